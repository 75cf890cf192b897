package index

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/conditionhq/condition/internal/weaviate"
	"github.com/conditionhq/condition/tensorio"
)

// ExportPart is the name of the part ExportPooled writes.
const ExportPart = "part-00000"

// exportPage is how many objects ExportPooled reads at a time.
const exportPage = 500

// ExportPooled reads the pooled vector (the image embedding) and the
// path, source, member and sha256 (a video's frame: and its video and
// time) of every object of the collection (a
// cursor over its objects, in id order) and writes them as an index
// without patches into the folder dir (dir/index/ExportPart: embeds.npy
// float32 [N, D], index.json last), its rows in path order: what Open
// reads as the job's index of the same images. It returns the rows
// written. dir must not hold an index; it takes N·D·4 bytes.
func (c *Collection) ExportPooled(ctx context.Context, dir string) (int, error) {
	d := c.meta.Dim
	type row struct {
		it  Item
		vec []float32
	}
	var rows []row
	consistency := ""
	if c.replication > 1 {
		consistency = c.consistency
	}
	props := []string{"path", "source", "member", "sha256"}
	if c.frames {
		props = append(props, "video", "time")
	}
	err := c.c.Pooled(ctx, c.t.Collection, consistency, exportPage, props, func(s weaviate.Stored) error {
		str := func(k string) string { v, _ := s.Properties[k].(string); return v }
		if len(s.Pooled) != d {
			return fmt.Errorf("object %s (%s): a pooled vector of %d values, want the collection's width %d", s.ID, str("path"), len(s.Pooled), d)
		}
		it := Item{Path: str("path"), Source: str("source"), Member: str("member"), SHA256: str("sha256"), Status: statusOK}
		it.Video, it.Time = frameProps(s.Properties)
		rows = append(rows, row{it, s.Pooled})
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("index: collection %s: %w", c.t, err)
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.it.Path, b.it.Path) })
	m := c.meta
	meta := Meta{Format: Format, Model: m.Model, Revision: m.Revision, Settings: json.RawMessage("{}"), DType: DTypeF32, Dim: d,
		LogitScale: m.LogitScale, LogitBias: m.LogitBias, Readout: m.Readout, Rows: len(rows)}
	vecs := make([]float32, 0, len(rows)*d)
	for i, r := range rows {
		r.it.Row = i
		meta.Items = append(meta.Items, r.it)
		vecs = append(vecs, r.vec...)
	}
	part := filepath.Join(dir, "index", ExportPart)
	if err := os.MkdirAll(part, 0o755); err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	if err := tensorio.WriteNPY(filepath.Join(part, EmbedsFile), tensorio.F32([]int{len(rows), d}, vecs)); err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	if err := tensorio.WriteNPY(filepath.Join(part, PatchesFile), tensorio.F32([]int{len(rows), 0, d}, nil)); err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	if err := tensorio.WriteFileAtomic(filepath.Join(part, MetaFile), func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	return len(rows), nil
}
