package weaviate

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Consistency levels of writes and reads on a replicated class.
const (
	One    = "ONE"
	Quorum = "QUORUM"
	All    = "ALL"
)

// namespace is the UUIDv5 namespace of the ids ID derives.
var namespace = [16]byte{0x6b, 0x1e, 0x5c, 0x2a, 0x3f, 0x0d, 0x4e, 0x8b, 0x9a, 0x51, 0x7c, 0x13, 0xd2, 0x46, 0xe0, 0x97}

// ID returns the UUIDv5 (RFC 9562) of name in this package's namespace:
// the same name always gives the same object id.
func ID(name string) string {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Object is one object to write: its id, properties and named vectors.
type Object struct {
	ID         string
	Properties map[string]any
	Pooled     []float32   // [D]
	Patches    [][]float32 // [P][D], or nil
}

type objectJSON struct {
	Class      string         `json:"class"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties,omitempty"`
	Vectors    map[string]any `json:"vectors,omitempty"`
}

type batchAnswer struct {
	ID     string `json:"id"`
	Result *struct {
		Status string `json:"status"`
		Errors *struct {
			Error []struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"errors"`
	} `json:"result"`
}

// Upsert writes objs into class in one batch (an object of the same id is
// replaced), with the write consistency level (empty: the server's
// default). errs[i] is object i's own error, nil when it was written; err
// is the batch's, when none was written.
func (c *Client) Upsert(ctx context.Context, class, consistency string, objs []Object) (errs []error, err error) {
	body := struct {
		Objects []objectJSON `json:"objects"`
	}{make([]objectJSON, len(objs))}
	for i, o := range objs {
		v := map[string]any{VectorPooled: o.Pooled}
		if o.Patches != nil {
			v[VectorPatches] = o.Patches
		}
		body.Objects[i] = objectJSON{Class: class, ID: o.ID, Properties: o.Properties, Vectors: v}
	}
	path := "/v1/batch/objects"
	if consistency != "" {
		path += "?consistency_level=" + consistency
	}
	var ans []batchAnswer
	if err := c.do(ctx, http.MethodPost, path, body, &ans); err != nil {
		return nil, err
	}
	if len(ans) != len(objs) {
		return nil, fmt.Errorf("weaviate: POST %s: %d objects sent, %d answered", path, len(objs), len(ans))
	}
	errs = make([]error, len(objs))
	for i, a := range ans {
		if a.Result == nil || a.Result.Errors == nil || len(a.Result.Errors.Error) == 0 {
			if a.Result != nil && a.Result.Status == "FAILED" {
				errs[i] = fmt.Errorf("weaviate: object %s: not written", objs[i].ID)
			}
			continue
		}
		var ms []string
		for _, e := range a.Result.Errors.Error {
			ms = append(ms, e.Message)
		}
		errs[i] = fmt.Errorf("weaviate: object %s: %s", objs[i].ID, strings.Join(ms, "; "))
	}
	return errs, nil
}

// graphql sends a GraphQL query and decodes its data into out.
func (c *Client) graphql(ctx context.Context, query string, out any) error {
	var ans struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/graphql", map[string]string{"query": query}, &ans); err != nil {
		return err
	}
	if len(ans.Errors) > 0 {
		var ms []string
		for _, e := range ans.Errors {
			ms = append(ms, e.Message)
		}
		return fmt.Errorf("weaviate: graphql: %s", strings.Join(ms, "; "))
	}
	if err := json.Unmarshal(ans.Data, out); err != nil {
		return fmt.Errorf("weaviate: graphql: the answer is not the JSON expected: %w", err)
	}
	return nil
}

// Count returns the number of objects in class.
func (c *Client) Count(ctx context.Context, class string) (int, error) {
	var data struct {
		Aggregate map[string][]struct {
			Meta struct {
				Count int `json:"count"`
			} `json:"meta"`
		} `json:"Aggregate"`
	}
	if err := c.graphql(ctx, "{ Aggregate { "+class+" { meta { count } } } }", &data); err != nil {
		return 0, fmt.Errorf("weaviate: count %s: %w", class, err)
	}
	rows := data.Aggregate[class]
	if len(rows) == 0 {
		return 0, nil
	}
	return rows[0].Meta.Count, nil
}

// IDs calls fn with the id and properties of every object of class, in id
// order, a page of up to page objects at a time (read at the consistency
// level, empty: the server's default). fn's error stops it.
func (c *Client) IDs(ctx context.Context, class, consistency string, page int, fn func(id string, props map[string]any) error) error {
	after := ""
	for {
		q := url.Values{"class": {class}, "limit": {strconv.Itoa(page)}}
		if after != "" {
			q.Set("after", after)
		}
		if consistency != "" {
			q.Set("consistency_level", consistency)
		}
		var ans struct {
			Objects []struct {
				ID         string         `json:"id"`
				Properties map[string]any `json:"properties"`
			} `json:"objects"`
		}
		if err := c.do(ctx, http.MethodGet, "/v1/objects?"+q.Encode(), nil, &ans); err != nil {
			return fmt.Errorf("weaviate: list %s: %w", class, err)
		}
		for _, o := range ans.Objects {
			if err := fn(o.ID, o.Properties); err != nil {
				return err
			}
		}
		if len(ans.Objects) < page {
			return nil
		}
		after = ans.Objects[len(ans.Objects)-1].ID
	}
}

// Stored is an object read back: its properties and the named vectors
// asked for.
type Stored struct {
	ID         string
	Properties map[string]any
	Pooled     []float32
	Patches    [][]float32
	Distance   float32 // a search's: cosine distance (1 − cos), or −MaxSim for patches
}

type storedJSON struct {
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties"`
	Vectors    struct {
		Pooled  []float32   `json:"pooled"`
		Patches [][]float32 `json:"patches"`
	} `json:"vectors"`
}

// Get reads the object id of class with its vectors (at the consistency
// level; empty: the server's default); nil when there is none.
func (c *Client) Get(ctx context.Context, class, id, consistency string) (*Stored, error) {
	q := url.Values{"include": {"vector"}}
	if consistency != "" {
		q.Set("consistency_level", consistency)
	}
	var sj storedJSON
	err := c.do(ctx, http.MethodGet, "/v1/objects/"+url.PathEscape(class)+"/"+url.PathEscape(id)+"?"+q.Encode(), nil, &sj)
	if se, ok := err.(*StatusError); ok && se.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Stored{ID: sj.ID, Properties: sj.Properties, Pooled: sj.Vectors.Pooled, Patches: sj.Vectors.Patches}, nil
}

// Delete removes the object id of class (none is not an error).
func (c *Client) Delete(ctx context.Context, class, id string) error {
	err := c.do(ctx, http.MethodDelete, "/v1/objects/"+url.PathEscape(class)+"/"+url.PathEscape(id), nil, nil)
	if se, ok := err.(*StatusError); ok && se.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// NearOptions controls Near.
type NearOptions struct {
	Target      string   // VectorPooled or VectorPatches
	Limit       int      // how many objects
	Properties  []string // the properties to return
	Vectors     []string // the named vectors to return with each object
	Consistency string   // the read's consistency level (empty: the server's default)
}

// Near searches class for the objects nearest the query: q is [D] for
// the pooled vector, or [rows][D] (a multi-vector, scored by MaxSim) for
// the patches. Objects come nearest first.
func (c *Client) Near(ctx context.Context, class string, q any, o NearOptions) ([]Stored, error) {
	vec, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	var add strings.Builder
	add.WriteString("id distance")
	if len(o.Vectors) > 0 {
		add.WriteString(" vectors { " + strings.Join(o.Vectors, " ") + " }")
	}
	args := fmt.Sprintf("nearVector: { vector: %s, targetVectors: [%q] }, limit: %d", vec, o.Target, o.Limit)
	if o.Consistency != "" {
		args += ", consistencyLevel: " + o.Consistency
	}
	query := fmt.Sprintf("{ Get { %s(%s) { %s _additional { %s } } } }", class, args, strings.Join(o.Properties, " "), add.String())
	var data struct {
		Get map[string][]map[string]json.RawMessage `json:"Get"`
	}
	if err := c.graphql(ctx, query, &data); err != nil {
		return nil, fmt.Errorf("weaviate: search %s: %w", class, err)
	}
	rows := data.Get[class]
	out := make([]Stored, len(rows))
	for i, r := range rows {
		var ad struct {
			ID       string  `json:"id"`
			Distance float32 `json:"distance"`
			Vectors  struct {
				Pooled  []float32   `json:"pooled"`
				Patches [][]float32 `json:"patches"`
			} `json:"vectors"`
		}
		if err := json.Unmarshal(r["_additional"], &ad); err != nil {
			return nil, fmt.Errorf("weaviate: search %s: _additional: %w", class, err)
		}
		s := Stored{ID: ad.ID, Distance: ad.Distance, Pooled: ad.Vectors.Pooled, Patches: ad.Vectors.Patches, Properties: map[string]any{}}
		for k, v := range r {
			if k == "_additional" {
				continue
			}
			var x any
			if json.Unmarshal(v, &x) == nil {
				s.Properties[k] = x
			}
		}
		out[i] = s
	}
	return out, nil
}
