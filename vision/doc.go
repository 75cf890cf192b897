// Package vision decodes images, puts them upright, and turns them into the
// pixel_values tensor [3, H, W] that CLIP's vision encoder takes, exactly as
// Hugging Face's CLIPImageProcessor (with Pillow) does, in pure Go.
//
// Decoding covers JPEG (baseline, progressive, gray, CMYK), PNG (1 to 16
// bits, gray, gray+alpha, RGB, RGBA, paletted), GIF (first frame), BMP, TIFF
// and WebP. The size is read from the header first, and images over a pixel
// limit are refused before any pixel buffer is allocated. The EXIF
// Orientation tag (JPEG APP1, PNG eXIf, WebP EXIF, TIFF IFD0) is applied by
// default, as Pillow's ImageOps.exif_transpose would.
//
// Preprocessing follows preprocessor_config.json: convert to RGB as
// Image.convert("RGB") does, resize the shortest edge (or to a height and
// width) with Pillow's two-pass fixed-point resampler, centre-crop (padding
// with zeros when the crop is larger), rescale, normalise, channels first.
// On lossless inputs the result is bit-identical to Pillow 9.4 + transformers.
// JPEGs are too in builds with the libjpeg tag, which decode them with
// libjpeg-turbo (cgo, -ljpeg) as Pillow does; Go's image/jpeg, the default,
// has another IDCT, and its JPEG inputs land within a few 8-bit levels.
// JPEGDecoder says which this build uses.
package vision
