package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
)

// TestBenchQueryWeaviate: `query --weaviate` writes the file index's
// vectors into a real node with the index it names and measures its
// recall against the file index: a flat index, with or without 8-bit
// codes, finds the exact top 10 (recall 1); an HNSW graph reports the
// construction settings and quantization it was built with. The index
// flags' mistakes are usage errors.
func TestBenchQueryWeaviate(t *testing.T) {
	node := weaviatetest.Start(t)
	for _, c := range []struct {
		args              []string
		index, quant      string
		efc, conns, limit int
		exact             bool
	}{
		{[]string{"--weaviate-index", "flat"}, "flat", "", 0, 0, 0, true},
		{[]string{"--weaviate-index", "flat", "--weaviate-quantization", "rq", "--rescore-limit", "128"}, "flat", "rq", 0, 0, 128, true},
		{[]string{"--ef-construction", "64", "--max-connections", "8"}, "hnsw", "", 64, 8, 0, false},
		{[]string{"--weaviate-quantization", "rq"}, "hnsw", "rq", 128, 32, 256, false},
	} {
		args := append([]string{"query", "--n", "2000", "--dim", "24", "--parts", "2", "--queries", "10", "--top", "20", "--faiss=false", "--json",
			"--weaviate", node.Host()}, c.args...)
		code, out, errs := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		var res queryBenchResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c.args, " "), err, out)
		}
		w := res.Weaviate
		if w == nil {
			t.Fatalf("%s: no Weaviate result: %s", strings.Join(c.args, " "), res.WeaviateError)
		}
		if w.Index != c.index || w.Quantization != c.quant || w.EFBuild != c.efc || w.MaxConns != c.conns || w.RescoreLimit != c.limit || w.ImagesPerS <= 0 {
			t.Errorf("%s: index %q quantization %q (rescoring %d), efConstruction %d, maxConnections %d, %.0f images/s; want %q %q (%d), %d, %d",
				strings.Join(c.args, " "), w.Index, w.Quantization, w.RescoreLimit, w.EFBuild, w.MaxConns, w.ImagesPerS, c.index, c.quant, c.limit, c.efc, c.conns)
		}
		if c.exact && w.RecallAt10 != 1 {
			t.Errorf("%s: recall@10 %.3f, want 1 (an exact search)", strings.Join(c.args, " "), w.RecallAt10)
		}
		t.Logf("%s: recall@10 %.3f, %.1f ms", strings.Join(c.args, " "), w.RecallAt10, w.MedianMS)
	}
	for _, args := range [][]string{
		{"--weaviate-index", "tree"},
		{"--weaviate-index", "flat", "--ef", "64"},
		{"--weaviate-quantization", "pq"},
		{"--rescore-limit", "-1"},
		{"--max-connections", "-4"},
	} {
		if code, _, errs := runCLI(t, append([]string{"query", "--weaviate", node.Host()}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errs)
		}
	}
}
