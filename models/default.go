package models

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"sync"
)

var (
	defaultMu    sync.Mutex
	defaultFiles func() fs.FS
)

// RegisterDefault makes files the model that the reference "default" opens.
// Package models/embedded calls it when it is linked in (import it, blank,
// where a program wants the built-in model); models alone does not carry
// the model's megabytes into every program that imports it.
func RegisterDefault(files func() fs.FS) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	defaultFiles = files
}

// ErrNoDefault is returned for the reference "default" in a program that
// has not linked the built-in model in.
var ErrNoDefault = errors.New(`models: the built-in model is not linked into this program: import _ "github.com/conditionhq/condition/models/embedded"`)

// defaultFS returns the files of the built-in model (see RegisterDefault).
func defaultFS() (fs.FS, error) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultFiles == nil {
		return nil, ErrNoDefault
	}
	return defaultFiles(), nil
}

// builtInWeights are the size and SHA-256 of the built-in model's
// model.safetensors (models/embedded/model), which tell its files wherever
// they are: embedded, or a copy in a folder.
const (
	builtInWeightsSize   = 1486388
	builtInWeightsSHA256 = "af7ccdf77c40ab51d2bf6716270065a3675137891904fbbb221ea027ab6acb57"
)

// BuiltIn reports whether m is the model built into this program (see
// models/embedded), by its files, not by its reference: "default", or any
// folder holding a copy of its model.safetensors.
func (m *Model) BuiltIn() bool {
	fi, err := fs.Stat(m.base, WeightsFile)
	if err != nil || fi.Size() != builtInWeightsSize {
		return false
	}
	b, err := fs.ReadFile(m.base, WeightsFile)
	if err != nil {
		return false
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]) == builtInWeightsSHA256
}
