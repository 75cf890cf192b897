package dedup_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conditionhq/condition/internal/halfdot"
	_ "github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// plantedDistinct photos, the first plantedCopies of them with a
// near-duplicate each (every transform as often).
const plantedDistinct, plantedCopies = 48, 24

var planted struct {
	once sync.Once
	set  *plantedSet
	out  string
	err  error
}

// plantedIndex makes, once per test run, the planted photos and their
// index with the built-in model through a real job: <out>/index/.
func plantedIndex(t *testing.T) (*plantedSet, string) {
	t.Helper()
	planted.once.Do(func() {
		root := filepath.Join(tmpRoot, "planted")
		if *keep != "" {
			root = filepath.Join(*keep, "planted")
		}
		planted.set = makePlanted(t, filepath.Join(root, "in"), plantedDistinct, plantedCopies)
		planted.out = filepath.Join(root, "out")
		ctx := context.Background()
		eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
		if err != nil {
			planted.err = err
			return
		}
		defer eng.Close()
		_, planted.err = batch.Run(ctx, batch.Config{Engine: eng, Inputs: []string{planted.set.dir}, Prompts: []string{"a photo"}, Out: planted.out, Index: true, Version: "test"})
	})
	if planted.err != nil {
		t.Fatal(planted.err)
	}
	return planted.set, planted.out
}

// allCosines returns every pair's cosine of x's images, by path, from
// their stored vectors.
func allCosines(t *testing.T, x *index.Index) (paths []string, cos func(i, j int) float32) {
	t.Helper()
	d := x.Meta().Dim
	v := make([]float32, x.Rows()*d)
	ok := make([]bool, x.Rows())
	if err := x.ReadEmbeds(0, v, ok); err != nil {
		t.Fatal(err)
	}
	var unit [][]float32
	for r := range x.Rows() {
		if !ok[r] {
			continue
		}
		row := v[r*d : (r+1)*d]
		s := float32(math.Sqrt(float64(halfdot.DotFloat32(row, row))))
		for j := range row {
			row[j] /= s
		}
		unit = append(unit, row)
		paths = append(paths, pathOf(t, x, r))
	}
	return paths, func(i, j int) float32 { return halfdot.DotFloat32(unit[i], unit[j]) }
}

// uncaught are the transforms the built-in model does not bring within
// DefaultThreshold every time: 15% brighter (cosines 0.70–0.97 here) and
// centre crops of 80% (0.33–0.99), against distinct photos up to 0.943.
var uncaught = map[string]bool{"bright15": true, "crop80": true}

// TestDedupPlanted: among 48 photo-like pictures, 24 planted
// near-duplicates (byte copies, JPEG quality 40, half size, 5% and 15%
// brighter, centre crops of 80%) indexed with the built-in model. Logs the
// cosines of the planted pairs by transform and of the distinct pairs; at
// DefaultThreshold, with either grouping and the default keep rule, every
// planted copy of the transforms not in uncaught is found in its
// original's group with the original kept, and no original is dropped.
func TestDedupPlanted(t *testing.T) {
	set, out := plantedIndex(t)
	ctx := context.Background()
	x, err := index.Open(ctx, out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	paths, cos := allCosines(t, x)
	at := map[string]int{}
	for i, p := range paths {
		at[p] = i
	}
	byKind := map[string][]float32{}
	for c, o := range set.copies {
		byKind[set.kind[c]] = append(byKind[set.kind[c]], cos(at[c], at[o]))
	}
	var distinct []float32
	for i := range paths {
		for j := i + 1; j < len(paths); j++ {
			a, b := paths[i], paths[j]
			if set.copies[a] == b || set.copies[b] == a {
				continue
			}
			distinct = append(distinct, cos(i, j))
		}
	}
	slices.Sort(distinct)
	q := func(f float64) float32 { return distinct[int(f*float64(len(distinct)-1))] }
	t.Logf("distinct pairs: %d, cosine min %.4f, median %.4f, 99%% %.4f, max %.4f", len(distinct), distinct[0], q(0.5), q(0.99), distinct[len(distinct)-1])
	for _, tr := range transforms {
		c := byKind[tr.name]
		slices.Sort(c)
		t.Logf("planted %-8s %d pairs, cosine min %.4f, max %.4f", tr.name, len(c), c[0], c[len(c)-1])
	}

	for _, grouping := range []dedup.Grouping{dedup.Star, dedup.Components} {
		res, err := dedup.Run(ctx, x, dedup.Options{Group: grouping})
		if err != nil {
			t.Fatal(err)
		}
		kept := map[string]string{} // dropped path → kept path
		for _, g := range res.Groups {
			for _, m := range g.Dups {
				kept[pathOf(t, x, m.Row)] = pathOf(t, x, g.Keep)
			}
		}
		caught := map[string]int{}
		for c, o := range set.copies {
			if kept[c] == o {
				caught[set.kind[c]]++
			} else if !uncaught[set.kind[c]] {
				t.Errorf("%s: planted %s (%s of %s, cosine %.4f) not in its original's group at %g", grouping, c, set.kind[c], o, cos(at[c], at[o]), res.Threshold)
			}
		}
		for p, k := range kept {
			if _, isCopy := set.copies[p]; !isCopy {
				t.Errorf("%s: original %s dropped (kept %s, cosine %.4f)", grouping, p, k, cos(at[p], at[k]))
			}
		}
		var s []string
		for _, tr := range transforms {
			s = append(s, fmt.Sprintf("%s %d/%d", tr.name, caught[tr.name], len(byKind[tr.name])))
		}
		t.Logf("%s at %g: %d groups, %d dropped; caught %s", grouping, res.Threshold, len(res.Groups), res.Duplicates(), strings.Join(s, ", "))
	}
}

// TestDedupJobMatchesNumPy: over the planted photos' index made by a real
// job with the built-in model, the pairs at 0.85 (planted and distinct
// ones alike) are numpy's brute force over the stored float16 vectors
// (scripts/dedup_pairs/dedup_pairs.py; testdata/planted.json), cosines
// within 1e-3 (the embeddings may differ in their last bits from CPU to
// CPU), in blocks of 15 rows (whole fours of rows and the rest) on two
// goroutines.
func TestDedupJobMatchesNumPy(t *testing.T) {
	_, out := plantedIndex(t)
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	g := readGolden(t, "planted.json")
	for _, grouping := range []dedup.Grouping{dedup.Star, dedup.Components} {
		res, err := dedup.Run(context.Background(), x, dedup.Options{Threshold: float32(g.Threshold), BlockRows: 15, Workers: 2, Group: grouping})
		if err != nil {
			t.Fatal(err)
		}
		comparePairs(t, x, res, g, 1e-3)
		checkGroups(t, res, grouping)
		t.Logf("%s at %g: %d groups, %d dropped", grouping, res.Threshold, len(res.Groups), res.Duplicates())
	}
}
