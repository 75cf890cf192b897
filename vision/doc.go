// Package vision decodes images, puts them upright, and turns them into the
// pixel_values tensor [3, H, W] that CLIP's vision encoder takes, exactly as
// Hugging Face's CLIPImageProcessor (with Pillow) does, in pure Go; or, for
// SigLIP 2's NaFlex checkpoints, into the patches [max_num_patches, 3·P²],
// pixel_attention_mask and spatial_shapes that Siglip2ImageProcessor makes.
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
// NaFlex (a preprocessor_config.json of Siglip2ImageProcessor) scales both
// sides by the largest factor that transformers' binary search finds whose
// sides, rounded up to multiples of the patch, fit the patch budget
// (NaFlexSize), resizes with the same resampler, then cuts the image into
// patches (ApplyNaFlexInto).
// On lossless inputs the result is bit-identical to Pillow 9.4 + transformers.
// JPEGs are too where libjpeg-turbo decodes them, as in Pillow: its
// TurboJPEG library (libturbojpeg.so.0: Debian's package libturbojpeg0,
// Ubuntu's libturbojpeg), opened when the first JPEG is decoded, so that neither
// the build nor the program needs it; or libjpeg linked at build time with
// the libjpeg tag (cgo, -ljpeg). The TurboJPEG API is declared here rather
// than through a Go binding or its header, as only six of its functions
// are needed and the library must be optional at run time. Without either
// (no library installed, or a build without cgo) baseline and progressive
// JPEGs are decoded in Go by vision/internal/jpegdec, which computes
// libjpeg-turbo's accurate integer IDCT, so that they too are Pillow's bit
// for bit, and the others (CMYK mostly) by Go's image/jpeg, whose IDCT is
// not libjpeg-turbo's: they land within a few 8-bit levels. JPEGDecoder
// says which decoder is in use.
//
// On amd64 the resize runs on SIMD kernels (hand-written Go assembly):
// AVX-512F where the CPU has it, AVX2 otherwise; other architectures,
// CPUs without AVX2 and builds with the purego tag run the pure-Go
// passes. The kernels build rows of four source rows interleaved column
// by column (JPEG 4:2:0 planes through libjpeg-turbo's fancy upsampling
// and YCC→RGB in 32-bit lanes, RGBA and NRGBA read in place), run
// Pillow's horizontal and vertical fixed-point convolutions with 32-bit
// products and sums (VPMULLD, VPADDD: the same integers as Pillow's, for
// every filter), clip as Pillow does, and gather the normalised floats
// from the value table (vision/internal/rgbx). The Go passes (resample)
// are the reference: the kernels give the same bytes and the same floats,
// which the tests check on every kernel set this CPU has.
package vision
