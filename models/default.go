package models

import (
	"errors"
	"io/fs"
)

// defaultFS returns the files of the model built into the binary.
//
// The default model lives in models/embedded (embedded.FS()). Until that
// package exists this returns an error; when it lands, this becomes
// `return embedded.FS(), nil`.
func defaultFS() (fs.FS, error) {
	return nil, errors.New("models: the default model is not built into this binary yet; pass a model directory or org/name instead of \"default\"")
}
