package weaviatetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// call sends a JSON request to url and returns the status and body;
// key, when set, goes in the Authorization header.
func call(t *testing.T, method, url, key string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, b
}

// mustCall is call that fails t unless the status is 200.
func mustCall(t *testing.T, method, url string, body any) []byte {
	t.Helper()
	code, b := call(t, method, url, "", body)
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d: %s", method, url, code, b)
	}
	return b
}

// createClass creates class from its JSON definition through n.
func createClass(t *testing.T, n *Node, class map[string]any) {
	t.Helper()
	mustCall(t, http.MethodPost, n.URL+"/v1/schema", class)
}

// insert inserts objects through n with POST /v1/batch/objects and query
// (e.g. "?consistency_level=QUORUM"), failing t on any object's error.
func insert(t *testing.T, n *Node, query string, objects []map[string]any) {
	t.Helper()
	b := mustCall(t, http.MethodPost, n.URL+"/v1/batch/objects"+query, map[string]any{"objects": objects})
	var res []struct {
		ID     string
		Result struct {
			Errors *struct{ Error []struct{ Message string } }
		}
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("batch answer %s: %v", b, err)
	}
	if len(res) != len(objects) {
		t.Fatalf("batch of %d answered for %d: %s", len(objects), len(res), b)
	}
	for _, r := range res {
		if r.Result.Errors != nil {
			t.Fatalf("batch object %s: %+v", r.ID, r.Result.Errors.Error)
		}
	}
}

// count returns class's object count through n, from GraphQL Aggregate.
func count(t *testing.T, n *Node, class string) int {
	t.Helper()
	q := fmt.Sprintf("{ Aggregate { %s { meta { count } } } }", class)
	b := mustCall(t, http.MethodPost, n.URL+"/v1/graphql", map[string]any{"query": q})
	var res struct {
		Data struct {
			Aggregate map[string][]struct{ Meta struct{ Count int } }
		}
		Errors []struct{ Message string }
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("Aggregate answer %s: %v", b, err)
	}
	if len(res.Errors) > 0 || len(res.Data.Aggregate[class]) != 1 {
		t.Fatalf("Aggregate %s through %s: %s", class, n.Name, b)
	}
	return res.Data.Aggregate[class][0].Meta.Count
}

func uuid(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// timed runs f and logs how long it took.
func timed(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	t.Logf("%s: %s", what, time.Since(start).Round(10*time.Millisecond))
}

func TestNodeNamedVectorsPersist(t *testing.T) {
	var n *Node
	timed(t, "start", func() { n = Start(t) })
	if n.PID() == 0 || !strings.HasPrefix(n.URL, "http://"+n.Host()) || n.GRPCPort() == 0 {
		t.Fatalf("node %+v: PID %d, Host %s, gRPC port %d", n, n.PID(), n.Host(), n.GRPCPort())
	}
	hnsw := func(extra map[string]any) map[string]any {
		cfg := map[string]any{"distance": "cosine"}
		for k, v := range extra {
			cfg[k] = v
		}
		return map[string]any{
			"vectorIndexType":   "hnsw",
			"vectorIndexConfig": cfg,
			"vectorizer":        map[string]any{"none": map[string]any{}},
		}
	}
	// No class-level "vectorizer": with named vectors Weaviate refuses it
	// ("a class level vector index and named vectors is forbidden").
	createClass(t, n, map[string]any{
		"class": "Probe",
		"vectorConfig": map[string]any{
			"pooled":  hnsw(nil),
			"patches": hnsw(map[string]any{"multivector": map[string]any{"enabled": true}}),
		},
		"properties": []any{map[string]any{"name": "title", "dataType": []string{"text"}}},
	})
	insert(t, n, "", []map[string]any{
		{"class": "Probe", "id": uuid(1), "properties": map[string]any{"title": "one"},
			"vectors": map[string]any{"pooled": []float32{1, 0, 0}, "patches": [][]float32{{1, 0}, {0, 1}}}},
		{"class": "Probe", "id": uuid(2), "properties": map[string]any{"title": "two"},
			"vectors": map[string]any{"pooled": []float32{0, 1, 0}, "patches": [][]float32{{1, 1}, {0, 1}, {1, 0}}}},
	})
	if c := count(t, n, "Probe"); c != 2 {
		t.Fatalf("count %d after inserting 2", c)
	}
	pid := n.PID()
	timed(t, "kill", n.Kill)
	n.Kill() // idempotent
	if n.PID() != 0 {
		t.Fatalf("PID %d after Kill", n.PID())
	}
	timed(t, "restart", func() {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	})
	if n.PID() == 0 || n.PID() == pid {
		t.Fatalf("PID %d after Restart (was %d)", n.PID(), pid)
	}
	if c := count(t, n, "Probe"); c != 2 {
		t.Fatalf("count %d after Kill and Restart, want 2", c)
	}
	b := mustCall(t, http.MethodGet, n.URL+"/v1/objects/Probe/"+uuid(2)+"?include=vector", nil)
	var obj struct{ Vectors map[string]json.RawMessage }
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	if got := string(obj.Vectors["patches"]); got != "[[1,1],[0,1],[1,0]]" {
		t.Errorf("patches of %s after Restart: %s", uuid(2), got)
	}
}

func TestClusterReplicates(t *testing.T) {
	var c *Cluster
	timed(t, "start 3 nodes", func() { c = StartCluster(t, 3) })
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	createClass(t, n1, map[string]any{
		"class":             "Replicated",
		"vectorizer":        "none",
		"replicationConfig": map[string]any{"factor": 3},
		"properties":        []any{map[string]any{"name": "n", "dataType": []string{"int"}}},
	})
	objects := func(from, to int) []map[string]any {
		var objs []map[string]any
		for i := from; i < to; i++ {
			objs = append(objs, map[string]any{"class": "Replicated", "id": uuid(i),
				"properties": map[string]any{"n": i}, "vector": []float32{float32(i), 1}})
		}
		return objs
	}
	insert(t, n1, "?consistency_level=QUORUM", objects(0, 10))
	timed(t, "kill node3", n3.Kill)
	// node3 may have been the Raft leader; a write sent before the others
	// know the new one would wait on node3 for good.
	timed(t, "wait for a leader", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := c.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	})
	insert(t, n1, "?consistency_level=QUORUM", objects(10, 20))
	b := mustCall(t, http.MethodGet, n2.URL+"/v1/objects/Replicated/"+uuid(15)+"?consistency_level=ONE", nil)
	var obj struct{ Properties struct{ N int } }
	if err := json.Unmarshal(b, &obj); err != nil || obj.Properties.N != 15 {
		t.Fatalf("object %s through node2 while node3 is down: %s (%v)", uuid(15), b, err)
	}
	timed(t, "restart node3", func() {
		if err := n3.Restart(); err != nil {
			t.Fatal(err)
		}
	})
	timed(t, "wait healthy", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	})
	// node3 missed objects 10..19. Reading every object through it with
	// consistency ALL needs all three replicas and repairs node3's copy.
	for i := range 20 {
		b := mustCall(t, http.MethodGet, n3.URL+"/v1/objects/Replicated/"+uuid(i)+"?consistency_level=ALL", nil)
		if err := json.Unmarshal(b, &obj); err != nil || obj.Properties.N != i {
			t.Fatalf("object %s through node3 with consistency ALL: %s (%v)", uuid(i), b, err)
		}
	}
	if got := count(t, n3, "Replicated"); got != 20 {
		t.Fatalf("count through node3 after its restart: %d, want 20", got)
	}
	// node1, which the others joined first, rejoins them.
	timed(t, "kill and restart node1", func() {
		n1.Kill()
		if err := n1.Restart(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if got := count(t, n1, "Replicated"); got != 20 {
		t.Fatalf("count through node1 after its restart: %d, want 20", got)
	}
}

func TestAPIKey(t *testing.T) {
	var n *Node
	timed(t, "start", func() { n = StartWith(t, Options{APIKey: "k"}) })
	for _, tc := range []struct {
		key  string
		want int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusUnauthorized}, {"k", http.StatusOK}} {
		if code, b := call(t, http.MethodGet, n.URL+"/v1/schema", tc.key, nil); code != tc.want {
			t.Errorf("GET /v1/schema with key %q: %d, want %d: %s", tc.key, code, tc.want, b)
		}
	}
	code, b := call(t, http.MethodPost, n.URL+"/v1/schema", "k", map[string]any{"class": "Keyed", "vectorizer": "none"})
	if code != http.StatusOK {
		t.Errorf("create a class with the key: %d: %s", code, b)
	}
}
