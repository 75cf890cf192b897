package models

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// KnownModel is a model whose files were checked against its hub pages (see
// Source): the models Known lists. Most are ONNX exports; those with Build
// set ship no ONNX graphs and have them built from their config.json and
// model.safetensors on first use.
type KnownModel struct {
	Ref string `json:"ref"` // the repository with the ONNX graphs (or, with Build, the checkpoint)
	// Family is the model family as people write it: "CLIP", "MetaCLIP 2",
	// "SigLIP" or "SigLIP 2" (Family.String of the family the files say).
	Family string `json:"family"`
	// Build reports that the repository has no ONNX graphs: Open builds them
	// from config.json and model.safetensors on first use (when the graph
	// builder writes the family: Outputs says), Variants is empty and the
	// heads are in the same file. Use may name a revision.
	Build bool `json:"build,omitempty"`
	// Layout is "openclip" for a repository in OpenCLIP's layout alone
	// (open_clip_config.json and open_clip_model.safetensors, such as
	// PE-Core's), which opens by its hub id or from a folder holding its
	// files, its tokenizer the repository's files or OpenCLIP's built-in
	// CLIP BPE (Model.OpenAIBPE); "" for the Hugging Face layout.
	Layout   string   `json:"layout,omitempty"`
	Use      string   `json:"use"`      // the reference to give Open (graphs+heads when the heads are verified)
	Arch     string   `json:"arch"`     // what it is
	Variants []string `json:"variants"` // graph suffixes present ("" = plain, first; none with Build)
	Outputs  string   `json:"outputs"`  // what the split graphs output, and how that is known
	Heads    string   `json:"heads"`    // where the projection heads come from, and how that is known
	Source   string   `json:"source"`   // where the file lists were seen, and what they listed
}

// LayoutOpenCLIP is KnownModel.Layout of a repository in OpenCLIP's
// layout alone.
const LayoutOpenCLIP = "openclip"

// knownJSON lists only what was verified against a repository's file listing
// (hub pages, model cards, public code that names the files); Source says
// where, and fields that could not be verified say so. Commits are the ones
// the pages showed, never guessed.
//
//go:embed known.json
var knownJSON []byte

var known = sync.OnceValue(func() []KnownModel {
	k, err := parseKnown(knownJSON)
	if err != nil {
		panic(err)
	}
	return k
})

// parseKnown parses a list of known models, refusing unknown fields.
func parseKnown(b []byte) ([]KnownModel, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var k []KnownModel
	if err := d.Decode(&k); err != nil {
		return nil, fmt.Errorf("models: known.json: %w", err)
	}
	if d.More() {
		return nil, errors.New("models: known.json: data after the list")
	}
	return k, nil
}

// Known returns the models (CLIP, PE-Core, MetaCLIP 2, SigLIP, SigLIP 2, TIPSv2) this package was checked against, in a
// fixed order, each with the reference to give Open and what was and was not
// verified about it. The result is a copy the caller may change.
func Known() []KnownModel {
	k := slices.Clone(known())
	for i := range k {
		k[i].Variants = slices.Clone(k[i].Variants)
	}
	return k
}
