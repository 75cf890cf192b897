//go:build amd64 && gc && !purego

package vision

import (
	"image"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestSIMDDispatch checks that the kernel set is the one this CPU should
// run, and that ApplyInto runs that set's assembly (every kernel, on the
// layouts that use each) and none under "go".
func TestSIMDDispatch(t *testing.T) {
	want := "go"
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX2:
		want = "avx512"
	case cpu.X86.HasAVX2:
		want = "avx2"
	}
	if defaultImpl != want {
		t.Fatalf("simdImpl is %q on this CPU, want %q", defaultImpl, want)
	}
	defer func(prev string) { simdImpl, kernelTrace = prev, nil }(simdImpl)
	ran := map[string]int{}
	kernelTrace = func(name string) { ran[name]++ }
	imgs := []image.Image{testImage(640, 480), randomImage(rand.New(rand.NewPCG(1, 2)), "ycbcr420", 64, 48, 0, 0, false), image.NewGray(image.Rect(0, 0, 50, 40))}
	p := DefaultPreprocessor()
	p.Size, p.CropSize = Size{ShortestEdge: 32}, Size{Height: 32, Width: 32}
	dst := make([]float32, 3*32*32)
	for _, name := range impls() {
		simdImpl = name
		clear(ran)
		for _, img := range imgs {
			if _, _, err := p.ApplyInto(dst, img); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for k := range ran {
			got = append(got, k)
		}
		slices.Sort(got)
		if name == "go" {
			if len(got) > 0 {
				t.Errorf("go: assembly ran: %v", got)
			}
			continue
		}
		suffix := map[string]string{"avx512": "AVX512", "avx2": "AVX2"}[name]
		for _, k := range []string{"hconv", "vconv", "lutRGBX"} {
			if ran[k+suffix] == 0 {
				t.Errorf("%s: %s%s did not run (ran %v)", name, k, suffix, got)
			}
		}
		for _, k := range []string{"quadRGBAVX2", "quadRGBAAVX2", "quadYCCAVX2"} {
			if ran[k] == 0 {
				t.Errorf("%s: %s did not run (ran %v)", name, k, got)
			}
		}
		for _, k := range got {
			if other := map[string]string{"avx512": "AVX2", "avx2": "AVX512"}[name]; strings.HasSuffix(k, other) && !strings.HasPrefix(k, "quad") {
				t.Errorf("%s: %s ran", name, k)
			}
		}
	}
}
