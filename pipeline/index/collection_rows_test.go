package index_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestCollectionRowsFollowWrites: an index open on a collection that a job
// goes on writing into counts the objects written since (Rows, Meta, as the
// server's /v1/models reports them), not only those there at open.
func TestCollectionRowsFollowWrites(t *testing.T) {
	node := weaviatetest.Start(t)
	ctx := context.Background()
	url := "weaviate://" + node.Host() + "/Counted"
	c, err := index.OpenCollection(ctx, url, index.CollectionOptions{Create: &index.CollectionMeta{Model: "test", Revision: "r", Dim: 4, LogitScale: 100}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(from, to int) {
		t.Helper()
		var objs []index.CollectionObject
		for i := from; i < to; i++ {
			objs = append(objs, index.CollectionObject{Path: fmt.Sprintf("img%d.png", i), Source: fmt.Sprintf("/data/img%d.png", i), Embeds: []float32{1, float32(i), 0, 1}})
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
	write(0, 3)
	x, err := index.Open(ctx, url, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Rows() != 3 {
		t.Fatalf("rows at open %d, want 3", x.Rows())
	}
	defer index.SetCollectionRowsFresh(0)()
	write(3, 5)
	start := time.Now()
	for x.Rows() != 5 || x.Meta().Rows != 5 {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("rows %d (meta %d) 15 s after 2 more objects were written, want 5", x.Rows(), x.Meta().Rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("rows 5 after %v", time.Since(start).Round(time.Millisecond))
}
