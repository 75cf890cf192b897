package index

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/conditionhq/condition/internal/weaviate"
)

// ErrNoCollection is the error (wrapped, with the collection's address) of
// opening a collection that does not exist without CollectionOptions.Create.
var ErrNoCollection = errors.New("no such collection")

// ErrCollectionExists is the error (wrapped, with the collection's address)
// of CreateCollection when a class of that name exists already.
var ErrCollectionExists = errors.New("the collection exists already")

// SettingError is a setting of CollectionOptions that cannot make or open
// a collection: Field names the CollectionOptions field ("Consistency",
// "Replication", "VectorIndex", "EF", "EFConstruction", "MaxConnections",
// "Quantization" or "RescoreLimit"), Value its value and Want what it may
// be.
type SettingError struct {
	Field string
	Value any
	Want  string
}

// settingWords names each field of CollectionOptions in messages.
var settingWords = map[string]string{
	"Consistency": "consistency level", "Replication": "replication factor", "VectorIndex": "vector index",
	"EF": "ef", "EFConstruction": "efConstruction", "MaxConnections": "maxConnections",
	"Quantization": "quantization", "RescoreLimit": "rescore limit",
}

func (e *SettingError) Error() string {
	v := fmt.Sprint(e.Value)
	if s, ok := e.Value.(string); ok {
		v = strconv.Quote(s)
	}
	return fmt.Sprintf("%s %s: want %s", settingWords[e.Field], v, e.Want)
}

// Check checks o's settings without connecting: the consistency level, the
// replication factor, the vector index and its graph's settings, the
// quantization and its rescore limit. Its error is a *SettingError
// (wrapped); OpenCollection and CreateCollection check them too.
func (o *CollectionOptions) Check() error {
	if err := o.check(); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// check is Check's *SettingError, unwrapped.
func (o *CollectionOptions) check() error {
	switch o.Consistency {
	case "", weaviate.One, weaviate.Quorum, weaviate.All:
	default:
		return &SettingError{"Consistency", o.Consistency, "ONE, QUORUM or ALL"}
	}
	if o.Replication < 0 {
		return &SettingError{"Replication", o.Replication, "1 or more (0: 1)"}
	}
	switch o.VectorIndex {
	case "", VectorIndexHNSW:
	case VectorIndexFlat:
		const want = "0: a flat index compares every embedding and has no HNSW settings"
		for _, f := range []struct {
			name string
			v    int
		}{{"EF", o.EF}, {"EFConstruction", o.EFConstruction}, {"MaxConnections", o.MaxConnections}} {
			if f.v != 0 {
				return &SettingError{f.name, f.v, want}
			}
		}
	default:
		return &SettingError{"VectorIndex", o.VectorIndex, VectorIndexHNSW + " or " + VectorIndexFlat}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"EF", o.EF}, {"EFConstruction", o.EFConstruction}, {"MaxConnections", o.MaxConnections}} {
		if f.v < 0 {
			return &SettingError{f.name, f.v, "0 (Weaviate's default) or more"}
		}
	}
	switch {
	case o.Quantization != "" && o.Quantization != QuantizationRQ:
		return &SettingError{"Quantization", o.Quantization, "none or " + QuantizationRQ}
	case o.RescoreLimit < 0 || o.RescoreLimit > 0 && o.Quantization == "":
		return &SettingError{"RescoreLimit", o.RescoreLimit, fmt.Sprintf("0 (%d) or more, with quantization %s", DefaultRescoreLimit, QuantizationRQ)}
	}
	return nil
}

// CollectionSettings are the settings a collection was made with, as
// Weaviate's schema describes them: fixed once the collection exists.
type CollectionSettings struct {
	// Replication is the replication factor.
	Replication int `json:"replication"`
	// VectorIndex is how the image embeddings are searched
	// (VectorIndexHNSW or VectorIndexFlat); EFConstruction and
	// MaxConnections are an HNSW graph's construction settings.
	VectorIndex    string `json:"vector_index"`
	EFConstruction int    `json:"ef_construction,omitempty"`
	MaxConnections int    `json:"max_connections,omitempty"`
	// Quantization is "" (none) or QuantizationRQ, and RescoreLimit how
	// many images a quantized search ranks again by their embeddings.
	Quantization string `json:"quantization,omitempty"`
	RescoreLimit int    `json:"rescore_limit,omitempty"`
	// Patches says whether the objects hold their patches (a
	// multi-vector), and Muvera whether that is encoded with MUVERA.
	Patches bool `json:"patches"`
	Muvera  bool `json:"muvera"`
}

// Settings returns the settings the collection was made with, as the
// server described them when it was opened.
func (c *Collection) Settings() CollectionSettings {
	return c.settings
}

// classSettings reads a collection's settings from its class.
func classSettings(cl *weaviate.Class) CollectionSettings {
	p := cl.Indexes[weaviate.VectorPooled]
	s := CollectionSettings{Replication: cl.Replication, VectorIndex: p.Type, Quantization: p.Quantization, RescoreLimit: p.RescoreLimit,
		Patches: cl.Multi[weaviate.VectorPatches], Muvera: cl.Indexes[weaviate.VectorPatches].Muvera}
	if p.Type == weaviate.IndexHNSW {
		s.EFConstruction, s.MaxConnections = p.EFConstruction, p.MaxConnections
	}
	return s
}
