// Package models resolves model references and reads models in the Hugging
// Face layout (config.json, preprocessor_config.json, tokenizer files,
// onnx/text_model.onnx, onnx/vision_model.onnx, model.safetensors).
//
// A reference is a directory, a hub id "org/name[@revision]" (resolved in the
// local Hugging Face cache), or "default", the small model built into the
// binary.
package models

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Well-known file names inside a model.
const (
	ConfigFile       = "config.json"
	PreprocessorFile = "preprocessor_config.json"
	TextModelFile    = "onnx/text_model.onnx"
	VisionModelFile  = "onnx/vision_model.onnx"
	WeightsFile      = "model.safetensors"
)

// DefaultRef is the reference of the model built into the binary.
const DefaultRef = "default"

// Options controls Open.
type Options struct {
	// HubCache overrides the Hugging Face hub cache folder (default:
	// HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub).
	HubCache string
}

// Model is an opened model: its files and its parsed config.json.
type Model struct {
	ref      string
	dir      string // "" for the embedded model
	revision string // the hub commit, for hub references
	fsys     fs.FS
	config   Config
}

// Open resolves ref and reads the model's config.json.
func Open(ref string, opts Options) (*Model, error) {
	if ref == "" {
		return nil, errors.New("models: empty model reference (give a directory, org/name[@revision], or default)")
	}
	m := &Model{ref: ref}
	switch {
	case ref == DefaultRef:
		fsys, err := defaultFS()
		if err != nil {
			return nil, err
		}
		m.fsys = fsys
	case isDir(ref):
		abs, err := filepath.Abs(ref)
		if err != nil {
			return nil, fmt.Errorf("models: %s: %w", ref, err)
		}
		m.dir, m.fsys = abs, os.DirFS(abs)
	case hubRef.MatchString(ref):
		dir, rev, err := resolveHub(ref, opts)
		if err != nil {
			return nil, err
		}
		m.dir, m.revision, m.fsys = dir, rev, os.DirFS(dir)
	default:
		if _, err := os.Stat(ref); err == nil {
			return nil, fmt.Errorf("models: %s is a file; a model is a directory (with %s, %s, ...)", ref, ConfigFile, TextModelFile)
		}
		return nil, fmt.Errorf("models: %q: no such directory, and not a hub id of the form org/name[@revision]", ref)
	}
	b, err := m.ReadFile(ConfigFile)
	if err != nil {
		return nil, err
	}
	if m.config, err = ParseConfig(b); err != nil {
		return nil, fmt.Errorf("models: %s: %s: %w", m.Name(), ConfigFile, err)
	}
	return m, nil
}

// FromFS opens a model held in an fs.FS (for example one embedded with
// go:embed); name is used in errors.
func FromFS(fsys fs.FS, name string) (*Model, error) {
	m := &Model{ref: name, fsys: fsys}
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

// FS returns the model's files, named with forward slashes relative to its root.
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
			return nil, fmt.Errorf("models: model %s has no %s: %w", m.where(), name, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("models: model %s: %s: %w", m.where(), name, err)
	}
	return b, nil
}

// Path returns a display path for one of the model's files: a path on disk
// when the model is on disk, else "<model>:<name>".
func (m *Model) Path(name string) string {
	if m.dir != "" {
		return filepath.Join(m.dir, filepath.FromSlash(name))
	}
	return m.ref + ":" + name
}

func (m *Model) where() string {
	if m.dir != "" && m.dir != m.ref {
		return fmt.Sprintf("%s (%s)", m.ref, m.dir)
	}
	return m.ref
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

var hubRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(@[A-Za-z0-9_./-]+)?$`)

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// HubCacheDir returns the Hugging Face hub cache folder: HF_HUB_CACHE, else
// HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
func HubCacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HUGGINGFACE_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// resolveHub finds org/name[@revision] in the local hub cache layout:
// <cache>/models--org--name/refs/<revision> holds a commit, whose files are
// in snapshots/<commit>/. Downloading is not implemented yet.
func resolveHub(ref string, opts Options) (dir, commit string, err error) {
	id, rev, _ := strings.Cut(ref, "@")
	if rev == "" {
		rev = "main"
	}
	cache := opts.HubCache
	if cache == "" {
		cache = HubCacheDir()
	}
	repo := filepath.Join(cache, "models--"+strings.ReplaceAll(id, "/", "--"))
	notCached := func(why string) error {
		return fmt.Errorf("models: hub model %s@%s is not in the local Hugging Face cache (%s: %s); downloading from the hub is not supported yet: "+
			"download it (for example with `huggingface-cli download %s`) or pass the model's directory", id, rev, repo, why, id)
	}
	commit = rev
	if !commitRE.MatchString(rev) {
		b, err := os.ReadFile(filepath.Join(repo, "refs", filepath.FromSlash(path.Clean(rev))))
		if err != nil {
			return "", "", notCached("no refs/" + rev)
		}
		commit = strings.TrimSpace(string(b))
		if !commitRE.MatchString(commit) {
			return "", "", fmt.Errorf("models: hub model %s: refs/%s holds %q, not a commit hash", id, rev, commit)
		}
	}
	dir = filepath.Join(repo, "snapshots", commit)
	if !isDir(dir) {
		return "", "", notCached("no snapshots/" + commit)
	}
	return dir, commit, nil
}
