package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

//go:generate sh -c "cd ../../_asm/attn && go run . -out ../../internal/attn/attn_amd64.s -stubs ../../internal/attn/attn_stubs_amd64.go -pkg attn"

// forEachImpl runs f on every kernel implementation the machine has.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, impl := range cpuid.Available() {
		t.Run(impl.String(), func(t *testing.T) {
			defer cpuid.Set(impl)()
			f(t)
		})
	}
}

// ulps returns the distance in float32 units in the last place between
// got and the correctly rounded e.
func ulps(got float32, e float64) float64 {
	want := float32(e)
	if got == want {
		return 0
	}
	return math.Abs(float64(int64(math.Float32bits(got)) - int64(math.Float32bits(want))))
}

// TestExpULP sweeps [-87, 0] densely (2^23 points plus both ends) and
// checks every implementation's exp to within 2 ulp of math.Exp.
func TestExpULP(t *testing.T) {
	const n = 1 << 23
	xs := make([]float32, 0, n+64)
	for i := 0; i <= n; i++ {
		xs = append(xs, float32(-87*float64(i)/n))
	}
	// exact ends and tiny arguments
	xs = append(xs, 0, -0.0, -1e-30, -1e-7, -87, float32(math.Nextafter32(-87, 0)))
	for len(xs)%16 != 0 {
		xs = append(xs, -1)
	}
	forEachImpl(t, func(t *testing.T) {
		y := append([]float32(nil), xs...)
		ExpSum(y, 0)
		worst, at := 0.0, float32(0)
		for i, x := range xs {
			if u := ulps(y[i], math.Exp(float64(x))); u > worst {
				worst, at = u, x
			}
		}
		t.Logf("max error %v ulp at x = %v", worst, at)
		if worst > 2 {
			t.Errorf("exp error %v ulp at x = %v, want <= 2", worst, at)
		}
		// The scalar Exp is the reference of all paths.
		for _, x := range xs[:1000] {
			if u := ulps(Exp(x), math.Exp(float64(x))); u > 2 {
				t.Fatalf("Exp(%v): %v ulp", x, u)
			}
		}
	})
}

func TestExpSpecial(t *testing.T) {
	in := []float32{float32(math.Inf(-1)), -1000, -87.34, -88, -100, -200, 0, -1, -2, -3, -4, -5, -6, -7, -8, -9}
	want := []float32{0, 0, 0, 0, 0, 0, 1}
	forEachImpl(t, func(t *testing.T) {
		y := append([]float32(nil), in...)
		s := ExpSum(y, 0)
		for i, w := range want {
			if y[i] != w {
				t.Errorf("exp(%v) = %v, want %v", in[i], y[i], w)
			}
		}
		var ref float64
		for _, x := range in {
			ref += math.Exp(float64(x))
		}
		if math.Abs(float64(s)-ref) > 1e-6*ref {
			t.Errorf("sum %v, want %v", s, ref)
		}
		// sub shifts the argument.
		y = []float32{5, 4, 3, 2, 1, 0, -1, -2, 5, 5, 5, 5, 5, 5, 5, 5}
		ExpSum(y, 5)
		if y[0] != 1 || ulps(y[2], math.Exp(-2)) > 2 {
			t.Errorf("ExpSum(sub=5) = %v", y[:3])
		}
	})
	if got := Exp(89); !math.IsInf(float64(got), 1) {
		t.Errorf("Exp(89) = %v, want +Inf", got)
	}
	if got := Exp(88.5); ulps(got, math.Exp(88.5)) > 2 {
		t.Errorf("Exp(88.5) = %v, want %v", got, math.Exp(88.5))
	}
}

const guard = 13

var guardVal = float32(math.Float32frombits(0x7fc0beef))

func guarded(n int) (buf, s []float32) {
	buf = make([]float32, n+2*guard)
	for i := range buf {
		buf[i] = guardVal
	}
	return buf, buf[guard : guard+n]
}

func checkGuard(t *testing.T, what string, buf []float32) {
	t.Helper()
	for _, i := range []int{0, guard - 1, len(buf) - guard, len(buf) - 1} {
		if math.Float32bits(buf[i]) != math.Float32bits(guardVal) {
			t.Fatalf("%s: guard overwritten at %d", what, i)
		}
	}
	for i := 0; i < guard; i++ {
		if math.Float32bits(buf[i]) != math.Float32bits(guardVal) || math.Float32bits(buf[len(buf)-1-i]) != math.Float32bits(guardVal) {
			t.Fatalf("%s: guard overwritten", what)
		}
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestScores checks Scores on every path against a float64 loop, with guard
// bands, at every panel count 1..5 and odd head widths.
func TestScores(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	forEachImpl(t, func(t *testing.T) {
		for _, hd := range []int{1, 2, 3, 15, 16, 17, 31, 64, 65, 100} {
			for tk := 1; tk <= 80; tk += 1 + tk/8 {
				np := Panels(tk)
				lds := np*NR + tk%3 // stride may exceed the panels
				k := randSlice(r, tk*(hd+2))
				kp := make([]float32, PackedKLen(tk, hd))
				PackK(kp, k, hd+2, tk, hd)
				q := randSlice(r, MR*hd)
				buf, s := guarded((MR-1)*lds + np*NR)
				Scores(s, lds, q, kp, np, hd)
				checkGuard(t, fmt.Sprintf("scores hd=%d tk=%d", hd, tk), buf)
				for i := 0; i < MR; i++ {
					for j := 0; j < np*NR; j++ {
						var want float64
						if j < tk {
							for d := 0; d < hd; d++ {
								want += float64(q[i*hd+d]) * float64(k[j*(hd+2)+d])
							}
						}
						got := float64(s[i*lds+j])
						if math.Abs(got-want) > 1e-5*math.Sqrt(float64(hd))*(1+math.Abs(want)) {
							t.Fatalf("hd=%d tk=%d: s[%d,%d] = %v, want %v", hd, tk, i, j, got, want)
						}
					}
				}
			}
		}
	})
}

// TestPV checks PV (accumulating) against a float64 loop with guard bands.
func TestPV(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	forEachImpl(t, func(t *testing.T) {
		for _, hd := range []int{1, 16, 17, 32, 48, 63, 64, 80, 100} {
			hp := PadHD(hd)
			for _, n := range []int{1, 2, 7, 15, 16, 17, 33, 77, 130, 512} {
				ldp := n + n%5
				p := randSlice(r, (MR-1)*ldp+n)
				vsrc := randSlice(r, n*hd)
				vbuf, v := guarded(n * hp)
				PackV(v, vsrc, hd, n, hd)
				obuf, o := guarded(MR * hp)
				o0 := randSlice(r, MR*hp)
				copy(o, o0)
				PV(o, p, ldp, v, n, hp)
				checkGuard(t, "pv out", obuf)
				checkGuard(t, "pv v", vbuf)
				for i := 0; i < MR; i++ {
					for c := 0; c < hp; c++ {
						want := float64(o0[i*hp+c])
						if c < hd {
							for j := 0; j < n; j++ {
								want += float64(p[i*ldp+j]) * float64(vsrc[j*hd+c])
							}
						}
						got := float64(o[i*hp+c])
						if math.Abs(got-want) > 1e-5*math.Sqrt(float64(n))*(1+math.Abs(want)) {
							t.Fatalf("hd=%d n=%d: o[%d,%d] = %v, want %v", hd, n, i, c, got, want)
						}
					}
				}
			}
		}
	})
}

func TestMaxExpSumLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	forEachImpl(t, func(t *testing.T) {
		for n := 1; n <= 100; n++ {
			x := randSlice(r, n)
			for i := range x {
				x[i] = min(x[i]*10, 29)
			}
			x[r.IntN(n)] = 30 // the max at a random position
			buf, y := guarded(n)
			copy(y, x)
			if got := Max(y); got != 30 {
				t.Fatalf("n=%d: Max = %v, want 30", n, got)
			}
			s := ExpSum(y, 30)
			checkGuard(t, "expsum", buf)
			var want float64
			for i, v := range x {
				e := math.Exp(float64(v - 30)) // the argument is rounded to float32 first
				want += e
				if ulps(y[i], e) > 2 && !(e < 1.2e-38 && y[i] == 0) {
					t.Fatalf("n=%d: exp(%v) = %v, want %v", n, v-30, y[i], e)
				}
			}
			if math.Abs(float64(s)-want) > 1e-6*want {
				t.Fatalf("n=%d: sum %v, want %v", n, s, want)
			}
		}
	})
}
