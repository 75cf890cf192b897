package batch

import (
	"context"
	"image"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/models"
	_ "github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
)

// BenchmarkIndexRow measures what the index adds per image of the built-in
// model: its joint-space patches (Engine.JointPatches), converted to each
// dtype and written into a part's rows.
func BenchmarkIndexRow(b *testing.B) {
	m, err := models.Open("default", models.Options{})
	if err != nil {
		b.Skip(err)
	}
	eng := tinyEngine(b, m, pipeline.Options{Threads: 1})
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	r := rand.New(rand.NewSource(1))
	for i := range img.Pix {
		img.Pix[i] = byte(r.Intn(256))
	}
	encs, err := eng.EncodeImages(context.Background(), []image.Image{img})
	if err != nil {
		b.Fatal(err)
	}
	enc := &encs[0]
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			eng.EncodeImages(context.Background(), []image.Image{img})
		}
	})
	b.Run("joint_patches", func(b *testing.B) {
		for b.Loop() {
			eng.JointPatches(enc)
		}
	})
	for _, dt := range []string{indexOutF16, indexOutF32, indexOutInt8} {
		b.Run("write_"+dt, func(b *testing.B) {
			out, err := openOutFolder(filepath.Join(b.TempDir(), "out"))
			if err != nil {
				b.Fatal(err)
			}
			defer out.Close()
			s, err := newIndexOutSet(out, eng, 1000, Shard{}, "x", dt)
			if err != nil {
				b.Fatal(err)
			}
			defer s.abandon()
			jp, _ := eng.JointPatches(enc)
			seq := 0
			for b.Loop() {
				if err := s.write(seq%1000, enc.Embeds, jp, enc.Grid); err != nil {
					b.Fatal(err)
				}
				seq++
			}
		})
	}
}

// BenchmarkIndexF16 measures the float16 conversion of one image's rows of
// the built-in model (65 vectors of 64).
func BenchmarkIndexF16(b *testing.B) {
	src := make([]float32, 65*64)
	r := rand.New(rand.NewSource(1))
	for i := range src {
		src[i] = float32(r.NormFloat64() / 8)
	}
	dst := make([]byte, 0, 2*len(src))
	for b.Loop() {
		dst = indexOutAppendF16(dst[:0], src)
	}
}
