package aaresize

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

// The goldens in testdata are torch 1.13's outputs, written by
// scripts/aaresize/make_goldens.py. The tests allow a difference of
// tolerance from them; as the arithmetic is torch's, they also log the
// differences seen and how many values differ in any bit (none, on the
// machine that wrote them).
const tolerance = 1e-6

func readF32(t *testing.T, path string) ([]int, []float32) {
	t.Helper()
	tn, err := tensorio.ReadNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tn.Float32()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tn.Shape, v
}

// compare returns the largest |got-want| and the number of values whose
// bits differ; a NaN in one and not the other is an infinite difference.
func compare(got, want []float32) (maxDiff float64, differ int) {
	for i := range want {
		if math.Float32bits(got[i]) == math.Float32bits(want[i]) {
			continue
		}
		differ++
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		maxDiff = max(maxDiff, d)
	}
	return maxDiff, differ
}

func TestBilinearTorch(t *testing.T) {
	ins, err := filepath.Glob(filepath.Join("testdata", "bilinear_*_in.npy"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("no bilinear goldens in testdata (%v); run scripts/aaresize/make_goldens.py", err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), "_in.npy")
		t.Run(strings.TrimPrefix(name, "bilinear_"), func(t *testing.T) {
			inShape, src := readF32(t, in)
			for _, k := range []struct {
				suffix string
				fused  bool
			}{{"_out.npy", true}, {"_out_nofma.npy", false}} {
				outShape, want := readF32(t, filepath.Join("testdata", name+k.suffix))
				if len(inShape) != 3 || len(outShape) != 3 || inShape[0] != outShape[0] {
					t.Fatalf("shapes %v → %v are not [c, h, w] → [c, h', w']", inShape, outShape)
				}
				c, inH, inW, outH, outW := inShape[0], inShape[1], inShape[2], outShape[1], outShape[2]
				got := make([]float32, len(want))
				if k.fused {
					Bilinear(got, src, c, inH, inW, outH, outW)
				} else {
					bilinear(got, src, make([]float32, c*inH*outW), c, inH, inW, outH, outW, false)
				}
				d, n := compare(got, want)
				t.Logf("%s: max |Δ| %g, %d of %d values differ in any bit", k.suffix, d, n, len(want))
				if !(d <= tolerance) {
					t.Errorf("%s: max |Δ| %g > %g", k.suffix, d, tolerance)
				}
			}
		})
	}
}

func TestPositionEmbeddingsTorch(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "pos_s*_h*_w*_m*.npy"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no position goldens in testdata (%v); run scripts/aaresize/make_goldens.py", err)
	}
	for _, f := range files {
		var side, h, w, m int
		base := filepath.Base(f)
		if _, err := fmt.Sscanf(base, "pos_s%d_h%d_w%d_m%d.npy", &side, &h, &w, &m); err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		t.Run(strings.TrimSuffix(base, ".npy"), func(t *testing.T) {
			tableShape, table := readF32(t, filepath.Join("testdata", fmt.Sprintf("pos_s%d_table.npy", side)))
			wantShape, want := readF32(t, f)
			d := tableShape[1]
			if tableShape[0] != side*side || wantShape[0] != m || wantShape[1] != d {
				t.Fatalf("shapes %v, %v do not fit side %d, max %d", tableShape, wantShape, side, m)
			}
			got := make([]float32, m*d)
			if err := PositionEmbeddings(got, table, side, d, h, w, m); err != nil {
				t.Fatal(err)
			}
			maxDiff, n := compare(got, want)
			t.Logf("max |Δ| %g, %d of %d values differ in any bit", maxDiff, n, len(want))
			if !(maxDiff <= tolerance) {
				t.Errorf("max |Δ| %g > %g", maxDiff, tolerance)
			}
			for r := h * w; r < m; r++ {
				for k := range d {
					if got[r*d+k] != got[k] {
						t.Fatalf("padding row %d differs from row 0 at %d", r, k)
					}
				}
			}
		})
	}
}

// TestPositionEmbeddingsIsBilinear checks that resizing the table in its
// channels-last order gives, transposed, what Bilinear gives on the
// permuted grid, bit for bit.
func TestPositionEmbeddingsIsBilinear(t *testing.T) {
	const side, d, maxPatches = 5, 3, 40
	table := make([]float32, side*side*d)
	for i := range table {
		table[i] = float32(math.Sin(float64(i)*1.7)) * 3
	}
	perm := make([]float32, len(table)) // [d, side, side]
	for p := range side * side {
		for k := range d {
			perm[k*side*side+p] = table[p*d+k]
		}
	}
	for _, g := range [][2]int{{1, 1}, {2, 7}, {5, 5}, {8, 3}, {1, 40}, {40, 1}} {
		h, w := g[0], g[1]
		got := make([]float32, maxPatches*d)
		if err := PositionEmbeddings(got, table, side, d, h, w, maxPatches); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, d*h*w)
		Bilinear(want, perm, d, side, side, h, w)
		for p := range h * w {
			for k := range d {
				if math.Float32bits(got[p*d+k]) != math.Float32bits(want[k*h*w+p]) {
					t.Fatalf("%d×%d: patch %d channel %d: %g, Bilinear gives %g", h, w, p, k, got[p*d+k], want[k*h*w+p])
				}
			}
		}
	}
}

func TestPositionEmbeddingsErrors(t *testing.T) {
	table := make([]float32, 4*4*2)
	for _, c := range []struct {
		name                  string
		dst, table            []float32
		side, d, h, w, maxLen int
	}{
		{"zero side", make([]float32, 32), table, 0, 2, 2, 2, 16},
		{"zero grid", make([]float32, 32), table, 4, 2, 0, 2, 16},
		{"too many patches", make([]float32, 32), table, 4, 2, 4, 5, 16},
		{"short table", make([]float32, 32), table[:30], 4, 2, 2, 2, 16},
		{"long dst", make([]float32, 34), table, 4, 2, 2, 2, 16},
		{"overflow", make([]float32, 32), table, 4, 2, math.MaxInt / 2, 3, 16},
	} {
		err := PositionEmbeddings(c.dst, c.table, c.side, c.d, c.h, c.w, c.maxLen)
		if !errors.Is(err, ErrShape) {
			t.Errorf("%s: error %v, want one wrapping ErrShape", c.name, err)
		} else if !strings.HasPrefix(err.Error(), "aaresize: ") {
			t.Errorf("%s: error %q lacks the package prefix", c.name, err)
		}
	}
}

func TestBilinearPanics(t *testing.T) {
	for _, c := range []struct {
		want                     string
		dst, src                 int
		ch, inH, inW, outH, outW int
	}{
		{errNonPositive, 4, 4, 1, 2, 2, 2, 0},
		{errNonPositive, 4, 4, -1, 2, 2, 2, 2},
		{errSrcLen, 4, 5, 1, 2, 2, 2, 2},
		{errDstLen, 3, 4, 1, 2, 2, 2, 2},
		{errTooLarge, 4, 4, math.MaxInt / 2, 2, 2, 2, 2},
	} {
		func() {
			defer func() {
				if r := recover(); r != c.want {
					t.Errorf("%+v: panic %v, want %q", c, r, c.want)
				}
			}()
			Bilinear(make([]float32, c.dst), make([]float32, c.src), c.ch, c.inH, c.inW, c.outH, c.outW)
		}()
	}
}

// TestFMA32 checks fma32 against a·b+c computed exactly and rounded once:
// on sums that double rounding gets wrong (the float64 sum lands on a
// float32 halfway point the exact sum is just off), and on random values
// whose sums range from float32's subnormals to 2^52.
func TestFMA32(t *testing.T) {
	const (
		lo = 1 - 0x1p-23                // the float32 below 1
		hi = 1 + 0x1p-23                // the float32 above 1
		b  = 0x1p-24 * (1 + 0x1p-23)    // lo·b = 2^-24 - 2^-70
		up = float32(math.MaxFloat32)   // finite, for the overflow case
		in = float32(0x1p-149) * 0x1p10 // a subnormal
	)
	for _, c := range []struct{ a, b, c, want float32 }{
		{1, 0x1p-24, 1, 1},  // exactly halfway between 1 and hi: ties to even
		{lo, b, hi, hi},     // just below the halfway point hi+2^-24
		{-lo, b, hi, hi},    // just above the halfway point 1+2^-24
		{lo, -b, -hi, -hi},  // the first, negated
		{-lo, -b, -hi, -hi}, // the second, negated
		{3, 5, 7, 22},       // exact
		{up, 2, -up, up},    // the product overflows float32 but not the sum
		{in, 0.5, in, 1.5 * in},
	} {
		if got := fma32(c.a, c.b, c.c); math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("fma32(%g, %g, %g) = %g, want %g", c.a, c.b, c.c, got, c.want)
		}
		if got := exactFMA32(c.a, c.b, c.c); math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("exactFMA32(%g, %g, %g) = %g, want %g", c.a, c.b, c.c, got, c.want)
		}
	}
	x := uint32(0x9e3779b9)
	next := func() float32 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		return math.Float32frombits(x&0x807fffff | (30+x%150)<<23)
	}
	for range 300000 {
		a, b, c := next(), next(), next()
		if got, want := fma32(a, b, c), exactFMA32(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}

// exactFMA32 is a·b+c computed exactly with math/big and rounded once to
// float32 (finite inputs).
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(1000).SetFloat64(float64(a))
	x.Mul(x, big.NewFloat(float64(b)))
	x.Add(x, big.NewFloat(float64(c)))
	f, _ := x.Float32()
	if f == 0 && math.Signbit(float64(a*b)) && math.Signbit(float64(c)) {
		return float32(math.Copysign(0, -1))
	}
	return f
}

// TestAxisWindows checks that no output's window is wider than the weight
// stride torch allots it, nor empty, nor outside the input.
func TestAxisWindows(t *testing.T) {
	for in := 1; in <= 128; in++ {
		for out := 1; out <= 128; out++ {
			a := newAxis(in, out)
			for i := range out {
				if a.size[i] < 1 || a.size[i] > a.stride || a.start[i]+a.size[i] > in {
					t.Fatalf("%d → %d: output %d has taps %d..%d, stride %d",
						in, out, i, a.start[i], a.start[i]+a.size[i], a.stride)
				}
			}
		}
	}
}

// fill puts values from a fixed sequence in [-scale, scale) into x.
func fill(x []float32, seed uint64, scale float32) {
	for i := range x {
		seed = seed*6364136223846793005 + 1442695040888963407
		x[i] = (float32(seed>>40)/(1<<24)*2 - 1) * scale
	}
}

// FuzzBilinear resizes grids of sizes 1..300 and checks what holds
// whatever the sizes: no panic; the outputs are convex combinations of the
// inputs (the weights are non-negative and sum to 1), so they lie within
// the inputs' range up to rounding; a constant grid stays constant, within
// 1e-6 while the windows are narrow (at most 40 taps over both passes,
// downscaling by up to about 9 along each axis). Wider windows drift
// further in float32, in torch too: a constant 0.5 resized from 257 rows
// to 1 becomes 0.49999872 there and here (testdata/fuzz has that case).
func FuzzBilinear(f *testing.F) {
	for _, s := range [][5]uint16{
		{1, 16, 16, 5, 3}, {2, 16, 16, 1, 1}, {3, 1, 1, 300, 300}, {1, 300, 300, 1, 1},
		{2, 7, 300, 300, 7}, {1, 4, 4, 13, 11}, {3, 299, 2, 3, 298},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], uint64(s[1])*977+uint64(s[4]), float32(0.375))
	}
	f.Fuzz(func(t *testing.T, c, inH, inW, outH, outW uint16, seed uint64, constant float32) {
		ch := int(c%3) + 1
		ih, iw, oh, ow := int(inH%300)+1, int(inW%300)+1, int(outH%300)+1, int(outW%300)+1
		if math.IsNaN(float64(constant)) || math.Abs(float64(constant)) > 1 {
			constant = 0.5
		}
		src := make([]float32, ch*ih*iw)
		dst := make([]float32, ch*oh*ow)

		fill(src, seed, 1)
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range src {
			lo, hi = min(lo, v), max(hi, v)
		}
		Bilinear(dst, src, ch, ih, iw, oh, ow)
		// Each output sums at most taps products per pass, each rounded
		// within 2^-24 of its magnitude; the inputs are within [-1, 1).
		taps := newAxis(iw, ow).stride + newAxis(ih, oh).stride
		slack := float32(taps) * 0x1p-24
		for i, v := range dst {
			if !(v >= lo-slack && v <= hi+slack) {
				t.Fatalf("%d×%d×%d → %d×%d: output %d is %g, outside the inputs' [%g, %g]", ch, ih, iw, oh, ow, i, v, lo, hi)
			}
		}

		for i := range src {
			src[i] = constant
		}
		Bilinear(dst, src, ch, ih, iw, oh, ow)
		tol := 1e-6
		if taps > 40 {
			tol = float64(slack) * math.Abs(float64(constant))
		}
		for i, v := range dst {
			if d := math.Abs(float64(v) - float64(constant)); !(d <= tol) {
				t.Fatalf("%d×%d×%d → %d×%d: constant %g became %g at %d (|Δ| %g)", ch, ih, iw, oh, ow, constant, v, i, d)
			}
		}
	})
}

// BenchmarkPositionEmbeddings resizes a SigLIP 2 NaFlex base table (16×16
// positions of width 768) to a 12×21 grid padded to 256 patches.
func BenchmarkPositionEmbeddings(b *testing.B) {
	const side, d, h, w, maxPatches = 16, 768, 12, 21, 256
	table := make([]float32, side*side*d)
	fill(table, 1, 0.05)
	dst := make([]float32, maxPatches*d)
	b.SetBytes(int64(len(table)+len(dst)) * 4)
	for b.Loop() {
		if err := PositionEmbeddings(dst, table, side, d, h, w, maxPatches); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBilinear is the same resize on the permuted table [768, 16, 16].
func BenchmarkBilinear(b *testing.B) {
	const c, in, h, w = 768, 16, 12, 21
	src := make([]float32, c*in*in)
	fill(src, 1, 0.05)
	dst := make([]float32, c*h*w)
	b.SetBytes(int64(len(src)+len(dst)) * 4)
	for b.Loop() {
		Bilinear(dst, src, c, in, in, h, w)
	}
}

// TestBilinearScaledTorch compares BilinearScaled with torch 1.13's
// F.interpolate(scale_factor=...) on the cases of testdata/scaled.json,
// up- and downscaling, DINOv2's offset factors among them; for those
// whose step differs from the sizes' ratio it also checks that a resize
// to the same size (Bilinear) does not give torch's values, so that the
// comparison tells the two apart.
func TestBilinearScaledTorch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "scaled.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string
		FactorH float64 `json:"factor_h"`
		FactorW float64 `json:"factor_w"`
		OutH    int     `json:"out_h"`
		OutW    int     `json:"out_w"`
	}
	if err := json.Unmarshal(b, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("scaled.json: %v (%d cases)", err, len(cases))
	}
	for _, k := range cases {
		t.Run(k.Name, func(t *testing.T) {
			inShape, src := readF32(t, filepath.Join("testdata", k.Name+"_in.npy"))
			outShape, want := readF32(t, filepath.Join("testdata", k.Name+"_out.npy"))
			c, inH, inW := inShape[0], inShape[1], inShape[2]
			if oh, ow := ScaledSize(inH, k.FactorH), ScaledSize(inW, k.FactorW); oh != outShape[1] || ow != outShape[2] || oh != k.OutH || ow != k.OutW {
				t.Fatalf("ScaledSize gives %dx%d, torch %dx%d", oh, ow, outShape[1], outShape[2])
			}
			got := make([]float32, len(want))
			BilinearScaled(got, src, c, inH, inW, k.FactorH, k.FactorW)
			d, n := compare(got, want)
			t.Logf("max |Δ| %g, %d of %d values differ in any bit", d, n, len(want))
			if !(d <= tolerance) {
				t.Errorf("max |Δ| %g > %g", d, tolerance)
			}
			ratio := func(in, out int, f float64) bool { return float32(1/f) != float32(in)/float32(out) }
			if ratio(inH, k.OutH, k.FactorH) || ratio(inW, k.OutW, k.FactorW) {
				sized := make([]float32, len(want))
				Bilinear(sized, src, c, inH, inW, k.OutH, k.OutW)
				if d, _ := compare(sized, want); d <= tolerance {
					t.Errorf("a resize to %dx%d gives torch's values too (max |Δ| %g): the case does not test the factor", k.OutH, k.OutW, d)
				}
			}
		})
	}
}

// TestBilinearScaledPanics: factors that are not positive finite numbers,
// or that leave no output sample, panic with the package's messages.
func TestBilinearScaledPanics(t *testing.T) {
	for _, k := range []struct {
		fh, fw float64
		want   string
	}{{0, 1, errFactor}, {1, math.NaN(), errFactor}, {math.Inf(1), 1, errFactor}, {-1, 1, errFactor}, {0.1, 1, errNonPositive}} {
		func() {
			defer func() {
				if r := recover(); r != k.want {
					t.Errorf("factors %v, %v: panic %v, want %q", k.fh, k.fw, r, k.want)
				}
			}()
			BilinearScaled(make([]float32, 4), make([]float32, 4), 1, 2, 2, k.fh, k.fw)
		}()
	}
}
