package index_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestCreateCollection: CreateCollection makes a collection with its
// settings, which Settings reads back as the server describes them (the
// default rescore limit filled in); creating it again is ErrCollectionExists
// and opening a missing one ErrNoCollection, neither naming a command; a
// setting that cannot be is a *SettingError naming its field, found before
// any connection.
func TestCreateCollection(t *testing.T) {
	node := weaviatetest.Start(t)
	ctx := context.Background()
	url := "weaviate://" + node.Host() + "/Created"
	meta := index.CollectionMeta{Model: "test", Revision: "r", Dim: 8, Grid: [2]int{2, 2}, LogitScale: 100}
	o := index.CollectionOptions{VectorIndex: index.VectorIndexFlat, Quantization: index.QuantizationRQ, Muvera: true}
	c, err := index.CreateCollection(ctx, url, meta, o)
	if err != nil {
		t.Fatal(err)
	}
	want := index.CollectionSettings{Replication: 1, VectorIndex: index.VectorIndexFlat, Quantization: index.QuantizationRQ,
		RescoreLimit: index.DefaultRescoreLimit, Patches: true, Muvera: true}
	if got := c.Settings(); got != want {
		t.Errorf("created: settings %+v; want %+v", got, want)
	}
	if m := c.Meta(); m.Format != index.CollectionFormat || m.Model != "test" || m.Dim != 8 || m.Grid != [2]int{2, 2} {
		t.Errorf("created: meta %+v", m)
	}
	again, err := index.OpenCollection(ctx, url, index.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Settings(); got != want {
		t.Errorf("opened: settings %+v; want %+v", got, want)
	}
	// A job of the same model writes into it, with its settings unnamed.
	if _, err := index.OpenCollection(ctx, url, index.CollectionOptions{Create: &meta}); err != nil {
		t.Errorf("a job's open of the collection made: %v", err)
	}
	_, err = index.CreateCollection(ctx, url, meta, index.CollectionOptions{})
	if !errors.Is(err, index.ErrCollectionExists) || !strings.Contains(err.Error(), url) {
		t.Errorf("create again: %v; want ErrCollectionExists naming %s", err, url)
	}
	missing := "weaviate://" + node.Host() + "/Missing"
	_, err = index.OpenCollection(ctx, missing, index.CollectionOptions{})
	if !errors.Is(err, index.ErrNoCollection) || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "run") {
		t.Errorf("open of a missing collection: %v; want ErrNoCollection naming %s and no command", err, missing)
	}
	closed := "weaviate://127.0.0.1:1/Never"
	for _, c := range []struct {
		o     index.CollectionOptions
		field string
	}{
		{index.CollectionOptions{Consistency: "SOME"}, "Consistency"},
		{index.CollectionOptions{Replication: -1}, "Replication"},
		{index.CollectionOptions{VectorIndex: "tree"}, "VectorIndex"},
		{index.CollectionOptions{VectorIndex: index.VectorIndexFlat, MaxConnections: 4}, "MaxConnections"},
		{index.CollectionOptions{EFConstruction: -1}, "EFConstruction"},
		{index.CollectionOptions{Quantization: "pq"}, "Quantization"},
		{index.CollectionOptions{RescoreLimit: 5}, "RescoreLimit"},
	} {
		var se *index.SettingError
		if err := c.o.Check(); !errors.As(err, &se) || se.Field != c.field || strings.Contains(err.Error(), "--") {
			t.Errorf("Check of %+v: %v; want a SettingError of %s naming no flag", c.o, err, c.field)
		}
		if _, err := index.CreateCollection(ctx, closed, meta, c.o); !errors.As(err, &se) || se.Field != c.field {
			t.Errorf("CreateCollection of %+v: %v; want a SettingError of %s before connecting", c.o, err, c.field)
		}
	}
	if err := (&index.CollectionOptions{VectorIndex: index.VectorIndexHNSW, EFConstruction: 64, Quantization: index.QuantizationRQ, RescoreLimit: 10}).Check(); err != nil {
		t.Errorf("Check of good settings: %v", err)
	}
}
