package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

// forEachImpl runs f once per implementation this CPU supports, with
// cpuid switched to it, so one test run covers AVX-512, AVX2 and Go.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, impl := range cpuid.Available() {
		t.Run(impl.String(), func(t *testing.T) {
			defer cpuid.Set(impl)()
			f(t)
		})
	}
}

// sentinel fills every element of a buffer the product must not write; its
// NaN payload is compared bit for bit.
var sentinel = math.Float32frombits(0x7fc0dead)

// poison fills gaps the kernels must not read (lda and ldb padding, past
// the end of a, b and bias): reading one makes a result NaN.
var poison = float32(math.NaN())

const guard = 37 // elements of guard band around buffers

// mmCase is one product to check.
type mmCase struct {
	m, n, k   int
	lda, ldc  int // 0 means k and n
	bias      bool
	n0, n1    int  // column range; n1 == 0 means n
	transpose bool // pack with PackTransposed instead of PackB
}

func (tc mmCase) String() string {
	return fmt.Sprintf("m%d_n%d_k%d_lda%d_ldc%d_bias%t_cols%d-%d_T%t",
		tc.m, tc.n, tc.k, tc.lda, tc.ldc, tc.bias, tc.n0, tc.n1, tc.transpose)
}

// tolerance is the bound on |C - exact| relative to Σ_p |A[i][p]||B[p][j]| +
// |bias[j]|: 2(k+2) units of float32 rounding (2⁻²⁴). Every path rounds at
// most twice per product term (multiply then add in Go, once per FMA in
// assembly) plus once per k block, so the worst case stays under it.
func tolerance(k int) float64 { return float64(2*(k+2)) * 0x1p-24 }

// checkCase runs tc on the current implementation and compares it with a
// float64 reference, element by element, and checks the guard bands.
func checkCase(t *testing.T, rng *rand.Rand, tc mmCase) {
	t.Helper()
	m, n, k := tc.m, tc.n, tc.k
	lda, ldc := max(tc.lda, k, 1), max(tc.ldc, n, 1)
	n0, n1 := tc.n0, tc.n1
	if n1 == 0 {
		n1 = n
	}
	rnd := func() float32 { return float32(rng.Float64()*2 - 1) }

	// A [m, k] with poisoned padding and tail.
	abuf := make([]float32, max(0, (m-1)*lda+k)+guard)
	for i := range abuf {
		abuf[i] = poison
	}
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			abuf[i*lda+p] = rnd()
		}
	}
	a := abuf[:len(abuf)-guard]

	// B [k, n] as float64 for the reference, packed from a poisoned
	// row-major copy (ldb = n+3) or from the PyTorch layout wᵀ.
	bref := make([]float64, k*n)
	for i := range bref {
		bref[i] = float64(rnd())
	}
	var p *Packed
	if tc.transpose {
		w := make([]float32, n*k+guard)
		for i := range w {
			w[i] = poison
		}
		for j := 0; j < n; j++ {
			for q := 0; q < k; q++ {
				w[j*k+q] = float32(bref[q*n+j])
			}
		}
		p = PackTransposed(w[:n*k], n, k)
	} else {
		ldb := n + 3
		b := make([]float32, max(0, (k-1)*ldb+n)+guard)
		for i := range b {
			b[i] = poison
		}
		for q := 0; q < k; q++ {
			for j := 0; j < n; j++ {
				b[q*ldb+j] = float32(bref[q*n+j])
			}
		}
		p = PackB(b[:len(b)-guard], k, n, ldb)
	}
	if p.K() != k || p.N() != n {
		t.Fatalf("%v: packed K, N = %d, %d", tc, p.K(), p.N())
	}

	var bias []float32
	if tc.bias {
		bbuf := make([]float32, n+guard)
		for i := range bbuf {
			bbuf[i] = poison
		}
		for j := 0; j < n; j++ {
			bbuf[j] = rnd()
		}
		bias = bbuf[:n]
	}

	// C with guard bands before, between rows (ldc > n) and after.
	clen := max(0, (m-1)*ldc+n)
	cbuf := make([]float32, guard+clen+guard)
	for i := range cbuf {
		cbuf[i] = sentinel
	}
	c := cbuf[guard : guard+clen]

	MatMulRange(c, ldc, a, lda, m, p, bias, n0, n1)

	tol := tolerance(k)
	bad := 0
	for x, got := range cbuf {
		e := x - guard
		i, j := -1, -1
		if e >= 0 && e < clen {
			i, j = e/ldc, e%ldc
		}
		if i < 0 || j < n0 || j >= n1 {
			if math.Float32bits(got) != math.Float32bits(sentinel) {
				t.Errorf("%v: wrote %v at element %d of c (outside the m×[n0,n1) block)", tc, got, e)
				bad++
			}
		} else {
			var ref, bound float64
			if bias != nil {
				ref, bound = float64(bias[j]), math.Abs(float64(bias[j]))
			}
			for q := 0; q < k; q++ {
				prod := float64(a[i*lda+q]) * bref[q*n+j]
				ref += prod
				bound += math.Abs(prod)
			}
			if d := math.Abs(float64(got) - ref); !(d <= tol*bound) {
				t.Errorf("%v: C[%d][%d] = %v, want %v (|diff| %.3g > %.3g = tol·Σ|a||b|)", tc, i, j, got, ref, d, tol*bound)
				bad++
			}
		}
		if bad > 5 {
			t.Fatalf("%v: too many errors", tc)
		}
	}
}

// TestMatMulEdges checks every implementation at every size around the
// register-tile edges (6 rows; 4, 16 and 64 columns) and k-block edges.
func TestMatMulEdges(t *testing.T) {
	ms := []int{1, 2, 3, 4, 5, 6, 7, 11, 12, 13}
	ns := []int{1, 2, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 80, 127, 128, 129}
	ks := []int{1, 2, 3, 4, 5, 7, 8, 9, 17, 127, 128, 129, 160, 161, 257, 321}
	if testing.Short() {
		ms, ns, ks = []int{1, 5, 6, 7}, []int{1, 15, 16, 17, 63, 64, 65, 129}, []int{1, 4, 5, 129, 161, 257}
	}
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, m := range ms {
			for _, n := range ns {
				for _, k := range ks {
					checkCase(t, rng, mmCase{m: m, n: n, k: k, bias: (m+n+k)%2 == 0, transpose: (m*n+k)%3 == 0})
				}
			}
		}
	})
}

// TestMatMulStrided checks leading dimensions larger than the widths, bias
// on and off, and column ranges, with sizes up to a few hundred.
func TestMatMulStrided(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		cases := []mmCase{
			{m: 7, n: 70, k: 33, lda: 40, ldc: 75, bias: true},
			{m: 13, n: 129, k: 161, lda: 170, ldc: 130},
			{m: 200, n: 100, k: 300, lda: 301, ldc: 101, bias: true},
			{m: 385, n: 65, k: 70, lda: 71, ldc: 80, bias: true, transpose: true},
			{m: 50, n: 768, k: 513, ldc: 800, bias: true, transpose: true},
			{m: 77, n: 320, k: 768, bias: true, transpose: true},
			{m: 19, n: 200, k: 40, n0: 64, n1: 128, bias: true},
			{m: 19, n: 200, k: 40, n0: 5, n1: 150, ldc: 203, bias: true},
			{m: 6, n: 200, k: 300, n0: 17, n1: 18},
			{m: 8, n: 200, k: 300, n0: 199, n1: 200, bias: true},
			{m: 8, n: 200, k: 3, n0: 70, n1: 70},
			{m: 3, n: 5, k: 0, bias: true},
			{m: 3, n: 5, k: 0},
			{m: 0, n: 5, k: 4},
		}
		for len(cases) < 60 {
			tc := mmCase{m: 1 + rng.IntN(300), n: 1 + rng.IntN(300), k: 1 + rng.IntN(700)}
			tc.lda = tc.k + rng.IntN(3)*rng.IntN(20)
			tc.ldc = tc.n + rng.IntN(3)*rng.IntN(20)
			tc.bias = rng.IntN(2) == 0
			tc.transpose = rng.IntN(2) == 0
			if rng.IntN(3) == 0 {
				tc.n0 = rng.IntN(tc.n)
				tc.n1 = tc.n0 + 1 + rng.IntN(tc.n-tc.n0)
			}
			cases = append(cases, tc)
		}
		for _, tc := range cases {
			checkCase(t, rng, tc)
		}
	})
}

// TestMatMulConcurrent splits the columns of one product across goroutines
// and compares with the single call, bit for bit.
func TestMatMulConcurrent(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		const m, k, n = 97, 200, 300
		a, b, bias := randSlice(rng, m*k), randSlice(rng, k*n), randSlice(rng, n)
		p := PackB(b, k, n, n)
		want := make([]float32, m*n)
		MatMul(want, n, a, k, m, p, bias)
		got := make([]float32, m*n)
		var wg sync.WaitGroup
		for _, r := range [][2]int{{0, 64}, {64, 192}, {192, 256}, {256, 300}} {
			wg.Go(func() { MatMulRange(got, n, a, k, m, p, bias, r[0], r[1]) })
		}
		wg.Wait()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("element %d: split %v, whole %v", i, got[i], want[i])
			}
		}
	})
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.Float64()*2 - 1)
	}
	return s
}

// TestPackTransposed checks that PackTransposed(w) packs exactly PackB(wᵀ).
func TestPackTransposed(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sz := range [][2]int{{1, 1}, {5, 3}, {64, 10}, {65, 7}, {130, 33}} {
		n, k := sz[0], sz[1]
		w := randSlice(rng, n*k)
		bt := make([]float32, k*n)
		for j := 0; j < n; j++ {
			for q := 0; q < k; q++ {
				bt[q*n+j] = w[j*k+q]
			}
		}
		p1, p2 := PackTransposed(w, n, k), PackB(bt, k, n, n)
		if len(p1.data) != len(p2.data) {
			t.Fatalf("n=%d k=%d: packed lengths %d and %d", n, k, len(p1.data), len(p2.data))
		}
		for i := range p1.data {
			if p1.data[i] != p2.data[i] {
				t.Fatalf("n=%d k=%d: element %d: %v != %v", n, k, i, p1.data[i], p2.data[i])
			}
		}
		if len(p1.data) > 0 && uintptrOf(p1.data)%64 != 0 {
			t.Errorf("n=%d k=%d: packed data not 64-byte aligned", n, k)
		}
	}
}

// TestMatMulNoAlloc checks that a steady-state call allocates nothing, on
// full and partial tiles of every implementation.
func TestMatMulNoAlloc(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		const m, k, n = 20, 300, 70
		a, bias := randSlice(rng, m*k), randSlice(rng, n)
		p := PackB(randSlice(rng, k*n), k, n, n)
		c := make([]float32, m*n)
		if allocs := testing.AllocsPerRun(20, func() { MatMul(c, n, a, k, m, p, bias) }); allocs != 0 {
			t.Errorf("MatMul allocates %v times per call", allocs)
		}
		if allocs := testing.AllocsPerRun(20, func() { MatMulRange(c, n, a, k, m, p, nil, 3, 61) }); allocs != 0 {
			t.Errorf("MatMulRange allocates %v times per call", allocs)
		}
	})
}

// TestBadShapes checks that bad arguments panic with "gemm: " messages.
func TestBadShapes(t *testing.T) {
	p := PackB(make([]float32, 12), 3, 4, 4) // K=3, N=4
	a := make([]float32, 6)                  // 2×3
	c := make([]float32, 8)                  // 2×4
	bias := make([]float32, 4)
	tests := []struct {
		name, want string
		f          func()
	}{
		{"PackB negative k", badK, func() { PackB(nil, -1, 4, 4) }},
		{"PackB negative n", badN, func() { PackB(nil, 3, -1, 1) }},
		{"PackB ldb", badLdB, func() { PackB(make([]float32, 12), 3, 4, 3) }},
		{"PackB short", shortB, func() { PackB(make([]float32, 11), 3, 4, 4) }},
		{"PackTransposed short", shortW, func() { PackTransposed(make([]float32, 11), 4, 3) }},
		{"PackTransposed negative", badN, func() { PackTransposed(nil, -4, 3) }},
		{"nil packed", nilPacked, func() { MatMul(c, 4, a, 3, 2, nil, nil) }},
		{"negative m", badM, func() { MatMul(c, 4, a, 3, -1, p, nil) }},
		{"lda", badLdA, func() { MatMul(c, 4, a, 2, 2, p, nil) }},
		{"ldc", badLdC, func() { MatMul(c, 3, a, 3, 2, p, nil) }},
		{"short a", shortA, func() { MatMul(c, 4, a[:5], 3, 2, p, nil) }},
		{"short c", shortC, func() { MatMul(c[:7], 4, a, 3, 2, p, nil) }},
		{"short bias", shortBias, func() { MatMul(c, 4, a, 3, 2, p, bias[:3]) }},
		{"range", badRange, func() { MatMulRange(c, 4, a, 3, 2, p, nil, 2, 5) }},
		{"range reversed", badRange, func() { MatMulRange(c, 4, a, 3, 2, p, nil, 3, 2) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if msg != tt.want || !strings.HasPrefix(msg, "gemm: ") {
					t.Errorf("panic %v, want %q", r, tt.want)
				}
			}()
			tt.f()
		})
	}
}

func uintptrOf(s []float32) uintptr { return uintptr(unsafe.Pointer(&s[0])) }
