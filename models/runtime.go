package models

import (
	"log/slog"

	"github.com/conditionhq/condition/internal/ort"
)

// The ONNX Runtime this program runs on: at least RuntimeMinVersion, looked
// for in this order: RuntimeOptions.LibPath; the RuntimeEnv variable;
// beside the executable and in ../lib; the user cache folder, where
// install.Runtime (package models/install) puts it; the system library
// folders; the bare soname.
const (
	RuntimeMinVersion     = ort.MinVersion
	RuntimeInstallVersion = ort.InstallVersion // the version install.Runtime installs
	RuntimeEnv            = ort.EnvLibraryPath
)

// RuntimeOptions controls LoadRuntime: LibPath names the library file (the
// only candidate then), Logger hears which one was used and why others
// were skipped.
type RuntimeOptions struct {
	// LibPath is an explicit library file. When set, it is the only
	// candidate: if it cannot be loaded, LoadRuntime fails.
	LibPath string
	// Logger receives one Info line naming the library used, and Debug
	// lines for candidates that were skipped. Nil means nothing is logged.
	Logger *slog.Logger
	// CacheDir overrides the install root (default: the user cache folder).
	CacheDir string
}

// Runtime is the ONNX Runtime library loaded in this process: its version,
// path, where it was found (Source) and every place tried before it.
type Runtime struct {
	Path    string           `json:"path"`    // the file (or bare soname) that was loaded
	Source  string           `json:"source"`  // flag, env, executable, cache, system or soname
	Version string           `json:"version"` // as the library reports it, e.g. "1.30.0"
	Tried   []RuntimeAttempt `json:"tried"`   // every candidate looked at, in order, ending with the one loaded
}

// RuntimeAttempt is one place LoadRuntime looked at, and what it found
// there.
type RuntimeAttempt struct {
	Source string `json:"source"`
	Path   string `json:"path"`
	// Result is "loaded", or why the candidate was not used
	// ("not found", "version 1.17.1 is older than 1.24.0", a loader error).
	Result string `json:"result"`
}

// RuntimeNotFoundError is LoadRuntime's error when no usable library was
// found; Tried lists every place looked at and what was there. Opening a
// model's encoders without a library fails with it too (errors.As finds
// it).
type RuntimeNotFoundError struct {
	Tried []RuntimeAttempt
}

func (e *RuntimeNotFoundError) Error() string {
	nf := ort.NotFoundError{}
	for _, a := range e.Tried {
		nf.Tried = append(nf.Tried, ort.Attempt(a))
	}
	return nf.Error()
}

// runtimeNotFound converts the loader's error.
func runtimeNotFound(nf *ort.NotFoundError) *RuntimeNotFoundError {
	return &RuntimeNotFoundError{Tried: attempts(nf.Tried)}
}

func init() {
	// errors.As(err, &*RuntimeNotFoundError) finds the loader's error
	// wherever it comes from (a session opened without LoadRuntime first).
	ort.NotFoundAs = func(nf *ort.NotFoundError, target any) bool {
		p, ok := target.(**RuntimeNotFoundError)
		if ok {
			*p = runtimeNotFound(nf)
		}
		return ok
	}
}

// LoadRuntime finds and loads ONNX Runtime. Later calls return the library
// already loaded (one process holds one ONNX Runtime); asking then for
// another LibPath is an error. Opening a model's encoders loads it with the
// default search when nothing is loaded yet.
func LoadRuntime(opts RuntimeOptions) (*Runtime, error) {
	rt, err := ort.Load(ort.LoadOptions{LibPath: opts.LibPath, Logger: opts.Logger, CacheDir: opts.CacheDir})
	if nf, ok := err.(*ort.NotFoundError); ok {
		return nil, runtimeNotFound(nf)
	}
	if err != nil {
		return nil, err
	}
	return &Runtime{Path: rt.Path, Source: rt.Source, Version: rt.Version, Tried: attempts(rt.Tried)}, nil
}

// attempts converts the loader's attempts (nil stays nil).
func attempts(tried []ort.Attempt) []RuntimeAttempt {
	var out []RuntimeAttempt
	for _, a := range tried {
		out = append(out, RuntimeAttempt(a))
	}
	return out
}
