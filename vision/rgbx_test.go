package vision

import (
	"bytes"
	"fmt"
	"image"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/conditionhq/condition/vision/internal/rgbx"
)

// impls are the kernel sets this CPU and build can run, "go" first: for
// ApplyInto, resample's passes (the reference); for resampleRGBX, the
// kernels' Go twins.
func impls() []string { return rgbx.Impls() }

// eachImpl runs f as a subtest with each kernel set of impls in turn.
func eachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer rgbx.SetImpl(rgbx.Impl())
	for _, name := range impls() {
		rgbx.SetImpl(name)
		t.Run(name, f)
	}
}

// rgbxToRGB drops the 4th byte of h RGBX rows of w pixels.
func rgbxToRGB(src []byte, w, h int) []byte {
	ws := rgbxStride(w)
	out := make([]byte, 0, 3*w*h)
	for y := range h {
		row := src[y*ws:][:4*w]
		for x := range w {
			out = append(out, row[4*x:4*x+3]...)
		}
	}
	return out
}

var allFilters = []Resample{Bicubic, Bilinear, Lanczos, Box, Hamming}

// checkResampleRGBX fails t unless resampleRGBX (with the kernels of
// rgbx.Impl(), the Go twins when "go") gives resample's bytes for img
// resized to dw×dh, window win. sa and sb are the two paths' scratch,
// reused across calls as the pool reuses them.
func checkResampleRGBX(t testing.TB, img image.Image, dw, dh int, win image.Rectangle, r Resample, sa, sb *resampleScratch, what string) {
	t.Helper()
	f, _ := r.filter()
	b := img.Bounds()
	var src rgbRows
	src.init(img, new(convScratch))
	want := make([]byte, 3*win.Dx()*win.Dy())
	resample(want, &src, b.Dx(), b.Dy(), dw, dh, win, f, sa)
	got := make([]byte, rgbxStride(win.Dx())*win.Dy())
	resampleRGBX(got, &src, b.Dx(), b.Dy(), dw, dh, win, f, sb)
	if g := rgbxToRGB(got, win.Dx(), win.Dy()); !bytes.Equal(g, want) {
		for i := range want {
			if g[i] != want[i] {
				px := i / 3
				t.Fatalf("%s: window pixel (%d, %d) channel %d is %d, resample gives %d",
					what, px%win.Dx(), px/win.Dx(), i%3, g[i], want[i])
			}
		}
	}
}

// randomResize picks a target size for a w×h source: downscales,
// upscales, unchanged axes, and 1-pixel edges; and a window in it.
func randomResize(rng *rand.Rand, w, h int) (dw, dh int, win image.Rectangle) {
	side := func(n int) int {
		switch rng.IntN(6) {
		case 0:
			return 1
		case 1:
			return n // that pass is an identity
		case 2:
			return 1 + rng.IntN(2*n+8) // up to twice the size and more
		}
		return 1 + rng.IntN(n) // down
	}
	for {
		dw, dh = side(w), side(h)
		if dw != w || dh != h {
			break
		}
	}
	win = image.Rect(0, 0, dw, dh)
	if rng.IntN(3) == 0 {
		x0, y0 := rng.IntN(dw), rng.IntN(dh)
		win = image.Rect(x0, y0, x0+1+rng.IntN(dw-x0), y0+1+rng.IntN(dh-y0))
	}
	return dw, dh, win
}

// TestResampleRGBXMatchesResample compares the vector path (every kernel
// set, and its Go twins) with resample, byte for byte, on random images
// of every layout and size 1..700 on each side, every filter, random
// targets and windows.
func TestResampleRGBXMatchesResample(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 80
	}
	eachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		var sa, sb resampleScratch
		for i := range n {
			kind := imageKinds[rng.IntN(len(imageKinds))]
			w, h := 1+rng.IntN(60), 1+rng.IntN(60)
			if i%4 == 0 {
				w, h = 1+rng.IntN(700), 1+rng.IntN(700)
			}
			img := randomImage(rng, kind, w, h, rng.IntN(3), rng.IntN(3), rng.IntN(4) == 0)
			dw, dh, win := randomResize(rng, w, h)
			r := allFilters[rng.IntN(len(allFilters))]
			checkResampleRGBX(t, img, dw, dh, win, r, &sa, &sb,
				fmt.Sprintf("case %d: %s %dx%d to %dx%d %v, window %v", i, kind, w, h, dw, dh, r, win))
		}
	})
}

// TestResampleRGBXCLIPSizes covers the main case, photos to 224 bicubic,
// on the layouts that have their own fast paths.
func TestResampleRGBXCLIPSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	type tc struct {
		img  image.Image
		what string
	}
	var cases []tc
	for _, sz := range [][2]int{{640, 480}, {481, 641}, {225, 224}} {
		for _, kind := range []string{"ycbcr420", "rgba", "rgba-alpha", "nrgba", "gray"} {
			o := rng.IntN(2)
			cases = append(cases, tc{randomImage(rng, kind, sz[0], sz[1], o, o, false), fmt.Sprintf("%s %v at %d", kind, sz, o)})
		}
	}
	eachImpl(t, func(t *testing.T) {
		var sa, sb resampleScratch
		for _, c := range cases {
			b := c.img.Bounds()
			p := DefaultPreprocessor()
			rh, rw := p.ResizedSize(b.Dx(), b.Dy())
			win := image.Rect((rw-224)/2, (rh-224)/2, (rw-224)/2+224, (rh-224)/2+224)
			checkResampleRGBX(t, c.img, rw, rh, win, Bicubic, &sa, &sb, c.what)
		}
	})
}

// FuzzResampleRGBX compares the vector path with resample on fuzzed
// sizes, filters, layouts and pixels, with every kernel set.
func FuzzResampleRGBX(f *testing.F) {
	f.Add(uint16(640), uint16(480), uint16(298), uint16(224), uint8(3), uint8(11), uint64(1))
	f.Add(uint16(1), uint16(1), uint16(7), uint16(1), uint8(1), uint8(0), uint64(2))
	f.Add(uint16(33), uint16(700), uint16(33), uint16(5), uint8(4), uint8(3), uint64(3))
	f.Fuzz(func(t *testing.T, w, h, dw, dh uint16, filt, kind uint8, seed uint64) {
		sw, sh := 1+int(w)%700, 1+int(h)%700
		tw, th := 1+int(dw)%1000, 1+int(dh)%1000
		if tw == sw && th == sh {
			return
		}
		r := allFilters[int(filt)%len(allFilters)]
		k := imageKinds[int(kind)%len(imageKinds)]
		defer rgbx.SetImpl(rgbx.Impl())
		for _, name := range impls() {
			rgbx.SetImpl(name)
			rng := rand.New(rand.NewPCG(seed, 1))
			img := randomImage(rng, k, sw, sh, int(seed%3), int(seed/3%3), seed%5 == 0)
			var sa, sb resampleScratch
			checkResampleRGBX(t, img, tw, th, image.Rect(0, 0, tw, th), r, &sa, &sb,
				fmt.Sprintf("%s: %s %dx%d to %dx%d %v", name, k, sw, sh, tw, th, r))
		}
	})
}

// TestQuadYCCMatchesPairH2V2 checks quadPair (and so quadYCCGo and the
// kernels) against pairH2V2, the Go path's conversion, on every column
// range of small 4:2:0 images.
func TestQuadYCCMatchesPairH2V2(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(29, 30))
		for _, sz := range [][4]int{{2, 2, 0, 0}, {5, 4, 0, 0}, {17, 6, 2, 0}, {40, 8, 0, 2}, {33, 5, 4, 2}} {
			img := randomImage(rng, "ycbcr420", sz[0], sz[1], sz[2], sz[3], false)
			var r rgbRows
			tmp := new(convScratch)
			r.init(img, tmp)
			w := sz[0]
			for y := 0; y+1 < sz[1]; y++ {
				if !r.pairAt(y) {
					continue
				}
				for x0 := range w {
					for x1 := x0 + 1; x1 <= w; x1++ {
						pair := make([]uint64, 3*(x1-x0))
						r.ycc.pairH2V2(pair, y, x0, x1, tmp)
						q := make([]byte, 16*(x1-x0))
						r.ycc.quadPair(q, 1, y, x0, x1, tmp)
						for x := range x1 - x0 {
							for c := range 3 {
								a, b := lanes(pair[3*x+c])
								if int32(q[16*x+4+c]) != a || int32(q[16*x+8+c]) != b {
									t.Fatalf("%v row %d columns %d..%d: column %d channel %d differs", sz, y, x0, x1, x, c)
								}
							}
						}
					}
				}
			}
		}
	})
}

// TestSIMDDispatch checks that ApplyInto runs the chosen set's assembly
// (every kernel, on the layouts that use each), and none under "go".
func TestSIMDDispatch(t *testing.T) {
	defer rgbx.SetImpl(rgbx.Impl())
	defer rgbx.SetTrace(nil)
	ran := map[string]int{}
	rgbx.SetTrace(func(name string) { ran[name]++ })
	imgs := []image.Image{testImage(640, 480), randomImage(rand.New(rand.NewPCG(1, 2)), "ycbcr420", 64, 48, 0, 0, false), image.NewGray(image.Rect(0, 0, 50, 40))}
	p := DefaultPreprocessor()
	p.Size, p.CropSize = Size{ShortestEdge: 32}, Size{Height: 32, Width: 32}
	dst := make([]float32, 3*32*32)
	for _, name := range impls() {
		rgbx.SetImpl(name)
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
		want := []string{"hconv" + suffix, "vconv" + suffix, "lutRGBX" + suffix, "quadRGBAVX2", "quadRGBAAVX2", "quadYCCAVX2"}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: ran %v, want %v", name, got, want)
		}
	}
}
