package vision

import "bytes"

// jpegComplete reports whether data, a JPEG from its SOI marker, holds the
// EOI marker that ends its first image: it walks the marker segments by
// their lengths (so an EOI inside an APP segment, such as an EXIF
// thumbnail's, does not count) and each scan's entropy-coded data to the
// next marker that is not a stuffed 0xFF00 or a restart marker. Data that
// does not start with SOI is left to the decoder to refuse (true).
func jpegComplete(data []byte) bool {
	if len(data) < 2 || data[0] != 0xff || data[1] != 0xd8 {
		return true
	}
	i := 2
	for {
		// A marker: 0xFF, any fill 0xFFs, then its code.
		for i < len(data) && data[i] != 0xff {
			i++ // garbage between segments, which libjpeg skips with a warning
		}
		for i < len(data) && data[i] == 0xff {
			i++
		}
		if i >= len(data) {
			return false
		}
		m := data[i]
		i++
		switch {
		case m == 0xd9: // EOI
			return true
		case m == 0x01 || m == 0xd8 || (m >= 0xd0 && m <= 0xd7): // no length
			continue
		}
		if i+2 > len(data) {
			return false
		}
		i += int(data[i])<<8 | int(data[i+1])
		if i >= len(data) {
			return false
		}
		if m != 0xda { // SOS: entropy-coded data follows its header
			continue
		}
		for {
			k := bytes.IndexByte(data[i:], 0xff)
			if k < 0 || i+k+1 >= len(data) {
				return false
			}
			i += k
			if c := data[i+1]; c != 0 && c != 0xff && (c < 0xd0 || c > 0xd7) {
				break
			}
			i++
		}
	}
}
