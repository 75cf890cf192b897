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

// TestAttend checks Attend on every path against a float64 loop, with
// guard bands around every buffer and strides wider than the rows, over
// key counts around the vector and panel sizes and head widths around the
// register-tile widths (1 to 5 zmm, 1 to 3 ymm, with tails).
func TestAttend(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	forEachImpl(t, func(t *testing.T) {
		for _, hd := range []int{1, 3, 8, 15, 16, 17, 24, 40, 48, 63, 64, 65, 80, 96, 100, 112, 160} {
			for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 47, 63, 77, 80, 81, 96, 130, 161, 197, 257, 511, 512, 513, 1100, 1537} {
				if testing.Short() && hd%16 != 0 && n%16 != 0 && n > 40 {
					continue
				}
				// Past BlockKeys (online softmax over blocks) a few widths.
				if n > 257 && hd != 3 && hd != 40 && hd != 64 && hd != 65 {
					continue
				}
				tiles := 1 + (n+hd)%3
				if n > BlockKeys && n%2 == 1 {
					tiles += blockTiles // more than one group of tiles per block call
				}
				rows := tiles * MR
				ldq, ldo, ldp := hd+3, hd+5, n+2
				scale := float32(0.3 + r.Float64())
				k := randSlice(r, n*hd)
				v := randSlice(r, n*hd)
				q := randSlice(r, (rows-1)*ldq+hd)
				kbuf, kp := guarded(PackedKLen(n, hd))
				PackK(kp, k, hd, n, hd)
				vbuf, vp := guarded(n * PadHD(hd))
				PackV(vp, v, hd, n, hd)
				sbuf, s := guarded(ScratchLen(n, hd))
				obuf, o := guarded((rows-1)*ldo + hd)
				pbuf, prob := guarded((rows-1)*ldp + n)
				// Between rows the outputs must stay untouched too.
				for i := range o {
					o[i] = guardVal
				}
				for i := range prob {
					prob[i] = guardVal
				}
				Attend(o, ldo, q, ldq, tiles, kp, vp, n, hd, scale, s, prob, ldp)
				name := fmt.Sprintf("hd=%d n=%d tiles=%d", hd, n, tiles)
				for _, g := range []struct {
					what string
					buf  []float32
				}{{"k", kbuf}, {"v", vbuf}, {"s", sbuf}, {"o", obuf}, {"prob", pbuf}} {
					checkGuard(t, name+" "+g.what, g.buf)
				}
				sc := make([]float64, n)
				for i := 0; i < rows; i++ {
					// magMax bounds the scores' rounding: a float32 dot
					// product is off by at most about hd·2⁻²⁴·Σ|q·k|,
					// typically √hd·2⁻²⁴·Σ|q·k|; a probability's relative
					// error is its own score's error plus the maximum's and
					// the sum's.
					mx, magMax := math.Inf(-1), 0.0
					for j := range sc {
						var d64, mag float64
						for d := 0; d < hd; d++ {
							d64 += float64(q[i*ldq+d]) * float64(k[j*hd+d])
							mag += math.Abs(float64(q[i*ldq+d]) * float64(k[j*hd+d]))
						}
						sc[j] = d64 * float64(scale)
						mx = max(mx, sc[j])
						magMax = max(magMax, mag*float64(scale))
					}
					probTol := 1e-6 + 2*math.Sqrt(float64(hd))*0x1p-24*magMax
					var l float64
					for j := range sc {
						sc[j] = math.Exp(sc[j] - mx)
						l += sc[j]
					}
					for j := 0; j < ldp && i*ldp+j < len(prob); j++ {
						got := prob[i*ldp+j]
						if j >= n {
							if math.Float32bits(got) != math.Float32bits(guardVal) {
								t.Fatalf("%s: prob[%d,%d] (past n) written", name, i, j)
							}
							continue
						}
						want := sc[j] / l
						if math.Abs(float64(got)-want) > probTol*(want+1e-3) {
							t.Fatalf("%s: prob[%d,%d] = %v, want %v", name, i, j, got, want)
						}
					}
					for c := 0; c < ldo && i*ldo+c < len(o); c++ {
						got := o[i*ldo+c]
						if c >= hd {
							if math.Float32bits(got) != math.Float32bits(guardVal) {
								t.Fatalf("%s: o[%d,%d] (past hd) written", name, i, c)
							}
							continue
						}
						var want, mag float64
						for j := range sc {
							want += sc[j] * float64(v[j*hd+c])
							mag += sc[j] * math.Abs(float64(v[j*hd+c]))
						}
						want, mag = want/l, mag/l
						if math.Abs(float64(got)-want) > 1e-5*math.Sqrt(float64(hd))*(mag+1e-3) {
							t.Fatalf("%s: o[%d,%d] = %v, want %v", name, i, c, got, want)
						}
					}
				}
				// Without probabilities the output is the same.
				o2 := make([]float32, len(o))
				Attend(o2, ldo, q, ldq, tiles, kp, vp, n, hd, scale, s, nil, 0)
				for i := 0; i < rows; i++ {
					for c := 0; c < hd; c++ {
						if o2[i*ldo+c] != o[i*ldo+c] {
							t.Fatalf("%s: o[%d,%d] = %v without probabilities, %v with", name, i, c, o2[i*ldo+c], o[i*ldo+c])
						}
					}
				}
			}
		}
	})
}

// TestAttendStats checks the row maxima and sums the kernels return for
// online softmax against a float64 reference.
func TestAttendStats(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range []struct{ n, hd, tiles int }{{1, 8, 1}, {17, 40, 2}, {77, 64, 3}, {512, 65, 2}} {
			n, hd, tiles := c.n, c.hd, c.tiles
			rows := tiles * MR
			k, v, q := randSlice(r, n*hd), randSlice(r, n*hd), randSlice(r, rows*hd)
			kp := make([]float32, PackedKLen(n, hd))
			PackK(kp, k, hd, n, hd)
			vp := make([]float32, n*PadHD(hd))
			PackV(vp, v, hd, n, hd)
			s := make([]float32, ScratchLen(n, hd))
			o := make([]float32, rows*hd)
			ml := make([]float32, 8*tiles)
			attend(o, hd, q, hd, tiles, kp, vp, n, hd, 0.5, s, nil, 0, ml)
			for i := 0; i < rows; i++ {
				sc := make([]float64, n)
				mx := math.Inf(-1)
				for j := range sc {
					for d := 0; d < hd; d++ {
						sc[j] += float64(q[i*hd+d]) * float64(k[j*hd+d])
					}
					sc[j] *= 0.5
					mx = max(mx, sc[j])
				}
				var l float64
				for _, x := range sc {
					l += math.Exp(x - mx)
				}
				gm, gl := float64(ml[8*(i/MR)+i%MR]), float64(ml[8*(i/MR)+4+i%MR])
				if math.Abs(gm-mx) > 1e-5*(1+math.Abs(mx)) || math.Abs(gl-l) > 1e-5*l {
					t.Errorf("n=%d hd=%d row %d: max, sum = %v, %v; want %v, %v", n, hd, i, gm, gl, mx, l)
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

// BenchmarkAttend times the fused kernel on one head: 200 query rows
// (50 tiles), head_dim 64 (and 40, SD 1.5's 320/8), T_k 77.
// FLOPs = 2·2·rows·T_k·head_dim (Q·Kᵀ and P·V).
func BenchmarkAttend(b *testing.B) {
	for _, c := range []struct{ hd, n int }{{64, 77}, {40, 77}, {64, 257}, {64, 4096}} {
		b.Run(fmt.Sprintf("hd=%d/tk=%d", c.hd, c.n), func(b *testing.B) {
			for _, impl := range cpuid.Available() {
				b.Run(impl.String(), func(b *testing.B) {
					defer cpuid.Set(impl)()
					r := rand.New(rand.NewPCG(1, 1))
					const tiles = 50
					hd, n := c.hd, c.n
					kp := make([]float32, PackedKLen(n, hd))
					PackK(kp, randSlice(r, n*hd), hd, n, hd)
					vp := make([]float32, n*PadHD(hd))
					PackV(vp, randSlice(r, n*hd), hd, n, hd)
					q := randSlice(r, tiles*MR*hd)
					o := make([]float32, len(q))
					s := make([]float32, ScratchLen(n, hd))
					b.ResetTimer()
					for range b.N {
						Attend(o, hd, q, hd, tiles, kp, vp, n, hd, 0.125, s, nil, 0)
					}
					flops := 4 * float64(tiles*MR*n*hd)
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		})
	}
}
