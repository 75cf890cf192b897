package batch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/objstore"
)

// TestLocalOutList: a local output lists as a store prefix does: every
// regular file below the folder at any depth, hidden names left out, a
// missing sub-folder empty, a missing output an error naming it.
func TestLocalOutList(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"index/000000/index.json", "index/000000/img.npy", "index/.tmp/x.npy", "index/.hidden", "index/top.txt", "metadata/metadata_000000.parquet"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o, err := resolveOutput(&objstore.Stores{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := o.list(context.Background(), "index/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.name)
		if f.size != int64(len(f.name)) {
			t.Errorf("%s: size %d, want %d", f.name, f.size, len(f.name))
		}
	}
	slices.Sort(names)
	if want := []string{"index/000000/img.npy", "index/000000/index.json", "index/top.txt"}; !slices.Equal(names, want) {
		t.Errorf("list index/ = %v, want %v", names, want)
	}
	if files, err := o.list(context.Background(), "shards/"); err != nil || len(files) != 0 {
		t.Errorf("list of a missing folder = %v, %v; want none", files, err)
	}
	b, err := readAll(context.Background(), o, "index/000000/index.json")
	if err != nil || string(b) != "index/000000/index.json" {
		t.Errorf("readAll = %q, %v", b, err)
	}
	missing := filepath.Join(dir, "nope")
	o, _ = resolveOutput(&objstore.Stores{}, missing)
	if _, err := o.list(context.Background(), "metadata/"); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("list of a missing output: %v, want an error naming %s", err, missing)
	}
}

// TestResolveInputs: each input is resolved once, a URL to the store and
// a path to the disk, and a URL that does not parse is an InputError naming it.
func TestResolveInputs(t *testing.T) {
	src, err := resolveInputs([]string{"photos", "s3://bucket/pre/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src[0].(localSource); !ok {
		t.Errorf("photos resolved to %T, want a local path", src[0])
	}
	if s, ok := src[1].(storeSource); !ok || s.loc.Bucket != "bucket" || s.String() != "s3://bucket/pre/" {
		t.Errorf("s3://bucket/pre/ resolved to %#v", src[1])
	}
	_, err = resolveInputs([]string{"s3://"})
	var ie *InputError
	if err == nil || !errors.As(err, &ie) || ie.Path != "s3://" {
		t.Errorf("resolveInputs(s3://) = %v, want an InputError naming it", err)
	}
}
