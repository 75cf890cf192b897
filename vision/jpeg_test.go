package vision

import (
	"bytes"
	"errors"
	"image"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These tests hold for both JPEG decoders: image/jpeg, and libjpeg-turbo
// (jpegExact(): its TurboJPEG library found at run time, or libjpeg linked
// with the libjpeg build tag). Pillow-exactness itself is proved by the
// golden tests.

// TestJPEGDecoder checks that JPEGDecoder names the decoder and that Decode
// uses it: libjpeg hands RGB (kept as opaque RGBA), image/jpeg its planes.
func TestJPEGDecoder(t *testing.T) {
	name := JPEGDecoder()
	t.Logf("JPEG decoder: %s", name)
	if jpegExact() != strings.HasPrefix(name, "libjpeg") {
		t.Errorf("JPEGDecoder() = %q with jpegExact() %v", name, jpegExact())
	}
	img, err := Decode(encode(t, testImage(20, 10), "jpeg"), DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch img.(type) {
	case *image.RGBA:
		if !jpegExact() {
			t.Errorf("image/jpeg gave %T", img)
		}
		if m := pilMode(img); m != "RGB" {
			t.Errorf("libjpeg's RGB is PIL mode %s, want RGB", m)
		}
	case *image.YCbCr:
		if jpegExact() {
			t.Errorf("libjpeg gave %T", img)
		}
	default:
		t.Errorf("decoded %T", img)
	}
	if b := img.Bounds(); b != image.Rect(0, 0, 20, 10) {
		t.Errorf("bounds %v", b)
	}
}

// TestDecodeJPEGTruncated cuts a JPEG at every length: each prefix gives an
// error naming the format, and the size once the header is whole; none
// crashes, none decodes (not even without just the EOI).
func TestDecodeJPEGTruncated(t *testing.T) {
	data := encode(t, testImage(37, 21), "jpeg")
	sos := bytes.Index(data, []byte{0xff, 0xda})
	if sos < 0 {
		t.Fatal("no SOS marker")
	}
	for n := 1; n < len(data); n++ {
		img, err := Decode(data[:n], DecodeOptions{})
		if err == nil {
			// As in Pillow, whose decoder says "image file is truncated"
			// (libjpeg's own memory source would invent an EOI instead).
			t.Errorf("cut to %d of %d bytes: decoded without error", n, len(data))
			continue
		}
		if img != nil {
			t.Errorf("cut to %d bytes: image and error", n)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "vision: decode: ") || (n >= 2 && !strings.Contains(msg, "jpeg")) {
			t.Errorf("cut to %d bytes: %v", n, err)
		}
		if n > sos+20 && !strings.Contains(msg, "corrupt jpeg image (37x21)") {
			t.Errorf("cut in the scan, at %d bytes: %v, want a corrupt jpeg image (37x21)", n, err)
		}
		// libjpeg's "Premature end of JPEG file" wraps io.ErrUnexpectedEOF
		// (image/jpeg says "short Huffman data" or "unexpected EOF").
		if jpegExact() && n > sos+20 && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut in the scan, at %d bytes: %v, want it to wrap io.ErrUnexpectedEOF", n, err)
		}
		if n >= len(data)-2 {
			t.Logf("without the EOI (%d of %d bytes): %v", n, len(data), err)
		}
	}
}

// TestDecodeJPEGCorrupt overwrites random bytes of JPEGs (4:2:0, gray,
// progressive, CMYK): each gives an image of the header's size or an
// error, never a crash.
func TestDecodeJPEGCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, name := range []string{"jpeg_420_48x36.jpg", "jpeg_gray_40x30.jpg", "jpeg_prog_48x36.jpg", "jpeg_cmyk_40x30.jpg"} {
		orig, err := os.ReadFile(filepath.Join(goldenDir, "src", name))
		if err != nil {
			t.Fatalf("committed golden data missing: %v", err)
		}
		want, err := Decode(orig, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var decoded, failed int
		for range 300 {
			data := bytes.Clone(orig)
			for range 1 + rng.IntN(4) {
				data[2+rng.IntN(len(data)-2)] = byte(rng.Uint32())
			}
			img, err := Decode(data, DecodeOptions{MaxPixels: 1 << 20})
			if err != nil {
				failed++
				if !strings.HasPrefix(err.Error(), "vision: decode: ") {
					t.Errorf("%s: error %v", name, err)
				}
				continue
			}
			decoded++
			// A changed SOF may change the size; the limit still holds.
			if b := img.Bounds(); b.Empty() || b.Dx()*b.Dy() > 1<<20 {
				t.Errorf("%s: decoded %v", name, b)
			}
		}
		t.Logf("%s (%T): %d corrupted copies decoded, %d refused", name, want, decoded, failed)
	}
}

// TestDecodeJPEGLimit checks that the libjpeg path refuses an image over
// the limit from libjpeg's own reading of the header (Decode checks the
// header image/jpeg reads first, so this is its second line).
func TestDecodeJPEGLimit(t *testing.T) {
	data := encode(t, testImage(50, 40), "jpeg")
	img, err := decodeLibjpeg(data, 1999, 0)
	if !jpegExact() {
		if img != nil || err != nil {
			t.Fatalf("without libjpeg: %T, %v; want nil, nil (image/jpeg decodes)", img, err)
		}
		return
	}
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Width != 50 || tl.Height != 40 || tl.Limit != 1999 || img != nil {
		t.Fatalf("got %T, %v; want a *TooLargeError for 50x40", img, err)
	}
	if img, err := decodeLibjpeg(data, 2000, 0); err != nil || img == nil {
		t.Fatalf("at the limit: %T, %v", img, err)
	}
	if img, err := decodeLibjpeg(nil, 0, 0); err != nil || img != nil {
		t.Fatalf("empty: %T, %v; want nil, nil", img, err)
	}
}

// TestDecodeJPEGManyScans repeats the first scan of a progressive JPEG
// 1200 times. libjpeg-turbo refuses it (over its limit of 1000 scans with
// the libjpeg tag, TurboJPEG's 500 otherwise, which no real encoder comes
// near) rather than decoding scan after scan; image/jpeg
// may do either. Nothing crashes.
func TestDecodeJPEGManyScans(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(goldenDir, "src", "jpeg_prog_48x36.jpg"))
	if err != nil {
		t.Fatalf("committed golden data missing: %v", err)
	}
	start := bytes.Index(orig, []byte{0xff, 0xda})
	if start < 0 {
		t.Fatal("no SOS marker")
	}
	// The scan runs to the next marker that is not a stuffed 0xFF00 or a
	// restart marker.
	end := start + 2
	for end+1 < len(orig) && !(orig[end] == 0xff && orig[end+1] != 0 && (orig[end+1] < 0xd0 || orig[end+1] > 0xd7) && end > start+4) {
		end++
	}
	scan := orig[start:end]
	var b bytes.Buffer
	b.Write(orig[:end])
	for range 1200 {
		b.Write(scan)
	}
	b.Write(orig[end:])
	img, err := Decode(b.Bytes(), DecodeOptions{})
	t.Logf("%d bytes, %d-byte scan repeated: %T, %v", b.Len(), len(scan), img, err)
	if jpegExact() && (err == nil || !strings.Contains(err.Error(), "more than") || !strings.Contains(err.Error(), "scans")) {
		t.Errorf("libjpeg: got %v, want the scan limit", err)
	}
}

// withThumbnail puts an APP1 segment holding a whole small JPEG (SOI to
// EOI, as an EXIF thumbnail is) after data's SOI.
func withThumbnail(t *testing.T, data []byte) []byte {
	t.Helper()
	thumb := encode(t, testImage(8, 8), "jpeg")
	if !bytes.HasSuffix(thumb, []byte{0xff, 0xd9}) {
		t.Fatal("the thumbnail does not end in EOI")
	}
	payload := append([]byte("Exif\x00\x00"), thumb...)
	seg := []byte{0xff, 0xe1, byte((len(payload) + 2) >> 8), byte(len(payload) + 2)}
	out := append([]byte{}, data[:2]...)
	out = append(append(out, seg...), payload...)
	return append(out, data[2:]...)
}

// TestJPEGComplete checks the marker walk that tells a whole JPEG from a
// cut one: whole files (baseline, with a thumbnail's EOI inside an APP1
// segment, progressive, with bytes after the EOI) are whole, and every
// prefix that stops before the EOI is cut.
func TestJPEGComplete(t *testing.T) {
	prog, err := os.ReadFile(filepath.Join(goldenDir, "src", "jpeg_prog_48x36.jpg"))
	if err != nil {
		t.Fatalf("committed golden data missing: %v", err)
	}
	files := map[string][]byte{
		"baseline":    encode(t, testImage(37, 21), "jpeg"),
		"thumbnail":   withThumbnail(t, encode(t, testImage(37, 21), "jpeg")),
		"progressive": prog,
		"trailing":    append(encode(t, testImage(9, 9), "jpeg"), "trailing bytes"...),
	}
	for name, data := range files {
		if !jpegComplete(data) {
			t.Errorf("%s: the whole file is cut", name)
		}
		end := bytes.LastIndex(data, []byte{0xff, 0xd9}) + 2
		for n := 2; n < end; n++ {
			if jpegComplete(data[:n]) {
				t.Errorf("%s: cut to %d of %d bytes, still whole", name, n, end)
				break
			}
		}
	}
	if !jpegComplete([]byte("not a jpeg")) {
		t.Error("data without SOI should be left to the decoder")
	}
}
