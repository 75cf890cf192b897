package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestEmbedWalksFolders: embed takes folders as run does, walking them for
// images (recursively, by extension, in name order); a missing path or a
// folder without images is a usage error naming it, before any work.
func TestEmbedWalksFolders(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(tinyclipDir, "golden", "images")
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(filepath.Join(src, "square.png"), filepath.Join(dir, "b.png"))
	copyFile(filepath.Join(src, "wide.png"), filepath.Join(dir, "sub", "a.PNG"))
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not an image"), 0o644)
	empty := filepath.Join(t.TempDir(), "empty")
	os.Mkdir(empty, 0o755)
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("not an image"), 0o644)

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{empty}, []string{"folder " + empty + " holds no images", ".png"}},
		{[]string{filepath.Join(dir, "nope")}, []string{"no image, video or folder " + filepath.Join(dir, "nope")}},
		{[]string{dir, filepath.Join(dir, "nope.jpg")}, []string{"nope.jpg"}},
	} {
		code, _, errs := embedCLI(t, append([]string{"embed", "--model", "default", "-p", "a red circle"}, c.args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, exitUsage, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}

	orttest.Load(t)
	single := filepath.Join(src, "square.png")
	code, stdout, errs := embedCLI(t, "embed", "--model", "default", "-p", "a red circle", "--json", dir, single)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res embedResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, im := range res.Images {
		got = append(got, im.Path)
	}
	want := []string{filepath.Join(dir, "b.png"), filepath.Join(dir, "sub", "a.PNG"), single}
	if !slices.Equal(got, want) || len(res.Cosine) != 3 {
		t.Errorf("images %q (%d rows of scores), want %q", got, len(res.Cosine), want)
	}
}
