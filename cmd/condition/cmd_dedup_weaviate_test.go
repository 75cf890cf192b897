package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
)

// dedupGroup is a line of groups.jsonl.
type dedupGroup struct {
	Keep       dedupImage   `json:"keep"`
	Duplicates []dedupImage `json:"duplicates"`
}

// TestDedupWeaviate: the scenes job written into a real Weaviate node,
// `dedup weaviate://...` (its pooled vectors read with a cursor) finds the
// groups `dedup` finds over the same job's file index: the same kept
// images and duplicates, cosines within float16's rounding, keep.txt and
// drop.txt byte for byte, for star and first, components and central, and
// a split search of the collection merged gives the same; a collection
// that does not exist is an error naming it.
func TestDedupWeaviate(t *testing.T) {
	node := weaviatetest.Start(t)
	out, in := queryJob(t)
	url := "weaviate://" + node.Host() + "/ScenesDedup"
	code, _, errs := runCLI(t, "run", "--images", filepath.Join(in, "scenes"), "--images", filepath.Join(in, "shard.tar"), "-p", "x", "--index", url, "--out", filepath.Join(t.TempDir(), "wout"))
	if code != 0 {
		t.Fatalf("run --index %s: exit %d: %s", url, code, errs)
	}
	dedupOf := func(where string, args ...string) string {
		t.Helper()
		res := filepath.Join(t.TempDir(), "dups")
		code, _, errs := runCLI(t, append([]string{"dedup", where, "--threshold", "0.9", "--no-pictures", "--out", res}, args...)...)
		if code != 0 {
			t.Fatalf("dedup %s %q: exit %d: %s", where, args, code, errs)
		}
		return res
	}
	for _, mode := range [][]string{{"--keep", "first", "--group", "star"}, {"--keep", "central", "--group", "components"}} {
		file, coll := dedupOf(out, mode...), dedupOf(url, mode...)
		sameDedup(t, mode, file, coll)
	}
	parts := filepath.Join(t.TempDir(), "parts")
	var dirs []string
	for i, s := range []string{"0", "1"} {
		dirs = append(dirs, filepath.Join(parts, s))
		if code, _, errs := runCLI(t, "dedup", url, "--threshold", "0.9", "--block-rows", "4", "--shard-index", s, "--shard-count", "2", "--out", dirs[i]); code != 0 {
			t.Fatalf("dedup %s share %s: exit %d: %s", url, s, code, errs)
		}
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if code, _, errs := runCLI(t, append([]string{"merge", "--out", merged}, dirs...)...); code != 0 {
		t.Fatalf("merge of the collection's parts: exit %d: %s", code, errs)
	}
	sameDedup(t, []string{"split collection"}, dedupOf(out), merged)
	missing := "weaviate://" + node.Host() + "/NoSuchScenes"
	if code, _, errs := runCLI(t, "dedup", missing); code != 1 || !strings.Contains(errs, "NoSuchScenes") {
		t.Errorf("dedup %s: exit %d, %s; want exit 1 naming the collection", missing, code, errs)
	}
}

// sameDedup checks that two dedup outputs hold the same groups (cosines
// within 2e-3: a file index stores float16, a collection float32) and the
// same keep.txt and drop.txt.
func sameDedup(t *testing.T, mode []string, want, got string) {
	t.Helper()
	wg, gg := readLines(t, filepath.Join(want, "groups.jsonl")), readLines(t, filepath.Join(got, "groups.jsonl"))
	if len(wg) < 3 || len(wg) != len(gg) {
		t.Fatalf("%v: %d groups, the file index %d (want 3 or more)", mode, len(gg), len(wg))
	}
	for i := range wg {
		var a, b dedupGroup
		json.Unmarshal([]byte(wg[i]), &a)
		json.Unmarshal([]byte(gg[i]), &b)
		ok := a.Keep == b.Keep && len(a.Duplicates) == len(b.Duplicates)
		for k := 0; ok && k < len(a.Duplicates); k++ {
			x, y := a.Duplicates[k], b.Duplicates[k]
			ok = x.Path == y.Path && x.Source == y.Source && x.Member == y.Member && x.Cosine != nil && y.Cosine != nil && math.Abs(float64(*x.Cosine-*y.Cosine)) < 2e-3
		}
		if !ok {
			t.Errorf("%v: group %d: %s, the file index's %s", mode, i, gg[i], wg[i])
		}
	}
	for _, f := range []string{"keep.txt", "drop.txt"} {
		a, _ := os.ReadFile(filepath.Join(want, f))
		b, _ := os.ReadFile(filepath.Join(got, f))
		if string(a) != string(b) {
			t.Errorf("%v: %s:\n%s\nthe file index's:\n%s", mode, f, b, a)
		}
	}
}
