package vision

import (
	"bytes"
	"image"
	"image/jpeg"
	"testing"

	"github.com/conditionhq/condition/vision/internal/rgbx"
)

// benchImages runs fn b.N times and reports images/s (wall time) and, where
// the thread's CPU time can be read, µs of CPU per image ("cpu-µs/img"),
// which moves far less than wall time when the machine is shared.
func benchImages(b *testing.B, fn func() error) {
	b.Helper()
	b.ReportAllocs()
	var err error
	cpu, ok := threadCPU(func() {
		for b.Loop() {
			if err = fn(); err != nil {
				return
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
	if ok {
		b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "cpu-µs/img")
	}
}

// benchJPEG is a 640×480 4:2:0 JPEG of the test pattern.
func benchJPEG(b *testing.B) []byte {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, testImage(640, 480), &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkPreprocess is one 640×480 image to CLIP's [3, 224, 224]
// (bicubic 640×480 → 298×224, crop 224×224), from an already decoded
// image: a JPEG's YCbCr planes or RGBA; "-generic" is the reference
// implementation, for comparison.
func BenchmarkPreprocess(b *testing.B) {
	ycc, err := jpeg.Decode(bytes.NewReader(benchJPEG(b)))
	if err != nil {
		b.Fatal(err)
	}
	p := DefaultPreprocessor()
	dst := make([]float32, 3*224*224)
	for _, bc := range []struct {
		name string
		img  image.Image
	}{{"ycbcr420", ycc}, {"rgba", testImage(640, 480)}} {
		b.Run(bc.name, func(b *testing.B) {
			benchImages(b, func() error { _, _, err := p.ApplyInto(dst, bc.img); return err })
		})
		b.Run(bc.name+"-generic", func(b *testing.B) {
			benchImages(b, func() error { _, _, err := p.applyGeneric(dst, bc.img); return err })
		})
	}
}

// BenchmarkPreprocessNaFlex is one 640×480 image to SigLIP 2's NaFlex
// patches at the defaults (bilinear 640×480 → 288×224, 14×18 of 256
// patches of 16×16), from an already decoded image, with each kernel set.
func BenchmarkPreprocessNaFlex(b *testing.B) {
	ycc, err := jpeg.Decode(bytes.NewReader(benchJPEG(b)))
	if err != nil {
		b.Fatal(err)
	}
	p := NaFlexPreprocessor()
	n := p.NaFlex.MaxNumPatches
	pv, mask, ss := make([]float32, n*p.NaFlex.PatchDim()), make([]int32, n), make([]int64, 2)
	for _, bc := range []struct {
		name string
		img  image.Image
	}{{"ycbcr420", ycc}, {"rgba", testImage(640, 480)}} {
		for _, impl := range impls() {
			b.Run(bc.name+"-"+impl, func(b *testing.B) {
				defer rgbx.SetImpl(rgbx.SetImpl(impl))
				benchImages(b, func() error { _, err := p.ApplyNaFlexInto(pv, mask, ss, bc.img); return err })
			})
		}
	}
}

// BenchmarkDecodePreprocess adds decoding the 640×480 JPEG.
func BenchmarkDecodePreprocess(b *testing.B) {
	data := benchJPEG(b)
	p := DefaultPreprocessor()
	dst := make([]float32, 3*224*224)
	benchImages(b, decodePreprocess(p, data, dst))
}

// decodePreprocess decodes data and preprocesses it into dst, a benchImages
// function.
func decodePreprocess(p *Preprocessor, data []byte, dst []float32) func() error {
	return func() error {
		img, err := Decode(data, DecodeOptions{})
		if err != nil {
			return err
		}
		_, _, err = p.ApplyInto(dst, img)
		return err
	}
}

// jobJPEG is a size×size 4:2:0 JPEG (quality 90) like the pipeline
// benchmark's synthetic images: a disc on a plain background, with noise in
// the low 4 bits of every pixel.
func jobJPEG(b *testing.B, size int) []byte {
	m := image.NewRGBA(image.Rect(0, 0, size, size))
	cx, cy, r := size/3, size/2, size/4
	seed := uint32(1)
	for y := range size {
		for x := range size {
			c := [3]uint8{40, 120, 200}
			if (x-cx)*(x-cx)+(y-cy)*(y-cy) < r*r {
				c = [3]uint8{215, 135, 55}
			}
			seed = seed*1664525 + 1013904223
			d := uint8(seed >> 28)
			i := m.PixOffset(x, y)
			m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = c[0]^d, c[1]^d, c[2]^d, 255
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// tinyPreprocessor is the embedded default model's preprocessing: shortest
// edge 64, bicubic, centre crop 64×64, CLIP's normalisation.
func tinyPreprocessor() *Preprocessor {
	p := DefaultPreprocessor()
	p.Size = Size{ShortestEdge: 64}
	p.CropSize = Size{Height: 64, Width: 64}
	return p
}

// BenchmarkJob256to64 is the pipeline benchmark's per-image work on the
// default model: a 256×256 JPEG to [3, 64, 64]. "preprocess" starts from
// the decoded image ("preprocess-generic" with the reference
// implementation, for comparison), "decode" only decodes,
// "decode+preprocess" does both.
func BenchmarkJob256to64(b *testing.B) {
	data := jobJPEG(b, 256)
	p := tinyPreprocessor()
	dst := make([]float32, 3*64*64)
	img, err := Decode(data, DecodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("preprocess", func(b *testing.B) {
		benchImages(b, func() error { _, _, err := p.ApplyInto(dst, img); return err })
	})
	b.Run("preprocess-generic", func(b *testing.B) {
		benchImages(b, func() error { _, _, err := p.applyGeneric(dst, img); return err })
	})
	b.Run("decode", func(b *testing.B) {
		benchImages(b, func() error { _, err := Decode(data, DecodeOptions{}); return err })
	})
	b.Run("decode+preprocess", func(b *testing.B) {
		benchImages(b, decodePreprocess(p, data, dst))
	})
}

// BenchmarkPreprocessImpl is ApplyInto with each kernel set ("go" is
// resample's Go passes, the reference), alternating, from decoded images:
// a 640×480 and a 4032×3024 JPEG (YCbCr 4:2:0) and RGBA to CLIP's
// [3, 224, 224], and the pipeline benchmark's 256×256 JPEG to [3, 64, 64].
func BenchmarkPreprocessImpl(b *testing.B) {
	decode := func(data []byte) image.Image {
		img, err := Decode(data, DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return img
	}
	var big bytes.Buffer
	if err := jpeg.Encode(&big, testImage(4032, 3024), &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	clip, tiny := DefaultPreprocessor(), tinyPreprocessor()
	for _, bc := range []struct {
		name string
		img  image.Image
		p    *Preprocessor
	}{
		{"640x480-ycbcr420", decode(benchJPEG(b)), clip},
		{"640x480-rgba", testImage(640, 480), clip},
		{"4032x3024-ycbcr420", decode(big.Bytes()), clip},
		{"256-to-64-ycbcr420", decode(jobJPEG(b, 256)), tiny},
	} {
		oh, ow := bc.p.OutputSize(bc.img.Bounds().Dx(), bc.img.Bounds().Dy())
		dst := make([]float32, 3*oh*ow)
		for _, impl := range impls() {
			b.Run(bc.name+"/"+impl, func(b *testing.B) {
				defer rgbx.SetImpl(rgbx.SetImpl(impl))
				benchImages(b, func() error { _, _, err := bc.p.ApplyInto(dst, bc.img); return err })
			})
		}
	}
}
