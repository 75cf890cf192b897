package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/weaviate"
	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
)

// collURL is the address of collection name on node n.
func collURL(n *weaviatetest.Node, name string) string { return "weaviate://" + n.Host() + "/" + name }

// checkCollectionHolds checks that the collection at url holds exactly
// the ok images of manifest, once each, under the ids their source gives,
// with the engine's vectors: the normalised image embedding and the
// joint-space patches.
func checkCollectionHolds(t *testing.T, f *indexFixture, url, manifest string) {
	t.Helper()
	ctx := context.Background()
	c, err := index.OpenCollection(ctx, url, index.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	want := map[string]string{}
	for p, e := range latestByPath(t, manifest) {
		if e.Status != StatusOK {
			if e.Object != "" {
				t.Errorf("%s failed (%s) but names object %s", p, e.Error, e.Object)
			}
			continue
		}
		ok++
		id := index.CollectionID(e.Source, "")
		if e.Object != url+"/"+id {
			t.Errorf("%s: object %q, want %s/%s", p, e.Object, url, id)
		}
		want[id] = p
	}
	seen := map[string]int{}
	if err := c.Objects(ctx, func(id, p string) error {
		seen[id]++
		if want[id] != p {
			t.Errorf("object %s has path %q, want %q", id, p, want[id])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != ok {
		t.Errorf("the collection holds %d objects, the manifest %d ok images", len(seen), ok)
	}
	n, err := c.Count(ctx)
	if err != nil || n != ok {
		t.Errorf("count %d (%v), want %d", n, err, ok)
	}
	tg, _ := weaviate.Parse(url)
	cl := weaviate.New(tg.Host, "")
	ref := f.ref(t)
	for id, p := range want {
		s, err := cl.Get(ctx, tg.Collection, id, "")
		if err != nil || s == nil {
			t.Fatalf("%s: object %s: %v", p, id, err)
		}
		emb, enc := ref(p)
		var norm float64
		for _, v := range emb {
			norm += float64(v) * float64(v)
		}
		for i, v := range s.Pooled {
			if d := math.Abs(float64(v) - float64(emb[i])/math.Sqrt(norm)); d > 1e-6 {
				t.Fatalf("%s: pooled[%d] %g, want %g", p, i, v, float64(emb[i])/math.Sqrt(norm))
			}
		}
		jp, err := f.eng.JointPatches(enc)
		if err != nil {
			t.Fatal(err)
		}
		d := len(emb)
		if len(s.Patches)*d != len(jp) {
			t.Fatalf("%s: %d patch vectors, want %d", p, len(s.Patches), len(jp)/d)
		}
		for k, row := range s.Patches {
			for i, v := range row {
				if math.Abs(float64(v-jp[k*d+i])) > 1e-5 {
					t.Fatalf("%s: patch %d [%d] %g, want %g", p, k, i, v, jp[k*d+i])
				}
			}
		}
	}
}

// TestRunCollection: a job into a collection on a real Weaviate node
// writes every ok image once, under its source's id, with its vectors;
// the manifest names each object and merge proves the collection holds
// them; a resumed job and one run again over it add nothing; search
// through Weaviate gives the file index's hits, scores and word boxes.
func TestRunCollection(t *testing.T) {
	node := weaviatetest.Start(t)
	ctx := context.Background()
	f := newIndexFixture(t, 6)
	url := collURL(node, "Images")
	cfg := func(out string) Config {
		return Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: out, Batch: 2,
			Collection: &CollectionConfig{URL: url, Batch: 4}}
	}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(ctx, cfg(out))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 6 || sum.Failed != 1 {
		t.Fatalf("done %d, failed %d; want 6 and the corrupt image", sum.Done, sum.Failed)
	}
	checkCollectionHolds(t, f, url, sum.Manifest)
	rep, err := Merge(ctx, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.HasCollection() {
		t.Fatal("merge: the manifest names no collection")
	}
	if err := rep.CheckCollection(ctx, ""); err != nil || rep.CollectionObjects != 6 || len(rep.CollectionMissing) != 0 || rep.CollectionOthers != 0 {
		t.Fatalf("merge's check: %d objects, missing %v, others %d, %v", rep.CollectionObjects, rep.CollectionMissing, rep.CollectionOthers, err)
	}

	// Resumed, then run again over it: the same objects, no more.
	c := cfg(out)
	c.Resume = true
	if sum, err = Run(ctx, c); err != nil || sum.Skipped != 6 {
		t.Fatalf("resume: skipped %d (%v), want 6", sum.Skipped, err)
	}
	c.Resume, c.Overwrite = false, true
	if sum, err = Run(ctx, c); err != nil || sum.Done != 6 {
		t.Fatalf("again: done %d (%v)", sum.Done, err)
	}
	checkCollectionHolds(t, f, url, sum.Manifest)

	// Removing an object shows in merge's check.
	tg, _ := weaviate.Parse(url)
	wc := weaviate.New(tg.Host, "")
	var gone string
	for _, e := range latestByPath(t, sum.Manifest) {
		if e.Status == StatusOK {
			gone = e.Path
			if err := wc.Delete(ctx, tg.Collection, strings.TrimPrefix(e.Object, url+"/")); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	rep, err = Merge(ctx, out, nil)
	if err == nil {
		err = rep.CheckCollection(ctx, "")
	}
	if err != nil || len(rep.CollectionMissing) != 1 || rep.CollectionMissing[0] != gone {
		t.Errorf("merge after deleting %s's object: missing %v (%v)", gone, rep.CollectionMissing, err)
	}

	// Search through Weaviate equals the file index's.
	local := filepath.Join(t.TempDir(), "local")
	lc := cfg(local)
	lc.Collection, lc.Index, lc.IndexDType = nil, true, "float32"
	if _, err := Run(ctx, lc); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, c); err != nil { // the deleted object back
		t.Fatal(err)
	}
	lx, err := index.Open(ctx, local, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lx.Close()
	wx, err := index.Open(ctx, url, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wx.Close()
	if wx.Meta().Format != index.CollectionFormat {
		t.Errorf("the collection's format %q, want %q", wx.Meta().Format, index.CollectionFormat)
	}
	if wx.Rows() != 6 || wx.Meta().Dim != lx.Meta().Dim || wx.Grid() != lx.Grid() {
		t.Errorf("the collection opened: %d rows, %d wide on %s; the file index %d wide on %s", wx.Rows(), wx.Meta().Dim, wx.Grid(), lx.Meta().Dim, lx.Grid())
	}
	for _, prompt := range []string{"a cat", "a photo of a dog"} {
		lr, err := lx.Search(ctx, f.eng, prompt, index.SearchOptions{Top: 6, Words: true})
		if err != nil {
			t.Fatal(err)
		}
		wr, err := wx.Search(ctx, f.eng, prompt, index.SearchOptions{Top: 6, Words: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(wr.Hits) != len(lr.Hits) {
			t.Fatalf("%q: %d hits from Weaviate, %d from the file index", prompt, len(wr.Hits), len(lr.Hits))
		}
		for i := range lr.Hits {
			l, w := lr.Hits[i], wr.Hits[i]
			if l.Path != w.Path || math.Abs(float64(l.Score-w.Score)) > 1e-3 {
				t.Errorf("%q hit %d: Weaviate %s %.5f, file index %s %.5f", prompt, i, w.Path, w.Score, l.Path, l.Score)
				continue
			}
			if w.ID != index.CollectionID(filepath.Join(f.in, w.Path), "") {
				t.Errorf("%q hit %d: id %s", prompt, i, w.ID)
			}
			if len(l.Words) != len(w.Words) {
				t.Fatalf("%q hit %d: %d words, want %d", prompt, i, len(w.Words), len(l.Words))
			}
			for k := range l.Words {
				if l.Words[k].Cell != w.Words[k].Cell || l.Words[k].Box != w.Words[k].Box {
					t.Errorf("%q hit %d word %s: cell %v box %v, file index %v %v", prompt, i, l.Words[k].Word, w.Words[k].Cell, w.Words[k].Box, l.Words[k].Cell, l.Words[k].Box)
				}
			}
		}
		// By MaxSim over the patches: every hit scored as by its embedding.
		pr, err := wx.Search(ctx, f.eng, prompt, index.SearchOptions{Top: 6, ByPatches: true})
		if err != nil || len(pr.Hits) != 6 {
			t.Fatalf("%q by patches: %d hits, %v", prompt, len(pr.Hits), err)
		}
		for _, h := range pr.Hits {
			for _, l := range lr.Hits {
				if l.Path == h.Path && math.Abs(float64(l.Score-h.Score)) > 1e-3 {
					t.Errorf("%q by patches: %s scored %.5f, by its embedding %.5f", prompt, h.Path, h.Score, l.Score)
				}
			}
		}
	}
}

// TestRunCollectionRefusals: a collection of another model, one made by
// another program, a refused address, a rejected API key and objects the
// collection rejects one by one each end in a clear error or an error row,
// never a hang or an ok entry.
func TestRunCollectionRefusals(t *testing.T) {
	node := weaviatetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := newIndexFixture(t, 2)
	run := func(url, key string) (*Summary, error) {
		return Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: filepath.Join(t.TempDir(), "out"),
			Collection: &CollectionConfig{URL: url, APIKey: key, Retries: 1}})
	}
	if _, err := run(collURL(node, "Tiny"), ""); err != nil {
		t.Fatal(err)
	}
	// Another model.
	def, err := pipeline.Open(ctx, "default", pipeline.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	_, err = Run(ctx, Config{Engine: def, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: filepath.Join(t.TempDir(), "out"),
		Collection: &CollectionConfig{URL: collURL(node, "Tiny")}})
	t.Logf("another model: %v", err)
	if err == nil || !strings.Contains(err.Error(), f.eng.Model().Name()) || !strings.Contains(err.Error(), def.Model().Name()) {
		t.Errorf("a job of another model into the collection: %v; want an error naming both models", err)
	}
	// Made by another program.
	tg, _ := weaviate.Parse(collURL(node, "Foreign"))
	wc := weaviate.New(tg.Host, "")
	if err := wc.CreateClass(ctx, weaviate.ClassSpec{Name: "Foreign", Description: "someone else's"}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(collURL(node, "Foreign"), ""); err == nil || !strings.Contains(err.Error(), "not made by this program") {
		t.Errorf("a collection made by another program: %v", err)
	}
	// Objects rejected one by one: a class of this program whose sha256
	// property is an integer.
	meta, _ := json.Marshal(index.CollectionMeta{Format: index.CollectionFormat, Model: f.eng.Model().Name(), Revision: f.eng.Model().Revision(),
		Readout: indexReadout(f.eng.Options().Readout), Dim: f.eng.JointDim(), Grid: gridOf(t, f), LogitScale: f.eng.LogitScale(), LogitBias: f.eng.LogitBias()})
	if err := wc.CreateClass(ctx, weaviate.ClassSpec{Name: "Broken", Description: string(meta), Properties: []string{"path"},
		IntProperties: []string{"sha256"}, Patches: true}); err != nil {
		t.Fatal(err)
	}
	sum, err := run(collURL(node, "Broken"), "")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 0 || sum.Failed != 3 {
		t.Errorf("objects the collection rejects: done %d, failed %d; want 0 and 3", sum.Done, sum.Failed)
	}
	for p, e := range latestByPath(t, sum.Manifest) {
		if strings.Contains(p, "corrupt") {
			continue
		}
		t.Logf("a rejected object's row: %s", e.Error)
		if e.Status != StatusError || !strings.Contains(e.Error, "sha256") || e.Object != "" {
			t.Errorf("%s: status %s, error %q, object %q", p, e.Status, e.Error, e.Object)
		}
	}
	// A refused address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	_, err = run("weaviate://"+closed+"/Images", "")
	t.Logf("a refused address: %v", err)
	if err == nil || !strings.Contains(err.Error(), closed) || !strings.Contains(err.Error(), "Weaviate node") {
		t.Errorf("a refused address: %v", err)
	}
	if _, err := run("weaviate://"+closed+"/images", ""); err == nil || !strings.Contains(err.Error(), "class name") {
		t.Errorf("a lower-case collection: %v", err)
	}
	// An API key refused, then accepted.
	secured := weaviatetest.StartWith(t, weaviatetest.Options{APIKey: "right-key"})
	_, err = run(collURL(secured, "Images"), "wrong-key")
	t.Logf("a refused API key: %v", err)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "API key") {
		t.Errorf("a refused API key: %v", err)
	}
	if sum, err := run(collURL(secured, "Images"), "right-key"); err != nil || sum.Done != 2 {
		t.Errorf("the right API key: %+v, %v", sum, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the refusals took more than five minutes")
	}
}

// gridOf returns the fixture engine's patch grid.
func gridOf(t *testing.T, f *indexFixture) [2]int {
	t.Helper()
	_, enc := f.ref(t)(f.order[0])
	return [2]int{enc.Grid.H, enc.Grid.W}
}

// TestRunCollectionCluster: a job into a three-node cluster with
// replication factor 3 goes on when a node is killed (SIGKILL) in the middle
// of it, the collection answers searches while the node is down, and a job
// stopped half-way and resumed ends with every image present once, under
// the same ids, with the same vectors.
func TestRunCollectionCluster(t *testing.T) {
	t0 := time.Now()
	cl := weaviatetest.StartCluster(t, 3)
	t.Logf("%.1f s: the cluster is up", time.Since(t0).Seconds())
	ctx := context.Background()
	f := newIndexFixture(t, 40)
	url := collURL(cl.Nodes[0], "Shared")
	var once sync.Once
	var killedAt atomic.Int64
	cfg := Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: filepath.Join(t.TempDir(), "out"), Batch: 2,
		Collection: &CollectionConfig{URL: url, Replication: 3, Batch: 4},
		Progress: func(p Progress) {
			if p.Done >= 12 {
				once.Do(func() {
					killedAt.Store(int64(p.Done))
					cl.Nodes[2].Kill()
				})
			}
		}}
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if killedAt.Load() == 0 || sum.Done != 40 || sum.Failed != 1 {
		t.Fatalf("killed at %d; done %d, failed %d; want 40 and the corrupt image", killedAt.Load(), sum.Done, sum.Failed)
	}
	t.Logf("node 3 killed after %d images; the job wrote all 40 at QUORUM", killedAt.Load())
	var slow []string
	for p, e := range latestByPath(t, sum.Manifest) {
		if e.Timings["collection"] > 1000 {
			slow = append(slow, fmt.Sprintf("%s %.0f ms", p, e.Timings["collection"]))
		}
	}
	t.Logf("images whose batch took over a second: %v", slow)
	t.Logf("%.1f s: the job has ended", time.Since(t0).Seconds())
	// Searches answer while a node is down (once the two left agree on a
	// leader: the killed node may have been it).
	if _, err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(ctx, collURL(cl.Nodes[1], "Shared"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Search(ctx, f.eng, "a cat", index.SearchOptions{Top: 5, Words: true})
	x.Close()
	if err != nil || len(res.Hits) != 5 {
		t.Fatalf("search with a node down: %v", err)
	}
	if err := cl.Nodes[2].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: node 3 is back", time.Since(t0).Seconds())
	checkCollectionHolds(t, f, url, sum.Manifest)

	// Stopped half-way, then resumed into a new collection.
	url2 := collURL(cl.Nodes[0], "Resumed")
	jctx, stop := context.WithCancel(ctx)
	c2 := cfg
	c2.Out = filepath.Join(t.TempDir(), "out2")
	c2.Layout, c2.ShardSize = "shards", 8
	c2.Collection = &CollectionConfig{URL: url2, Replication: 3, Batch: 4}
	c2.Progress = func(p Progress) {
		if p.Done >= 15 {
			stop()
		}
	}
	if _, err := Run(jctx, c2); err == nil {
		t.Fatal("the stopped job returned no error")
	}
	c2.Progress, c2.Resume = nil, true
	sum, err = Run(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped < 15 || sum.Skipped+sum.Done < 40 {
		t.Errorf("resumed: skipped %d, done %d; want at least 15 skipped and 40 in all", sum.Skipped, sum.Done)
	}
	checkCollectionHolds(t, f, url2, sum.Manifest)
	rep, err := VerifyShards(ctx, c2.Out, []string{f.in}, nil)
	if err == nil && rep.HasCollection() {
		err = rep.CheckCollection(ctx, "")
	}
	if err != nil || !rep.Complete() || rep.Collection != url2 || rep.CollectionObjects != 40 || len(rep.CollectionMissing) != 0 {
		t.Errorf("verify the shards and the collection: %+v, %v", rep, err)
	}
	t.Logf("%.1f s: the resumed job has ended", time.Since(t0).Seconds())
}
