package batch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func walkAll(t *testing.T, roots ...string) []string {
	t.Helper()
	var got []string
	err := Walk(context.Background(), roots, func(it Item) error {
		got = append(got, it.Rel)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestWalkOrderExtensionsAndLinks(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "imgs")
	for _, p := range []string{"b.png", "a.JPG", "sub/z.webp", "sub/c.txt", "sub/deeper/y.tiff", ".hidden.png", "A.gif"} {
		touch(t, filepath.Join(root, p))
	}
	// A link loop and a link to a sibling folder must not loop or repeat.
	if err := os.Symlink("..", filepath.Join(root, "sub", "loop")); err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(dir, "other", "o.png"))
	if err := os.Symlink(filepath.Join(dir, "other"), filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing.png", filepath.Join(root, "broken.png")); err != nil {
		t.Fatal(err)
	}
	got := walkAll(t, root)
	want := []string{"A.gif", "a.JPG", "b.png", "broken.png", "linked/o.png", "sub/deeper/y.tiff", "sub/z.webp"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("walk = %q\nwant %q", got, want)
	}
	// Several roots: each adds its base name; a file root is taken whatever its extension.
	touch(t, filepath.Join(dir, "single.dat"))
	got = walkAll(t, filepath.Join(dir, "other"), filepath.Join(dir, "single.dat"))
	if want := []string{"other/o.png", "single.dat"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("walk = %q, want %q", got, want)
	}
	if err := Walk(context.Background(), []string{filepath.Join(dir, "nope")}, func(Item) error { return nil }, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing root: %v", err)
	}
}

func TestShards(t *testing.T) {
	const n = 4
	counts := make([]int, n)
	for i := 0; i < 1000; i++ {
		rel := fmt.Sprintf("dir/%d.png", i)
		taken := 0
		for s := 0; s < n; s++ {
			if (Shard{Index: s, Count: n}).Takes(rel) {
				taken++
				counts[s]++
			}
		}
		if taken != 1 {
			t.Fatalf("%s taken by %d shards", rel, taken)
		}
	}
	for s, c := range counts {
		if c < 150 {
			t.Errorf("shard %d took only %d of 1000", s, c)
		}
	}
	// FNV-1a 64 of "a.png", computed independently in Python: the split
	// must not change between versions, or resumed shards would disagree.
	if got := ShardOf("a.png", 1000); got != 417 {
		t.Fatalf("ShardOf(a.png, 1000) = %d, want 417", got)
	}
	if got := ShardOf("a.png", 7); got != 4 {
		t.Fatalf("ShardOf(a.png, 7) = %d, want 4", got)
	}
	env := map[string]string{"AWS_BATCH_JOB_ARRAY_INDEX": "2"}
	s, err := ResolveShard(-1, 3, func(k string) string { return env[k] })
	if err != nil || s.Index != 2 || s.ManifestName() != "manifest-2-of-3.jsonl" {
		t.Fatalf("env shard: %+v %v", s, err)
	}
	env["JOB_COMPLETION_INDEX"] = "1"
	if s, _ := ResolveShard(-1, 3, func(k string) string { return env[k] }); s.Index != 1 {
		t.Fatalf("JOB_COMPLETION_INDEX must win: %+v", s)
	}
	for _, bad := range [][2]int{{3, 3}, {-1, 3}, {1, 0}, {0, -2}} {
		if _, err := ResolveShard(bad[0], bad[1], func(string) string { return "" }); err == nil {
			t.Errorf("ResolveShard(%d, %d) accepted", bad[0], bad[1])
		}
	}
}

func TestOutDirStaysInside(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	o, err := openOutFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for _, bad := range []string{"../x", "../../x.jpg", "/etc/passwd", "a/../../x", ""} {
		if err := o.WriteFile(bad, []byte("no")); err == nil {
			t.Errorf("WriteFile(%q) accepted", bad)
		}
	}
	// A link planted inside the folder cannot lead a write outside it.
	outside := filepath.Join(dir, "outside")
	os.MkdirAll(outside, 0o755)
	if err := os.Symlink(outside, filepath.Join(out, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := o.WriteFile("evil/x.safetensors", []byte("no")); err == nil {
		t.Error("write through a link to outside was accepted")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("wrote outside: %v", ents)
	}
	if err := o.WriteFile("a/b/c.txt", []byte("yes")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "a/b/c.txt")); string(b) != "yes" {
		t.Fatalf("content %q", b)
	}
	if err := o.Close(); err != nil || o.Close() != nil {
		t.Fatal("Close is not idempotent")
	}
}

func TestManifestResumeDropsPartialLine(t *testing.T) {
	o, err := openOutFolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	m, prior, err := openManifest(o, "manifest.jsonl", false)
	if err != nil || len(prior) != 0 {
		t.Fatal(err)
	}
	m.Add(Entry{Path: "a.png", Status: StatusOK, Settings: "s"})
	m.Add(Entry{Path: "b.png", Status: StatusError, Error: "bad", Settings: "s"})
	m.Close()
	f, _ := o.OpenAppend("manifest.jsonl", false)
	f.WriteString(`{"path":"c.png","sta`) // a killed writer
	f.Close()
	m, prior, err = openManifest(o, "manifest.jsonl", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(prior) != 2 || prior[1].Error != "bad" {
		t.Fatalf("prior = %+v", prior)
	}
	m.Add(Entry{Path: "b.png", Status: StatusOK, Settings: "s"})
	m.Close()
	b, _ := o.ReadFile("manifest.jsonl")
	all, err := ParseManifest(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("manifest after resume: %v\n%s", err, b)
	}
	latest := Latest(all)
	if len(latest) != 2 || latest[1].Status != StatusOK {
		t.Fatalf("latest = %+v", latest)
	}
}

func TestMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) {
		os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
	write("manifest-0-of-3.jsonl", `{"path":"a.png","status":"ok","settings":"s"}`, `{"path":"b.png","status":"error","error":"x","settings":"s"}`)
	write("manifest-2-of-3.jsonl", `{"path":"b.png","status":"ok","settings":"s"}`, `{"path":"c.png","status":"ok","settings":"s"}`)
	imgs := filepath.Join(dir, "imgs")
	for _, p := range []string{"a.png", "b.png", "c.png", "d.png"} {
		touch(t, filepath.Join(imgs, p))
	}
	rep, err := Merge(context.Background(), dir, []string{imgs})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ShardCount != 3 || !reflect.DeepEqual(rep.MissingShards, []int{1}) || !reflect.DeepEqual(rep.Duplicated, []string{"b.png"}) ||
		!reflect.DeepEqual(rep.Missing, []string{"d.png"}) || rep.Images != 3 || rep.OK != 3 {
		t.Fatalf("report %+v", rep)
	}
	// Incomplete: no manifest.jsonl, which a reader would take for the
	// whole job.
	if _, err := os.Stat(filepath.Join(dir, "manifest.jsonl")); rep.Out != "" || !os.IsNotExist(err) {
		t.Fatalf("an incomplete job's merge wrote %q (%v)", rep.Out, err)
	}
	write("manifest-1-of-3.jsonl", `{"path":"d.png","status":"ok","settings":"s"}`)
	if rep, err = Merge(context.Background(), dir, []string{imgs}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.jsonl"))
	if got, _ := ParseManifest(strings.NewReader(string(b))); rep.Out == "" || len(got) != 4 || got[1].Status != StatusOK {
		t.Fatalf("merged manifest %q:\n%s", rep.Out, b)
	}
}

// TestMergeOneProcess: a job of one process (manifest.jsonl alone) is
// checked against its inputs and its manifest left as it was.
func TestMergeOneProcess(t *testing.T) {
	dir := t.TempDir()
	text := `{"path":"a.png","status":"error","error":"x","settings":"s"}` + "\n" + `{"path":"a.png","status":"ok","settings":"s"}` + "\n"
	os.WriteFile(filepath.Join(dir, "manifest.jsonl"), []byte(text), 0o644)
	imgs := filepath.Join(dir, "imgs")
	for _, p := range []string{"a.png", "b.png"} {
		touch(t, filepath.Join(imgs, p))
	}
	rep, err := Merge(context.Background(), dir, []string{imgs})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ShardCount != 1 || len(rep.MissingShards) != 0 || rep.Images != 1 || rep.OK != 1 || !reflect.DeepEqual(rep.Missing, []string{"b.png"}) {
		t.Fatalf("report %+v; want 1 image ok, b.png missing", rep)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "manifest.jsonl")); string(b) != text {
		t.Errorf("the manifest was rewritten:\n%s", b)
	}
}
