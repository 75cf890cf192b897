package models_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/models/hub/hubtest"
)

// TestFetchExternalData: graphs that keep their initializers in side files
// come with those files, read from the graphs' external_data locations, in
// the same snapshot folder; the cache check knows about them too.
func TestFetchExternalData(t *testing.T) {
	srv := fakeHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	m, err := models.Open("org/external", opts)
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(cache, "models--org--external", "snapshots", commitA)
	ext := filepath.Join("..", "internal", "onnxgraph", "testdata", "external")
	for file, src := range map[string]string{
		"onnx/text_model.onnx.data":   "text_model.onnx.data",
		"onnx/vision_model.onnx_data": "vision_model.onnx_data",
	} {
		p := filepath.Join(snap, filepath.FromSlash(file))
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s not fetched beside its graph: %v", file, err)
			continue
		}
		if !bytes.Equal(got, mustRead(t, filepath.Join(ext, src))) {
			t.Errorf("%s differs from the hub's", file)
		}
		if l, err := os.Readlink(p); err != nil || !strings.HasPrefix(l, "../../../blobs/") {
			t.Errorf("%s: not a link into blobs: %q %v", file, l, err)
		}
	}
	// The data of a graph this model does not use stays on the hub.
	if _, err := os.Lstat(filepath.Join(snap, "onnx", "model.onnx_data")); err == nil {
		t.Error("fetched onnx/model.onnx_data, which no graph of the model names")
	}
	// The graphs are served from the snapshot, their data beside them.
	if filepath.Dir(m.Path(models.VisionModelFile)) != filepath.Join(snap, "onnx") {
		t.Errorf("vision graph at %s", m.Path(models.VisionModelFile))
	}

	// Opened again: complete, no request.
	srv.Reset()
	if _, err := models.Open("org/external", opts); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("second open made %d requests", len(r))
	}

	// A side file lost from the cache (link and blob): offline, the error
	// names it; online, it alone is downloaded again.
	side := filepath.Join(snap, "onnx", "vision_model.onnx_data")
	blob, err := filepath.EvalSymlinks(side)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(side)
	os.Remove(blob)
	off := opts
	off.Offline = true
	_, err = models.Open("org/external", off)
	if !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), "onnx/vision_model.onnx_data") {
		t.Errorf("offline with a side file missing: %v", err)
	}
	srv.Reset()
	if _, err := models.Open("org/external", opts); err != nil {
		t.Fatal(err)
	}
	var gets []string
	for _, r := range srv.Requests() {
		if r.Role == "cdn" && r.Method == "GET" {
			gets = append(gets, r.Path)
		}
	}
	if want := "/blobs/" + hubtest.SHA256(mustRead(t, filepath.Join(ext, "vision_model.onnx_data"))); len(gets) != 1 || gets[0] != want {
		t.Errorf("downloads after losing one side file: %q, want only %s", gets, want)
	}
	if _, err := os.Stat(side); err != nil {
		t.Errorf("side file not restored: %v", err)
	}

	// A repository without the side file a graph names; a graph whose data
	// points outside its folder.
	for ref, want := range map[string][]string{
		"org/nodata": {"onnx/vision_model.onnx", "onnx/vision_model.onnx_data", "does not have"},
		"org/escape": {"onnx/vision_model.onnx", "../escape.bin", "outside"},
	} {
		_, err := models.Open(ref, hubOptions(t, srv, t.TempDir()))
		if err == nil {
			t.Errorf("Open(%s): no error", ref)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%s): error %q lacks %q", ref, err, w)
			}
		}
	}
}
