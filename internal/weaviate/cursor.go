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
			s, err := storedRow(r)
			if err != nil {
				return fmt.Errorf("weaviate: read %s: %w", class, err)
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

// Ordered calls fn with every object of class whose text property key
// equals value, in ascending order of its number property order, a page
// of up to page objects at a time (GraphQL Get filtered by key and by
// order above the page's last, sorted by order): its id, the properties
// props (order among them) and its pooled vector. Objects with equal
// order values must not span two pages; the caller's order is unique per
// value (a video's frames' times). consistency as for Pooled.
func (c *Client) Ordered(ctx context.Context, class, consistency, key, value, order string, page int, props []string, fn func(Stored) error) error {
	v, _ := json.Marshal(value) // a JSON string is a GraphQL string
	var after *float64
	for {
		where := fmt.Sprintf("{ path: [%q], operator: Equal, valueText: %s }", key, v)
		if after != nil {
			where = fmt.Sprintf("{ operator: And, operands: [%s, { path: [%q], operator: GreaterThan, valueNumber: %s }] }",
				where, order, strconv.FormatFloat(*after, 'g', -1, 64))
		}
		args := fmt.Sprintf("where: %s, sort: [{ path: [%q], order: asc }], limit: %d", where, order, page)
		if consistency != "" {
			args += ", consistencyLevel: " + consistency
		}
		query := fmt.Sprintf("{ Get { %s(%s) { %s _additional { id vectors { %s } } } } }", class, args, strings.Join(props, " "), VectorPooled)
		var data struct {
			Get map[string][]map[string]json.RawMessage `json:"Get"`
		}
		if err := c.graphql(ctx, query, &data); err != nil {
			return fmt.Errorf("weaviate: read %s where %s = %s: %w", class, key, v, err)
		}
		rows := data.Get[class]
		for _, r := range rows {
			s, err := storedRow(r)
			if err != nil {
				return fmt.Errorf("weaviate: read %s: %w", class, err)
			}
			t, ok := s.Properties[order].(float64)
			if !ok {
				return fmt.Errorf("weaviate: read %s: object %s has no number %s", class, s.ID, order)
			}
			after = &t
			if err := fn(s); err != nil {
				return err
			}
		}
		if len(rows) < page {
			return nil
		}
	}
}

// storedRow is a GraphQL Get row: its _additional id and pooled vector,
// and its properties.
func storedRow(r map[string]json.RawMessage) (Stored, error) {
	var ad struct {
		ID      string `json:"id"`
		Vectors struct {
			Pooled []float32 `json:"pooled"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(r["_additional"], &ad); err != nil {
		return Stored{}, fmt.Errorf("_additional: %w", err)
	}
	s := Stored{ID: ad.ID, Pooled: ad.Vectors.Pooled, Properties: map[string]any{}}
	for k, v := range r {
		var x any
		if k != "_additional" && json.Unmarshal(v, &x) == nil {
			s.Properties[k] = x
		}
	}
	return s, nil
}
