package models_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/models/hub/hubtest"
)

// dropOutput returns the ONNX model b without its graph output name: a
// full CLIP export made into a pooled-only one, its initializers left where
// they were (here, in an external-data file).
func dropOutput(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			t.Fatal("dropOutput: bad protobuf")
		}
		field := b[:n+m]
		if num == 7 && typ == protowire.BytesType { // ModelProto.graph
			g, _ := protowire.ConsumeBytes(b[n:])
			var kept []byte
			for len(g) > 0 {
				gn, gt, k := protowire.ConsumeTag(g)
				l := protowire.ConsumeFieldValue(gn, gt, g[k:])
				if k < 0 || l < 0 {
					t.Fatal("dropOutput: bad graph")
				}
				if gn == 12 { // GraphProto.output: ValueInfoProto, name = 1
					v, _ := protowire.ConsumeBytes(g[k:])
					vn, _, vk := protowire.ConsumeTag(v)
					if s, sk := protowire.ConsumeString(v[vk:]); vn == 1 && sk > 0 && s == name {
						g = g[k+l:]
						continue
					}
				}
				kept = append(kept, g[:k+l]...)
				g = g[k+l:]
			}
			field = protowire.AppendBytes(protowire.AppendTag(nil, 7, protowire.BytesType), kept)
		}
		out = append(out, field...)
		b = b[n+m:]
	}
	return out
}

// mirrorHub is a fake hub with org/mirror: pooled-only graphs, the vision
// one keeping its initializers in onnx/vision_model.onnx_data, and a
// model.safetensors. It returns the files the hub serves.
func mirrorHub(t *testing.T) (*hubtest.Server, map[string]hubtest.File) {
	ext := filepath.Join("..", "internal", "onnxgraph", "testdata", "external")
	files := repoFromDir(t, tiny, map[string]string{
		"onnx/text_model.onnx":        filepath.Join("..", "testdata", "hub", "pooled_only", "text_model.onnx"),
		"onnx/vision_model.onnx_data": filepath.Join(ext, "vision_model.onnx_data"),
		"model.safetensors":           filepath.Join(tiny, "model.safetensors"),
	})
	pooled := dropOutput(t, mustRead(t, filepath.Join(ext, "vision_model.onnx")), onnxgraph.HiddenName)
	if gm, err := onnxgraph.Parse(pooled); err != nil {
		t.Fatal(err)
	} else if _, ok := gm.Graph.Output(onnxgraph.HiddenName); ok || len(gm.ExternalFiles()) != 1 {
		t.Fatalf("the pooled-only vision graph: outputs %v, external data %v", gm.Graph.Outputs, gm.ExternalFiles())
	}
	files["onnx/vision_model.onnx"] = hubtest.File{Data: pooled, LFS: true}
	srv := hubtest.New(t, map[string]*hubtest.Repo{
		"org/mirror": {Commits: map[string]map[string]hubtest.File{commitA: files}, Branches: map[string]string{"main": commitA}},
	})
	return srv, files
}

// listFiles lists the files under dir (symbolic links included, as the
// paths they are found at), slash-separated and sorted.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// loadsInORT checks that ONNX Runtime loads the model's vision graph, its
// external data included, and that it outputs last_hidden_state.
func loadsInORT(t *testing.T, m *models.Model) {
	t.Helper()
	orttest.Load(t)
	g, err := ort.ModelGraph(m, models.VisionModelFile)
	if err != nil {
		t.Fatal(err)
	}
	_, outs, err := g.InspectLoaded()
	if err != nil {
		t.Fatalf("ONNX Runtime cannot load %s: %v", g.Name(), err)
	}
	for _, o := range outs {
		if o.Name == onnxgraph.HiddenName {
			return
		}
	}
	t.Errorf("%s: outputs %v, no %s", g.Name(), outs, onnxgraph.HiddenName)
}

// TestSnapshotMirrorsHub: after a fetch, an open whose heads are read by
// ranges and an Expose, the snapshot folder holds exactly the files the hub
// serves (all but the model.safetensors read by ranges), byte for byte, and
// nothing in the hub cache is this program's; the heads and the exposed
// graphs are in the derived cache, by repository and commit, the vision
// graph's external data linked beside it, and ONNX Runtime loads it there.
func TestSnapshotMirrorsHub(t *testing.T) {
	srv, served := mirrorHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	opts.Update = true             // as `condition models fetch` opens
	opts.MaxWeightsDownload = 1000 // the checkpoint counts as large: heads by ranges
	m, err := models.Open("org/mirror", opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Expose()
	if err != nil {
		t.Fatal(err)
	}
	derived := filepath.Join(opts.DerivedCache, "models--org--mirror", commitA)
	for _, r := range res {
		if r.Already || r.Missing || !strings.HasPrefix(r.Written, derived+string(filepath.Separator)) {
			t.Errorf("expose %s: %+v", r.Graph, r)
		}
	}

	snap := filepath.Join(cache, "models--org--mirror", "snapshots", commitA)
	var want []string
	for name := range served {
		if name != models.WeightsFile {
			want = append(want, name)
		}
	}
	sort.Strings(want)
	got := listFiles(t, snap)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("snapshot holds\n  %q\nthe hub serves (but for the heads' checkpoint)\n  %q", got, want)
	}
	for _, name := range got {
		if b, err := os.ReadFile(filepath.Join(snap, filepath.FromSlash(name))); err != nil || !bytes.Equal(b, served[name].Data) {
			t.Errorf("snapshot's %s differs from the hub's (%v)", name, err)
		}
	}
	for _, name := range listFiles(t, cache) {
		if strings.Contains(name, models.HeadsFile) || strings.Contains(name, models.ExposedSuffix) {
			t.Errorf("the hub cache holds %s", name)
		}
	}
	checks, err := hub.Cache{Dir: cache}.Verify("org/mirror", commitA, nil)
	if err != nil || len(checks) != len(want) {
		t.Fatalf("verify: %d checks, %v", len(checks), err)
	}
	for _, c := range checks {
		if !c.OK || c.Kind == "" {
			t.Errorf("verify %+v", c)
		}
	}

	wantDerived := []string{models.HeadsFile, "onnx/text_model.exposed.onnx", "onnx/vision_model.exposed.onnx", "onnx/vision_model.onnx_data"}
	if got := listFiles(t, derived); strings.Join(got, " ") != strings.Join(wantDerived, " ") {
		t.Errorf("derived cache holds %q, want %q", got, wantDerived)
	}
	if m.Path(models.WeightsFile) != filepath.Join(derived, models.HeadsFile) {
		t.Errorf("heads from %s", m.Path(models.WeightsFile))
	}
	// The external data: a hard link to the snapshot's blob, not a copy.
	data := filepath.Join(derived, "onnx", "vision_model.onnx_data")
	a, errA := os.Lstat(data)
	b, errB := os.Stat(filepath.Join(snap, "onnx", "vision_model.onnx_data"))
	if errA != nil || errB != nil || !a.Mode().IsRegular() || !os.SameFile(a, b) {
		t.Errorf("%s is not a hard link to the snapshot's blob: %v %v", data, errA, errB)
	}
	loadsInORT(t, m)

	// Opened again offline: no request; the exposed graphs and heads come
	// from the derived cache; the external data, lost, is placed again.
	os.Remove(data)
	srv.Reset()
	off := opts
	off.Offline, off.Update = true, false
	m, err = models.Open("org/mirror", off)
	if err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("offline reopen made %d requests", len(r))
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		if src := m.Source(g); src != strings.TrimSuffix(g, ".onnx")+models.ExposedSuffix || m.Path(g) != filepath.Join(derived, filepath.FromSlash(src)) {
			t.Errorf("%s: source %s, path %s", g, src, m.Path(g))
		}
	}
	if m.Path(models.WeightsFile) != filepath.Join(derived, models.HeadsFile) {
		t.Errorf("reopened, heads from %s", m.Path(models.WeightsFile))
	}
	if _, err := os.Stat(data); err != nil {
		t.Errorf("external data not placed again: %v", err)
	}
	if res, err := m.Expose(); err != nil || !res[0].Already || !res[1].Already {
		t.Errorf("second expose: %+v %v", res, err)
	}
	if s, fromWeights, err := m.LogitScale(); err != nil || !fromWeights || s < 2.659 || s > 2.6593 {
		t.Errorf("LogitScale %v %v %v", s, fromWeights, err)
	}
	loadsInORT(t, m)
}

// TestDerivedCopyWhenLinkFails: where a hard link cannot be made (another
// file system, here a replaced link function that always fails), the
// external data is copied beside the exposed graph, and ONNX Runtime loads
// the graph with it.
func TestDerivedCopyWhenLinkFails(t *testing.T) {
	links := 0
	models.SetLinkFile(t, func(oldname, newname string) error {
		links++
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errors.ErrUnsupported}
	})
	srv, served := mirrorHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	m, err := models.Open("org/mirror", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Expose(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(opts.DerivedCache, "models--org--mirror", commitA, "onnx", "vision_model.onnx_data")
	a, errA := os.Lstat(data)
	b, errB := os.Stat(filepath.Join(cache, "models--org--mirror", "snapshots", commitA, "onnx", "vision_model.onnx_data"))
	if errA != nil || errB != nil || !a.Mode().IsRegular() || os.SameFile(a, b) || links != 1 {
		t.Fatalf("%s: want a copy after %d failed link (%d): %v %v", data, 1, links, errA, errB)
	}
	if got := mustRead(t, data); !bytes.Equal(got, served["onnx/vision_model.onnx_data"].Data) {
		t.Errorf("the copy differs from the hub's file")
	}
	// No temporary file is left behind.
	if got := listFiles(t, filepath.Dir(data)); len(got) != 3 {
		t.Errorf("derived onnx/ holds %q", got)
	}
	loadsInORT(t, m)
}
