// Package models resolves model references and reads models in the Hugging
// Face layout (config.json, preprocessor_config.json, tokenizer files,
// onnx/text_model.onnx, onnx/vision_model.onnx, model.safetensors).
//
// A reference is
//
//   - a directory;
//   - a hub id "org/name[@revision]", looked up in the Hugging Face cache
//     (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub) and
//     fetched from the hub (HF_ENDPOINT, HF_TOKEN) into it when missing,
//     unless HF_HUB_OFFLINE is set;
//   - "default", the small model built into the binary;
//   - "<graphs>+<weights>": the ONNX graphs, configs and tokenizer from the
//     first (a directory or hub id), the projection heads (text_projection,
//     visual_projection, vision_model.post_layernorm, logit_scale) from the
//     model.safetensors of the second. Many ONNX exports ship no safetensors:
//     "Xenova/clip-vit-large-patch14+openai/clip-vit-large-patch14". Only the
//     heads are read from the second, with HTTP range requests when it is on
//     the hub: a 1.7 GB checkpoint is not downloaded for 3 MB of heads.
//
// ParseRef and SplitRef say which of these a string is; hub.ParseRef is the
// one authority on hub ids. A directory on disk wins over a hub id of the
// same spelling.
//
// Graphs fetched from the hub come with the files their initializers'
// external data point to (onnx/vision_model.onnx_data, ...), in the same
// snapshot folder, so that ONNX Runtime finds them beside the graph.
//
// Options.Variant picks graphs by suffix (onnx/text_model_fp16.onnx for
// "fp16"). A graph rewritten by Model.Expose (onnx/<name>.exposed.onnx,
// beside the original) is used in place of the original.
//
// Whatever the files' real names, the model's FS serves them under the
// canonical names: onnx/text_model.onnx, onnx/vision_model.onnx and
// model.safetensors.
package models

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/models/onnxgraph"
	"github.com/conditionhq/condition/tensorio"
)

// Well-known file names inside a model.
const (
	ConfigFile       = "config.json"
	PreprocessorFile = "preprocessor_config.json"
	TextModelFile    = "onnx/text_model.onnx"
	VisionModelFile  = "onnx/vision_model.onnx"
	WeightsFile      = "model.safetensors"
)

// HeadsFile is where the projection heads read out of a large
// model.safetensors are kept, in the cache snapshot of the repository they
// were read from: snapshots/<commit>/condition-heads.safetensors (a link
// into blobs/, like every file of the snapshot).
const HeadsFile = "condition-heads.safetensors"

// ExposedSuffix marks a graph rewritten by Expose: onnx/vision_model.onnx →
// onnx/vision_model.exposed.onnx.
const ExposedSuffix = ".exposed.onnx"

// HeadNames are the tensors of CLIPModel's joint-space heads.
var HeadNames = []string{
	"text_projection.weight",
	"visual_projection.weight",
	"vision_model.post_layernorm.weight",
	"vision_model.post_layernorm.bias",
	"logit_scale",
}

// SmallWeights is the default size up to which a model.safetensors on the
// hub is downloaded whole; a larger one has only its heads read, by ranges.
const SmallWeights = 64 << 20

// DefaultRef is the reference of the model built into the binary.
const DefaultRef = "default"

// Options controls Open.
type Options struct {
	// HubCache overrides the Hugging Face hub cache folder (default:
	// HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub).
	HubCache string
	// Offline never touches the network (as HF_HUB_OFFLINE=1 does).
	Offline bool
	// Update asks the hub which commit a branch is at even when the cache
	// already holds the model (by default a cached model is used as is).
	Update bool
	// Variant picks graphs by suffix: "fp16" → onnx/text_model_fp16.onnx.
	Variant string
	// Weights is a directory or hub id whose model.safetensors holds the
	// projection heads (the same as "<ref>+<weights>").
	Weights string
	// MaxWeightsDownload is the size up to which a model.safetensors on the
	// hub is downloaded whole (0: SmallWeights); past it only the heads are
	// read, with range requests.
	MaxWeightsDownload int64
	// Hub, when set, is the hub client to use (endpoint, token, HTTP client);
	// nil means hub.FromEnv(). HubCache, Offline, Progress and Logger are
	// applied to a copy of it.
	Hub *hub.Client
	// Progress, when set, is called as files download.
	Progress func(hub.Progress)
	// Logger receives a line per file fetched; nil discards.
	Logger *slog.Logger
}

// Model is an opened model: its files and its parsed config.json.
type Model struct {
	ref      string
	dir      string // "" for the embedded model
	revision string // the hub commit, for hub references
	repo     string // org/name for hub references
	fsys     fs.FS
	base     fs.FS             // the folder, before aliases
	alias    map[string]string // canonical name → name in base
	extra    map[string]string // canonical name → file on disk outside the folder
	weights  string            // where the heads come from, when not the model itself
	variant  string
	hub      *hub.Client
	config   Config
}

// Open resolves ref and reads the model's config.json. Hub models missing
// from the cache are downloaded (see OpenContext).
func Open(ref string, opts Options) (*Model, error) {
	return OpenContext(context.Background(), ref, opts)
}

// OpenContext is Open with a context bounding any download.
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
	m := &Model{ref: model, variant: variant, weights: weights, alias: map[string]string{}, extra: map[string]string{}}
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
			return nil, err
		}
	}
	m.fsys = overlay{m}
	if err := m.pickGraphs(); err != nil {
		return nil, err
	}
	b, err := m.ReadFile(ConfigFile)
	if err != nil {
		return nil, err
	}
	if m.config, err = ParseConfig(b); err != nil {
		return nil, fmt.Errorf("models: %s: %s: %w", m.Name(), ConfigFile, err)
	}
	if weights != "" {
		if err := m.openWeights(ctx, weights, opts); err != nil {
			return nil, err
		}
	} else if m.repo != "" && !fsHas(m.base, WeightsFile) && fsHas(m.base, HeadsFile) {
		m.extra[WeightsFile] = filepath.Join(m.dir, HeadsFile)
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
	real := name
	if a, ok := m.alias[name]; ok {
		real = a
	}
	if m.dir != "" {
		return filepath.Join(m.dir, filepath.FromSlash(real))
	}
	return m.ref + ":" + real
}

// Source returns the name under the model's folder that serves the canonical
// name (the variant or exposed graph), or "" when it comes from outside it.
func (m *Model) Source(name string) string {
	if _, ok := m.extra[name]; ok {
		return ""
	}
	if a, ok := m.alias[name]; ok {
		return a
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

// variantName returns the file of a graph variant: onnx/text_model.onnx with
// "fp16" → onnx/text_model_fp16.onnx.
func variantName(name, variant string) string {
	if variant == "" {
		return name
	}
	return strings.TrimSuffix(name, ".onnx") + "_" + variant + ".onnx"
}

func exposedName(name string) string { return strings.TrimSuffix(name, ".onnx") + ExposedSuffix }

// pickGraphs maps the canonical graph names to the variant asked for and to
// exposed rewrites, when there are.
func (m *Model) pickGraphs() error {
	found := 0
	for _, g := range []string{TextModelFile, VisionModelFile} {
		name := variantName(g, m.variant)
		if fsHas(m.base, exposedName(name)) {
			m.alias[g] = exposedName(name)
			found++
			continue
		}
		if fsHas(m.base, name) {
			found++
			if name != g {
				m.alias[g] = name
			}
		} else if name != g {
			m.alias[g] = name // so that errors name the variant's file
		}
	}
	if m.variant != "" && found == 0 {
		vs := Variants(m.base)
		return fmt.Errorf("models: model %s has no %s variant (%s, %s); variants present: %s",
			m.where(), m.variant, variantName(TextModelFile, m.variant), variantName(VisionModelFile, m.variant), listOrNone(vs))
	}
	return nil
}

var variantRE = regexp.MustCompile(`^onnx/(?:text|vision)_model(?:_([A-Za-z0-9]+))?\.onnx$`)

// Variants lists the graph variants present in a model folder ("" for the
// plain onnx/text_model.onnx and onnx/vision_model.onnx), sorted.
func Variants(fsys fs.FS) []string {
	ents, err := fs.ReadDir(fsys, "onnx")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, "onnx/"+e.Name())
	}
	return variantsOf(names)
}

func variantsOf(files []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		if sm := variantRE.FindStringSubmatch(f); sm != nil && !seen[sm[1]] {
			seen[sm[1]] = true
			out = append(out, sm[1])
		}
	}
	sort.Strings(out)
	return out
}

func listOrNone(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		if v == "" {
			v = `"" (plain)`
		}
		q[i] = v
	}
	return strings.Join(q, ", ")
}

func fsHas(fsys fs.FS, name string) bool {
	if fsys == nil {
		return false
	}
	fi, err := fs.Stat(fsys, name)
	return err == nil && !fi.IsDir()
}

// Ref is one model reference, classified.
type Ref struct {
	Default bool    // "default": the model built into the binary
	Dir     string  // a directory on disk, as given
	Hub     hub.Ref // a hub id, when neither of the above (Hub.Repo != "")
}

// ParseRef classifies one model reference (without "+<weights>", see
// SplitRef): "default" is the built-in model (write ./default for a folder
// of that name); a path that exists on disk is a directory, or an error when
// it is a file; anything else must be a hub id, org/name[@revision], as
// hub.ParseRef accepts. A folder org/name in the working directory is used
// rather than the hub repository of that name.
func ParseRef(s string) (Ref, error) {
	if s == "" {
		return Ref{}, errors.New("models: empty model reference (give a directory, org/name[@revision], or default)")
	}
	if s == DefaultRef {
		return Ref{Default: true}, nil
	}
	if fi, err := os.Stat(s); err == nil {
		if !fi.IsDir() {
			return Ref{}, fmt.Errorf("models: %s is a file; a model is a directory (with %s, %s, ...)", s, ConfigFile, TextModelFile)
		}
		return Ref{Dir: s}, nil
	}
	r, err := hub.ParseRef(s)
	if err != nil {
		return Ref{}, fmt.Errorf("models: %q: no such directory, and not a hub id: %w", s, err)
	}
	return Ref{Hub: r}, nil
}

// SplitRef splits "<model>+<weights>" into its two references, each a
// directory or a hub id (see ParseRef); weights is "" when s names no
// weights. A reference that exists on disk as it is, "+" and all, is not
// split; otherwise s is split at the first "+" that leaves two valid
// references (hub ids hold no "+", folder names may).
func SplitRef(s string) (model, weights string, err error) {
	if s == DefaultRef || !strings.Contains(s, "+") {
		return s, "", nil
	}
	if _, err := os.Stat(s); err == nil {
		return s, "", nil
	}
	var first error
	for i := 0; i < len(s); i++ {
		if s[i] != '+' {
			continue
		}
		a, b := s[:i], s[i+1:]
		_, errA := ParseRef(a) // an error for "" too
		_, errB := ParseRef(b)
		if errA == nil && errB == nil {
			return a, b, nil
		}
		if first == nil {
			first = errors.Join(errA, errB)
			if a == "" || b == "" {
				first = errors.New("one side is empty")
			}
		}
	}
	return "", "", fmt.Errorf("models: %q: expected <model>+<weights>, each a directory or org/name[@revision]: %w", s, first)
}

// HubCacheDir returns the Hugging Face hub cache folder: HF_HUB_CACHE, else
// HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
func HubCacheDir() string { return hub.CacheDirFromEnv() }

// HubClient returns the hub client Open uses for opts: opts.Hub or one from
// the environment, with the options' cache folder, offline mode, progress
// callback and logger applied to a copy.
func HubClient(opts Options) *hub.Client {
	var c hub.Client
	if opts.Hub != nil {
		c = *opts.Hub
	} else {
		c = *hub.FromEnv()
	}
	if opts.HubCache != "" {
		c.CacheDir = opts.HubCache
	}
	if opts.Offline {
		c.Offline = true
	}
	if opts.Progress != nil {
		c.Progress = opts.Progress
	}
	if opts.Logger != nil {
		c.Logger = opts.Logger
	}
	return &c
}

// optionalFiles are fetched with a hub model when the repository has them.
var optionalFiles = []string{
	PreprocessorFile, "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
}

// openHub resolves org/name[@revision] in the cache, fetching what is missing.
func (m *Model) openHub(ctx context.Context, r hub.Ref, opts Options) error {
	ref := r.String()
	c := HubClient(opts)
	m.hub, m.repo = c, r.Repo
	cache := c.Cache()
	graphs := []string{variantName(TextModelFile, m.variant), variantName(VisionModelFile, m.variant)}
	// A cached snapshot with the config and both graphs (or a record that a
	// graph does not exist), and the files holding the graphs' external
	// data, is used without asking the hub.
	if commit, err := cache.Commit(r.Repo, r.Rev()); err == nil && (!opts.Update || c.Offline) {
		missing := missingFromSnapshot(cache, r.Repo, commit, graphs)
		// Offline, a snapshot without graphs still serves its config and
		// tokenizer; asking for a missing graph then names it. A graph whose
		// external data is missing is an error: ONNX Runtime could not load it.
		if len(missing.files) == 0 || (c.Offline && !missing.config && len(missing.side) == 0) {
			m.revision, m.dir = commit, cache.SnapshotDir(r.Repo, commit)
			m.base = os.DirFS(m.dir)
			return nil
		}
		if c.Offline {
			return fmt.Errorf("models: HF_HUB_OFFLINE is set, and the cached %s@%s (%s) lacks %s; unset HF_HUB_OFFLINE to fetch it, or run `condition models fetch %s` where there is a network: %w",
				r.Repo, r.Rev(), cache.SnapshotDir(r.Repo, commit), strings.Join(missing.files, ", "), ref, hub.ErrOffline)
		}
	} else if c.Offline {
		return fmt.Errorf("models: HF_HUB_OFFLINE is set, and %s@%s is not in the Hugging Face cache %s (it needs %s); unset HF_HUB_OFFLINE to fetch it, or run `condition models fetch %s` where there is a network: %w",
			r.Repo, r.Rev(), c.CacheDir, ConfigFile+", "+strings.Join(graphs, ", "), ref, hub.ErrOffline)
	}
	info, err := c.ListFiles(ctx, r.Repo, r.Rev())
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	commit := info.Commit
	has := map[string]bool{}
	for _, f := range info.Files {
		has[f] = true
	}
	if !has[ConfigFile] {
		return fmt.Errorf("models: hub model %s@%s (commit %s) has no %s; is it a model in the Hugging Face layout?", r.Repo, r.Rev(), commit, ConfigFile)
	}
	var present []string
	for _, g := range graphs {
		if has[g] {
			present = append(present, g)
		} else {
			cache.MarkNoExist(r.Repo, commit, g)
		}
	}
	if len(present) == 0 && m.variant != "" {
		return fmt.Errorf("models: hub model %s@%s has no %s variant (%s, %s); graph variants present: %s",
			r.Repo, r.Rev(), m.variant, graphs[0], graphs[1], listOrNone(variantsOf(info.Files)))
	}
	fetch := func(f string) error {
		got, err := c.Download(ctx, r.Repo, commit, f)
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		if got.Downloaded && opts.Logger != nil {
			opts.Logger.Info("fetched", "repo", r.Repo, "file", f, "bytes", got.Size)
		}
		return nil
	}
	for _, f := range append([]string{ConfigFile}, present...) {
		if err := fetch(f); err != nil {
			return err
		}
	}
	// The files holding the graphs' external data, read from the graphs
	// themselves, beside them in the snapshot.
	for _, g := range present {
		side, err := sideFiles(cache, r.Repo, commit, g)
		if err != nil {
			return err
		}
		for _, f := range side {
			if !has[f] {
				return fmt.Errorf("models: hub model %s@%s (commit %s): %s keeps tensor data in %s, which the repository does not have",
					r.Repo, r.Rev(), commit, g, f)
			}
			if err := fetch(f); err != nil {
				return err
			}
		}
	}
	for _, f := range optionalFiles {
		if has[f] {
			if err := fetch(f); err != nil {
				return err
			}
		}
	}
	m.revision, m.dir = commit, cache.SnapshotDir(r.Repo, commit)
	m.base = os.DirFS(m.dir)
	// Projection heads from the repository's own model.safetensors.
	if has[WeightsFile] && m.weights == "" {
		p, err := fetchHeads(ctx, c, r.Repo, commit, commit, opts.MaxWeightsDownload)
		if err != nil {
			return err
		}
		if filepath.Base(p) == HeadsFile {
			m.extra[WeightsFile] = p
		}
	}
	return nil
}

// snapshotGaps is what a cached snapshot lacks for a model.
type snapshotGaps struct {
	config bool     // the config is missing
	side   []string // external-data files of cached graphs
	files  []string // everything missing, for messages
}

// missingFromSnapshot lists what repo@commit's snapshot lacks: the config,
// graphs neither cached nor recorded as absent, and the external-data files
// of the graphs it has.
func missingFromSnapshot(cache hub.Cache, repo, commit string, graphs []string) snapshotGaps {
	var g snapshotGaps
	if _, ok := cache.File(repo, commit, ConfigFile); !ok {
		g.config = true
		g.files = append(g.files, ConfigFile)
	}
	for _, name := range graphs {
		if _, ok := cache.File(repo, commit, name); !ok {
			if !cache.NoExist(repo, commit, name) {
				g.files = append(g.files, name)
			}
			continue
		}
		side, err := sideFiles(cache, repo, commit, name)
		if err != nil {
			what := fmt.Sprintf("the external data of %s (%v)", name, err)
			g.side = append(g.side, what)
			g.files = append(g.files, what)
			continue
		}
		for _, f := range side {
			if _, ok := cache.File(repo, commit, f); !ok {
				g.side = append(g.side, f)
				g.files = append(g.files, f)
			}
		}
	}
	return g
}

// sideFiles returns the files, as paths in the repository, that hold the
// external data of the cached graph repo@commit:graph: the locations its
// initializers name, relative to the graph's folder. Only the graph's
// framing is read (onnxgraph.ExternalDataFiles), not its tensors.
func sideFiles(cache hub.Cache, repo, commit, graph string) ([]string, error) {
	p, ok := cache.File(repo, commit, graph)
	if !ok {
		return nil, fmt.Errorf("models: %s@%s: %s is not in the cache", repo, commit, graph)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	locs, err := onnxgraph.ExternalDataFiles(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("models: %s@%s: %s: %w", repo, commit, graph, err)
	}
	out := make([]string, 0, len(locs))
	for _, l := range locs {
		if err := onnxgraph.CheckLocation(l); err != nil {
			return nil, fmt.Errorf("models: %s@%s: %s: %w", repo, commit, graph, err)
		}
		out = append(out, path.Join(path.Dir(graph), l))
	}
	return out, nil
}

// cachedHeads returns where the cache holds repo@commit's heads: its
// model.safetensors, or the heads read out of it by ranges.
func cachedHeads(cache hub.Cache, repo, commit string) (string, bool) {
	if p, ok := cache.File(repo, commit, WeightsFile); ok {
		return p, true
	}
	return cache.File(repo, commit, HeadsFile)
}

// fetchHeads makes the heads of repo's model.safetensors available at
// revision rev (commit, when known, is the commit rev is at; "" to ask the
// hub): the file itself when small or already cached, else the heads read by
// ranges into snapshots/<commit>/condition-heads.safetensors. It returns the
// path to read them from. The hub is asked about the file once (one HEAD
// request); the download or the range reads reuse that answer.
func fetchHeads(ctx context.Context, c *hub.Client, repo, rev, commit string, maxDownload int64) (string, error) {
	if maxDownload <= 0 {
		maxDownload = SmallWeights
	}
	cache := c.Cache()
	if commit != "" {
		if p, ok := cachedHeads(cache, repo, commit); ok {
			return p, nil
		}
	}
	at := rev
	if commit != "" {
		at = commit
	}
	if c.Offline {
		return "", fmt.Errorf("models: HF_HUB_OFFLINE is set, and neither %s nor its heads (%s) of %s@%s are in the cache: %w", WeightsFile, HeadsFile, repo, at, hub.ErrOffline)
	}
	meta, err := c.Metadata(ctx, repo, at, WeightsFile)
	if err != nil {
		return "", fmt.Errorf("models: weights %s@%s: %w", repo, at, err)
	}
	if commit == "" {
		if err := cache.WriteRef(repo, rev, meta.Commit); err != nil {
			return "", fmt.Errorf("models: %w", err)
		}
		if p, ok := cachedHeads(cache, repo, meta.Commit); ok {
			return p, nil
		}
	}
	if meta.Size >= 0 && meta.Size <= maxDownload {
		f, err := c.Fetch(ctx, meta)
		if err != nil {
			return "", fmt.Errorf("models: %w", err)
		}
		return f.Path, nil
	}
	isHead := map[string]bool{}
	for _, n := range HeadNames {
		isHead[n] = true
	}
	heads, err := c.ReadTensorsFunc(ctx, meta, func(n string) bool { return isHead[n] })
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	if len(heads) == 0 {
		return "", fmt.Errorf("models: %s@%s: %s has none of the heads (%s)", repo, meta.Commit, WeightsFile, strings.Join(HeadNames, ", "))
	}
	note := map[string]string{"format": "pt", "source": repo + "@" + meta.Commit + ":" + WeightsFile,
		"note": "projection heads read by condition with HTTP range requests"}
	p, err := cache.AddFile(repo, meta.Commit, HeadsFile, func(w io.Writer) error {
		b, err := tensorio.EncodeSafetensors(heads, note)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	return p, nil
}

// openWeights makes model.safetensors come from another model's heads.
func (m *Model) openWeights(ctx context.Context, ref string, opts Options) error {
	r, err := ParseRef(ref)
	if err != nil {
		return fmt.Errorf("models: weights: %w", err)
	}
	var p string
	switch {
	case r.Dir != "":
		p = filepath.Join(r.Dir, WeightsFile)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("models: weights %s have no %s: %w", ref, WeightsFile, fs.ErrNotExist)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		p = abs
	case r.Hub.Repo != "":
		c := m.hub
		if c == nil {
			c = HubClient(opts)
		}
		commit := ""
		if !opts.Update || c.Offline {
			if cm, err := c.Cache().Commit(r.Hub.Repo, r.Hub.Rev()); err == nil {
				commit = cm
			} else if c.Offline {
				return fmt.Errorf("models: HF_HUB_OFFLINE is set, and the weights %s@%s are not in the Hugging Face cache %s: %w", r.Hub.Repo, r.Hub.Rev(), c.CacheDir, hub.ErrOffline)
			}
		}
		if p, err = fetchHeads(ctx, c, r.Hub.Repo, r.Hub.Rev(), commit, opts.MaxWeightsDownload); err != nil {
			return err
		}
	default:
		return fmt.Errorf("models: weights %q: give a directory or org/name[@revision] with a %s", ref, WeightsFile)
	}
	m.extra[WeightsFile] = p
	m.weights = ref
	return m.checkHeads()
}

// checkHeads checks that the heads fit the model's config.
func (m *Model) checkHeads() error {
	f, err := os.Open(m.extra[WeightsFile])
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	h, err := tensorio.ReadSafetensorsHeader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("models: weights %s: %w", m.weights, err)
	}
	c := m.config
	for name, want := range map[string][2]int{
		"text_projection.weight":   {c.ProjectionDim, c.TextConfig.HiddenSize},
		"visual_projection.weight": {c.ProjectionDim, c.VisionConfig.HiddenSize},
	} {
		t, ok := h.Tensors[name]
		if !ok {
			continue
		}
		if len(t.Shape) != 2 || t.Shape[0] != want[0] || t.Shape[1] != want[1] {
			return fmt.Errorf("models: the weights %s do not fit %s: %s is %v, its config.json says [%d %d] (projection_dim × hidden_size)",
				m.weights, m.ref, name, t.Shape, want[0], want[1])
		}
	}
	return nil
}

// Exposed is what Expose did for one graph.
type Exposed struct {
	Graph   string          `json:"graph"`           // canonical name
	Source  string          `json:"source"`          // the file rewritten
	Written string          `json:"written"`         // the rewritten file ("" when nothing was needed)
	Already bool            `json:"already"`         // the graph already outputs last_hidden_state
	Walk    *onnxgraph.Walk `json:"walk,omitempty"`  // what the rewrite found
	Missing bool            `json:"missing"`         // the model has no such graph
	Error   string          `json:"error,omitempty"` // why it could not be rewritten
}

// Expose rewrites the model's graphs that output only pooled embeddings so
// that they also output last_hidden_state (see onnxgraph.Expose), saving
// each beside the original as onnx/<name>.exposed.onnx (for a hub model, in
// its cache snapshot, as a link into blobs/ like the downloaded files). The
// model then serves the rewritten graphs. Graphs that need no rewrite are
// left alone. An unrecognised graph is an error for that graph.
func (m *Model) Expose() ([]Exposed, error) {
	if m.dir == "" {
		return nil, fmt.Errorf("models: model %s is not on disk; expose works on a model directory or a hub model", m.ref)
	}
	var out []Exposed
	var errs []error
	for _, g := range []struct{ name, pooled string }{{TextModelFile, "text_embeds"}, {VisionModelFile, "image_embeds"}} {
		src := m.Source(g.name)
		e := Exposed{Graph: g.name, Source: src}
		if strings.HasSuffix(src, ExposedSuffix) {
			e.Already = true
			out = append(out, e)
			continue
		}
		b, err := fs.ReadFile(m.base, src)
		if errors.Is(err, fs.ErrNotExist) {
			e.Missing = true
			out = append(out, e)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("models: %w", err)
		}
		gm, err := onnxgraph.Parse(b)
		if err != nil {
			return out, fmt.Errorf("models: %s: %w", m.Path(g.name), err)
		}
		if _, ok := gm.Graph.Output(onnxgraph.HiddenName); ok {
			e.Already = true
			out = append(out, e)
			continue
		}
		name := exposedName(src)
		write := func(w io.Writer) error {
			walk, err := onnxgraph.Expose(gm, g.pooled, w)
			e.Walk = walk
			return err
		}
		var werr error
		if m.repo != "" && m.revision != "" && m.hub != nil {
			_, werr = m.hub.Cache().AddFile(m.repo, m.revision, name, write)
		} else {
			werr = tensorio.WriteFileAtomic(filepath.Join(m.dir, filepath.FromSlash(name)), write)
		}
		if werr != nil {
			e.Error = werr.Error()
			errs = append(errs, fmt.Errorf("models: expose %s: %w", m.Path(g.name), werr))
			out = append(out, e)
			continue
		}
		e.Written = filepath.Join(m.dir, filepath.FromSlash(name))
		m.alias[g.name] = name
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// Files lists the files the model uses under their canonical names, with
// where each comes from (for display).
func (m *Model) Files() map[string]string {
	out := map[string]string{}
	for _, n := range []string{ConfigFile, PreprocessorFile, "tokenizer.json", "vocab.json", "merges.txt", TextModelFile, VisionModelFile, WeightsFile} {
		if m.Has(n) {
			out[n] = m.Path(n)
		}
	}
	return out
}

// WeightsHeader parses the header of the model's model.safetensors once: the
// name, dtype, shape and byte range of every tensor, without reading the
// tensors (for listing which heads a model has, and their shapes). A missing
// file is an error naming the model that wraps fs.ErrNotExist.
func (m *Model) WeightsHeader() (*tensorio.Header, error) {
	_, h, closeFn, err := m.weightsFile()
	if err != nil {
		return nil, err
	}
	closeFn()
	return h, nil
}

// weightsFile opens model.safetensors and reads its header; the caller
// reads tensors through ra and then calls closeFn.
func (m *Model) weightsFile() (ra io.ReaderAt, h *tensorio.Header, closeFn func(), err error) {
	f, err := m.fsys.Open(WeightsFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil, fmt.Errorf("models: model %s has no %s: %w", m.where(), WeightsFile, fs.ErrNotExist)
		}
		return nil, nil, nil, fmt.Errorf("models: model %s: %w", m.where(), err)
	}
	fail := func(err error) (io.ReaderAt, *tensorio.Header, func(), error) {
		f.Close()
		return nil, nil, nil, fmt.Errorf("models: model %s: %s: %w", m.where(), WeightsFile, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	ra, ok := f.(io.ReaderAt)
	size := fi.Size()
	if !ok {
		b, err := io.ReadAll(f)
		if err != nil {
			return fail(err)
		}
		ra, size = bytes.NewReader(b), int64(len(b))
	}
	if h, err = tensorio.ReadSafetensorsHeader(ra, size); err != nil {
		return fail(err)
	}
	return ra, h, func() { f.Close() }, nil
}
