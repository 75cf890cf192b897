package models

import (
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
