package models_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub/hubtest"
)

var tinySiglip = filepath.Join("..", "testdata", "tinysiglip")

// siglipRepo is testdata/tinysiglip as a hub repository: spiece.model and
// no tokenizer.json or vocab.json, graphs under onnx/.
func siglipRepo(t *testing.T) map[string]hubtest.File {
	files := map[string]hubtest.File{}
	for name, lfs := range map[string]bool{"config.json": false, "preprocessor_config.json": false, "special_tokens_map.json": false,
		"tokenizer_config.json": false, "spiece.model": true, "model.safetensors": true,
		"onnx/text_model.onnx": true, "onnx/vision_model.onnx": true} {
		b, err := os.ReadFile(filepath.Join(tinySiglip, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = hubtest.File{Data: b, LFS: lfs}
	}
	return files
}

// TestOpenHubSigLIP opens a SigLIP repository from the hub: its
// spiece.model is fetched with it (the family is read from it), and a
// snapshot cached without any tokenizer file is completed when the hub can
// be asked.
func TestOpenHubSigLIP(t *testing.T) {
	srv := hubtest.New(t, map[string]*hubtest.Repo{
		"org/tinysiglip": {Commits: map[string]map[string]hubtest.File{commitA: siglipRepo(t)}, Branches: map[string]string{"main": commitA}},
	})
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	m, err := models.Open("org/tinysiglip", opts)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(tinySiglip, "spiece.model"))
	if got, err := m.ReadFile("spiece.model"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("spiece.model: %v", err)
	}
	if m.Family() != models.SigLIP {
		t.Errorf("family %s, want SigLIP", m.Family())
	}
	// A snapshot left without spiece.model (as fetched before its name was
	// known): opened again, the file is fetched.
	link := filepath.Join(cache, "models--org--tinysiglip", "snapshots", commitA, "spiece.model")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	srv.Reset()
	if m, err = models.Open("org/tinysiglip", opts); err != nil || !m.Has("spiece.model") {
		t.Fatalf("reopened: has spiece.model %v, %v", err == nil && m.Has("spiece.model"), err)
	}
	listed := false
	for _, r := range srv.Requests() {
		listed = listed || strings.HasPrefix(r.Path, "/api/models/org/tinysiglip/revision/")
	}
	if !listed {
		t.Errorf("the hub was not asked for the files: %+v", srv.Requests())
	}
	// Complete now: no request.
	srv.Reset()
	if _, err := models.Open("org/tinysiglip", opts); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("a complete snapshot made %d requests: %+v", len(r), r)
	}
}
