package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/s3test"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
)

// readLines returns a file's lines.
func readLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// TestDedupCLI: over a real job's index of the scenes, 3 of them also read
// from a tar shard (byte copies), dedup finds those 3 as the duplicates
// (cosine 1) of the folder's files, kept first; groups.jsonl, keep.txt and
// drop.txt agree with each other and with the --json summary, and run
// --list takes keep.txt.
func TestDedupCLI(t *testing.T) {
	out, _ := queryJob(t)
	res := filepath.Join(t.TempDir(), "dups")
	code, stdout, errs := runCLI(t, "dedup", out, "--out", res, "--json")
	if code != 0 {
		t.Fatalf("dedup: exit %d: %s", code, errs)
	}
	var sum dedupSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	keep, drop := readLines(t, filepath.Join(res, "keep.txt")), readLines(t, filepath.Join(res, "drop.txt"))
	ents, err := os.ReadDir("../../testdata/scenes/images")
	if err != nil {
		t.Fatal(err)
	}
	n := len(ents)
	if sum.Images != n+3 || sum.Duplicates != 3 || len(drop) != 3 || len(keep) != n || sum.Groups != 3 || sum.Kept != n {
		t.Errorf("summary %+v, keep.txt %d lines, drop.txt %d; want %d images, 3 groups of one duplicate, %d kept", sum, len(keep), len(drop), n+3, n)
	}
	for _, d := range drop {
		if !strings.Contains(d, "shard.tar#") {
			t.Errorf("drop.txt: %s, want a member of shard.tar", d)
		}
	}
	var dups []string
	for _, line := range readLines(t, filepath.Join(res, "groups.jsonl")) {
		var g struct {
			Keep       dedupImage   `json:"keep"`
			Duplicates []dedupImage `json:"duplicates"`
		}
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatal(err)
		}
		for _, d := range g.Duplicates {
			if d.Cosine == nil || *d.Cosine < 0.999 || filepath.Base(d.Member) != filepath.Base(g.Keep.Source) {
				t.Errorf("group of %s: duplicate %+v, want the same scene from the shard at cosine 1", g.Keep.Source, d)
			}
			dups = append(dups, listLine(d))
		}
	}
	if strings.Join(dups, "\n") != strings.Join(drop, "\n") {
		t.Errorf("groups.jsonl's duplicates %q, drop.txt %q", dups, drop)
	}
	checkDedupPictures(t, res, n+3)
	res2 := filepath.Join(t.TempDir(), "dups")
	if code, _, errs := runCLI(t, "dedup", out, "--out", res2, "--no-pictures"); code != 0 {
		t.Fatalf("dedup --no-pictures: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(res2, "groups.png")); !os.IsNotExist(err) {
		t.Errorf("--no-pictures: groups.png: %v, want none", err)
	}
	code, stdout, errs = runCLI(t, "dedup", out, "--clusters", "3", "--check-recall", "5", "--json")
	var approx dedupSummary
	if err := json.Unmarshal([]byte(stdout), &approx); code != 0 || err != nil {
		t.Fatalf("dedup --clusters 3: exit %d, %v: %s %s", code, err, stdout, errs)
	}
	if r := approx.Recall; approx.Clusters != 3 || approx.Duplicates != 3 || r == nil || r.Sampled != 5 || r.Found != r.Exact || r.Ratio != 1 {
		t.Errorf("dedup --clusters 3 --check-recall 5: %+v (recall %+v), want the 3 byte copies and recall 1 over 5 images", approx, r)
	}
	code, _, errs = runCLI(t, "run", "--list", filepath.Join(res, "keep.txt"), "-p", "x", "--out", filepath.Join(t.TempDir(), "again"))
	if code != 0 {
		t.Errorf("run --list keep.txt: exit %d: %s", code, errs)
	}
}

// TestDedupCLIRefusals: bad input is refused before any comparison, each
// with an error naming what is wrong.
func TestDedupCLIRefusals(t *testing.T) {
	out, _ := queryJob(t)
	parts, err := filepath.Glob(filepath.Join(out, "index", "*"))
	if err != nil || len(parts) != 2 {
		t.Fatalf("index parts %v (%v), want 2", parts, err)
	}
	existing := t.TempDir()
	// mixed: a copy of the index whose second part says another model.
	mixed := filepath.Join(t.TempDir(), "mixed")
	if err := os.CopyFS(mixed, os.DirFS(filepath.Join(out, "index"))); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(mixed, filepath.Base(parts[1]), index.MetaFile)
	b, _ := os.ReadFile(second)
	var meta map[string]any
	json.Unmarshal(b, &meta)
	meta["model"] = "another/model"
	b, _ = json.Marshal(meta)
	os.WriteFile(second, b, 0o644)
	// truncated: a copy whose first part's embeddings lost their end.
	trunc := filepath.Join(t.TempDir(), "trunc")
	if err := os.CopyFS(trunc, os.DirFS(filepath.Join(out, "index"))); err != nil {
		t.Fatal(err)
	}
	emb := filepath.Join(trunc, filepath.Base(parts[0]), index.EmbedsFile)
	st, _ := os.Stat(emb)
	os.Truncate(emb, st.Size()-100)
	// empty: one part of no rows; failed: a part whose images all failed.
	empty, failed := filepath.Join(t.TempDir(), "empty"), filepath.Join(t.TempDir(), "failed")
	if err := os.CopyFS(failed, os.DirFS(parts[0])); err != nil {
		t.Fatal(err)
	}
	var m index.Meta
	json.Unmarshal(must(os.ReadFile(filepath.Join(parts[0], index.MetaFile))), &m)
	for i := range m.Items {
		m.Items[i].Status = "error"
	}
	os.WriteFile(filepath.Join(failed, index.MetaFile), must(json.Marshal(m)), 0o644)
	os.MkdirAll(empty, 0o755)
	p := m.Grid[0] * m.Grid[1]
	os.WriteFile(filepath.Join(empty, index.EmbedsFile), must(tensorio.NPYHeader(tensorio.DTypeF16, []int{0, m.Dim}, 0)), 0o644)
	os.WriteFile(filepath.Join(empty, index.PatchesFile), must(tensorio.NPYHeader(tensorio.DTypeF16, []int{0, p, m.Dim}, 0)), 0o644)
	m.Rows, m.Items = 0, nil
	os.WriteFile(filepath.Join(empty, index.MetaFile), must(json.Marshal(m)), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{out, "--threshold", "0"}, 2, "--threshold 0: want a cosine above 0"},
		{[]string{out, "--threshold", "1.01"}, 2, "--threshold 1.01"},
		{[]string{out, "--keep", "largest"}, 2, "does not record"},
		{[]string{out, "--keep", "biggest"}, 2, `--keep "biggest"`},
		{[]string{out, "--group", "chain"}, 2, `--group "chain"`},
		{[]string{out, "--out", existing}, 2, "--out " + existing + " exists"},
		{[]string{out, "--clusters", "4", "--probe", "3"}, 2, "--probe 3"},
		{[]string{out, "--clusters", "-1"}, 2, "--clusters -1"},
		{[]string{out, "--check-recall", "5"}, 2, "give --clusters too"},
		{[]string{"weaviate://127.0.0.1:1/Photos"}, 1, "127.0.0.1:1"},
		{[]string{mixed}, 1, "one index holds the vectors of one model"},
		{[]string{trunc}, 1, index.EmbedsFile},
		{[]string{filepath.Join(t.TempDir(), "none")}, 1, "none"},
		{[]string{empty}, 1, "the index has no rows"},
		{[]string{failed}, 1, "no image read and encoded"},
	} {
		code, _, errs := runCLI(t, append([]string{"dedup"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("dedup %q: exit %d, %s; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDedupCLIObjectStore: the same job's index in an S3 prefix (SeaweedFS)
// gives the same groups.jsonl, byte for byte, as on a local disk.
func TestDedupCLIObjectStore(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	if err := srv.CreateBucket(context.Background(), "out"); err != nil {
		t.Fatal(err)
	}
	_, in := queryJob(t)
	inputs := []string{"--images", filepath.Join(in, "scenes"), "--images", filepath.Join(in, "shard.tar"), "-p", "x", "--index", "--shard-size", "8", "--layout", "shards"}
	local := filepath.Join(t.TempDir(), "local")
	const prefix = "s3://out/ix/"
	for _, out := range []string{local, prefix} {
		if code, _, errs := runCLI(t, append([]string{"run", "--out", out}, inputs...)...); code != 0 {
			t.Fatalf("run --out %s: exit %d: %s", out, code, errs)
		}
	}
	var groups [2][]byte
	for i, ix := range []string{local, prefix} {
		res := filepath.Join(t.TempDir(), "dups")
		if code, _, errs := runCLI(t, "dedup", ix, "--out", res); code != 0 {
			t.Fatalf("dedup %s: exit %d: %s", ix, code, errs)
		}
		groups[i] = must(os.ReadFile(filepath.Join(res, "groups.jsonl")))
	}
	if len(groups[0]) == 0 || !bytes.Equal(groups[0], groups[1]) {
		t.Errorf("groups.jsonl from the store:\n%s\nfrom the disk:\n%s", groups[1], groups[0])
	}
}
