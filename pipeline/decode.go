package pipeline

import (
	"fmt"
	"image"

	"github.com/conditionhq/condition/vision"
)

// DecodeMode is how DecodeImage decodes JPEGs.
type DecodeMode string

const (
	// DecodeExact decodes every JPEG whole, as Pillow does by default.
	DecodeExact DecodeMode = "exact"
	// DecodeFast lets libjpeg scale a JPEG by 1/2, 1/4 or 1/8 in the DCT
	// while keeping both sides at least twice the side the preprocessor
	// resizes to, as Pillow's Image.draft("RGB", (2s, 2s)) does, before
	// the usual resize. A photo several times the model's input decodes
	// in a fraction of the time; pixel_values change by a few levels.
	DecodeFast DecodeMode = "fast"
	// DecodeFastest is DecodeFast keeping both sides at least the side
	// the preprocessor resizes to (draft("RGB", (s, s))): faster again on
	// photos between 2 and 4 times the model's input, further from the
	// exact pixels.
	DecodeFastest DecodeMode = "fastest"
)

// ParseDecodeMode parses "exact", "fast" or "fastest" ("" is exact).
func ParseDecodeMode(s string) (DecodeMode, error) {
	switch m := DecodeMode(s); m {
	case "":
		return DecodeExact, nil
	case DecodeExact, DecodeFast, DecodeFastest:
		return m, nil
	}
	return "", fmt.Errorf("decode mode %q: want exact, fast or fastest", s)
}

// draftSide is the vision.DecodeOptions.Draft that mode asks for images
// that pre resizes: 2× (fast) or 1× (fastest) the larger of the sides it
// resizes to; 0 for exact decoding and for a preprocessor that keeps the
// image's size, whose output would change with the decoded size.
func draftSide(mode DecodeMode, pre *vision.Preprocessor) int {
	if mode != DecodeFast && mode != DecodeFastest || !pre.DoResize {
		return 0
	}
	side := max(pre.Size.ShortestEdge, pre.Size.Height, pre.Size.Width)
	if mode == DecodeFast {
		side *= 2
	}
	return side
}

// JPEGDraft is the side below which DecodeImage does not scale a JPEG down
// (vision.DecodeOptions.Draft), or 0 when it decodes JPEGs whole.
func (e *Engine) JPEGDraft() int { return e.draft }

// DecodeImage decodes an encoded image (JPEG, PNG, GIF, WebP, BMP, TIFF),
// applying its EXIF orientation, and refuses images over Options.MaxPixels.
// JPEGs are scaled down while decoding when Options.Decode asks for it.
// A decoder that panics on a malformed file gives an error, not a crash.
func (e *Engine) DecodeImage(data []byte) (image.Image, error) {
	img, _, err := e.DecodeImageInfo(data)
	return img, err
}

// DecodeImageInfo is DecodeImage that also gives the image's full size and
// the factor a scaled decode divided its sides by (vision.Info.Scale).
func (e *Engine) DecodeImageInfo(data []byte) (img image.Image, info vision.Info, err error) {
	defer func() {
		if r := recover(); r != nil {
			img, info, err = nil, vision.Info{}, fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	return vision.DecodeInfo(data, vision.DecodeOptions{MaxPixels: e.opts.MaxPixels, Draft: e.draft})
}
