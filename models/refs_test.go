package models_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
)

// TestParseRef covers what a model reference is: hub.ParseRef decides hub
// ids, a path on disk wins over a hub id spelled the same, "+" splits only
// where both sides are references.
func TestParseRef(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// Folders and a file that look like hub ids, and a folder with a '+'.
	for _, d := range []string{"org/name", "with+plus", "default"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "org", "file"), []byte("x"), 0o644)

	for _, c := range []struct {
		ref            string
		dir, repo, rev string
		isDefault      bool
		err            string
		split1, split2 string // SplitRef's answer, when it differs from (ref, "")
		splitErr       string
	}{
		{ref: "default", isDefault: true},
		{ref: "./default", dir: "./default"},
		{ref: "org/name", dir: "org/name"}, // on disk: the folder, not the hub
		{ref: "org/file", err: "is a file"},
		{ref: "openai/clip-vit-base-patch32", repo: "openai/clip-vit-base-patch32"},
		{ref: "Xenova/clip-vit-base-patch16@main", repo: "Xenova/clip-vit-base-patch16", rev: "main"},
		{ref: "openai/clip-vit-base-patch32@refs/pr/66", repo: "openai/clip-vit-base-patch32", rev: "refs/pr/66"},
		{ref: "org/x@" + strings.Repeat("ab", 20), repo: "org/x", rev: strings.Repeat("ab", 20)},
		{ref: "org/name@v1.0", repo: "org/name", rev: "v1.0"}, // not on disk under that name
		{ref: "laion/CLIP-ViT-B-32-laion2B-s34B-b79K", repo: "laion/CLIP-ViT-B-32-laion2B-s34B-b79K"},
		{ref: "", err: "empty model reference"},
		{ref: "name", err: "not a hub id"},
		{ref: "org/name/x", err: "not a hub id"},
		{ref: "./missing/dir", err: "no folder"},
		{ref: "org/na--me", err: "not a hub id"},
		{ref: "org/na..me", err: "not a hub id"},
		{ref: "org/-name", err: "not a hub id"},
		{ref: "org/name.", err: "not a hub id"},
		{ref: "org/" + strings.Repeat("n", 97), err: "not a hub id"},
		{ref: "org/name@", err: "bad revision"},
		{ref: "org/name@../x", err: "bad revision"},
		{ref: "org/name@refs//pr", err: "bad revision"},
		{ref: "org/name@refs/pr/", err: "bad revision"},
		{ref: "org/name@a b", err: "bad revision"},
		{ref: "org/name@-x", err: "bad revision"},
		// Combined references.
		{ref: "org/onnx+org/pt", split1: "org/onnx", split2: "org/pt", err: "not a hub id"},
		{ref: "org/onnx@v2+org/pt@refs/pr/1", split1: "org/onnx@v2", split2: "org/pt@refs/pr/1", err: "bad revision"},
		{ref: "with+plus", dir: "with+plus"}, // a folder named with '+' is not split
		{ref: "with+plus+org/pt", split1: "with+plus", split2: "org/pt", err: "no folder"},
		{ref: "default+org/pt", split1: "default", split2: "org/pt", err: "not a hub id"},
		{ref: "org/onnx+", splitErr: "expected <model>+<weights>", err: "not a hub id"},
		{ref: "+org/pt", splitErr: "expected <model>+<weights>", err: "not a hub id"},
		{ref: "org/onnx+bad name", splitErr: "expected <model>+<weights>", err: "not a hub id"},
	} {
		r, err := models.ParseRef(c.ref)
		switch {
		case c.err != "" && c.dir == "" && c.repo == "" && !c.isDefault:
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRef(%q) = %+v, %v; want an error with %q", c.ref, r, err, c.err)
			}
		case err != nil:
			t.Errorf("ParseRef(%q): %v", c.ref, err)
		case r.Default != c.isDefault || r.Dir != c.dir || r.Hub.Repo != c.repo || r.Hub.Revision != c.rev:
			t.Errorf("ParseRef(%q) = %+v; want default %v dir %q repo %q rev %q", c.ref, r, c.isDefault, c.dir, c.repo, c.rev)
		}
		// hub.ParseRef agrees wherever the reference is not on disk.
		if c.dir == "" && !c.isDefault && c.split1 == "" && c.ref != "" && c.err != "is a file" && c.err != "no such directory" {
			hr, herr := hub.ParseRef(c.ref)
			if (herr == nil) != (c.repo != "") || hr.Repo != c.repo {
				t.Errorf("hub.ParseRef(%q) = %+v, %v; models.ParseRef says repo %q", c.ref, hr, herr, c.repo)
			}
		}
		a, b, err := models.SplitRef(c.ref)
		want1, want2 := c.ref, ""
		if c.split1 != "" {
			want1, want2 = c.split1, c.split2
		}
		switch {
		case c.splitErr != "":
			if err == nil || !strings.Contains(err.Error(), c.splitErr) {
				t.Errorf("SplitRef(%q) = %q, %q, %v; want an error with %q", c.ref, a, b, err, c.splitErr)
			}
		case err != nil:
			t.Errorf("SplitRef(%q): %v", c.ref, err)
		case a != want1 || b != want2:
			t.Errorf("SplitRef(%q) = %q, %q; want %q, %q", c.ref, a, b, want1, want2)
		}
	}
}

// TestOpenLocalBeatsHub: a folder spelled like a hub id is opened from disk
// without a request to the hub.
func TestOpenLocalBeatsHub(t *testing.T) {
	srv := fakeHub(t)
	cfg := mustRead(t, filepath.Join(tiny, "config.json"))
	dir := t.TempDir()
	t.Chdir(dir)
	local := filepath.Join(dir, "org", "tinyclip")
	os.MkdirAll(local, 0o755)
	os.WriteFile(filepath.Join(local, "config.json"), cfg, 0o644)
	srv.Reset()
	m, err := models.Open("org/tinyclip", hubOptions(t, srv, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if m.Dir() != local || m.Repo() != "" {
		t.Errorf("opened %q (repo %q), want the folder %s", m.Dir(), m.Repo(), local)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("%d requests to the hub for a local folder", len(r))
	}
}

// TestOpenRevisionWithSlashes opens org/name@refs/pr/1 from the fake hub and
// then from the cache.
func TestOpenRevisionWithSlashes(t *testing.T) {
	srv := fakeHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	m, err := models.Open("org/pr@refs/pr/1", opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Revision() != commitC {
		t.Errorf("revision %s, want %s", m.Revision(), commitC)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "models--org--pr", "refs", "refs", "pr", "1")); err != nil || string(b) != commitC {
		t.Errorf("refs/refs/pr/1: %q %v", b, err)
	}
	opts.Offline = true
	if m, err := models.Open("org/pr@refs/pr/1", opts); err != nil || m.Revision() != commitC {
		t.Errorf("offline: %v", err)
	}
	if _, err := models.Open("org/pr@refs/pr/2", opts); !errors.Is(err, hub.ErrOffline) {
		t.Errorf("offline, another PR: %v", err)
	}
}
