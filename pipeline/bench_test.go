package pipeline

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkRun measures the whole job on the tiny test model over synthetic
// images (images/s); compare with BenchmarkEncoder, the encoder alone.
func BenchmarkRun(b *testing.B) {
	m := openTiny(b)
	in := filepath.Join(b.TempDir(), "in")
	if err := WriteSyntheticImages(in, 200, 128, 1); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	images := 0
	for i := 0; b.Loop(); i++ {
		sum, err := Run(context.Background(), Config{Model: m, Inputs: []string{in}, Prompts: []string{"a red circle"}, Out: filepath.Join(b.TempDir(), "out")})
		if err != nil {
			b.Fatal(err)
		}
		images += sum.Done
	}
	b.ReportMetric(float64(images)/b.Elapsed().Seconds(), "images/s")
}
