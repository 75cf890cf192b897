package vision

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// BenchmarkDecodePhotos decodes, then decodes and preprocesses (224²), each
// image released once done with as the job does (Release), the
// throughput set's JPEG photos in turn (scripts/bench_photos/make_photos.py;
// the folder CONDITION_BENCH_PHOTOS, /tmp/condition-photos by default), with
// the JPEG decoder Decode uses here (JPEGDecoder): run it with and without
// libturbojpeg0 installed to compare.
func BenchmarkDecodePhotos(b *testing.B) {
	dir := os.Getenv("CONDITION_BENCH_PHOTOS")
	if dir == "" {
		dir = "/tmp/condition-photos"
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.jpg"))
	if len(names) == 0 {
		b.Skipf("no JPEG photos in %s: make them with scripts/bench_photos/make_photos.py", dir)
	}
	sort.Strings(names)
	photos := make([][]byte, len(names))
	for i, n := range names {
		var err error
		if photos[i], err = os.ReadFile(n); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d photos from %s, decoder %s", len(photos), dir, JPEGDecoder())
	p := DefaultPreprocessor()
	dst := make([]float32, 3*224*224)
	for _, dec := range photoDecoders() {
		b.Run(dec.name, func(b *testing.B) {
			defer dec.use()()
			for _, pre := range []bool{false, true} {
				name := map[bool]string{false: "decode", true: "decode+preprocess"}[pre]
				b.Run(name, func(b *testing.B) {
					i := 0
					benchImages(b, func() error {
						img, err := Decode(photos[i%len(photos)], DecodeOptions{})
						i++
						if err != nil {
							return err
						}
						defer Release(img) // as the job does
						if pre {
							_, _, err = p.ApplyInto(dst, img)
						}
						return err
					})
				})
			}
		})
	}
}

// photoDecoder is one of the JPEG decoders Decode can use here: use makes
// Decode use it and returns what restores the default.
type photoDecoder struct {
	name string
	use  func() (restore func())
}

// photoDecoders are the JPEG decoders to compare: libjpeg-turbo where this
// build and machine have it, jpegdec (baseline and progressive files), and image/jpeg.
func photoDecoders() []photoDecoder {
	var out []photoDecoder
	if jpegExact() {
		out = append(out, photoDecoder{"turbo", func() func() { return func() {} }})
	}
	goOnly := func(stdlib bool) func() func() {
		return func() func() {
			restoreLib := withoutLibjpeg()
			was := jpegStdlib
			jpegStdlib = stdlib
			return func() { jpegStdlib = was; restoreLib() }
		}
	}
	if !canForceGo() {
		return out // libjpeg linked in: the Go decoders cannot be chosen
	}
	return append(out, photoDecoder{"jpegdec", goOnly(false)}, photoDecoder{"image-jpeg", goOnly(true)})
}
