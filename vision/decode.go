package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
	"os"

	// Decoders registered with package image.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"
)

// DefaultMaxPixels is the pixel limit when DecodeOptions.MaxPixels is 0:
// Pillow's Image.MAX_IMAGE_PIXELS (1024 * 1024 * 1024 / 4 / 3).
const DefaultMaxPixels int64 = 89_478_485

// DecodeOptions controls Decode.
type DecodeOptions struct {
	// MaxPixels refuses images whose width × height, read from the header
	// before decoding, is larger. 0 means DefaultMaxPixels; negative means
	// no limit.
	MaxPixels int64
	// NoOrientation leaves the pixels as stored, ignoring the EXIF
	// Orientation tag. By default orientations 2 to 8 are applied.
	NoOrientation bool
	// Draft, when positive, asks for a JPEG no smaller than Draft×Draft
	// pixels rather than its full size, as Pillow's
	// Image.draft("RGB", (Draft, Draft)): the decoder scales it by 1/2, 1/4
	// or 1/8 in the DCT, the largest factor that keeps both sides at least
	// Draft (see draftScale), which skips most of the decoding of a large
	// photo. The pixels are Pillow's after draft, not after a full decode,
	// so they differ from Draft 0's. Only builds that decode JPEGs with
	// libjpeg honour it (CanDraft); others, and other formats, decode at
	// full size. The pixel limit applies to the full size.
	Draft int
}

// draftScale is the DCT scale (1, 2, 4 or 8) Pillow's draft picks for a
// w×h JPEG asked to be at least draft×draft: the first of 8, 4 and 2 not
// above min(w/draft, h/draft) in integer division, else 1.
func draftScale(w, h, draft int) int {
	if draft <= 0 {
		return 1
	}
	scale := min(w/draft, h/draft)
	for _, s := range []int{8, 4, 2} {
		if scale >= s {
			return s
		}
	}
	return 1
}

func (o DecodeOptions) limit() int64 {
	if o.MaxPixels == 0 {
		return DefaultMaxPixels
	}
	return o.MaxPixels
}

// ErrUnsupportedFormat is returned (wrapped) for data that is not a JPEG,
// PNG, GIF, BMP, TIFF or WebP image. It wraps image.ErrFormat.
var ErrUnsupportedFormat = fmt.Errorf("unknown or unsupported image format (want JPEG, PNG, GIF, BMP, TIFF or WebP): %w", image.ErrFormat)

// TooLargeError is returned (wrapped) for an image over the pixel limit.
// It is detected from the header, before any pixel buffer is allocated.
type TooLargeError struct {
	Format        string
	Width, Height int
	Limit         int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s image is %dx%d (%d pixels), over the limit of %d pixels", e.Format, e.Width, e.Height,
		int64(e.Width)*int64(e.Height), e.Limit)
}

// Decode decodes a JPEG, PNG, GIF (first frame), BMP, TIFF or WebP image
// from data. It reads the size from the header first and refuses images
// over opt's pixel limit (a *TooLargeError), then decodes and, unless
// opt.NoOrientation, applies the EXIF orientation. The result keeps the
// decoder's colour model (gray, 16-bit, paletted, CMYK, YCbCr...);
// Preprocessor.Apply converts it to RGB as Pillow does.
//
// JPEGs go to libjpeg-turbo as in Pillow where it is installed or linked
// (opaque *image.RGBA, *image.Gray, *image.CMYK), which makes them Pillow's
// bit for bit, else to Go code: baseline and progressive files to a
// decoder with libjpeg-turbo's arithmetic (planes as *image.YCbCr or
// *image.Gray, Pillow's pixels once converted to RGB), the others (CMYK
// mostly) to Go's image/jpeg (*image.YCbCr, *image.Gray, *image.CMYK);
// JPEGDecoder says which.
func Decode(data []byte, opt DecodeOptions) (image.Image, error) {
	img, _, err := DecodeInfo(data, opt)
	return img, err
}

// Info describes an image Decode decoded.
type Info struct {
	Format string // "jpeg", "png", "gif", "bmp", "tiff" or "webp"
	// Width and Height are the image's full size, upright (after its EXIF
	// orientation unless NoOrientation): the decoded image's size unless
	// a draft scaled it.
	Width, Height int
	// Scale is the factor a draft (DecodeOptions.Draft) divided the sides
	// by: 1, 2, 4 or 8. Pixel (x, y) of the decoded image covers the full
	// image's pixels from (Scale·x, Scale·y) to (Scale·x+Scale, Scale·y+Scale),
	// the last row and column cut by the border.
	Scale int
}

// DecodeInfo is Decode that also says what the image was before any draft.
func DecodeInfo(data []byte, opt DecodeOptions) (image.Image, Info, error) {
	img, info, err := decode(data, opt)
	if err != nil {
		return nil, Info{}, fmt.Errorf("vision: decode: %w", err)
	}
	return img, info, nil
}

// DecodeReader reads all of r and decodes it as Decode does.
func DecodeReader(r io.Reader, opt DecodeOptions) (image.Image, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("vision: decode: %w", err)
	}
	return Decode(data, opt)
}

// DecodeFile reads and decodes the image file at path as Decode does; its
// errors name the file.
func DecodeFile(path string, opt DecodeOptions) (image.Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vision: decode %q: %w", path, err)
	}
	img, _, err := decode(data, opt)
	if err != nil {
		return nil, fmt.Errorf("vision: decode %q: %w", path, err)
	}
	return img, nil
}

func decode(data []byte, opt DecodeOptions) (image.Image, Info, error) {
	if len(data) == 0 {
		return nil, Info{}, errors.New("empty file")
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return nil, Info{}, ErrUnsupportedFormat
		}
		if format == "" {
			format = sniff(data)
		}
		return nil, Info{}, fmt.Errorf("corrupt %s header: %w", format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, Info{}, fmt.Errorf("%s image has no pixels (%dx%d)", format, cfg.Width, cfg.Height)
	}
	lim := opt.limit()
	if lim > 0 && int64(cfg.Width)*int64(cfg.Height) > lim {
		return nil, Info{}, &TooLargeError{Format: format, Width: cfg.Width, Height: cfg.Height, Limit: lim}
	}
	info := Info{Format: format, Width: cfg.Width, Height: cfg.Height, Scale: 1}
	var img image.Image
	if format == "jpeg" {
		// libjpeg-turbo, as Pillow, where it is installed or linked;
		// nil, nil leaves the file to image/jpeg.
		img, err = decodeLibjpeg(data, lim, opt.Draft)
		if img != nil {
			info.Scale = draftScale(cfg.Width, cfg.Height, opt.Draft)
		}
		if img == nil && err == nil {
			// Else baseline and progressive files in pure Go, with
			// libjpeg-turbo's arithmetic (at full size: no draft); nil,
			// nil again leaves the file to image/jpeg.
			img, err = decodeGoJPEG(data, lim)
		}
		var tl *TooLargeError
		if errors.As(err, &tl) {
			return nil, Info{}, err
		}
	}
	if img == nil && err == nil {
		img, _, err = image.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("corrupt %s image (%dx%d): %w", format, cfg.Width, cfg.Height, err)
	}
	if b := img.Bounds(); b.Empty() {
		return nil, Info{}, fmt.Errorf("%s image has no pixels", format)
	}
	img = fixup(format, data, img)
	if !opt.NoOrientation {
		if o := orientation(format, data); o >= 2 && o <= 8 {
			img = orient(img, o)
			if o >= 5 {
				info.Width, info.Height = info.Height, info.Width
			}
		}
	}
	return img, info, nil
}

// sniff names the format from the magic bytes, for error messages about
// data whose header the registered decoder could not read.
func sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\xff\xd8")):
		return "jpeg"
	case bytes.HasPrefix(data, []byte("\x89PNG")):
		return "png"
	case bytes.HasPrefix(data, []byte("GIF8")):
		return "gif"
	case bytes.HasPrefix(data, []byte("BM")):
		return "bmp"
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return "tiff"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "webp"
	}
	return "image"
}

// fixup undoes the places where Go's decoders keep less than Pillow does,
// or mean something else: the RGB of a GIF's transparent palette entry,
// 16-bit gray PNGs with a tRNS chunk (decoded as NRGBA64; Pillow opens them
// as mode "I"), and lossy WebP's limited-range Y'CbCr (see webpRGB).
func fixup(format string, data []byte, img image.Image) image.Image {
	switch format {
	case "gif":
		if p, ok := img.(*image.Paletted); ok {
			restoreGIFPalette(data, p)
		}
	case "webp":
		switch m := img.(type) {
		case *image.YCbCr:
			if m.SubsampleRatio == image.YCbCrSubsampleRatio420 && m.Rect.Min == (image.Point{}) {
				return webpRGB(m, nil, 0)
			}
		case *image.NYCbCrA:
			if m.SubsampleRatio == image.YCbCrSubsampleRatio420 && m.Rect.Min == (image.Point{}) {
				return webpRGB(&m.YCbCr, m.A, m.AStride)
			}
		}
	case "png":
		if m, ok := img.(*image.NRGBA64); ok && pngIsGray16(data) {
			g := image.NewGray16(m.Rect)
			for y := m.Rect.Min.Y; y < m.Rect.Max.Y; y++ {
				src := m.Pix[m.PixOffset(m.Rect.Min.X, y):]
				dst := g.Pix[g.PixOffset(g.Rect.Min.X, y):]
				for x := 0; x < m.Rect.Dx(); x++ {
					dst[2*x], dst[2*x+1] = src[8*x], src[8*x+1]
				}
			}
			return g
		}
	}
	return img
}
