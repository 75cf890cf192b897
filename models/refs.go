package models

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/models/hub"
)

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
// rather than the hub repository of that name. A reference that is neither
// is an error that gives both readings: "no folder ./mymodels/clip
// (mymodels has no clip); as a hub id: ...".
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
		return Ref{}, &noFolderError{ref: s, err: err}
	}
	return Ref{Hub: r}, nil
}

// noFolderError is a reference that names no folder, with what reading it as
// a hub id gave: "no folder mymodels/clip (mymodels has no clip); as a hub
// id: ...". It wraps the hub reading's error.
type noFolderError struct {
	ref string
	err error
}

func (e *noFolderError) Error() string {
	return fmt.Sprintf("models: no folder %s%s; as a hub id: %s", e.ref, folderHint(e.ref), strings.TrimPrefix(e.err.Error(), "models: "))
}

func (e *noFolderError) Unwrap() error { return e.err }

// folderHint says what is wrong with ref read as a path: the folder nearest
// to it that exists and the first name it lacks, or that ~ is not expanded.
func folderHint(ref string) string {
	if strings.HasPrefix(ref, "~") {
		return " (~ is not expanded here: write the full path)"
	}
	p := filepath.Clean(ref)
	for {
		parent := filepath.Dir(p)
		if parent == p || parent == "." || parent == string(filepath.Separator) {
			return ""
		}
		if fi, err := os.Stat(parent); err == nil {
			if !fi.IsDir() {
				return fmt.Sprintf(" (%s is a file)", parent)
			}
			return fmt.Sprintf(" (%s has no %s)", parent, filepath.Base(p))
		}
		p = parent
	}
}

// looksLikePath reports whether ref reads as a path rather than a hub id: it
// starts with ./ ../ / or ~, is absolute, has more parts than org/name, or
// its first part is a folder here.
func looksLikePath(ref string) bool {
	if filepath.IsAbs(ref) || strings.ContainsRune(ref, '\\') {
		return true
	}
	for _, p := range []string{"./", "../", "/", "~"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	repo, _, _ := strings.Cut(ref, "@")
	if strings.Count(repo, "/") > 1 {
		return true
	}
	first, _, ok := strings.Cut(repo, "/")
	if !ok {
		return false
	}
	fi, err := os.Stat(first)
	return err == nil && fi.IsDir()
}

// locateError is a failure to find a hub repository at all: not in the cache
// and offline, unknown to the hub, or the hub out of reach. It wraps the
// error and reads as it does.
type locateError struct{ err error }

func (e *locateError) Error() string { return e.err.Error() }
func (e *locateError) Unwrap() error { return e.err }

// withFolderReading adds the folder reading to err, the error opening ref as
// a hub id, when ref looks like a path or the repository could not be found.
func withFolderReading(ref string, err error) error {
	var le *locateError
	if looksLikePath(ref) || errors.As(err, &le) {
		return &noFolderError{ref: ref, err: err}
	}
	return err
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
