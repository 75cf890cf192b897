package index_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestCollectionExportPooled: 1203 objects written in a shuffled order
// (more than two pages of the cursor) come back from ExportPooled as an
// index of 1203 rows in path order, each row the object's normalised
// embedding, with its path, source and member.
func TestCollectionExportPooled(t *testing.T) {
	node := weaviatetest.Start(t)
	ctx := context.Background()
	url := "weaviate://" + node.Host() + "/Exported"
	const n, d = 1203, 8
	c, err := index.OpenCollection(ctx, url, index.CollectionOptions{Create: &index.CollectionMeta{Model: "test", Revision: "r", Dim: d, LogitScale: 100}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	vecs := make([][]float32, n)
	objs := make([]index.CollectionObject, n)
	for i := range n {
		vecs[i] = make([]float32, d)
		for j := range vecs[i] {
			vecs[i][j] = float32(rng.NormFloat64())
		}
		objs[i] = index.CollectionObject{Path: fmt.Sprintf("img%05d.png", i), Source: "/data/shard.tar", Member: fmt.Sprintf("m%d.png", i), Embeds: vecs[i]}
	}
	rng.Shuffle(n, func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	for k := 0; k < n; k += 200 {
		errs, err := c.Upsert(ctx, objs[k:min(n, k+200)])
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
	}
	dir := t.TempDir()
	rows, err := c.ExportPooled(ctx, dir)
	if err != nil || rows != n {
		t.Fatalf("exported %d rows (%v), want %d", rows, err, n)
	}
	x, err := index.Open(ctx, dir, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Rows() != n || x.Meta().Model != "test" || x.Meta().Dim != d {
		t.Fatalf("index of %d rows, model %q, width %d; want %d, test, %d", x.Rows(), x.Meta().Model, x.Meta().Dim, n, d)
	}
	got := make([]float32, n*d)
	if err := x.ReadEmbeds(0, got, nil); err != nil {
		t.Fatal(err)
	}
	for r := range n {
		_, it, ok := x.RowItem(r)
		if want := fmt.Sprintf("img%05d.png", r); !ok || it.Path != want || it.Source != "/data/shard.tar" || it.Member != fmt.Sprintf("m%d.png", r) {
			t.Fatalf("row %d: %+v (%v), want %s of /data/shard.tar", r, it, ok, want)
		}
		var s float64
		for _, e := range vecs[r] {
			s += float64(e) * float64(e)
		}
		for j, e := range vecs[r] {
			if w := float64(e) / math.Sqrt(s); math.Abs(float64(got[r*d+j])-w) > 1e-6 {
				t.Fatalf("row %d value %d: %g, want %g", r, j, got[r*d+j], w)
			}
		}
	}
}
