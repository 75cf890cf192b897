// Package ort finds and loads the ONNX Runtime shared library and runs ONNX
// graphs on it. It is the only package of the project that talks to
// github.com/yalue/onnxruntime_go. Package ortinstall installs the library
// where Load finds it.
//
// ONNX Runtime is loaded once per process. Load looks for the library in this
// order:
//
//  1. the path given by the caller (the --ort-lib flag);
//  2. ONNXRUNTIME_SHARED_LIBRARY_PATH;
//  3. beside the executable, then in ../lib relative to it;
//  4. the user cache folder where ortinstall puts it
//     (os.UserCacheDir()/condition/onnxruntime/<version>/);
//  5. the system library folders;
//  6. the bare soname (the dynamic loader's own search: LD_LIBRARY_PATH, ld.so.cache).
//
// A library older than MinVersion is skipped. When nothing loads, the error
// lists every place tried and says how to install the library. The package
// logs nothing unless given a logger (LoadOptions.Logger); Inspect and
// NewSession, when nothing is loaded yet, load ONNX Runtime with the default
// search and no logger.
package ort

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	onnx "github.com/yalue/onnxruntime_go"
)

// MinVersion is the oldest ONNX Runtime that onnxruntime_go v1.27.0 works with
// (it asks for ORT API version 24).
const MinVersion = "1.24.0"

// InstallVersion is the ONNX Runtime version ortinstall installs by default,
// and the first version Load looks for in the user cache folder.
const InstallVersion = "1.30.0"

// ManifestName is the file ortinstall writes beside the library in a version
// folder of the user cache folder.
const ManifestName = "INSTALL.json"

// EnvLibraryPath is the environment variable naming the library file.
const EnvLibraryPath = "ONNXRUNTIME_SHARED_LIBRARY_PATH"

// Where a candidate library came from, in search order.
const (
	SourceFlag       = "flag"
	SourceEnv        = "env"
	SourceExecutable = "executable"
	SourceCache      = "cache"
	SourceSystem     = "system"
	SourceSoname     = "soname"
)

// installHint is appended to errors when no usable library was found.
const installHint = "install it (install.Runtime, package models/install) or point " + EnvLibraryPath + " at a libonnxruntime " + MinVersion + " or newer"

// Attempt is one place Load looked at, and what it found there.
type Attempt struct {
	Source string `json:"source"`
	Path   string `json:"path"`
	// Result is "loaded", or why the candidate was not used
	// ("not found", "version 1.17.1 is older than 1.24.0", a loader error).
	Result string `json:"result"`
}

// Runtime describes the ONNX Runtime library loaded in this process.
type Runtime struct {
	Path    string    `json:"path"`    // the file (or bare soname) that was loaded
	Source  string    `json:"source"`  // one of the Source constants
	Version string    `json:"version"` // as the library reports it, e.g. "1.30.0"
	Tried   []Attempt `json:"tried"`   // every candidate looked at, in order, ending with the one loaded
}

// LoadOptions controls Load.
type LoadOptions struct {
	// LibPath is an explicit library file (the --ort-lib flag). When set, it
	// is the only candidate: if it cannot be loaded, Load fails.
	LibPath string
	// Logger receives one Info line naming the library used, and Debug lines
	// for candidates that were skipped. Nil means nothing is logged.
	Logger *slog.Logger
	// CacheDir overrides the install root (default DefaultCacheDir()).
	CacheDir string
}

var (
	loadMu sync.Mutex
	loaded *Runtime
)

// NotFoundError is returned by Load when no usable library was found.
type NotFoundError struct {
	Tried []Attempt
}

// NotFoundAs, when set, is NotFoundError's As: it lets errors.As find a
// NotFoundError as a public package's own type (models sets it).
var NotFoundAs func(e *NotFoundError, target any) bool

// As converts e to target's type through NotFoundAs.
func (e *NotFoundError) As(target any) bool { return NotFoundAs != nil && NotFoundAs(e, target) }

func (e *NotFoundError) Error() string {
	var b strings.Builder
	b.WriteString("ort: no usable ONNX Runtime library (need version ")
	b.WriteString(MinVersion)
	b.WriteString(" or newer); tried:")
	for _, a := range e.Tried {
		fmt.Fprintf(&b, "\n  %-10s %s: %s", a.Source, a.Path, a.Result)
	}
	b.WriteString("\n")
	b.WriteString(installHint)
	return b.String()
}

// Loaded returns the library loaded in this process, or nil.
func Loaded() *Runtime {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded == nil {
		return nil
	}
	r := *loaded
	return &r
}

// Load finds and loads ONNX Runtime and initialises its environment, logging
// to opts.Logger, if set, which library it used and why it skipped others. It is
// safe to call more than once: later calls return the library already loaded,
// unless they ask for a different explicit LibPath, which is an error (one
// process holds one ONNX Runtime).
func Load(opts LoadOptions) (*Runtime, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded != nil {
		if opts.LibPath != "" && !samePath(opts.LibPath, loaded.Path) {
			return nil, fmt.Errorf("ort: ONNX Runtime is already loaded from %s; cannot also load %s in the same process", loaded.Path, opts.LibPath)
		}
		r := *loaded
		return &r, nil
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cands := Candidates(opts)
	var tried []Attempt
	for _, c := range cands {
		res, ver, ok := tryLoad(c)
		tried = append(tried, Attempt{Source: c.Source, Path: c.Path, Result: res})
		if !ok {
			log.Debug("onnxruntime: skipped", "source", c.Source, "path", c.Path, "reason", res)
			// An explicit choice that fails is final: do not silently use another library.
			if c.Source == SourceFlag || c.Source == SourceEnv {
				return nil, &NotFoundError{Tried: tried}
			}
			continue
		}
		loaded = &Runtime{Path: c.Path, Source: c.Source, Version: ver, Tried: tried}
		log.Info("onnxruntime: loaded", "version", ver, "path", c.Path, "source", c.Source)
		r := *loaded
		return &r, nil
	}
	return nil, &NotFoundError{Tried: tried}
}

// Candidate is one place to look for the library.
type Candidate struct {
	Source string
	Path   string
}

// Candidates lists, in order, the places Load looks at for these options.
func Candidates(opts LoadOptions) []Candidate {
	if opts.LibPath != "" {
		return []Candidate{{SourceFlag, opts.LibPath}}
	}
	if p := os.Getenv(EnvLibraryPath); p != "" {
		return []Candidate{{SourceEnv, p}}
	}
	var out []Candidate
	names := libNames()
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		dir := filepath.Dir(exe)
		for _, d := range []string{dir, filepath.Join(dir, "..", "lib")} {
			for _, n := range names {
				out = append(out, Candidate{SourceExecutable, filepath.Clean(filepath.Join(d, n))})
			}
		}
	}
	root := opts.CacheDir
	if root == "" {
		root, _ = DefaultCacheDir()
	}
	if root != "" {
		vs := cachedVersions(root)
		if len(vs) == 0 || vs[0] != InstallVersion {
			vs = append([]string{InstallVersion}, vs...) // listed even when absent, so errors show it
		}
		for _, v := range vs {
			out = append(out, Candidate{SourceCache, filepath.Join(root, v, InstalledLibName())})
		}
	}
	for _, d := range systemDirs() {
		for _, n := range names {
			out = append(out, Candidate{SourceSystem, filepath.Join(d, n)})
		}
	}
	for _, n := range names {
		out = append(out, Candidate{SourceSoname, n})
	}
	return out
}

// DefaultCacheDir returns os.UserCacheDir()/condition/onnxruntime, the
// folder ortinstall writes to and Load searches (one sub-folder per version).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("ort: user cache folder: %w", err)
	}
	return filepath.Join(d, "condition", "onnxruntime"), nil
}

// InstalledLibName returns the file name ortinstall gives the library in its
// version folder.
func InstalledLibName() string {
	if runtime.GOOS == "darwin" {
		return "libonnxruntime.dylib"
	}
	return "libonnxruntime.so.1"
}

// libNames are the file names tried in each folder, the soname first.
func libNames() []string {
	if runtime.GOOS == "darwin" {
		return []string{"libonnxruntime.dylib", "libonnxruntime.1.dylib"}
	}
	return []string{"libonnxruntime.so.1", "libonnxruntime.so"}
}

func systemDirs() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{"/opt/homebrew/lib", "/usr/local/lib"}
	case "linux":
		triple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
		dirs := []string{"/usr/local/lib"}
		if triple != "" {
			dirs = append(dirs, "/usr/local/lib/"+triple, "/usr/lib/"+triple, "/lib/"+triple)
		}
		return append(dirs, "/usr/lib64", "/usr/lib", "/lib64", "/lib")
	}
	return []string{"/usr/local/lib", "/usr/lib"}
}

// cachedVersions returns the version folders under root, InstallVersion
// first, then the others newest first. Folders starting with "." (staging
// folders of an install in progress) are ignored.
func cachedVersions(root string) []string {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var vs []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		if _, err := ParseVersion(n); err != nil {
			continue
		}
		vs = append(vs, n)
	}
	sort.Slice(vs, func(i, j int) bool {
		if (vs[i] == InstallVersion) != (vs[j] == InstallVersion) {
			return vs[i] == InstallVersion
		}
		a, _ := ParseVersion(vs[i])
		b, _ := ParseVersion(vs[j])
		return CompareVersions(a, b) > 0
	})
	return vs
}

// tryLoad loads one candidate. It returns the result text, the version and
// whether the library is now loaded and initialised.
func tryLoad(c Candidate) (result, version string, ok bool) {
	if strings.ContainsRune(c.Path, filepath.Separator) {
		fi, err := os.Stat(c.Path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "not found", "", false
			}
			return err.Error(), "", false
		}
		if fi.IsDir() {
			return "is a directory, not a library file", "", false
		}
	}
	// Probe first: it reads the version of any ONNX Runtime, however old,
	// without touching onnxruntime_go's process-wide state.
	ver, err := Probe(c.Path)
	if err != nil {
		return err.Error(), "", false
	}
	if err := checkVersion(ver); err != nil {
		return err.Error(), ver, false
	}
	onnx.SetSharedLibraryPath(c.Path)
	if err := onnx.InitializeEnvironment(onnx.WithLogLevelError()); err != nil {
		return "initialise: " + err.Error(), ver, false
	}
	return "loaded", onnx.GetVersion(), true
}

func checkVersion(ver string) error {
	v, err := ParseVersion(ver)
	if err != nil {
		return fmt.Errorf("reports version %q, which is not a version number", ver)
	}
	min, _ := ParseVersion(MinVersion)
	if CompareVersions(v, min) < 0 {
		return fmt.Errorf("version %s is older than %s", ver, MinVersion)
	}
	return nil
}

// Version is a parsed major.minor.patch version.
type Version [3]int

// ParseVersion parses "1.30.0" (a missing patch is 0; a suffix such as
// "-dev" after the patch is ignored).
func ParseVersion(s string) (Version, error) {
	var v Version
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(s, "-+ "); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("ort: bad version %q", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("ort: bad version %q", s)
		}
		v[i] = n
	}
	return v, nil
}

// CompareVersions returns -1, 0 or 1 as a is older than, equal to or newer than b.
func CompareVersions(a, b Version) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

func samePath(a, b string) bool {
	if a == b {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
