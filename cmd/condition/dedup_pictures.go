package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// writeDedupPictures writes into dir the pictures to choose the threshold
// by: nn-histogram.png and .json (each image's nearest-neighbour cosine),
// groups.png (the largest groups) and near-threshold.png (the pairs just
// above and below the threshold).
func writeDedupPictures(ctx context.Context, x *index.Index, res *dedup.Result, dir string) error {
	h := res.Histogram()
	hist, err := h.PNG()
	if err != nil {
		return err
	}
	groups, err := dedup.GroupsSheet(ctx, x, res, dedup.SheetOptions{})
	if err != nil {
		return err
	}
	near, err := dedup.NearSheet(ctx, x, res, dedup.SheetOptions{})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(w io.Writer) error
	}{
		{"nn-histogram.json", func(w io.Writer) error { return json.NewEncoder(w).Encode(h) }},
		{"nn-histogram.png", bytesTo(hist)},
		{"groups.png", bytesTo(groups.PNG)},
		{"near-threshold.png", bytesTo(near.PNG)},
	} {
		if err := writeLines(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	return nil
}

func bytesTo(b []byte) func(w io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}
