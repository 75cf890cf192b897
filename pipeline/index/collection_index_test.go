package index_test

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestCollectionVectorIndex: a collection made with a flat index answers
// stage 1 exactly (each query's top 10 equal to a float64 scan of the same
// vectors, in order), and so does one whose flat index ranks 8-bit codes
// and then rescores; one made with HNSW construction settings is built
// with them, as the server reports; a collection's index and its graph's
// settings are fixed, so naming others for it, or an ef for a flat index,
// is an error naming both.
func TestCollectionVectorIndex(t *testing.T) {
	node := weaviatetest.Start(t)
	ctx := context.Background()
	const n, dim = 3000, 48
	rng := rand.New(rand.NewPCG(3, 4))
	unit := func() []float32 {
		v := make([]float32, dim)
		var s float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			s += float64(v[i]) * float64(v[i])
		}
		for i := range v {
			v[i] = float32(float64(v[i]) / math.Sqrt(s))
		}
		return v
	}
	vecs := make([][]float32, n)
	for i := range vecs {
		vecs[i] = unit()
	}
	meta := &index.CollectionMeta{Model: "test", Revision: "r", Dim: dim, LogitScale: 100}
	write := func(c *index.Collection) {
		t.Helper()
		for lo := 0; lo < n; lo += 500 {
			var objs []index.CollectionObject
			for i := lo; i < min(n, lo+500); i++ {
				objs = append(objs, index.CollectionObject{Path: strconv.Itoa(i), Source: "/v/" + strconv.Itoa(i), Embeds: vecs[i]})
			}
			errs, err := c.Upsert(ctx, objs)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range errs {
				if e != nil {
					t.Fatal(e)
				}
			}
		}
	}

	exact := func(url string) {
		t.Helper()
		x, err := index.Open(ctx, url, index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		for q := range 20 {
			qv := unit()
			type scored struct {
				i int
				s float64
			}
			all := make([]scored, n)
			for i, v := range vecs {
				var s float64
				for k := range v {
					s += float64(qv[k]) * float64(v[k])
				}
				all[i] = scored{i, s}
			}
			slices.SortFunc(all, func(a, b scored) int { return cmp.Compare(b.s, a.s) })
			hits, err := x.SearchVector(ctx, qv, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 10 {
				t.Fatalf("%s query %d: %d hits, want 10", url, q, len(hits))
			}
			for r, h := range hits {
				if h.Path != strconv.Itoa(all[r].i) {
					t.Fatalf("%s query %d rank %d: image %s, the exact scan's is %d (cosine %.6f)", url, q, r, h.Path, all[r].i, all[r].s)
				}
			}
		}
		t.Logf("%s: 20 queries' top 10 equal to the exact scan of %d × %d, in order", url, n, dim)
	}

	flatURL := "weaviate://" + node.Host() + "/Flat"
	c, err := index.OpenCollection(ctx, flatURL, index.CollectionOptions{Create: meta, VectorIndex: index.VectorIndexFlat})
	if err != nil {
		t.Fatal(err)
	}
	if kind, _, _ := c.VectorIndex(); kind != index.VectorIndexFlat {
		t.Fatalf("the collection's index is %q, want %q", kind, index.VectorIndexFlat)
	}
	write(c)
	exact(flatURL)
	// Ranked by 8-bit codes, then the best 256 again by their vectors:
	// still the exact top 10.
	rqURL := "weaviate://" + node.Host() + "/FlatRQ"
	rq, err := index.OpenCollection(ctx, rqURL, index.CollectionOptions{Create: meta, VectorIndex: index.VectorIndexFlat, Quantization: index.QuantizationRQ})
	if err != nil {
		t.Fatal(err)
	}
	if q, limit := rq.Quantization(); q != index.QuantizationRQ || limit != index.DefaultRescoreLimit {
		t.Fatalf("the collection's quantization %q rescoring %d, want %q and %d", q, limit, index.QuantizationRQ, index.DefaultRescoreLimit)
	}
	write(rq)
	exact(rqURL)
	if err := c.SetEF(ctx, 64); err == nil || !strings.Contains(err.Error(), "flat") {
		t.Errorf("ef on a flat index: %v, want an error naming the flat index", err)
	}

	graphURL := "weaviate://" + node.Host() + "/Graph"
	g, err := index.OpenCollection(ctx, graphURL, index.CollectionOptions{Create: meta, EFConstruction: 200, MaxConnections: 12})
	if err != nil {
		t.Fatal(err)
	}
	if kind, efc, m := g.VectorIndex(); kind != index.VectorIndexHNSW || efc != 200 || m != 12 {
		t.Fatalf("the collection's index: %s, efConstruction %d, maxConnections %d; want hnsw, 200, 12", kind, efc, m)
	}
	if err := g.SetEF(ctx, 64); err != nil {
		t.Fatal(err)
	}
	d, err := index.OpenCollection(ctx, "weaviate://"+node.Host()+"/Default", index.CollectionOptions{Create: meta})
	if err != nil {
		t.Fatal(err)
	}
	if kind, efc, m := d.VectorIndex(); kind != index.VectorIndexHNSW || efc != 128 || m != 32 {
		t.Errorf("a collection made with the defaults: %s, efConstruction %d, maxConnections %d; want Weaviate's hnsw, 128, 32", kind, efc, m)
	}

	for _, r := range []struct {
		url  string
		o    index.CollectionOptions
		want string
	}{
		{flatURL, index.CollectionOptions{Create: meta, VectorIndex: index.VectorIndexHNSW}, "by flat, not hnsw"},
		{graphURL, index.CollectionOptions{Create: meta, VectorIndex: index.VectorIndexFlat}, "by hnsw, not flat"},
		{graphURL, index.CollectionOptions{Create: meta, EFConstruction: 128}, "efConstruction 200, not 128"},
		{graphURL, index.CollectionOptions{Create: meta, MaxConnections: 32}, "maxConnections 12, not 32"},
		{graphURL, index.CollectionOptions{Create: meta, VectorIndex: "tree"}, `vector index "tree": want hnsw or flat`},
		{flatURL, index.CollectionOptions{Create: meta, VectorIndex: index.VectorIndexFlat, EFConstruction: 64}, "no HNSW settings"},
		{flatURL, index.CollectionOptions{Create: meta, Quantization: index.QuantizationRQ}, "quantization none, not rq"},
		{flatURL, index.CollectionOptions{Create: meta, Quantization: "pq"}, `quantization "pq"`},
		{flatURL, index.CollectionOptions{Create: meta, RescoreLimit: 100}, "rescore limit 100"},
		{graphURL, index.CollectionOptions{Create: meta, MaxConnections: -1}, "want 0 (Weaviate's default) or more"},
	} {
		_, err := index.OpenCollection(ctx, r.url, r.o)
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s with %+v: %v; want an error with %q", r.url, r.o, err, r.want)
		}
	}
	// The same settings, or none, open the collections as they are.
	for _, r := range []struct {
		url string
		o   index.CollectionOptions
	}{
		{flatURL, index.CollectionOptions{Create: meta}},
		{flatURL, index.CollectionOptions{Create: meta, VectorIndex: index.VectorIndexFlat}},
		{rqURL, index.CollectionOptions{Create: meta}},
		{graphURL, index.CollectionOptions{Create: meta, VectorIndex: index.VectorIndexHNSW, EFConstruction: 200, MaxConnections: 12}},
	} {
		if _, err := index.OpenCollection(ctx, r.url, r.o); err != nil {
			t.Errorf("%s with %+v: %v", r.url, r.o, err)
		}
	}
}
