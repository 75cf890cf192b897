package main

import (
	"math"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
)

// TestQueryWeaviate: `run --index weaviate://...` (the URL after a space,
// as users type it) writes the scenes, tar members included, into a real
// Weaviate node; `merge` proves the collection holds them; `query
// weaviate://...` ranks them as `query` over the same job's file index, with
// the same words' cells; the flags' mistakes are usage errors and an
// address nobody answers is a clear error.
func TestQueryWeaviate(t *testing.T) {
	node := weaviatetest.Start(t)
	out, in := queryJob(t)
	url := "weaviate://" + node.Host() + "/Scenes"
	wout := filepath.Join(t.TempDir(), "wout")
	code, _, errs := runCLI(t, "run", "--images", filepath.Join(in, "scenes"), "--images", filepath.Join(in, "shard.tar"), "-p", "x", "--index", url, "--out", wout)
	if code != 0 || !strings.Contains(errs, url) {
		t.Fatalf("run --index %s: exit %d: %s", url, code, errs)
	}
	code, stdout, errs := runCLI(t, "merge", wout)
	if code != 0 || !strings.Contains(stdout, "collection "+url+": 15 objects, 0 of them") {
		t.Fatalf("merge: exit %d: %s%s", code, stdout, errs)
	}
	hits := func(where string) []queryHit {
		t.Helper()
		code, stdout, errs := runCLI(t, "query", where, "-p", "a black star", "--top", "5", "--json")
		if code != 0 {
			t.Fatalf("query %s: exit %d: %s", where, code, errs)
		}
		return parseQueryHits(t, stdout)
	}
	want := hits(out)
	same := func(url string) {
		t.Helper()
		got := hits(url)
		if len(got) != 5 || len(want) != 5 {
			t.Fatalf("%d hits from %s, %d from the file index", len(got), url, len(want))
		}
		members := 0
		for i := range want {
			g := got[i]
			w := want[i]
			// The shard's members are copies of folder images: equal
			// scores, in either order.
			for _, o := range want {
				if o.Path == g.Path && math.Abs(float64(o.Score-g.Score)) < 0.02 && math.Abs(float64(w.Score-g.Score)) < 0.02 {
					w = o
				}
			}
			if g.Path != w.Path || g.Member != w.Member || g.ID == "" || len(g.Words) != len(w.Words) {
				t.Fatalf("%s hit %d: %s %.4f (member %q, id %q); the file index: %s %.4f (member %q)", url, i, g.Path, g.Score, g.Member, g.ID, w.Path, w.Score, w.Member)
			}
			if g.Member != "" {
				members++
			}
			for k := range w.Words {
				if g.Words[k].Cell != w.Words[k].Cell {
					t.Errorf("%s hit %d word %s: cell %v, the file index %v", url, i, w.Words[k].Word, g.Words[k].Cell, w.Words[k].Cell)
				}
			}
		}
		t.Logf("%s: top 5 equal to the file index's, %d of them tar members", url, members)
	}
	same(url)
	// A collection searched by a flat index (exact) answers as well.
	flat := "weaviate://" + node.Host() + "/ScenesFlat"
	code, _, errs = runCLI(t, "run", "--images", filepath.Join(in, "scenes"), "--images", filepath.Join(in, "shard.tar"), "-p", "x", "--index", flat, "--vector-index", "flat", "--out", filepath.Join(t.TempDir(), "fout"))
	if code != 0 {
		t.Fatalf("run --index %s --vector-index flat: exit %d: %s", flat, code, errs)
	}
	same(flat)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--replication", "3"}, exitUsage, "--replication needs --index weaviate://"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", "weaviate://" + node.Host() + "/lower"}, exitUsage, "class name"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index=elsewhere"}, exitUsage, "--index \"elsewhere\""},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--consistency", "SOME"}, exitUsage, "--consistency \"SOME\""},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--ef-construction", "256"}, exitUsage, "--ef-construction needs --index weaviate://"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--vector-index", "tree"}, exitUsage, "--vector-index \"tree\": want hnsw or flat"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--vector-index", "flat", "--max-connections", "64"}, exitUsage, "--max-connections 64: want 0: a flat index"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--max-connections", "-2"}, exitUsage, "want 0 (Weaviate's default) or more"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--quantization", "pq"}, exitUsage, "--quantization \"pq\": want none or rq"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--rescore-limit", "64"}, exitUsage, "--rescore-limit 64: want 0 (256) or more, with quantization rq"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--quantization", "rq"}, exitFailed, "quantization none, not rq"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--vector-index", "flat"}, exitFailed, "searches its image embeddings by hnsw, not flat"},
		{[]string{"run", in, "-p", "x", "--out", filepath.Join(t.TempDir(), "o"), "--index", url, "--ef-construction", "512"}, exitFailed, "efConstruction 128, not 512"},
		{[]string{"query", url, "-p", "x", "--top", "0"}, exitUsage, "--top must be 1"},
		{[]string{"query", "weaviate://" + closed + "/Scenes", "-p", "x"}, exitFailed, "is a Weaviate node listening at " + closed},
		{[]string{"query", "weaviate://" + node.Host() + "/Nothing", "-p", "x"}, exitFailed, "no such collection"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s; want exit %d and %q", strings.Join(c.args, " "), code, errs, c.code, c.want)
		}
	}
}
