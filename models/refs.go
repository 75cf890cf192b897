package models

import (
	"errors"
	"fmt"
	"os"
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
