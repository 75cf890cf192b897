package vision

import (
	"bytes"
	"image"
	"image/jpeg"
	"testing"
)

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
// image: a JPEG's YCbCr planes or RGBA.
func BenchmarkPreprocess(b *testing.B) {
	ycc, err := jpeg.Decode(bytes.NewReader(benchJPEG(b)))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		img  image.Image
	}{{"ycbcr420", ycc}, {"rgba", testImage(640, 480)}} {
		b.Run(bc.name, func(b *testing.B) {
			p := DefaultPreprocessor()
			dst := make([]float32, 3*224*224)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := p.ApplyInto(dst, bc.img); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// BenchmarkDecodePreprocess adds decoding the 640×480 JPEG.
func BenchmarkDecodePreprocess(b *testing.B) {
	data := benchJPEG(b)
	p := DefaultPreprocessor()
	dst := make([]float32, 3*224*224)
	b.ReportAllocs()
	for b.Loop() {
		img, err := Decode(data, DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := p.ApplyInto(dst, img); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}
