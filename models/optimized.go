package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/conditionhq/condition/tensorio"
)

// Graph variants this program derives from a model's own graphs and keeps
// in its derived cache (see DefaultDerivedDir), never in the model's folder
// or the Hugging Face cache.
const (
	// VariantOptimized is the graphs with their subgraphs fused into ONNX
	// Runtime's contrib operators (onnxgraph.Fuse), float32 as the original.
	VariantOptimized = "optimized"
	// VariantOptimizedInt8 is VariantOptimized with the weight MatMuls
	// quantized to int8 and their activations quantized at run time per
	// row (scheme Int8SchemePerRow): an image's outputs do not depend on
	// the images encoded beside it.
	VariantOptimizedInt8 = "optimized-int8"
	// VariantOptimizedInt8PerCall is the earlier int8 form, kept for
	// comparison: activations quantized with one scale per call (scheme
	// Int8SchemePerCall), so that an image's outputs depend on its
	// batch-mates. Made only when asked for (models optimize).
	VariantOptimizedInt8PerCall = "optimized-int8-per-call"
	// VariantOptimizedInt8Static is the int8 form with static activation
	// scales (scheme Int8SchemeStatic): one constant scale and zero point
	// per MatMul input, calibrated by running the float32 graph over
	// calibration images; an image's outputs do not depend on the images
	// encoded beside it. Made only when asked for (models optimize).
	VariantOptimizedInt8Static = "optimized-int8-static"
	// VariantPlain asks for the model's own graphs even when an optimized
	// variant is present.
	VariantPlain = "plain"
)

// The quantization schemes of the int8 variants, written in their stamps
// (VariantStamp.Scheme).
const (
	// Int8SchemePerRow: weights int8 per output channel, activations int8
	// per row (one token of one image or prompt), symmetric, computed in
	// the graph; layer norms with outlier channels smoothed into the
	// weights they feed, and the MatMuls downstream of them kept float32.
	Int8SchemePerRow = "per-row-v1"
	// Int8SchemePerCall: weights int8 per output channel, activations with
	// one scale per call (ONNX Runtime's DynamicQuantizeMatMul). Stamps
	// written before schemes were recorded have this scheme.
	Int8SchemePerCall = "per-call"
	// Int8SchemeStatic: weights int8 per output channel, activations int8
	// with one constant scale and zero point per MatMul input, over the
	// range the float32 graph's activations took on calibration inputs;
	// the outlier rule as per row.
	Int8SchemeStatic = "static-v1"
)

// IsDerivedVariant reports whether variant is one this program makes and
// keeps in its derived cache.
func IsDerivedVariant(variant string) bool {
	return variant == VariantOptimized || IsInt8Variant(variant)
}

// IsInt8Variant reports whether variant is one of the int8 variants.
func IsInt8Variant(variant string) bool {
	return variant == VariantOptimizedInt8 || variant == VariantOptimizedInt8PerCall || variant == VariantOptimizedInt8Static
}

// Int8Scheme returns the quantization scheme of an int8 variant, "" for
// any other.
func Int8Scheme(variant string) string {
	switch variant {
	case VariantOptimizedInt8:
		return Int8SchemePerRow
	case VariantOptimizedInt8PerCall:
		return Int8SchemePerCall
	case VariantOptimizedInt8Static:
		return Int8SchemeStatic
	}
	return ""
}

// ErrStaleScheme is matched (errors.Is) by the error of opening an int8
// variant that the cache holds made by another quantization scheme than
// the one the variant names now: it is made again, never reused. It
// wraps ErrNoVariant.
var ErrStaleScheme = fmt.Errorf("made by another quantization scheme: %w", ErrNoVariant)

// staleScheme returns the scheme a stamp of an int8 variant says, when it
// is not the scheme the variant names now ("" otherwise). A stamp with no
// scheme was written by DynamicQuantizeMatMul's scheme.
func staleScheme(saved VariantStamp) string {
	want := Int8Scheme(saved.Variant)
	if want == "" {
		return ""
	}
	got := saved.Scheme
	if got == "" {
		got = Int8SchemePerCall
	}
	if got != want {
		return got
	}
	return ""
}

// VariantStamp is written beside a derived graph: what it was made from,
// so that a graph whose source changed is not used, and what was done.
type VariantStamp struct {
	Source       string          `json:"source"`                // the source graph (display path)
	Size         int64           `json:"size"`                  // its size
	ModTimeNanos int64           `json:"mod_time_ns,omitempty"` // its modification time (files on disk)
	SHA256       string          `json:"sha256,omitempty"`      // its hash (the embedded model)
	Commit       string          `json:"commit,omitempty"`      // the hub commit it was made from (graphs built from a hub model's checkpoint)
	Report       json.RawMessage `json:"report,omitempty"`      // what the rewrite did and how it was checked
	Program      string          `json:"program,omitempty"`     // the version that wrote it
	Variant      string          `json:"variant"`               // VariantOptimized, ...
	Graph        string          `json:"graph"`                 // canonical name
	Written      string          `json:"written,omitempty"`     // when
	Notes        []string        `json:"notes,omitempty"`       // anything else worth knowing
	Scheme       string          `json:"scheme,omitempty"`      // an int8 variant's quantization scheme (Int8SchemePerRow, ...)
	Pixels       string          `json:"pixels,omitempty"`      // built graphs: the vision graph's pixel size HxW when not the config's image_size (TIPSv2 at its preprocessor's size)
}

// variantDir returns the derived cache folder of the model's derived
// variants: <derived>/models--org--name/<commit> for a hub model,
// <derived>/local/<hash of the folder's path> for a folder and
// <derived>/default for the embedded model.
func (m *Model) variantDir() (string, error) {
	if m.isHub() {
		return m.derived.dir(m.repo, m.revision)
	}
	root := m.derived.root
	if root == "" {
		if m.derived.err != nil {
			return "", m.derived.err
		}
		return "", errors.New("no folder for the files derived from models")
	}
	if m.dir == "" {
		return filepath.Join(root, "default"), nil
	}
	h := sha256.Sum256([]byte(m.dir))
	return filepath.Join(root, "local", hex.EncodeToString(h[:8])), nil
}

// VariantPath returns where the derived variant of the canonical graph
// name (TextModelFile or VisionModelFile) is kept.
func (m *Model) VariantPath(variant, name string) (string, error) {
	dir, err := m.variantDir()
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	return filepath.Join(dir, filepath.FromSlash(variantName(name, variant))), nil
}

// sourceStamp describes the graph the model serves now under the
// canonical name: its size and modification time, or, for the embedded
// model, its hash.
func (m *Model) sourceStamp(name string) (VariantStamp, error) { return m.stampIn(m.fsys, name) }

// stampIn is sourceStamp of the file name in fsys: the model's overlay
// (what it serves now) or its base (its own files).
func (m *Model) stampIn(fsys fs.FS, name string) (VariantStamp, error) {
	st := VariantStamp{Source: m.Path(name), Graph: name}
	if m.dir == "" && !m.isHub() {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return st, err
		}
		h := sha256.Sum256(b)
		st.Size, st.SHA256 = int64(len(b)), hex.EncodeToString(h[:])
		return st, nil
	}
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return st, err
	}
	st.Size, st.ModTimeNanos = fi.Size(), fi.ModTime().UnixNano()
	return st, nil
}

func sameSource(a, b VariantStamp) bool {
	return a.Size == b.Size && a.ModTimeNanos == b.ModTimeNanos && a.SHA256 == b.SHA256
}

// derivedVariant returns the derived variant of the canonical graph name
// when the cache holds one made from the graph the model serves now (an
// int8 one by the scheme the variant names now); why says why not
// otherwise, and stale whether it was made by another scheme.
func (m *Model) derivedVariant(variant, name string) (path string, ok bool, why string, stale bool) {
	p, err := m.VariantPath(variant, name)
	if err != nil {
		return "", false, err.Error(), false
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return p, false, fmt.Sprintf("no %s in the derived cache", p), false
	}
	b, err := os.ReadFile(p + ".json")
	if err != nil {
		return p, false, fmt.Sprintf("%s has no stamp %s.json", p, p), false
	}
	var saved VariantStamp
	if err := json.Unmarshal(b, &saved); err != nil {
		return p, false, fmt.Sprintf("%s.json: %v", p, err), false
	}
	now, err := m.sourceStamp(name)
	if err != nil {
		return p, false, err.Error(), false
	}
	if !sameSource(saved, now) {
		return p, false, fmt.Sprintf("%s was made from another version of %s", p, now.Source), false
	}
	if old := staleScheme(saved); old != "" {
		return p, false, fmt.Sprintf("%s was made by the quantization scheme %s, not %s", p, old, Int8Scheme(variant)), true
	}
	return p, true, "", false
}

// VariantReport returns the report stored with the derived variant of the
// canonical graph name (what the rewrite did and how it was checked: for
// VariantOptimized and VariantOptimizedInt8 a clip.Optimized in JSON) when
// this program's cache holds one made from the model's graph as it is now;
// ok is false otherwise. The model may serve another variant, or a mapped
// copy of its graph: the stamp is compared with the model's own file.
func (m *Model) VariantReport(variant, name string) (report json.RawMessage, ok bool) {
	p, err := m.VariantPath(variant, name)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(p + ".json")
	if err != nil {
		return nil, false
	}
	var saved VariantStamp
	if json.Unmarshal(b, &saved) != nil || len(saved.Report) == 0 || staleScheme(saved) != "" {
		return nil, false
	}
	if _, err := os.Stat(p); err != nil {
		return nil, false
	}
	now, err := m.stampIn(m.base, name)
	if err != nil || !sameSource(saved, now) {
		return nil, false
	}
	return saved.Report, true
}

// ErrNoVariant is matched (errors.Is) by the error of opening a model with
// a derived variant (VariantOptimized, VariantOptimizedInt8) that this
// program's cache does not hold yet.
var ErrNoVariant = errors.New("models: variant not made yet")

// useDerivedVariants points the canonical graphs at the derived variant
// asked for (an error when the cache does not hold both graphs' variants),
// or, with no variant asked for, at the optimized variant when the cache
// holds it for both graphs.
func (m *Model) useDerivedVariants(variant string) error {
	auto := variant == ""
	if auto {
		variant = VariantOptimized
	}
	paths := map[string]string{}
	for _, g := range []string{TextModelFile, VisionModelFile} {
		if !m.Has(g) {
			continue
		}
		p, ok, why, stale := m.derivedVariant(variant, g)
		if !ok {
			if auto {
				return nil
			}
			sentinel := ErrNoVariant
			if stale {
				sentinel = ErrStaleScheme
			}
			return fmt.Errorf("models: model %s has no %s variant of %s: %s (variants of this kind are made from the model's own graphs and kept in this program's cache): %w", m.where(), variant, g, why, sentinel)
		}
		paths[g] = p
	}
	if len(paths) == 0 {
		return nil
	}
	for g, p := range paths {
		m.alias[g], m.extra[g] = variantName(g, variant), p
	}
	m.variant = variant
	if auto && m.log != nil {
		m.log.Info("using the optimized graphs of the model (from the derived cache; the variant plain gives the original ones)", "model", m.ref,
			"text", paths[TextModelFile], "vision", paths[VisionModelFile])
	}
	return nil
}

// SaveVariant stores the derived variant of the canonical graph name in
// the derived cache: write is called once with the destination (a
// temporary file renamed into place when write returns nil), then the
// stamp is written beside it with report. The model then serves it. It
// returns the graph's path.
func (m *Model) SaveVariant(variant, name string, report any, write func(w io.Writer) error) (string, error) {
	if !IsDerivedVariant(variant) {
		return "", fmt.Errorf("models: %q is not a variant this program derives", variant)
	}
	st, err := m.sourceStamp(name)
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	p, err := m.VariantPath(variant, name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	if err := tensorio.WriteFileAtomic(p, write); err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	st.Variant = variant
	st.Scheme = Int8Scheme(variant)
	if report != nil {
		if st.Report, err = json.Marshal(report); err != nil {
			return "", fmt.Errorf("models: %w", err)
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	if err := tensorio.WriteFileAtomic(p+".json", func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	return p, nil
}

// DerivedGraph is one graph of a derived variant in this program's cache.
type DerivedGraph struct {
	Variant string `json:"variant"`
	Graph   string `json:"graph"` // canonical name
	Path    string `json:"path"`
	// Scheme is an int8 variant's quantization scheme (Int8SchemePerRow,
	// Int8SchemePerCall, Int8SchemeStatic), as its stamp says.
	Scheme string `json:"scheme,omitempty"`
	// Usable: made from the graph the model has now (and, for an int8
	// variant, by the scheme the variant names now); Why says why not.
	Usable bool   `json:"usable"`
	Why    string `json:"why,omitempty"`
}

// DerivedGraphs lists the derived variants this program's cache holds for
// the model's own graphs.
func (m *Model) DerivedGraphs() []DerivedGraph {
	var out []DerivedGraph
	for _, v := range []string{VariantOptimized, VariantOptimizedInt8, VariantOptimizedInt8PerCall, VariantOptimizedInt8Static} {
		for _, g := range []string{TextModelFile, VisionModelFile} {
			p, err := m.VariantPath(v, g)
			if err != nil {
				return nil
			}
			if _, err := os.Stat(p); err != nil {
				continue
			}
			d := DerivedGraph{Variant: v, Graph: g, Path: p}
			var saved VariantStamp
			if b, err := os.ReadFile(p + ".json"); err == nil && json.Unmarshal(b, &saved) == nil && IsInt8Variant(v) {
				d.Scheme = saved.Scheme
				if d.Scheme == "" {
					d.Scheme = Int8SchemePerCall
				}
			}
			_, d.Usable, d.Why, _ = m.derivedVariant(v, g)
			out = append(out, d)
		}
	}
	return out
}
