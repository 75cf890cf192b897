package models_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
)

// TestMistypedFolderGivesBothReadings: a reference that is not a folder is
// tried as a hub id; when it looks like a path, or the hub could not be
// asked about it, the error names both readings, not only the hub's.
func TestMistypedFolderGivesBothReadings(t *testing.T) {
	srv := fakeHub(t) // reads the test model's files: before Chdir
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("mymodels", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HUB_OFFLINE", "")
	down := func() models.Options { // a hub that cannot be reached
		return models.Options{Hub: &hub.Client{Endpoint: "http://127.0.0.1:1", CacheDir: t.TempDir(), Retries: 1, RetryWait: 1}, DerivedCache: t.TempDir()}
	}
	offline := down()
	offline.Offline = true
	up := hubOptions(t, srv, t.TempDir())

	for _, c := range []struct {
		name, ref string
		opts      models.Options
		want      []string // in the error, in this order
		is        error
	}{
		{"first part is a folder, hub unreachable", "mymodels/clip", down(),
			[]string{"no folder mymodels/clip (mymodels has no clip)", "; as a hub id: ", "127.0.0.1:1"}, nil},
		{"first part is a folder, offline", "mymodels/clip", offline,
			[]string{"no folder mymodels/clip", "; as a hub id: ", "not in the Hugging Face cache"}, hub.ErrOffline},
		{"first part is a folder, no such repository", "mymodels/clip", up,
			[]string{"no folder mymodels/clip", "; as a hub id: ", "RepoNotFound"}, hub.ErrRepoNotFound},
		{"not cached, hub unreachable", "org/clip", down(),
			[]string{"no folder org/clip; as a hub id: ", "127.0.0.1:1"}, nil},
		{"not cached, offline", "org/clip", offline,
			[]string{"no folder org/clip; as a hub id: ", "not in the Hugging Face cache"}, hub.ErrOffline},
		{"starts with ./", "./mymodels/clip", up,
			[]string{"no folder ./mymodels/clip (mymodels has no clip); as a hub id: ", "not a hub id"}, nil},
		{"deeper than org/name", "mymodels/clip/v2", up,
			[]string{"no folder mymodels/clip/v2 (mymodels has no clip); as a hub id: ", "not a hub id"}, nil},
		{"absolute", filepath.Join(dir, "mymodels", "clip"), up,
			[]string{"no folder " + filepath.Join(dir, "mymodels", "clip") + " (" + filepath.Join(dir, "mymodels") + " has no clip); as a hub id: "}, nil},
		{"home", "~/models/clip", up,
			[]string{"no folder ~/models/clip", "~ is not expanded", "; as a hub id: "}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := models.OpenContext(context.Background(), c.ref, c.opts)
			if err == nil {
				t.Fatal("opened")
			}
			msg, at := err.Error(), 0
			for _, w := range c.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q: want %q (after byte %d)", msg, w, at)
				}
				at += i + len(w)
			}
			if !strings.HasPrefix(msg, "models: ") || strings.Contains(msg, "as a hub id: models: ") {
				t.Errorf("error %q: want one models: prefix", msg)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %q does not match %v", msg, c.is)
			}
		})
	}

	// A hub id the hub knows opens; one whose failure is not about finding
	// it gets no folder reading.
	if _, err := models.Open("org/tinyclip", up); err != nil {
		t.Fatal(err)
	}
	_, err := models.Open("org/tinyclip", models.Options{Hub: up.Hub, Variant: "fp16", DerivedCache: t.TempDir()})
	if err == nil || strings.Contains(err.Error(), "no folder") {
		t.Errorf("a missing variant of a hub model: %v", err)
	}
}

// TestOfflineOpenNamesItsCause: opening in offline mode names HF_HUB_OFFLINE
// only when it is set, and says what is missing from the cache either way.
func TestOfflineOpenNamesItsCause(t *testing.T) {
	srv := fakeHub(t)
	cache := t.TempDir()
	if _, err := models.Open("org/onnx", hubOptions(t, srv, cache)); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"", "1"} {
		t.Setenv("HF_HUB_OFFLINE", env)
		opts := hubOptions(t, srv, cache)
		opts.Offline = true
		for _, c := range []struct{ ref, want string }{
			{"org/tinyclip", "not in the Hugging Face cache"},
			{"org/onnx+org/pt", "the weights org/pt@main are not in the Hugging Face cache"},
			{"org/onnx+org/tinyclip", "the weights org/tinyclip@main are not in the Hugging Face cache"},
		} {
			_, err := models.Open(c.ref, opts)
			if !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("HF_HUB_OFFLINE=%q: %s: %v; want ErrOffline and %q", env, c.ref, err, c.want)
				continue
			}
			if named := strings.Contains(err.Error(), "HF_HUB_OFFLINE"); named != (env != "") {
				t.Errorf("HF_HUB_OFFLINE=%q: %s: %q", env, c.ref, err)
			}
		}
	}
}
