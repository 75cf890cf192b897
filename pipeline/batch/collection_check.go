package batch

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/conditionhq/condition/pipeline/index"
)

// CollectionCheck is what checking a job's collection in Weaviate against
// its manifests found: the objects the collection holds, the ok images
// whose object it does not hold, and its objects of no ok image of the
// job (another job's, or an image's that failed after it was written).
type CollectionCheck struct {
	Collection        string   `json:"collection,omitempty"`
	CollectionObjects int      `json:"collection_objects,omitempty"`
	CollectionMissing []string `json:"collection_missing,omitempty"`
	CollectionOthers  int      `json:"collection_others,omitempty"`
}

// check lists every object of the collection that objects (ok images'
// object URLs → their paths) name, once, and fills in c.
func (c *CollectionCheck) check(ctx context.Context, objects map[string]string, apiKey string) error {
	byColl := map[string]map[string]string{} // collection URL → object id → path
	for u, p := range objects {
		i := strings.LastIndexByte(u, '/')
		if i < 0 || !index.IsCollectionURL(u) {
			return fmt.Errorf("batch: %s's object %q is not a collection's object URL", p, u)
		}
		if byColl[u[:i]] == nil {
			byColl[u[:i]] = map[string]string{}
		}
		byColl[u[:i]][u[i+1:]] = p
	}
	if len(byColl) != 1 {
		return fmt.Errorf("batch: the manifests name objects of %d collections; a job writes one", len(byColl))
	}
	for url, want := range byColl {
		c.Collection = url
		coll, err := index.OpenCollection(ctx, url, index.CollectionOptions{APIKey: apiKey})
		if err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		seen := map[string]bool{}
		err = coll.Objects(ctx, func(id, _ string) error {
			c.CollectionObjects++
			if _, ok := want[id]; ok {
				seen[id] = true
			} else {
				c.CollectionOthers++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		for id, p := range want {
			if !seen[id] {
				c.CollectionMissing = append(c.CollectionMissing, p)
			}
		}
		sort.Strings(c.CollectionMissing)
	}
	return nil
}

// addObject records entry e's object, when it is ok and names one.
func addObject(objects *map[string]string, e Entry) {
	if e.Status != StatusOK || e.Object == "" {
		return
	}
	if *objects == nil {
		*objects = map[string]string{}
	}
	(*objects)[e.Object] = e.Path
}
