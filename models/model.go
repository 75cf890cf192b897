package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/models/hub"
)

// Model is an opened model: its files and its parsed config.json.
type Model struct {
	ref      string
	dir      string // "" for the embedded model
	revision string // the hub commit, for hub references
	repo     string // org/name for hub references
	fsys     fs.FS
	base     fs.FS             // the folder, before aliases
	alias    map[string]string // canonical name → name in base (or in the derived cache)
	extra    map[string]string // canonical name → file on disk outside the folder
	weights  string            // where the heads come from, when not the model itself
	variant  string
	hub      *hub.Client
	derived  derivedCache // files made from hub models
	config   Config
	family   Family
	log      *slog.Logger      // nil: silent
	listed   map[string]bool   // a hub model's files, when the hub was asked for them by this Open
	built    bool              // the graphs are those built from the safetensors
	noGraphs error             // why a model without graphs got none built, for errors
	virtual  map[string][]byte // canonical name → a file made in memory (OpenCLIP's layout)
	openCLIP bool              // the folder is in OpenCLIP's layout
	// openAIBPE: the tokenizer is OpenCLIP's built-in CLIP BPE;
	// noTokenizer: why a model in OpenCLIP's layout has none (OpenAIBPE).
	openAIBPE   bool
	noTokenizer error
}

// Open resolves ref and reads the model's config.json. Hub models missing
// from the cache are downloaded (see OpenContext).
func Open(ref string, opts Options) (*Model, error) {
	return OpenContext(context.Background(), ref, opts)
}

// OpenContext is Open with a context bounding any download. When a hub id
// cannot be opened and it looks like a path (./, ../, /, ~, more parts than
// org/name, or a first part that is a folder here), or the repository could
// not be found (not cached and offline, unknown to the hub, the hub out of
// reach), the error gives both readings: "no folder mymodels/clip (mymodels
// has no clip); as a hub id: ...". It wraps the hub's error.
func OpenContext(ctx context.Context, ref string, opts Options) (*Model, error) {
	model, weights, err := SplitRef(ref)
	if err != nil {
		return nil, err
	}
	if weights != "" && opts.Weights != "" {
		return nil, fmt.Errorf("models: %q names its weights after +, and weights %q were given too", ref, opts.Weights)
	}
	if weights == "" {
		weights = opts.Weights
	}
	r, err := ParseRef(model)
	if err != nil {
		return nil, err
	}
	variant := strings.TrimPrefix(opts.Variant, "_")
	// Derived variants are looked up once the model's own graphs are known;
	// with no variant asked for, an optimized one is used when present.
	derived := variant
	if IsDerivedVariant(variant) || variant == VariantPlain {
		variant = ""
	}
	m := &Model{ref: model, variant: variant, weights: weights, alias: map[string]string{}, extra: map[string]string{},
		derived: newDerivedCache(opts), log: opts.Logger}
	switch {
	case r.Default:
		fsys, err := defaultFS()
		if err != nil {
			return nil, err
		}
		m.base = fsys
	case r.Dir != "":
		abs, err := filepath.Abs(r.Dir)
		if err != nil {
			return nil, fmt.Errorf("models: %s: %w", r.Dir, err)
		}
		m.dir, m.base = abs, os.DirFS(abs)
	default:
		if err := m.openHub(ctx, r.Hub, opts); err != nil {
			return nil, withFolderReading(model, err)
		}
	}
	m.fsys = overlay{m}
	if err := m.pickGraphs(); err != nil {
		return nil, err
	}
	if err := m.openCLIPLayout(); err != nil {
		return nil, err
	}
	b, err := m.ReadFile(ConfigFile)
	if err != nil {
		return nil, err
	}
	if m.config, err = ParseConfig(b); err != nil {
		return nil, fmt.Errorf("models: %s: %s: %w", m.Name(), ConfigFile, err)
	}
	if err := m.setFamily(); err != nil {
		return nil, err
	}
	// No graphs of its own: those built from its safetensors, made once.
	if err := m.buildOnOpen(ctx, opts); err != nil {
		return nil, err
	}
	if variant == "" && derived != VariantPlain {
		if err := m.useDerivedVariants(derived); err != nil {
			return nil, err
		}
	}
	if weights != "" {
		if err := m.openWeights(ctx, weights, opts); err != nil {
			return nil, err
		}
	} else if m.repo != "" && !m.openCLIP && !fsHas(m.base, WeightsFile) && m.extra[WeightsFile] == "" {
		cache := m.hub.Cache()
		if p, ok := cachedHeads(cache, m.derived, m.repo, m.revision); ok {
			m.extra[WeightsFile] = p
		} else if m.listed[WeightsFile] || m.listed == nil && !m.hub.Offline && !cache.NoExist(m.repo, m.revision, WeightsFile) {
			// Projection heads from the repository's own model.safetensors
			// (when the listing has it; from a cached snapshot, when the hub
			// has not said it is absent: a 404 is recorded).
			p, err := fetchHeads(ctx, m.hub, m.derived, m.repo, m.revision, m.revision, opts.MaxWeightsDownload)
			switch {
			case m.listed == nil && errors.Is(err, hub.ErrEntryNotFound):
			case err != nil:
				return nil, err
			case filepath.Base(p) == HeadsFile:
				m.extra[WeightsFile] = p
			}
		}
	}
	return m, nil
}

// FromFS opens a model held in an fs.FS (for example one embedded with
// go:embed); name is used in errors.
func FromFS(fsys fs.FS, name string) (*Model, error) {
	m := &Model{ref: name, base: fsys, alias: map[string]string{}, extra: map[string]string{}}
	m.fsys = overlay{m}
	b, err := m.ReadFile(ConfigFile)
	if err != nil {
		return nil, err
	}
	if m.config, err = ParseConfig(b); err != nil {
		return nil, fmt.Errorf("models: %s: %s: %w", name, ConfigFile, err)
	}
	if err := m.setFamily(); err != nil {
		return nil, err
	}
	return m, nil
}

// Name returns the reference the model was opened with.
func (m *Model) Name() string { return m.ref }

// Dir returns the model's folder on disk, or "" for a model that is not on
// disk (the embedded default).
func (m *Model) Dir() string { return m.dir }

// Revision returns the hub commit of a hub reference, or "".
func (m *Model) Revision() string { return m.revision }

// Repo returns org/name for a hub reference, or "".
func (m *Model) Repo() string { return m.repo }

// Variant returns the graph variant asked for ("" for the plain graphs).
func (m *Model) Variant() string { return m.variant }

// WeightsSource returns the reference the projection heads come from when it
// is not the model itself, else "".
func (m *Model) WeightsSource() string { return m.weights }

// FS returns the model's files, named with forward slashes relative to its
// root; the graphs and weights under their canonical names.
func (m *Model) FS() fs.FS { return m.fsys }

// Config returns the parsed config.json.
func (m *Model) Config() Config { return m.config }

// Has reports whether the model has the file name.
func (m *Model) Has(name string) bool {
	fi, err := fs.Stat(m.fsys, name)
	return err == nil && !fi.IsDir()
}

// ReadFile reads one of the model's files. A missing file is an error that
// names the file and the model, and wraps fs.ErrNotExist.
func (m *Model) ReadFile(name string) ([]byte, error) {
	b, err := fs.ReadFile(m.fsys, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if m.noGraphs != nil && (name == TextModelFile || name == VisionModelFile) {
				return nil, fmt.Errorf("models: model %s has no %s: %w: %w", m.where(), m.describe(name), m.noGraphs, fs.ErrNotExist)
			}
			return nil, fmt.Errorf("models: model %s has no %s: %w", m.where(), m.describe(name), fs.ErrNotExist)
		}
		return nil, fmt.Errorf("models: model %s: %s: %w", m.where(), name, err)
	}
	return b, nil
}

// Path returns a display path for one of the model's files: a path on disk
// when the model is on disk, else "<model>:<name>".
func (m *Model) Path(name string) string {
	if p, ok := m.extra[name]; ok {
		return p
	}
	if _, ok := m.virtual[name]; ok {
		return fmt.Sprintf("%s (%s, made from %s)", name, m.where(), OpenCLIPConfigFile)
	}
	real := name
	if a, ok := m.alias[name]; ok {
		real = a
	}
	if m.dir != "" {
		return filepath.Join(m.dir, filepath.FromSlash(real))
	}
	return m.ref + ":" + real
}

// Source returns the name of the model's file that serves the canonical
// name (the variant or exposed graph; a hub model's exposed graph is kept in
// the derived cache, see Path), or "" when the file is not one of the
// model's own (heads from another model, or read by ranges).
func (m *Model) Source(name string) string {
	if a, ok := m.alias[name]; ok {
		return a
	}
	if _, ok := m.extra[name]; ok {
		return ""
	}
	return name
}

func (m *Model) describe(name string) string {
	if a, ok := m.alias[name]; ok {
		return fmt.Sprintf("%s (%s)", name, a)
	}
	if name == TextModelFile || name == VisionModelFile {
		if m.variant != "" {
			return fmt.Sprintf("%s (variant %s: %s)", name, m.variant, variantName(name, m.variant))
		}
	}
	return name
}

func (m *Model) where() string {
	if m.dir != "" && m.dir != m.ref {
		return fmt.Sprintf("%s (%s)", m.ref, m.dir)
	}
	return m.ref
}

// overlay serves a model's folder with its aliases and extra files.
type overlay struct{ m *Model }

func (o overlay) Open(name string) (fs.File, error) {
	if b, ok := o.m.virtual[name]; ok {
		return newMemFile(name, b), nil
	}
	if p, ok := o.m.extra[name]; ok {
		f, err := os.Open(p)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return f, nil
	}
	if a, ok := o.m.alias[name]; ok {
		name = a
	}
	return o.m.base.Open(name)
}

// Files lists the files the model uses under their canonical names, with
// where each comes from (for display).
func (m *Model) Files() map[string]string {
	out := map[string]string{}
	for _, n := range []string{ConfigFile, PreprocessorFile, "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "spiece.model", "tokenizer.model", TextModelFile, VisionModelFile, WeightsFile} {
		if m.Has(n) {
			out[n] = m.Path(n)
		}
	}
	return out
}
