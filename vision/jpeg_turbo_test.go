//go:build cgo && !libjpeg

package vision

import (
	"bytes"
	"errors"
	"image"
	"io"
	"testing"
)

// goJPEG makes Decode use image/jpeg for the rest of the test, as on a
// machine without libjpeg-turbo's TurboJPEG library.
func goJPEG(t *testing.T) {
	t.Helper()
	was := jpegGoOnly
	jpegGoOnly = true
	t.Cleanup(func() { jpegGoOnly = was })
}

// TestJPEGWithoutTurbo runs the JPEG tests again with Go's image/jpeg, the
// decoder of machines without the library: the planes it hands over, the
// golden images within their bound in 8-bit levels, truncated files.
func TestJPEGWithoutTurbo(t *testing.T) {
	if !loadTurbo() {
		t.Logf("already without libjpeg-turbo: %s", JPEGDecoder())
	}
	goJPEG(t)
	if jpegExact() || CanDraft() || JPEGDecoder() != "Go image/jpeg" {
		t.Fatalf("image/jpeg forced: exact %v, draft %v, decoder %q", jpegExact(), CanDraft(), JPEGDecoder())
	}
	t.Run("decoder", TestJPEGDecoder)
	t.Run("rgb", TestGoldenRGB)
	t.Run("pixel_values", TestGoldenPixelValues)
	t.Run("truncated", TestDecodeJPEGTruncated)
	t.Run("draft", TestDraftIsPillows)
}

// TestTurboTruncatedAfterThumbnail cuts, inside its scan, a JPEG whose EXIF
// segment holds a thumbnail with its own EOI marker: TurboJPEG's memory
// source would finish the image in gray, and the marker walk must not take
// the thumbnail's EOI for the image's, so Decode fails as Pillow does.
func TestTurboTruncatedAfterThumbnail(t *testing.T) {
	if !loadTurbo() {
		t.Skipf("the TurboJPEG library is not installed here (%s): Debian package libturbojpeg0", JPEGDecoder())
	}
	full := withThumbnail(t, encode(t, testImage(64, 48), "jpeg"))
	img, err := Decode(full, DecodeOptions{})
	if err != nil || img.Bounds() != image.Rect(0, 0, 64, 48) {
		t.Fatalf("whole file: %v, %v", img, err)
	}
	sos := bytes.LastIndex(full, []byte{0xff, 0xda})
	for _, n := range []int{sos + 30, len(full) - 40, len(full) - 2, len(full) - 1} {
		img, err := Decode(full[:n], DecodeOptions{})
		if img != nil || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut to %d of %d bytes: %T, %v; want an error wrapping io.ErrUnexpectedEOF", n, len(full), img, err)
		}
	}
}
