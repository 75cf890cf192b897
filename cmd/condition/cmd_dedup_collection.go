package main

import (
	"context"
	"os"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// openDedupCollection reads the pooled vectors of the collection url
// names into a temporary index (rows in path order) and opens it for
// dedup; close closes it and removes the folder.
func openDedupCollection(ctx context.Context, url string) (x *index.Index, close func(), err error) {
	c, err := index.OpenCollection(ctx, url, index.CollectionOptions{APIKey: os.Getenv(weaviateKeyEnv)})
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "condition-dedup-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if _, err := c.ExportPooled(ctx, tmp); err != nil {
		return nil, nil, err
	}
	if x, err = index.Open(ctx, tmp, index.Options{}); err != nil {
		return nil, nil, err
	}
	if err := dedup.CheckIndex(x); err != nil {
		x.Close()
		return nil, nil, err
	}
	return x, func() { x.Close(); os.RemoveAll(tmp) }, nil
}
