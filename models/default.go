package models

import (
	"io/fs"

	"github.com/conditionhq/condition/models/embedded"
)

// defaultFS returns the files of the model built into the binary (package
// models/embedded: a tiny CLIP trained on generated scenes).
func defaultFS() (fs.FS, error) {
	return embedded.FS(), nil
}
