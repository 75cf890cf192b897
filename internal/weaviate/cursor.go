package weaviate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Pooled calls fn with every object of class, in id order, a page of up
// to page objects at a time (GraphQL Get with the cursor "after"): its id,
// the properties props and its pooled vector (Stored.Pooled). consistency,
// when not empty, is the reads' level (a replicated class only). fn's
// error stops it.
func (c *Client) Pooled(ctx context.Context, class, consistency string, page int, props []string, fn func(Stored) error) error {
	after := ""
	for {
		args := "limit: " + strconv.Itoa(page)
		if after != "" {
			args += ", after: " + strconv.Quote(after)
		}
		if consistency != "" {
			args += ", consistencyLevel: " + consistency
		}
		query := fmt.Sprintf("{ Get { %s(%s) { %s _additional { id vectors { %s } } } } }", class, args, strings.Join(props, " "), VectorPooled)
		var data struct {
			Get map[string][]map[string]json.RawMessage `json:"Get"`
		}
		if err := c.graphql(ctx, query, &data); err != nil {
			return fmt.Errorf("weaviate: read %s: %w", class, err)
		}
		rows := data.Get[class]
		for _, r := range rows {
			var ad struct {
				ID      string `json:"id"`
				Vectors struct {
					Pooled []float32 `json:"pooled"`
				} `json:"vectors"`
			}
			if err := json.Unmarshal(r["_additional"], &ad); err != nil {
				return fmt.Errorf("weaviate: read %s: _additional: %w", class, err)
			}
			s := Stored{ID: ad.ID, Pooled: ad.Vectors.Pooled, Properties: map[string]any{}}
			for k, v := range r {
				var x any
				if k != "_additional" && json.Unmarshal(v, &x) == nil {
					s.Properties[k] = x
				}
			}
			if err := fn(s); err != nil {
				return err
			}
		}
		if len(rows) < page {
			return nil
		}
		var last struct {
			ID string `json:"id"`
		}
		json.Unmarshal(rows[len(rows)-1]["_additional"], &last)
		after = last.ID
	}
}
