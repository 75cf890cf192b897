package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/weaviatetest"
)

// schemaPooled reads the pooled vector's index config and the class's
// replication factor of class from node's REST schema, with no code of
// this program between: what the server holds.
func schemaPooled(t *testing.T, node *weaviatetest.Node, class string) (status int, kind string, conf map[string]any, patches map[string]any, replication float64) {
	t.Helper()
	resp, err := http.Get("http://" + node.Host() + "/v1/schema/" + class)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", nil, nil, 0
	}
	var cl struct {
		VectorConfig map[string]struct {
			VectorIndexType   string         `json:"vectorIndexType"`
			VectorIndexConfig map[string]any `json:"vectorIndexConfig"`
		} `json:"vectorConfig"`
		ReplicationConfig struct {
			Factor float64 `json:"factor"`
		} `json:"replicationConfig"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cl); err != nil {
		t.Fatal(err)
	}
	p := cl.VectorConfig["pooled"]
	return resp.StatusCode, p.VectorIndexType, p.VectorIndexConfig, cl.VectorConfig["patches"].VectorIndexConfig, cl.ReplicationConfig.Factor
}

// collectionInfoJSON runs collection info --json on url.
func collectionInfoJSON(t *testing.T, url string) collectionInfo {
	t.Helper()
	code, stdout, errs := runCLI(t, "collection", "info", url, "--json")
	if code != 0 {
		t.Fatalf("collection info %s: exit %d: %s", url, code, errs)
	}
	var info collectionInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatalf("collection info %s --json: %v: %s", url, err, stdout)
	}
	return info
}

// TestCollectionCommands: collection create makes a collection with the
// settings asked (the server's own schema holds them) and info reports
// them as the server does (Weaviate's defaults where none was asked);
// run --index writes into the collection made, and one of another
// readout refuses the job; the deprecated creation flags of run still
// work and say so; drop removes the collection; mistakes are usage errors
// naming the flag, and a missing or existing collection is an error naming
// it, with what to do.
func TestCollectionCommands(t *testing.T) {
	orttest.Load(t)
	node := weaviatetest.Start(t)
	url := "weaviate://" + node.Host() + "/Made"
	code, stdout, errs := runCLI(t, "collection", "create", url, "--ef-construction", "200", "--max-connections", "12",
		"--quantization", "rq", "--rescore-limit", "100", "--muvera", "--json")
	if code != 0 {
		t.Fatalf("collection create: exit %d: %s", code, errs)
	}
	var made collectionInfo
	if err := json.Unmarshal([]byte(stdout), &made); err != nil {
		t.Fatalf("collection create --json: %v: %s", err, stdout)
	}
	status, kind, conf, patches, repl := schemaPooled(t, node, "Made")
	rq, _ := conf["rq"].(map[string]any)
	mv, _ := patches["multivector"].(map[string]any)
	muvera, _ := mv["muvera"].(map[string]any)
	if status != 200 || kind != "hnsw" || conf["efConstruction"] != 200.0 || conf["maxConnections"] != 12.0 ||
		rq["enabled"] != true || rq["rescoreLimit"] != 100.0 || muvera["enabled"] != true || repl != 1 {
		t.Fatalf("the server's schema of Made: status %d, %s %v, patches %v, replication %v", status, kind, conf, patches, repl)
	}
	info := collectionInfoJSON(t, url)
	s := info.Settings
	if s.VectorIndex != "hnsw" || s.EFConstruction != 200 || s.MaxConnections != 12 || s.Quantization != "rq" || s.RescoreLimit != 100 ||
		!s.Muvera || !s.Patches || s.Replication != 1 || info.Objects != 0 || info.Model != "default" || info.Dim <= 0 || info.Grid[0] <= 0 ||
		info.Format != "condition-collection/v1" || info.Collection != url {
		t.Fatalf("collection info: %+v", info)
	}
	if made.Settings != s || made.CollectionMeta != info.CollectionMeta {
		t.Errorf("create printed %+v; info %+v", made, info)
	}
	// Weaviate's own defaults where none was asked: read back, not ours.
	defURL := "weaviate://" + node.Host() + "/Defaults"
	if code, _, errs := runCLI(t, "collection", "create", defURL, "--readout", "clearclip"); code != 0 {
		t.Fatalf("collection create %s: exit %d: %s", defURL, code, errs)
	}
	_, _, conf, _, _ = schemaPooled(t, node, "Defaults")
	d := collectionInfoJSON(t, defURL)
	if d.Settings.VectorIndex != "hnsw" || float64(d.Settings.EFConstruction) != conf["efConstruction"] || float64(d.Settings.MaxConnections) != conf["maxConnections"] ||
		d.Settings.EFConstruction <= 0 || d.Settings.Quantization != "" || d.Settings.Muvera || d.Readout != "clearclip" {
		t.Errorf("collection info %s: %+v; the server's pooled index %v", defURL, d, conf)
	}
	flatURL := "weaviate://" + node.Host() + "/Flat"
	if code, _, errs := runCLI(t, "collection", "create", flatURL, "--vector-index", "flat"); code != 0 {
		t.Fatalf("collection create %s --vector-index flat: exit %d: %s", flatURL, code, errs)
	}
	if _, kind, _, _, _ := schemaPooled(t, node, "Flat"); kind != "flat" || collectionInfoJSON(t, flatURL).Settings.VectorIndex != "flat" {
		t.Errorf("%s: the server's index %s, info %+v", flatURL, kind, collectionInfoJSON(t, flatURL).Settings)
	}
	code, stdout, errs = runCLI(t, "collection", "info", flatURL)
	if code != 0 || !strings.Contains(stdout, "vector index  flat\n") || !strings.Contains(stdout, "model         default\n") {
		t.Errorf("collection info %s: exit %d: %s%s", flatURL, code, stdout, errs)
	}
	t.Logf("collection info %s:\n%s", flatURL, stdout)

	// run --index writes into the collection made, as its model stamp allows.
	in := filepath.Join("..", "..", "testdata", "scenes", "images")
	ents, err := os.ReadDir(in)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "run", in, "-p", "x", "--index", url, "--out", filepath.Join(t.TempDir(), "o")); code != 0 {
		t.Fatalf("run --index %s: exit %d: %s", url, code, errs)
	}
	if got := collectionInfoJSON(t, url); got.Objects != len(ents) || got.Settings != s {
		t.Errorf("after run --index: %d objects, settings %+v; want %d, %+v", got.Objects, got.Settings, len(ents), s)
	}
	code, _, errs = runCLI(t, "run", in, "-p", "x", "--index", defURL, "--out", filepath.Join(t.TempDir(), "o"))
	if code != exitFailed || !strings.Contains(errs, "readout clearclip") {
		t.Errorf("run --index %s (a clearclip collection) without --readout: exit %d: %s; want exit 1 naming the readouts", defURL, code, errs)
	}
	// The deprecated creation flags of run: a collection made with them.
	oldURL := "weaviate://" + node.Host() + "/Old"
	code, _, errs = runCLI(t, "run", in, "-p", "x", "--index", oldURL, "--vector-index", "flat", "--out", filepath.Join(t.TempDir(), "o"))
	if code != 0 || !strings.Contains(errs, "--vector-index has been deprecated") || !strings.Contains(errs, "condition collection create") {
		t.Fatalf("run --index %s --vector-index flat: exit %d: %s", oldURL, code, errs)
	}
	if got := collectionInfoJSON(t, oldURL); got.Settings.VectorIndex != "flat" || got.Objects != len(ents) {
		t.Errorf("run --index --vector-index flat made %+v", got)
	}

	missing := "weaviate://" + node.Host() + "/Missing"
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"collection", "create", "weaviate://" + node.Host() + "/lower"}, exitUsage, []string{"class name"}},
		{[]string{"collection", "create", "Photos"}, exitUsage, []string{"weaviate://HOST:PORT/Collection"}},
		{[]string{"collection", "create"}, exitUsage, []string{"want one collection"}},
		{[]string{"collection", "create", missing, "--vector-index", "tree"}, exitUsage, []string{`--vector-index "tree": want hnsw or flat`}},
		{[]string{"collection", "create", missing, "--vector-index", "flat", "--ef-construction", "64"}, exitUsage, []string{"--ef-construction 64: want 0: a flat index"}},
		{[]string{"collection", "create", missing, "--quantization", "pq"}, exitUsage, []string{`--quantization "pq": want none or rq`}},
		{[]string{"collection", "create", missing, "--rescore-limit", "10"}, exitUsage, []string{"--rescore-limit 10", "with quantization rq"}},
		{[]string{"collection", "create", missing, "--replication", "-1"}, exitUsage, []string{"--replication -1"}},
		{[]string{"collection", "create", url}, exitFailed, []string{url, "exists already", "condition collection drop " + url + " --yes"}},
		{[]string{"collection", "info", missing}, exitFailed, []string{missing, "no such collection", "condition collection create " + missing}},
		{[]string{"collection", "drop", missing, "--yes"}, exitFailed, []string{missing, "no such collection"}},
		{[]string{"collection", "drop", url}, exitUsage, []string{url, "add --yes"}},
		{[]string{"query", missing, "-p", "x"}, exitFailed, []string{"no such collection", "condition run --index " + missing}},
	} {
		code, _, errs := runCLI(t, c.args...)
		ok := code == c.code
		for _, w := range c.want {
			ok = ok && strings.Contains(errs, w)
		}
		if !ok {
			t.Errorf("%s: exit %d: %s; want exit %d and %q", strings.Join(c.args, " "), code, errs, c.code, c.want)
		}
		t.Logf("%s: exit %d: %s", strings.Join(c.args[:2], " "), code, errs)
	}
	if status, _, _, _, _ := schemaPooled(t, node, "Missing"); status != http.StatusNotFound {
		t.Errorf("a refused create made Missing: schema status %d", status)
	}

	// A class this program did not make is described as not ours and
	// never dropped.
	resp, err := http.Post("http://"+node.Host()+"/v1/schema", "application/json", strings.NewReader(`{"class": "Foreign", "description": "someone else's"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	foreign := "weaviate://" + node.Host() + "/Foreign"
	for _, args := range [][]string{{"collection", "info", foreign}, {"collection", "drop", foreign, "--yes"}} {
		if code, _, errs := runCLI(t, args...); code != exitFailed || !strings.Contains(errs, "was not made by this program") {
			t.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
	}
	if status, _, _, _, _ := schemaPooled(t, node, "Foreign"); status != http.StatusOK {
		t.Errorf("drop --yes of a class this program did not make: its schema status %d after", status)
	}

	code, stdout, errs = runCLI(t, "collection", "drop", url, "--yes")
	if code != 0 || stdout != fmt.Sprintf("dropped %s (%d objects)\n", url, len(ents)) {
		t.Fatalf("collection drop %s --yes: exit %d: %q %s", url, code, stdout, errs)
	}
	if status, _, _, _, _ := schemaPooled(t, node, "Made"); status != http.StatusNotFound {
		t.Errorf("after drop, the server's schema of Made: status %d", status)
	}
	if code, _, errs := runCLI(t, "collection", "info", url); code != exitFailed || !strings.Contains(errs, "no such collection") {
		t.Errorf("collection info after drop: exit %d: %s", code, errs)
	}
}
