package weaviate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The named vectors of a collection of images.
const (
	VectorPooled  = "pooled"  // [D]: the image's embedding (HNSW, cosine)
	VectorPatches = "patches" // [P][D]: its patches, a multi-vector scored by MaxSim
)

// ClassSpec is what a collection of images is made with.
type ClassSpec struct {
	Name string
	// Description is stored as the class's description: the collection's
	// own metadata (model, width, grid, …), read back by Class.
	Description string
	// Properties are the objects' text properties (filterable, not
	// searchable by words).
	Properties []string
	// IntProperties are the objects' integer properties.
	IntProperties []string
	// NumberProperties are the objects' number (float64) properties.
	NumberProperties []string
	// Patches adds the patches multi-vector beside the pooled vector.
	Patches bool
	// Muvera encodes the patches multi-vector with MUVERA (one
	// fixed-width vector per image in the HNSW graph instead of one per
	// patch).
	Muvera bool
	// Replication is the replication factor (0: the server's default).
	Replication int
	// Index is the pooled vector's index: IndexHNSW (the default, "") or
	// IndexFlat (an exact scan of every vector). The patches multi-vector
	// is always in an HNSW graph.
	Index string
	// EF is the HNSW graphs' search list size (0: the server's default, a
	// dynamic one from 100 up); larger finds more of the true nearest
	// neighbours, slower.
	EF int
	// EFConstruction and MaxConnections are the pooled vector's HNSW graph
	// construction settings (0: the server's defaults, 128 and 32): the
	// search list size while inserting and the links kept per node. Larger
	// builds a graph in which a search finds more of the true nearest
	// neighbours, at a slower ingestion and more memory. Fixed when the
	// class is made.
	EFConstruction, MaxConnections int
	// Quantization compresses the pooled vectors in the index: "" (none)
	// or QuantizationRQ (Weaviate's 8-bit rotational quantization; a flat
	// index keeps the codes in memory). A search ranks by the codes, then
	// reads the RescoreLimit best vectors whole and ranks them again.
	Quantization string
	RescoreLimit int
}

// QuantizationRQ is Weaviate's 8-bit rotational quantization.
const QuantizationRQ = "rq"

// The vector index types a ClassSpec names.
const (
	IndexHNSW = "hnsw" // a graph: approximate, fast at any size
	IndexFlat = "flat" // every vector compared: exact, time linear in the objects
)

// VectorIndex is a named vector's index as the server describes it.
type VectorIndex struct {
	Type                           string // IndexHNSW, IndexFlat, …
	EFConstruction, MaxConnections int    // HNSW's construction settings
	Quantization                   string // "" or QuantizationRQ
	RescoreLimit                   int    // with Quantization
	Muvera                         bool   // a multi-vector encoded with MUVERA
}

// Class is a class as the server describes it (the fields used here).
type Class struct {
	Name        string
	Description string
	Replication int
	Vectors     []string // the named vectors
	Multi       map[string]bool
	Indexes     map[string]VectorIndex // by named vector
	Properties  []string               // the properties' names
}

// classJSON is the schema's class, as sent and received.
type classJSON struct {
	Class             string                    `json:"class"`
	Description       string                    `json:"description,omitempty"`
	Properties        []propertyJSON            `json:"properties,omitempty"`
	VectorConfig      map[string]vectorConfJSON `json:"vectorConfig,omitempty"`
	ReplicationConfig *struct {
		Factor int `json:"factor"`
	} `json:"replicationConfig,omitempty"`
}

type propertyJSON struct {
	Name            string   `json:"name"`
	DataType        []string `json:"dataType"`
	Tokenization    string   `json:"tokenization,omitempty"`
	IndexSearchable *bool    `json:"indexSearchable,omitempty"`
}

type vectorConfJSON struct {
	Vectorizer        map[string]any `json:"vectorizer"`
	VectorIndexType   string         `json:"vectorIndexType"`
	VectorIndexConfig map[string]any `json:"vectorIndexConfig"`
}

// CreateClass creates the class spec describes. A class of that name made
// meanwhile by another writer is not an error: the caller reads it back
// with Class and compares.
func (c *Client) CreateClass(ctx context.Context, spec ClassSpec) error {
	cj := classJSON{Class: spec.Name, Description: spec.Description, VectorConfig: map[string]vectorConfJSON{}}
	for _, p := range spec.Properties {
		cj.Properties = append(cj.Properties, textProperty(p))
	}
	for _, p := range spec.IntProperties {
		cj.Properties = append(cj.Properties, propertyJSON{Name: p, DataType: []string{"int"}})
	}
	for _, p := range spec.NumberProperties {
		cj.Properties = append(cj.Properties, numberProperty(p))
	}
	none := map[string]any{"none": map[string]any{}}
	pooled := map[string]any{"distance": "cosine"}
	kind := spec.Index
	switch kind {
	case "", IndexHNSW:
		kind = IndexHNSW
		for k, v := range map[string]int{"ef": spec.EF, "efConstruction": spec.EFConstruction, "maxConnections": spec.MaxConnections} {
			if v > 0 {
				pooled[k] = v
			}
		}
	case IndexFlat:
		if spec.EF > 0 || spec.EFConstruction > 0 || spec.MaxConnections > 0 {
			return fmt.Errorf("weaviate: class %s: a flat index has no HNSW settings (ef %d, efConstruction %d, maxConnections %d)", spec.Name, spec.EF, spec.EFConstruction, spec.MaxConnections)
		}
	default:
		return fmt.Errorf("weaviate: class %s: vector index %q: want %s or %s", spec.Name, spec.Index, IndexHNSW, IndexFlat)
	}
	switch spec.Quantization {
	case "":
	case QuantizationRQ:
		// 8 bits; a flat index scans the codes from memory.
		rq := map[string]any{"enabled": true, "bits": 8, "rescoreLimit": spec.RescoreLimit}
		if kind == IndexFlat {
			rq["cache"] = true
		}
		pooled["rq"] = rq
	default:
		return fmt.Errorf("weaviate: class %s: quantization %q: want none or %s", spec.Name, spec.Quantization, QuantizationRQ)
	}
	cj.VectorConfig[VectorPooled] = vectorConfJSON{Vectorizer: none, VectorIndexType: kind, VectorIndexConfig: pooled}
	if spec.Patches {
		mv := map[string]any{"enabled": true, "aggregation": "maxSim"}
		if spec.Muvera {
			mv["muvera"] = map[string]any{"enabled": true}
		}
		cj.VectorConfig[VectorPatches] = vectorConfJSON{Vectorizer: none, VectorIndexType: "hnsw",
			VectorIndexConfig: map[string]any{"distance": "cosine", "multivector": mv}}
	}
	if spec.Replication > 0 {
		cj.ReplicationConfig = &struct {
			Factor int `json:"factor"`
		}{spec.Replication}
	}
	err := c.do(ctx, http.MethodPost, "/v1/schema", cj, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(se.Message), "already exists") {
		return nil
	}
	return err
}

// GetClass returns the class name, or nil when there is none.
func (c *Client) GetClass(ctx context.Context, name string) (*Class, error) {
	var cj classJSON
	err := c.do(ctx, http.MethodGet, "/v1/schema/"+url.PathEscape(name), nil, &cj)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if cj.Class == "" {
		return nil, nil
	}
	cl := &Class{Name: cj.Class, Description: cj.Description, Multi: map[string]bool{}, Indexes: map[string]VectorIndex{}}
	if cj.ReplicationConfig != nil {
		cl.Replication = cj.ReplicationConfig.Factor
	}
	for _, p := range cj.Properties {
		cl.Properties = append(cl.Properties, p.Name)
	}
	for n, vc := range cj.VectorConfig {
		cl.Vectors = append(cl.Vectors, n)
		vi := VectorIndex{Type: vc.VectorIndexType}
		if mv, ok := vc.VectorIndexConfig["multivector"].(map[string]any); ok && mv["enabled"] == true {
			cl.Multi[n] = true
			if mu, ok := mv["muvera"].(map[string]any); ok && mu["enabled"] == true {
				vi.Muvera = true
			}
		}
		if f, ok := vc.VectorIndexConfig["efConstruction"].(float64); ok {
			vi.EFConstruction = int(f)
		}
		if f, ok := vc.VectorIndexConfig["maxConnections"].(float64); ok {
			vi.MaxConnections = int(f)
		}
		if rq, ok := vc.VectorIndexConfig["rq"].(map[string]any); ok && rq["enabled"] == true {
			vi.Quantization = QuantizationRQ
			if f, ok := rq["rescoreLimit"].(float64); ok {
				vi.RescoreLimit = int(f)
			}
		}
		cl.Indexes[n] = vi
	}
	return cl, nil
}

// textProperty is a text property as CreateClass makes them: filterable
// as a whole value, not searchable by words.
func textProperty(name string) propertyJSON {
	no := false
	return propertyJSON{Name: name, DataType: []string{"text"}, Tokenization: "field", IndexSearchable: &no}
}

// numberProperty is a number property as CreateClass makes them.
func numberProperty(name string) propertyJSON {
	return propertyJSON{Name: name, DataType: []string{"number"}}
}

// AddProperties adds to class the text properties text and the number
// properties numbers it does not have yet (as CreateClass makes them);
// objects written before have none of them. A property another writer
// added meanwhile is not an error.
func (c *Client) AddProperties(ctx context.Context, class string, text, numbers []string) error {
	cl, err := c.GetClass(ctx, class)
	if err != nil {
		return err
	}
	if cl == nil {
		return fmt.Errorf("weaviate: class %s: not found", class)
	}
	var add []propertyJSON
	for _, p := range text {
		if !slices.Contains(cl.Properties, p) {
			add = append(add, textProperty(p))
		}
	}
	for _, p := range numbers {
		if !slices.Contains(cl.Properties, p) {
			add = append(add, numberProperty(p))
		}
	}
	for _, p := range add {
		err := c.do(ctx, http.MethodPost, "/v1/schema/"+url.PathEscape(class)+"/properties", p, nil)
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(se.Message), "already exists") {
			continue
		}
		if err != nil {
			return fmt.Errorf("weaviate: class %s: add property %s: %w", class, p.Name, err)
		}
	}
	return nil
}

// DeleteClass removes the class name and its objects.
func (c *Client) DeleteClass(ctx context.Context, name string) error {
	err := c.do(ctx, http.MethodDelete, "/v1/schema/"+url.PathEscape(name), nil, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("weaviate: delete class %s: %w", name, err)
	}
	return nil
}

// SetEF sets the search list size of the HNSW graph of class's named
// vector (Weaviate lets it change on a class that holds objects).
func (c *Client) SetEF(ctx context.Context, class, vector string, ef int) error {
	var cl map[string]any
	if err := c.do(ctx, http.MethodGet, "/v1/schema/"+url.PathEscape(class), nil, &cl); err != nil {
		return err
	}
	vc, _ := cl["vectorConfig"].(map[string]any)
	v, _ := vc[vector].(map[string]any)
	ic, _ := v["vectorIndexConfig"].(map[string]any)
	if ic == nil {
		return fmt.Errorf("weaviate: class %s has no vector %s", class, vector)
	}
	if t, _ := v["vectorIndexType"].(string); t != IndexHNSW {
		return fmt.Errorf("weaviate: class %s: vector %s is in a %s index, which has no search list size (ef): only an hnsw graph has", class, vector, t)
	}
	ic["ef"] = ef
	return c.do(ctx, http.MethodPut, "/v1/schema/"+url.PathEscape(class), cl, nil)
}
