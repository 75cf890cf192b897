package rgbx

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// eachImpl runs f as a subtest with each kernel set of Impls in turn.
func eachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer SetImpl(Impl())
	for _, name := range Impls() {
		SetImpl(name)
		t.Run(name, f)
	}
}

func stride(w int) int { return (4*w + Align - 1) &^ (Align - 1) }

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
			ws := stride(ow) + 8*rng.IntN(3)
			want := bytes.Repeat([]byte{0xa5}, 4*ws)
			got := bytes.Clone(want)
			HconvGeneric(want, ws, q, taps, k, ksize)
			Hconv(got, ws, q, taps, k, ksize)
			if !bytes.Equal(got, want) {
				t.Fatalf("ow %d, ksize %d: hconv differs from HconvGeneric", ow, ksize)
			}
		}
	})
}

func TestVconvKernels(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		for width := Align; width <= 16*Align; width += Align {
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
				VconvGeneric(want[:width], src, ws, k)
				Vconv(got[:width], src, ws, k)
				if !bytes.Equal(got, want) {
					t.Fatalf("width %d, %d taps: vconv differs from VconvGeneric", width, n)
				}
			}
		}
	})
}

func TestLutKernels(t *testing.T) {
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
			LutGeneric(want[0][:n], want[1][:n], want[2][:n], src, &lut)
			Lut(got[0][:n], got[1][:n], got[2][:n], src, &lut)
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
			QuadRGBGeneric(want[:16*n], rgb)
			QuadRGB(got[:16*n], rgb)
			if !bytes.Equal(got, want) {
				t.Fatalf("n %d: quadRGB differs from QuadRGBGeneric", n)
			}
			wa := QuadRGBAGeneric(want[:16*n], rgba)
			ga := QuadRGBA(got[:16*n], rgba)
			if !bytes.Equal(got, want) || ga != wa {
				t.Fatalf("n %d: quadRGBA differs from QuadRGBAGeneric (alpha %#x, want %#x)", n, ga, wa)
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
				QuadYCCGeneric(want, yT, yB, pc, m, xs, n)
				QuadYCC(got, yT, yB, pc, m, xs, n)
				if !bytes.Equal(got, want) {
					t.Fatalf("n %d from %d: quadYCC differs from QuadYCCGeneric", n, xs)
				}
			}
		}
	})
}
