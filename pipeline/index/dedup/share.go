package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
)

// Share is one process's share of a search split over Count processes
// (0 ≤ Index < Count).
type Share struct{ Index, Count int }

// Part is the pairs one share of a split search found and what they were
// found over: the index's identity, the threshold and the search's
// settings, which every part of one search shares (Merge refuses parts
// that differ), and the work the share covered.
type Part struct {
	Format string `json:"format"`
	// Identity is the index's identity (a SHA-256 of its model, dtype,
	// rows, each row's part, path, source and member, and each vector's
	// norm): parts of another index, or of one since changed, differ.
	Identity  string  `json:"index_identity"`
	Index     string  `json:"index"` // where the share read the index, as it was given
	Rows      int     `json:"rows"`
	Threshold float32 `json:"threshold"`
	Share     int     `json:"share"`
	Shares    int     `json:"shares"`
	BlockRows int     `json:"block_rows"`
	// Kernel is halfdot's kernel on the share's machine (halfdot.Impl):
	// the k-means of an approximate search, computed by every share, is
	// the same only with the same kernel's rounding.
	Kernel     string `json:"kernel"`
	Clusters   int    `json:"clusters,omitempty"`
	Probe      int    `json:"probe,omitempty"`
	Iterations int    `json:"iterations,omitempty"`
	// Nearest says the part keeps each row's nearest cosine over the
	// pairs it compared (NN) and the pairs down to Threshold − NearMargin,
	// for the pictures (Options.NoNearest unset).
	Nearest    bool    `json:"nearest,omitempty"`
	NearMargin float32 `json:"near_margin,omitempty"`
	// NN is each row's best cosine over the pairs the share compared, NaN
	// for none (stored beside the JSON), with Nearest.
	NN []float32 `json:"-"`
	// RowsFrom and RowsTo are the rows [RowsFrom, RowsTo) the exact search
	// compared with themselves and every later row.
	RowsFrom int `json:"rows_from"`
	RowsTo   int `json:"rows_to"`
	// ClusterList is the clusters the approximate search compared.
	ClusterList []int `json:"cluster_list,omitempty"`
	// NumPairs is len(Pairs), as the part's file says it.
	NumPairs int `json:"pairs"`
	// Pairs is the pairs found, in (A, B) order (stored beside the JSON).
	Pairs []Pair `json:"-"`
	// Name is where the part was read from, for messages.
	Name string `json:"-"`
}

// RunShare finds the pairs of share s of the search of x: for the exact
// search, a run of blocks of Options.BlockRows rows, each compared with
// itself and every later row, the runs of the Count shares about equal in
// pairs compared; with Options.Clusters, the k-means (the same in every
// share: from the index and DefaultSeed) and the clusters of share s,
// dealt out largest first to the share of least work. where is recorded
// in the part as the index's location. Unless Options.NoNearest, the part
// keeps each row's nearest cosine over the pairs it compared and the pairs
// down to Threshold − NearMargin, for the pictures. A recall check needs
// the whole search: an error. Merge joins the parts.
func RunShare(ctx context.Context, x *index.Index, where string, o Options, s Share) (*Part, error) {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return nil, fmt.Errorf("dedup: share %d of %d: want 0 ≤ share < count", s.Index, s.Count)
	}
	if o.CheckRecall > 0 {
		return nil, fmt.Errorf("dedup: a recall check compares its sample with every image: run it on the whole search, not a share")
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	if err := CheckIndex(x); err != nil {
		return nil, err
	}
	o.defaults()
	if o.NoNearest {
		o.NearMargin = 0
	}
	v, m, err := load(x, o.Clusters > 0)
	if err != nil {
		return nil, err
	}
	if v.images == 0 {
		return nil, fmt.Errorf("dedup: the index holds no image read and encoded (every row is a failed image)")
	}
	p := &Part{Format: PartFormat, Identity: identity(x, v), Index: where, Rows: v.n, Threshold: o.Threshold,
		Share: s.Index, Shares: s.Count, BlockRows: o.BlockRows, Kernel: halfdot.Impl(), Nearest: !o.NoNearest, NearMargin: o.NearMargin}
	var nn *nearest
	if !o.NoNearest {
		nn = newNearest(v.n)
	}
	search := o
	search.Threshold = o.Threshold - o.NearMargin
	if o.Clusters > 0 {
		p.Clusters, p.Probe, p.Iterations = o.Clusters, o.Probe, o.Iterations
		a, err := newApprox(ctx, m, v, o)
		if err != nil {
			return nil, err
		}
		a.clusterOrder = shareClusters(a, s)
		p.ClusterList = slices.Sorted(slices.Values(a.clusterOrder))
		if p.Pairs, err = a.search(ctx, v, search, nn); err != nil {
			return nil, err
		}
	} else {
		p.RowsFrom, p.RowsTo = shareRows(v.n, o.BlockRows, s)
		if p.Pairs, err = rangePairs(ctx, x, v, search, nn, p.RowsFrom, p.RowsTo); err != nil {
			return nil, err
		}
	}
	p.NumPairs, p.NN = len(p.Pairs), nn.values()
	return p, nil
}

// shareRows returns the rows [lo, hi) of share s of the exact search of n
// rows in blocks of bs: block i is compared with blocks i to nb−1, so the
// shares take runs of blocks of about total/Count block pairs each.
func shareRows(n, bs int, s Share) (lo, hi int) {
	nb := (n + bs - 1) / bs
	total := int64(nb) * int64(nb+1) / 2
	first := func(k int) int { // the first block of share k
		target := total * int64(k) / int64(s.Count)
		var cum int64
		for i := range nb {
			if cum >= target {
				return i
			}
			cum += int64(nb - i)
		}
		return nb
	}
	return min(n, first(s.Index)*bs), min(n, first(s.Index+1)*bs)
}

// shareClusters returns the clusters of share s, in a.clusterOrder: each
// cluster in turn (largest first) goes to the share of least work so far
// (the lowest such), its work the pairs it compares.
func shareClusters(a *approx, s Share) []int {
	load := make([]int64, s.Count)
	var mine []int
	for _, c := range a.clusterOrder {
		np := int64(len(a.prim[c]))
		work := np*(np+int64(len(a.sec[c]))) + 1
		k := 0
		for i := range load {
			if load[i] < load[k] {
				k = i
			}
		}
		load[k] += work
		if k == s.Index {
			mine = append(mine, c)
		}
	}
	return mine
}

// identity is x's identity: a SHA-256 of its model, revision, dtype,
// width and rows, of each row's part, path, source and member (or that
// it failed), and of each row's 1/‖v‖.
func identity(x *index.Index, v *vectors) string {
	h := sha256.New()
	m := x.Meta()
	fmt.Fprintf(h, "%q %q %q %d %d\n", m.Model, m.Revision, x.EmbedsDType(), m.Dim, v.n)
	var b [4]byte
	for r := range v.n {
		part, it, ok := x.RowItem(r)
		if ok {
			fmt.Fprintf(h, "%q %d %q %q %q\n", part, it.Row, it.Path, it.Source, it.Member)
		} else {
			fmt.Fprintln(h, "-")
		}
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v.inv[r]))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
