package vision

import (
	"bytes"
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"testing"
)

// defaultImpl is the kernel set chosen for this CPU and build.
var defaultImpl = simdImpl

// impls are the kernel sets this CPU and build can run, "go" (resample's
// passes, the reference) first.
func impls() []string {
	out := []string{"go"}
	if defaultImpl != "go" {
		out = append(out, defaultImpl)
		if defaultImpl == "avx512" && hasAVX2 {
			out = append(out, "avx2") // the AVX2 kernels run where AVX-512 does
		}
	}
	return out
}

// eachImpl runs f as a subtest with each kernel set of impls in turn.
func eachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer func(prev string) { simdImpl = prev }(simdImpl)
	for _, name := range impls() {
		simdImpl = name
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
// simdImpl, the Go twins when "go") gives resample's bytes for img
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
		defer func(prev string) { simdImpl = prev }(simdImpl)
		for _, name := range impls() {
			simdImpl = name
			rng := rand.New(rand.NewPCG(seed, 1))
			img := randomImage(rng, k, sw, sh, int(seed%3), int(seed/3%3), seed%5 == 0)
			var sa, sb resampleScratch
			checkResampleRGBX(t, img, tw, th, image.Rect(0, 0, tw, th), r, &sa, &sb,
				fmt.Sprintf("%s: %s %dx%d to %dx%d %v", name, k, sw, sh, tw, th, r))
		}
	})
}

// The kernel tests compare each kernel set's wrappers with the Go twins,
// at every length, with guard bytes around what they may write.

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = uint8(rng.IntN(256))
	}
	return b
}

func TestHconvKernels(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		for ow := 1; ow <= 70; ow++ {
			ksize := 1 + rng.IntN(13)
			cols := 1 + rng.IntN(3*ow+ksize)
			q := randomBytes(rng, 16*cols)
			for x := range cols { // the quad rows' 4th bytes are 0
				for r := range 4 {
					q[16*x+4*r+3] = 0
				}
			}
			taps := make([]int32, 2*ow)
			k := make([]int32, ow*ksize)
			for xx := range ow {
				n := rng.IntN(min(ksize, cols) + 1)
				taps[2*xx] = int32(16 * rng.IntN(cols-n+1))
				taps[2*xx+1] = int32(n)
				for i := range n {
					k[xx*ksize+i] = int32(rng.IntN(3<<precision)) - 1<<precision
				}
			}
			ws := rgbxStride(ow) + 8*rng.IntN(3)
			want := bytes.Repeat([]byte{0xa5}, 4*ws)
			got := bytes.Clone(want)
			hconvGo(want, ws, q, taps, k, ksize)
			hconv(got, ws, q, taps, k, ksize)
			if !bytes.Equal(got, want) {
				t.Fatalf("ow %d, ksize %d: hconv differs from hconvGo", ow, ksize)
			}
		}
	})
}

func TestVconvKernels(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		for width := rgbxAlign; width <= 16*rgbxAlign; width += rgbxAlign {
			for n := 1; n <= 14; n++ {
				ws := width + 4*rng.IntN(20)
				src := randomBytes(rng, n*ws)
				k := make([]int32, n)
				for i := range k {
					k[i] = int32(rng.IntN(3<<precision)/n - 1<<precision/n)
				}
				want := make([]byte, width+64)
				for i := range want {
					want[i] = 0x5a
				}
				got := bytes.Clone(want)
				vconvGo(want[:width], src, ws, k)
				vconv(got[:width], src, ws, k)
				if !bytes.Equal(got, want) {
					t.Fatalf("width %d, %d taps: vconv differs from vconvGo", width, n)
				}
			}
		}
	})
}

func TestLutRGBXKernels(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(25, 26))
		var lut [3][256]float32
		for c := range lut {
			for v := range lut[c] {
				lut[c][v] = float32(rng.NormFloat64())
			}
		}
		lut[1][7] = float32(math.Copysign(0, -1))
		for n := 0; n <= 100; n++ {
			src := randomBytes(rng, 4*n+16)
			var want, got [3][]float32
			for c := range 3 {
				want[c] = make([]float32, n+8)
				for i := range want[c] {
					want[c][i] = float32(i) + 0.5
				}
				got[c] = append([]float32(nil), want[c]...)
			}
			lutRGBXGo(want[0][:n], want[1][:n], want[2][:n], src, &lut)
			lutRGBX(got[0][:n], got[1][:n], got[2][:n], src, &lut)
			for c := range 3 {
				for i := range want[c] {
					if math.Float32bits(got[c][i]) != math.Float32bits(want[c][i]) {
						t.Fatalf("n %d: channel %d value %d is %v, want %v", n, c, i, got[c][i], want[c][i])
					}
				}
			}
		}
	})
}

func TestQuadKernels(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(27, 28))
		for n := 0; n <= 64; n += 4 {
			var rgb, rgba [4][]byte
			for r := range 4 {
				rgb[r] = randomBytes(rng, 3*n+16)
				rgba[r] = randomBytes(rng, 4*n)
				if rng.IntN(2) == 0 {
					for x := range n {
						rgba[r][4*x+3] = 0xff
					}
				}
			}
			want := bytes.Repeat([]byte{0xa5}, 16*n+64)
			got := bytes.Clone(want)
			quadRGBGo(want[:16*n], rgb)
			quadRGB(got[:16*n], rgb)
			if !bytes.Equal(got, want) {
				t.Fatalf("n %d: quadRGB differs from quadRGBGo", n)
			}
			wa := quadRGBAGo(want[:16*n], rgba)
			ga := quadRGBA(got[:16*n], rgba)
			if !bytes.Equal(got, want) || ga != wa {
				t.Fatalf("n %d: quadRGBA differs from quadRGBAGo (alpha %#x, want %#x)", n, ga, wa)
			}
		}
		// YCbCr: every start parity and length, and enough columns for
		// every chroma and luma value.
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 40, 4096} {
			for xs := range 4 {
				cw := (xs+n+1)/2 + 1
				m := cw + 2 + 8
				pc := randomBytes(rng, 6*m)
				yT, yB := randomBytes(rng, n), randomBytes(rng, n)
				want := bytes.Repeat([]byte{0xa5}, 16*n+64)
				got := bytes.Clone(want)
				quadYCCGo(want, yT, yB, pc, m, xs, n)
				quadYCC(got, yT, yB, pc, m, xs, n)
				if !bytes.Equal(got, want) {
					t.Fatalf("n %d from %d: quadYCC differs from quadYCCGo", n, xs)
				}
			}
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
