package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// pngHeader is a PNG signature and IHDR claiming w×h 8-bit RGB, followed
// by a tiny IDAT that is not nearly enough data.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(kind string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(kind)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(kind), data...)))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	chunk("IEND", nil)
	return b.Bytes()
}

// gifHeader is a GIF whose logical screen is w×h, with one 1×1 frame.
func gifHeader(w, h uint16) []byte {
	var b bytes.Buffer
	b.WriteString("GIF89a")
	binary.Write(&b, binary.LittleEndian, w)
	binary.Write(&b, binary.LittleEndian, h)
	b.Write([]byte{0x80, 0, 0, 0, 0, 0, 255, 255, 255})
	b.Write([]byte{0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 0x01, 0, 0x3b})
	return b.Bytes()
}

func encode(t testing.TB, img image.Image, format string) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, &jpeg.Options{Quality: 90})
	case "gif":
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeBomb checks that images over the pixel limit are refused from
// their header, without allocating their pixels.
func TestDecodeBomb(t *testing.T) {
	jpegBomb := encode(t, testImage(8, 8), "jpeg")
	// Patch the SOF0 height and width to 65000×65000.
	i := bytes.Index(jpegBomb, []byte{0xff, 0xc0})
	binary.BigEndian.PutUint16(jpegBomb[i+5:], 65000)
	binary.BigEndian.PutUint16(jpegBomb[i+7:], 65000)
	tests := []struct {
		name string
		data []byte
		w, h int
	}{
		{"png", pngHeader(100000, 100000), 100000, 100000},
		{"png-just-over", pngHeader(9459, 9460), 9459, 9460},
		{"gif", gifHeader(65535, 65535), 65535, 65535},
		{"jpeg", jpegBomb, 65000, 65000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decode(tt.data, DecodeOptions{})
			runtime.ReadMemStats(&after)
			var tl *TooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("got %v, want a *TooLargeError", err)
			}
			if tl.Width != tt.w || tl.Height != tt.h || tl.Limit != DefaultMaxPixels {
				t.Errorf("got %+v", tl)
			}
			if !strings.Contains(err.Error(), "over the limit") || !strings.HasPrefix(err.Error(), "vision: decode: ") {
				t.Errorf("message: %v", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("refusing it allocated %d bytes", n)
			}
		})
	}
	// The limit is settable, and negative means none.
	small := encode(t, testImage(50, 40), "png")
	if _, err := Decode(small, DecodeOptions{MaxPixels: 1999}); err == nil {
		t.Error("MaxPixels 1999: 50x40 accepted")
	}
	if _, err := Decode(small, DecodeOptions{MaxPixels: 2000}); err != nil {
		t.Errorf("MaxPixels 2000: %v", err)
	}
	if _, err := Decode(small, DecodeOptions{MaxPixels: -1}); err != nil {
		t.Errorf("MaxPixels -1: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := encode(t, testImage(20, 10), "png")
	tests := []struct {
		name    string
		data    []byte
		wantErr string
		is      error
	}{
		{"empty", nil, "empty file", nil},
		{"text", []byte("hello, world"), "unknown or unsupported image format", image.ErrFormat},
		{"truncated png", good[:60], "corrupt png image (20x10)", nil},
		{"bad png header", []byte("\x89PNG\r\n\x1a\nxxxxxxxxxxxxxxxxxxxx"), "corrupt png header", nil},
		{"zero size png", pngHeader(0, 10), "png", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.data, DecodeOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) is false", err, tt.is)
			}
		})
	}
	// DecodeFile names the file.
	dir := t.TempDir()
	path := filepath.Join(dir, "broken.png")
	if err := os.WriteFile(path, good[:60], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := DecodeFile(path, DecodeOptions{})
	if err == nil || !strings.Contains(err.Error(), `vision: decode "`+path+`": corrupt png image`) {
		t.Errorf("DecodeFile: got %v", err)
	}
	if _, err := DecodeFile(filepath.Join(dir, "missing.jpg"), DecodeOptions{}); err == nil || !strings.Contains(err.Error(), "missing.jpg") {
		t.Errorf("missing file: got %v", err)
	}
	if _, err := DecodeReader(bytes.NewReader(good), DecodeOptions{}); err != nil {
		t.Errorf("DecodeReader: %v", err)
	}
}

// TestOrientation checks all eight orientations against a direct mapping,
// on stored PNGs with an eXIf chunk, and that NoOrientation keeps them.
func TestOrientation(t *testing.T) {
	base, err := DecodeFile(filepath.Join(goldenDir, "src", "png_exif1_20x12.png"), DecodeOptions{})
	if err != nil {
		t.Fatalf("committed golden data: %v", err)
	}
	rgb0, w, h := toRGB(nil, base, nil)
	for o := 1; o <= 8; o++ {
		path := filepath.Join(goldenDir, "src", "png_exif"+string(rune('0'+o))+"_20x12.png")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := orientation("png", data); got != o {
			t.Errorf("orientation %d: read %d", o, got)
		}
		raw, err := Decode(data, DecodeOptions{NoOrientation: true})
		if err != nil {
			t.Fatal(err)
		}
		if b := raw.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Errorf("orientation %d with NoOrientation: %v", o, b)
		}
		img, err := Decode(data, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rgb, ow, oh := toRGB(nil, img, nil)
		for y := 0; y < oh; y++ {
			for x := 0; x < ow; x++ {
				// Where output (x, y) comes from in the stored image.
				s := map[int][2]int{
					1: {x, y}, 2: {w - 1 - x, y}, 3: {w - 1 - x, h - 1 - y}, 4: {x, h - 1 - y},
					5: {y, x}, 6: {y, h - 1 - x}, 7: {w - 1 - y, h - 1 - x}, 8: {w - 1 - y, x},
				}[o]
				sx, sy := s[0], s[1]
				if !bytes.Equal(rgb[3*(y*ow+x):][:3], rgb0[3*(sy*w+sx):][:3]) {
					t.Fatalf("orientation %d: pixel (%d, %d) wrong", o, x, y)
				}
			}
		}
	}
}

func TestTIFFOrientationParser(t *testing.T) {
	le := []byte("II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x03\x00\x01\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00")
	be := []byte("MM\x00*\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01\x00\x03\x00\x00\x00\x00\x00\x00")
	if got := tiffOrientation(le); got != 6 {
		t.Errorf("little-endian: %d", got)
	}
	if got := tiffOrientation(be); got != 3 {
		t.Errorf("big-endian: %d", got)
	}
	for n := 0; n < 8+2+12; n++ { // truncated before the entry ends: no orientation
		if got := tiffOrientation(le[:n]); got != 0 {
			t.Errorf("truncated to %d bytes: %d", n, got)
		}
	}
	// A JPEG with that EXIF in APP1.
	j := encode(t, testImage(4, 2), "jpeg")
	app1 := append([]byte{0xff, 0xe1, 0, byte(2 + 6 + len(le))}, append([]byte("Exif\x00\x00"), le...)...)
	j = append(append(append([]byte{}, j[:2]...), app1...), j[2:]...)
	if got := orientation("jpeg", j); got != 6 {
		t.Errorf("jpeg: %d", got)
	}
	img, err := Decode(j, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 2 || b.Dy() != 4 {
		t.Errorf("jpeg with orientation 6: %v, want 2x4", b)
	}
}

// TestOrientConverted checks the one-pass convert-and-transpose used for
// JPEG planes (and other converted layouts) against converting to RGBA
// first and transposing that (the path TestOrientation checks), for all
// orientations, on odd and even sizes and a sub-image.
func TestOrientConverted(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, kind := range []string{"ycbcr420", "ycbcr422", "ycbcr444", "ycbcr411"} {
		for _, sz := range [][4]int{{1, 1, 0, 0}, {7, 5, 0, 0}, {16, 9, 0, 0}, {13, 22, 1, 3}} {
			img := randomImage(rng, kind, sz[0], sz[1], sz[2], sz[3], false)
			rgb, w, h := toRGB(nil, img, nil)
			rgba := image.NewRGBA(image.Rect(0, 0, w, h))
			for i := 0; i < w*h; i++ {
				copy(rgba.Pix[4*i:], rgb[3*i:3*i+3])
				rgba.Pix[4*i+3] = 0xff
			}
			for o := 2; o <= 8; o++ {
				got, ok := orient(img, o).(*image.RGBA)
				want := orient(rgba, o).(*image.RGBA)
				if !ok || got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) {
					t.Errorf("%s %dx%d at (%d, %d), orientation %d: differs from converting first", kind, sz[0], sz[1], sz[2], sz[3], o)
				}
			}
		}
	}
}
