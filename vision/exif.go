package vision

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
)

// orientation returns the EXIF Orientation (1 to 8) stored in an encoded
// image, or 0 when there is none or it cannot be read. It looks where
// Pillow's getexif does: the first "Exif\0" APP1 segment of a JPEG, the eXIf
// chunk of a PNG, the EXIF chunk of a WebP, IFD0 of a TIFF. It never fails:
// broken metadata means "no orientation", as in Pillow.
func orientation(format string, data []byte) int {
	switch format {
	case "jpeg":
		return tiffOrientation(jpegExif(data))
	case "png":
		return tiffOrientation(pngChunk(data, "eXIf"))
	case "webp":
		return tiffOrientation(trimExifPrefix(webpChunk(data, "EXIF")))
	case "tiff":
		return tiffOrientation(data)
	}
	return 0
}

func trimExifPrefix(b []byte) []byte {
	return bytes.TrimPrefix(b, []byte("Exif\x00\x00"))
}

// jpegExif returns the TIFF-structured payload of the first APP1 segment
// that starts with "Exif\0", scanning the markers before the first SOS.
func jpegExif(d []byte) []byte {
	if len(d) < 4 || d[0] != 0xff || d[1] != 0xd8 {
		return nil
	}
	i := 2
	for i+4 <= len(d) {
		if d[i] != 0xff {
			return nil
		}
		m := d[i+1]
		if m == 0xff { // fill byte
			i++
			continue
		}
		if m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7) { // no length
			i += 2
			continue
		}
		if m == 0xda || m == 0xd9 { // SOS, EOI: no more metadata
			return nil
		}
		n := int(binary.BigEndian.Uint16(d[i+2:]))
		if n < 2 || i+2+n > len(d) {
			return nil
		}
		seg := d[i+4 : i+2+n]
		if m == 0xe1 && len(seg) >= 6 && string(seg[:5]) == "Exif\x00" {
			return seg[6:]
		}
		i += 2 + n
	}
	return nil
}

// pngChunk returns the data of the first chunk of the given type.
func pngChunk(d []byte, kind string) []byte {
	const sig = "\x89PNG\r\n\x1a\n"
	if len(d) < len(sig) || string(d[:len(sig)]) != sig {
		return nil
	}
	for i := len(sig); i+8 <= len(d); {
		n := binary.BigEndian.Uint32(d[i:])
		t := string(d[i+4 : i+8])
		if uint64(n) > uint64(len(d)-i-8) {
			return nil
		}
		if t == kind {
			return d[i+8 : i+8+int(n)]
		}
		if t == "IEND" {
			return nil
		}
		i += 12 + int(n)
	}
	return nil
}

// pngIsGray16 reports whether a PNG is 16-bit grayscale without alpha
// (colour type 0, bit depth 16).
func pngIsGray16(d []byte) bool {
	h := pngChunk(d, "IHDR")
	return len(h) >= 10 && h[8] == 16 && h[9] == 0
}

// webpChunk returns the data of the first RIFF chunk of the given FourCC.
func webpChunk(d []byte, fourcc string) []byte {
	if len(d) < 12 || string(d[:4]) != "RIFF" || string(d[8:12]) != "WEBP" {
		return nil
	}
	for i := 12; i+8 <= len(d); {
		n := binary.LittleEndian.Uint32(d[i+4:])
		if uint64(n) > uint64(len(d)-i-8) {
			return nil
		}
		if string(d[i:i+4]) == fourcc {
			return d[i+8 : i+8+int(n)]
		}
		i += 8 + int(n) + int(n&1)
	}
	return nil
}

// tiffOrientation reads tag 0x0112 (Orientation) from IFD0 of a
// TIFF-structured block ("II*\0" or "MM\0*" header), as EXIF stores it.
// It returns 0 unless the tag holds a single SHORT or LONG.
func tiffOrientation(b []byte) int {
	if len(b) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(b[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 0
	}
	off := uint64(bo.Uint32(b[4:]))
	if off+2 > uint64(len(b)) {
		return 0
	}
	n := int(bo.Uint16(b[off:]))
	p := int(off) + 2
	for k := 0; k < n; k++ {
		e := p + 12*k
		if e+12 > len(b) {
			return 0
		}
		if bo.Uint16(b[e:]) != 0x0112 {
			continue
		}
		typ, count := bo.Uint16(b[e+2:]), bo.Uint32(b[e+4:])
		if count != 1 {
			return 0
		}
		switch typ {
		case 3: // SHORT
			return int(bo.Uint16(b[e+8:]))
		case 4: // LONG
			v := bo.Uint32(b[e+8:])
			if v > 8 {
				return 0
			}
			return int(v)
		}
		return 0
	}
	return 0
}

// restoreGIFPalette puts back the colour of the transparent index of the
// first frame, which Go's decoder replaces with transparent black but
// Pillow keeps (convert("RGB") shows it).
func restoreGIFPalette(d []byte, p *image.Paletted) {
	if len(d) < 13 || string(d[:3]) != "GIF" {
		return
	}
	table := func(packed byte) int { return 3 << (packed&7 + 1) }
	var global []byte
	i := 13
	if d[10]&0x80 != 0 {
		n := table(d[10])
		if i+n > len(d) {
			return
		}
		global = d[i : i+n]
		i += n
	}
	ti := -1
	for i < len(d) {
		switch d[i] {
		case 0x21: // extension: label, then sub-blocks
			if i+2 > len(d) {
				return
			}
			label := d[i+1]
			i += 2
			first := true
			for i < len(d) && d[i] != 0 {
				n := int(d[i])
				if i+1+n > len(d) {
					return
				}
				if label == 0xf9 && first && n >= 4 {
					if d[i+1]&1 != 0 {
						ti = int(d[i+4])
					} else {
						ti = -1
					}
				}
				first = false
				i += 1 + n
			}
			i++ // block terminator
		case 0x2c: // image descriptor
			if i+10 > len(d) {
				return
			}
			tab := global
			if packed := d[i+9]; packed&0x80 != 0 {
				n := table(packed)
				if i+10+n > len(d) {
					return
				}
				tab = d[i+10 : i+10+n]
			}
			if ti >= 0 && 3*ti+3 <= len(tab) && ti < len(p.Palette) {
				p.Palette[ti] = color.RGBA{tab[3*ti], tab[3*ti+1], tab[3*ti+2], 0xff}
			}
			return
		default: // trailer or garbage
			return
		}
	}
}
