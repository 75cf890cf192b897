// Package embedded holds the default model of condition: a tiny CLIP trained on
// the generated scenes of internal/scenes by scripts/train_default/train.py,
// compiled into the binary so that the program works with no download.
//
// The files are in the Hugging Face layout (config.json,
// preprocessor_config.json, tokenizer.json, vocab.json, merges.txt,
// tokenizer_config.json, model.safetensors, onnx/text_model.onnx,
// onnx/vision_model.onnx). The vision tower takes 64×64 images cut in 8×8
// patches: last_hidden_state [B, 65, d_v]; the text tower's
// last_hidden_state is [B, T, d_t] with T ≤ 77.
//
// Importing the package registers the model as the reference "default" of
// package models:
//
//	import _ "github.com/conditionhq/condition/models/embedded"
package embedded

import (
	"embed"
	"io/fs"

	"github.com/conditionhq/condition/models"
)

func init() { models.RegisterDefault(FS) }

//go:embed model
var files embed.FS

// FS returns the model directory: its root holds config.json and the other
// files of the Hugging Face layout.
func FS() fs.FS {
	sub, err := fs.Sub(files, "model")
	if err != nil {
		// fs.Sub fails only on an invalid path; "model" is valid.
		panic("embedded: " + err.Error())
	}
	return sub
}
