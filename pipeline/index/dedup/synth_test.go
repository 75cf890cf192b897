package dedup_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
)

// keep, when set, is a folder the tests write their indexes into (one
// folder each), for scripts/dedup_pairs.py to make the golden pairs from.
var keep = flag.String("dedup.keep", "", "write the tests' indexes into this folder (for scripts/dedup_pairs.py)")

// synthVectors returns n unit vectors [n, d] drawn from seed: n-k
// independent ones, then k near copies of earlier ones (each the vector
// of row k·i/… plus noise of a drawn size, so that their cosines spread
// over 0.9–1), and a chain: rows whose neighbours are close and whose ends
// are not.
func synthVectors(n, d, k int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	v := make([]float32, n*d)
	gauss := func(row []float32, base []float32, noise float64) {
		for j := range row {
			b := 0.0
			if base != nil {
				b = float64(base[j])
			}
			row[j] = float32(b + noise*rng.NormFloat64()/math.Sqrt(float64(d)))
		}
		var s float64
		for _, e := range row {
			s += float64(e) * float64(e)
		}
		for j := range row {
			row[j] = float32(float64(row[j]) / math.Sqrt(s))
		}
	}
	distinct := n - k
	for i := range distinct {
		gauss(v[i*d:(i+1)*d], nil, 1)
	}
	for i := distinct; i < n; i++ {
		src := rng.IntN(distinct)
		if i > distinct && rng.IntN(4) == 0 {
			src = i - 1 // a chain: a copy of the last copy
		}
		gauss(v[i*d:(i+1)*d], v[src*d:(src+1)*d], 0.05+0.5*rng.Float64())
	}
	return v
}

// writePart writes rows of unit vectors [n, d] as an index part of dtype
// (float16, float32 or int8, quantised per row as the job does) into dir:
// embeds.npy, an empty patch grid, and index.json last. Row i is the image
// "img-<first+i>.jpg".
func writePart(t testing.TB, dir, dtype string, vec []float32, d, first int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := len(vec) / d
	meta := index.Meta{Format: index.Format, Model: "synthetic", Settings: json.RawMessage(`{}`), DType: dtype, Dim: d, LogitScale: 100, Rows: n}
	for i := range n {
		name := fmt.Sprintf("img-%05d.jpg", first+i)
		meta.Items = append(meta.Items, index.Item{Row: i, Path: name, Source: "/photos/" + name, Status: "ok"})
	}
	write := func(name string, dt tensorio.DType, shape []int, data []byte) {
		h, err := tensorio.NPYHeader(dt, shape, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(h, data...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	switch dtype {
	case index.DTypeF32:
		write(index.EmbedsFile, tensorio.DTypeF32, []int{n, d}, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vec))), 4*len(vec)))
		write(index.PatchesFile, tensorio.DTypeF32, []int{n, 0, d}, nil)
	case index.DTypeInt8:
		q, scales := make([]byte, len(vec)), make([]float32, n)
		for r := range n {
			mx := float32(0)
			for _, e := range vec[r*d : (r+1)*d] {
				mx = max(mx, float32(math.Abs(float64(e))))
			}
			scales[r] = mx / 127
			for j, e := range vec[r*d : (r+1)*d] {
				q[r*d+j] = byte(int8(math.Round(float64(e / scales[r]))))
			}
		}
		write(index.EmbedsFile, tensorio.DTypeI8, []int{n, d}, q)
		write(index.EmbedsScaleFile, tensorio.DTypeF32, []int{n}, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(scales))), 4*n))
		write(index.PatchesFile, tensorio.DTypeI8, []int{n, 0, d}, nil)
		write(index.PatchesScaleFile, tensorio.DTypeF32, []int{n, 0}, nil)
	default:
		b := make([]byte, 2*len(vec))
		for i, e := range vec {
			h := tensorio.Float32ToF16(e)
			b[2*i], b[2*i+1] = byte(h), byte(h>>8)
		}
		write(index.EmbedsFile, tensorio.DTypeF16, []int{n, d}, b)
		write(index.PatchesFile, tensorio.DTypeF16, []int{n, 0, d}, nil)
	}
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, index.MetaFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// synthIndex writes the synthetic vectors as an index of dtype in parts
// of at most partRows rows: <dir>/index/part-NNNN/.
func synthIndex(t testing.TB, dir, dtype string, vec []float32, d, partRows int) string {
	t.Helper()
	n := len(vec) / d
	for p, r0 := 0, 0; r0 < n; p, r0 = p+1, r0+partRows {
		r1 := min(n, r0+partRows)
		writePart(t, filepath.Join(dir, "index", fmt.Sprintf("part-%04d", p)), dtype, vec[r0*d:r1*d], d, r0)
	}
	return dir
}

// eachGoldenIndex runs fn, as a subtest per dtype (float16, float32,
// int8), on the synthetic index numpy's goldens testdata/synthetic-*.json
// were made from (400 rows of 64 values, 80 planted, seed 1, parts of 150
// rows), with its golden.
func eachGoldenIndex(t *testing.T, fn func(t *testing.T, x *index.Index, g *goldenPairs)) {
	t.Helper()
	const n, d, k = 400, 64, 80
	vec := synthVectors(n, d, k, 1)
	for _, dtype := range []string{index.DTypeF16, index.DTypeF32, index.DTypeInt8} {
		t.Run(dtype, func(t *testing.T) {
			x, err := index.Open(context.Background(), synthIndex(t, t.TempDir(), dtype, vec, d, 150), index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			fn(t, x, readGolden(t, fmt.Sprintf("synthetic-%s.json", dtype)))
		})
	}
}
