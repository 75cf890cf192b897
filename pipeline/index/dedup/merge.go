package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/conditionhq/condition/pipeline/index"
)

// Merge joins the parts of a split search of x (RunShare, one per share)
// into the result a whole search gives: the same pairs, and the groups
// made of them by grouping and keep. It refuses parts of another index or
// of an index since changed, parts whose threshold or settings differ
// (with clusters, halfdot's kernel too), a share given twice and a share
// missing, naming the parts. With parts that kept their nearest
// cosines (Part.Nearest), the result has Result.NN and Result.Near as the
// whole search gives them; it has no recall.
func Merge(ctx context.Context, x *index.Index, parts []*Part, grouping Grouping, keep Keep) (*Result, error) {
	o := Options{Group: grouping, Keep: keep}
	if err := o.Check(); err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, errors.New("dedup: no part to merge")
	}
	if err := CheckIndex(x); err != nil {
		return nil, err
	}
	v, _, err := load(x, false)
	if err != nil {
		return nil, err
	}
	if err := checkParts(parts, identity(x, v), v.n); err != nil {
		return nil, err
	}
	lists := make([][]Pair, len(parts))
	for i, p := range parts {
		lists[i] = p.Pairs
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	first := parts[0]
	res := &Result{Threshold: first.Threshold, Rows: v.n, Images: v.images, Clusters: first.Clusters}
	pairs := sortedPairs(lists)
	for _, p := range pairs {
		if !v.ok[p.A] || !v.ok[p.B] {
			return nil, fmt.Errorf("dedup: a part's pair (%d, %d) names a row that holds no image", p.A, p.B)
		}
	}
	res.Pairs, res.Near = splitNear(pairs, first.Threshold, DefaultNearPairs)
	if first.Nearest {
		res.NN = mergeNearest(parts, v.n)
	}
	if res.Groups, err = group(x, v, res.Pairs, o); err != nil {
		return nil, err
	}
	return res, nil
}

// checkParts returns an error naming the part that does not belong with
// the first (another format, index, threshold or setting), a share given
// twice, or the shares missing.
func checkParts(parts []*Part, id string, rows int) error {
	first := parts[0]
	setting := func(p *Part) string {
		s := fmt.Sprintf("%d shares, blocks of %d rows, %d clusters, probe %d, %d iterations", p.Shares, p.BlockRows, p.Clusters, p.Probe, p.Iterations)
		if p.Nearest {
			s += fmt.Sprintf(", the pictures' nearest cosines and pairs down to %g below the threshold", p.NearMargin)
		}
		return s
	}
	seen := make([]string, max(first.Shares, 0))
	for _, p := range parts {
		switch {
		case p.Format != PartFormat:
			return fmt.Errorf("dedup: part %s: format %q, want %q", p.Name, p.Format, PartFormat)
		case p.Identity != id || p.Rows != rows:
			return fmt.Errorf("dedup: part %s was found over another index than %s (or over it before it changed): index identity %.16s…, this index's %.16s…", p.Name, first.Index, p.Identity, id)
		case p.Threshold != first.Threshold:
			return fmt.Errorf("dedup: part %s is of threshold %g, part %s of %g: the parts of one search share its threshold", p.Name, p.Threshold, first.Name, first.Threshold)
		case setting(p) != setting(first):
			return fmt.Errorf("dedup: part %s is of %s, part %s of %s: the parts of one search share its settings", p.Name, setting(p), first.Name, setting(first))
		case first.Clusters > 0 && p.Kernel != first.Kernel:
			return fmt.Errorf("dedup: part %s clustered with halfdot's %q kernel, part %s with %q: their k-means may differ; run every share of an approximate search on CPUs of one kind", p.Name, p.Kernel, first.Name, first.Kernel)
		case p.Share < 0 || p.Share >= p.Shares:
			return fmt.Errorf("dedup: part %s: share %d of %d", p.Name, p.Share, p.Shares)
		case seen[p.Share] != "":
			return fmt.Errorf("dedup: parts %s and %s are both share %d of %d", seen[p.Share], p.Name, p.Share, p.Shares)
		}
		seen[p.Share] = p.Name
	}
	var missing []string
	for s, name := range seen {
		if name == "" {
			missing = append(missing, fmt.Sprint(s))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("dedup: share %s of %d (numbered from 0) missing: %d parts given (%s)", strings.Join(missing, ", "), first.Shares, len(parts), names(parts))
	}
	return nil
}

// mergeNearest returns each row's best cosine over the parts' (NaN where
// no part has one).
func mergeNearest(parts []*Part, n int) []float32 {
	nn := make([]float32, n)
	for r := range nn {
		nn[r] = float32(math.NaN())
		for _, p := range parts {
			if c := p.NN[r]; !math.IsNaN(float64(c)) && (math.IsNaN(float64(nn[r])) || c > nn[r]) {
				nn[r] = c
			}
		}
	}
	return nn
}

// names returns the parts' names, comma-separated.
func names(parts []*Part) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = p.Name
	}
	return strings.Join(s, ", ")
}
