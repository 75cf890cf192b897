package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline/index"
)

// TestDedupCLIShares: dedup split into 3 shares of blocks of 2 rows
// (--shard-index/--shard-count), its parts joined by condition merge,
// writes groups.jsonl, keep.txt, drop.txt and the pictures byte for byte
// as the whole search does, for both groupings and keep rules, with the
// parts given in any order; a missing share, a share twice, a part of another threshold,
// a part without the pictures' data among parts with it, a part over
// another index and merge flags given to a job's output are
// refused, naming the part or flag.
func TestDedupCLIShares(t *testing.T) {
	out, _ := queryJob(t)
	dir := t.TempDir()
	share := func(i, n int, threshold string) string {
		t.Helper()
		part := filepath.Join(dir, fmt.Sprintf("part-%s-%d-of-%d", threshold, i, n))
		code, _, errs := runCLI(t, "dedup", out, "--threshold", threshold, "--block-rows", "2", "--shard-index", fmt.Sprint(i), "--shard-count", fmt.Sprint(n), "--out", part)
		if code != 0 {
			t.Fatalf("dedup share %d of %d: exit %d: %s", i, n, code, errs)
		}
		return part
	}
	parts := []string{share(2, 3, "0.9"), share(0, 3, "0.9"), share(1, 3, "0.9")}
	for _, mode := range [][]string{{"--keep", "first", "--group", "star"}, {"--keep", "central", "--group", "components"}} {
		whole, merged := filepath.Join(t.TempDir(), "whole"), filepath.Join(t.TempDir(), "merged")
		code, stdout, errs := runCLI(t, append([]string{"dedup", out, "--threshold", "0.9", "--block-rows", "2", "--out", whole}, mode...)...)
		if code != 0 {
			t.Fatalf("dedup: exit %d: %s", code, errs)
		}
		code, mstdout, errs := runCLI(t, append(append([]string{"merge", "--out", merged}, parts...), mode...)...)
		if code != 0 {
			t.Fatalf("merge of the parts: exit %d: %s", code, errs)
		}
		if first := strings.SplitN(stdout, "\n", 2)[0]; !strings.HasPrefix(mstdout, first) {
			t.Errorf("%v: merge says %q, the whole search %q", mode, mstdout, stdout)
		}
		for _, f := range []string{"groups.jsonl", "keep.txt", "drop.txt", "nn-histogram.json", "nn-histogram.png", "groups.png", "near-threshold.png"} {
			a, err := os.ReadFile(filepath.Join(whole, f))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(merged, f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%v: %s of the merged parts:\n%s\nof the whole search:\n%s", mode, f, b, a)
			}
		}
		if len(readLines(t, filepath.Join(whole, "drop.txt"))) < 3 {
			t.Errorf("%v: fewer than 3 duplicates at 0.9: the test compares too little", mode)
		}
	}
	other := share(1, 3, "0.95")
	plain := filepath.Join(dir, "plain-1-of-3")
	if code, _, errs := runCLI(t, "dedup", out, "--threshold", "0.9", "--block-rows", "2", "--shard-index", "1", "--shard-count", "3", "--no-pictures", "--out", plain); code != 0 {
		t.Fatalf("dedup share --no-pictures: exit %d: %s", code, errs)
	}
	// another index: a copy of the job's whose first image is renamed.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.CopyFS(moved, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	metas, _ := filepath.Glob(filepath.Join(moved, "index", "*", index.MetaFile))
	if len(metas) == 0 {
		t.Fatal("no index part in the copy")
	}
	var m index.Meta
	json.Unmarshal(must(os.ReadFile(metas[0])), &m)
	m.Items[0].Path = "renamed.png"
	os.WriteFile(metas[0], must(json.Marshal(m)), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{parts[0], parts[1]}, "share 1 of 3 (numbered from 0) missing"},
		{[]string{parts[0], parts[1], parts[2], parts[1]}, "both share 0 of 3"},
		{[]string{parts[1], other, parts[0]}, other + " is of threshold 0.95"},
		{[]string{parts[1], plain, parts[0]}, plain + " is of 3 shares, blocks of 2 rows, 0 clusters, probe 0, 0 iterations, part"},
		{append([]string{"--index", moved}, parts...), "was found over another index"},
		{append([]string{"--index", filepath.Join(moved, "nothing")}, parts...), "nothing"},
		{[]string{out, "--keep", "central"}, "--keep is for the parts of a split dedup search"},
		{[]string{parts[0], filepath.Join(dir, "none")}, "no dedup-part.json"},
	} {
		code, _, errs := runCLI(t, append([]string{"merge"}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("merge %q: exit %d, %s; want an error saying %q", c.args, code, errs, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard-index", "0", "--shard-count", "3"}, "give --out"},
		{[]string{"--shard-index", "3", "--shard-count", "3", "--out", filepath.Join(dir, "x")}, "shard"},
		{[]string{"--shard-index", "0", "--shard-count", "3", "--out", parts[0]}, "exists"},
		{[]string{"--shard-index", "0", "--shard-count", "3", "--clusters", "2", "--check-recall", "3", "--out", filepath.Join(dir, "y")}, "--check-recall"},
		{[]string{"--block-rows", "0"}, "--block-rows 0"},
	} {
		code, _, errs := runCLI(t, append([]string{"dedup", out}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("dedup %q: exit %d, %s; want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
}
