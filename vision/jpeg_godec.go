package vision

import (
	"errors"
	"image"

	"github.com/conditionhq/condition/vision/internal/jpegdec"
)

// goJPEGName names the JPEG decoding of Decode where libjpeg-turbo is not
// used: vision/internal/jpegdec for baseline and progressive files, whose
// planes are libjpeg-turbo's, and Go's image/jpeg for the others.
const goJPEGName = "Go (libjpeg-exact baseline and progressive; image/jpeg for CMYK and others)"

// jpegStdlib makes Decode leave to image/jpeg the JPEGs that libjpeg-turbo
// does not decode, as before jpegdec; tests and benchmarks set it to
// compare.
var jpegStdlib bool

// decodeGoJPEG decodes a baseline or progressive JPEG with jpegdec into
// planes from the pixel pool: *image.YCbCr or *image.Gray, libjpeg-turbo's
// samples, which rgbRows upsamples and converts as libjpeg-turbo does. It
// returns nil, nil to leave the file to image/jpeg: files jpegdec does not
// handle (CMYK...) and files it finds corrupt, so that corrupt files
// fail or decode as image/jpeg has them. An image over limit pixels (when
// limit > 0) is a *TooLargeError.
func decodeGoJPEG(data []byte, limit int64) (image.Image, error) {
	if jpegStdlib {
		return nil, nil
	}
	img, err := jpegdec.Decode(data, jpegdec.Options{MaxPixels: limit, Alloc: pixBuffer})
	var tl *jpegdec.TooLargeError
	if errors.As(err, &tl) {
		return nil, &TooLargeError{Format: "jpeg", Width: tl.Width, Height: tl.Height, Limit: tl.Limit}
	}
	if err != nil {
		return nil, nil
	}
	return img, nil
}
