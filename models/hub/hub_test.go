package hub_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/models/hub/hubtest"
	"github.com/conditionhq/condition/tensorio"
)

var (
	commit1 = strings.Repeat("1a", 20)
	commit2 = strings.Repeat("2b", 20)
)

func randBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

type fixture struct {
	srv   *hubtest.Server
	cache string
	cfg   []byte
	graph []byte
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{cache: t.TempDir(), cfg: []byte(`{"projection_dim": 16}`), graph: randBytes(300_000, 1)}
	f.srv = hubtest.New(t, map[string]*hubtest.Repo{
		"org/tiny": {
			Commits: map[string]map[string]hubtest.File{
				commit1: {"config.json": {Data: f.cfg}, "onnx/text_model.onnx": {Data: f.graph, LFS: true}},
				commit2: {"config.json": {Data: []byte(`{}`)}},
			},
			Branches: map[string]string{"main": commit1, "v2": commit2, "refs/pr/1": commit2},
		},
		"org/private": {
			Commits:  map[string]map[string]hubtest.File{commit1: {"config.json": {Data: f.cfg}}},
			Branches: map[string]string{"main": commit1},
			Token:    "hf_secret",
		},
	})
	return f
}

func (f *fixture) client() *hub.Client {
	return &hub.Client{Endpoint: f.srv.URL(), CacheDir: f.cache, RetryWait: 1}
}

func count(reqs []hubtest.Request, role, method string) int {
	n := 0
	for _, r := range reqs {
		if r.Role == role && r.Method == method {
			n++
		}
	}
	return n
}

func TestDownloadLayout(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	var last hub.Progress
	c.Progress = func(p hub.Progress) { last = p }
	ctx := context.Background()
	cfg, err := c.Download(ctx, "org/tiny", "", "config.json")
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if !g.Downloaded || g.Commit != commit1 || g.Size != int64(len(f.graph)) {
		t.Errorf("download: %+v", g)
	}
	if last.File != "onnx/text_model.onnx" || last.Done != int64(len(f.graph)) || last.Total != int64(len(f.graph)) {
		t.Errorf("last progress %+v", last)
	}
	repo := filepath.Join(f.cache, "models--org--tiny")
	// The layout huggingface_hub writes.
	if b, _ := os.ReadFile(filepath.Join(repo, "refs", "main")); string(b) != commit1 {
		t.Errorf("refs/main = %q", b)
	}
	snap := filepath.Join(repo, "snapshots", commit1)
	for _, c := range []struct{ file, link string }{
		{"config.json", "../../blobs/" + hubtest.GitSHA1(f.cfg)},
		{"onnx/text_model.onnx", "../../../blobs/" + hubtest.SHA256(f.graph)},
	} {
		l, err := os.Readlink(filepath.Join(snap, filepath.FromSlash(c.file)))
		if err != nil || l != c.link {
			t.Errorf("%s -> %q (%v), want %s", c.file, l, err, c.link)
		}
	}
	if cfg.Path != filepath.Join(snap, "config.json") {
		t.Errorf("path %s", cfg.Path)
	}
	if b, _ := os.ReadFile(g.Path); !bytes.Equal(b, f.graph) {
		t.Error("graph contents differ")
	}
	if _, err := os.Stat(filepath.Join(f.cache, ".locks", "models--org--tiny", hubtest.SHA256(f.graph)+".lock")); err != nil {
		t.Errorf("lock file: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(repo, "blobs", "*.incomplete")); len(m) != 0 {
		t.Errorf("left %v", m)
	}
	// Again: a HEAD to see the commit, no GET.
	f.srv.Reset()
	if g2, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx"); err != nil || g2.Downloaded {
		t.Errorf("second download: %+v %v", g2, err)
	}
	if r := f.srv.Requests(); count(r, "hub", "GET")+count(r, "cdn", "GET") != 0 || count(r, "hub", "HEAD") != 1 {
		t.Errorf("second download requests %+v", r)
	}
	// By commit: no request at all.
	f.srv.Reset()
	if _, err := c.Download(ctx, "org/tiny", commit1, "onnx/text_model.onnx"); err != nil {
		t.Fatal(err)
	}
	if r := f.srv.Requests(); len(r) != 0 {
		t.Errorf("download by cached commit made requests %+v", r)
	}
	// Another branch and a revision with slashes (escaped as one segment).
	if g, err := c.Download(ctx, "org/tiny", "refs/pr/1", "config.json"); err != nil || g.Commit != commit2 {
		t.Fatalf("refs/pr/1: %+v %v", g, err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "refs", "refs", "pr", "1")); string(b) != commit2 {
		t.Errorf("refs/refs/pr/1 = %q", b)
	}
	// The cache reads back.
	repos, err := c.Cache().Repos()
	if err != nil || len(repos) != 1 || repos[0].Repo != "org/tiny" || len(repos[0].Snapshots) != 2 || repos[0].Refs["main"] != commit1 {
		t.Errorf("Repos: %+v %v", repos, err)
	}
}

func TestTokenStaysOnHub(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	c.Token = "hf_secret"
	if _, err := c.Download(context.Background(), "org/tiny", "main", "onnx/text_model.onnx"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Download(context.Background(), "org/private", "main", "config.json"); err != nil {
		t.Fatal(err)
	}
	var hubAuth, cdn int
	for _, r := range f.srv.Requests() {
		switch r.Role {
		case "hub":
			if r.Authorization == "Bearer hf_secret" {
				hubAuth++
			}
		case "cdn":
			cdn++
			if r.Authorization != "" {
				t.Errorf("the CDN got Authorization %q", r.Authorization)
			}
		}
	}
	if hubAuth == 0 || cdn == 0 {
		t.Errorf("hub requests with the token %d, CDN requests %d", hubAuth, cdn)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	ctx := context.Background()
	for _, tc := range []struct {
		repo, rev, file string
		is              error
		want            string
	}{
		{"org/nope", "main", "config.json", hub.ErrUnauthorized, "401"},
		{"org/private", "main", "config.json", hub.ErrUnauthorized, "HF_TOKEN"},
		{"org/tiny", "nope", "config.json", hub.ErrRevisionNotFound, "RevisionNotFound"},
		{"org/tiny", "main", "missing.json", fs.ErrNotExist, "EntryNotFound"},
	} {
		_, err := c.Download(ctx, tc.repo, tc.rev, tc.file)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s@%s %s: %v; want errors.Is %v and %q", tc.repo, tc.rev, tc.file, err, tc.is, tc.want)
		}
	}
	// The missing file is remembered as huggingface_hub does.
	if !c.Cache().NoExist("org/tiny", commit1, "missing.json") {
		t.Error("no .no_exist marker")
	}
	// 500 from the CDN, every time: retried, then an error naming the status.
	f.srv.SetFault("org/tiny", "onnx/text_model.onnx", &hubtest.Fault{Status: http.StatusInternalServerError, StatusTimes: 100})
	c.Retries = 2
	_, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx")
	if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("500: %v", err)
	}
	if n := count(f.srv.Requests(), "cdn", "GET"); n != 3 {
		t.Errorf("%d GETs for 2 retries", n)
	}
	// A 500 that passes.
	f.srv.SetFault("org/tiny", "onnx/text_model.onnx", &hubtest.Fault{Status: http.StatusBadGateway, StatusTimes: 1})
	if _, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx"); err != nil {
		t.Errorf("after one 502: %v", err)
	}
	// No hub at all: an error, and with the file cached, the cached file.
	dead := &hub.Client{Endpoint: "http://127.0.0.1:1", CacheDir: f.cache, Retries: 1, RetryWait: 1}
	if g, err := dead.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx"); err != nil || g.Commit != commit1 {
		t.Errorf("unreachable hub, cached file: %+v %v", g, err)
	}
	if _, err := dead.Download(ctx, "org/tiny", "main", "other.json"); err == nil {
		t.Error("unreachable hub, file not cached: no error")
	}
}

func TestResume(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	ctx := context.Background()
	// The body is cut after 100 kB, twice: each retry asks for the rest.
	f.srv.SetFault("org/tiny", "onnx/text_model.onnx", &hubtest.Fault{TruncateAt: 100_000, TruncateTimes: 1})
	g, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(g.Path); !bytes.Equal(b, f.graph) {
		t.Fatal("resumed download differs")
	}
	var ranges []string
	for _, r := range f.srv.Requests() {
		if r.Role == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	if len(ranges) != 2 || ranges[0] != "" || ranges[1] != "bytes=100000-" {
		t.Errorf("CDN ranges %q, want one full request then bytes=100000-", ranges)
	}

	// A partial file left by a killed process is resumed, and the whole file hashed.
	f2 := newFixture(t)
	c2 := f2.client()
	blob := filepath.Join(f2.cache, "models--org--tiny", "blobs", hubtest.SHA256(f2.graph))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob+".incomplete", f2.graph[:123_456], 0o644)
	if _, err := c2.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(blob); !bytes.Equal(b, f2.graph) {
		t.Fatal("download resumed from a leftover file differs")
	}
	for _, r := range f2.srv.Requests() {
		if r.Role == "cdn" && (r.Range != "bytes=123456-" || r.Bytes != int64(len(f2.graph)-123_456)) {
			t.Errorf("CDN request %+v, want the rest from 123456", r)
		}
	}
	// A leftover partial file with wrong bytes fails the sha256 check and is removed.
	f3 := newFixture(t)
	blob = filepath.Join(f3.cache, "models--org--tiny", "blobs", hubtest.SHA256(f3.graph))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob+".incomplete", make([]byte, 1000), 0o644)
	_, err = f3.client().Download(ctx, "org/tiny", "main", "onnx/text_model.onnx")
	if !errors.Is(err, hub.ErrChecksum) {
		t.Errorf("stale partial file: %v", err)
	}
	if _, err := os.Stat(blob + ".incomplete"); !errors.Is(err, fs.ErrNotExist) {
		t.Error("bad partial file kept")
	}
	// A server that ignores Range: start over from zero.
	f4 := newFixture(t)
	blob = filepath.Join(f4.cache, "models--org--tiny", "blobs", hubtest.SHA256(f4.graph))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob+".incomplete", f4.graph[:5000], 0o644)
	f4.srv.SetFault("org/tiny", "onnx/text_model.onnx", &hubtest.Fault{NoRange: true})
	if g, err := f4.client().Download(ctx, "org/tiny", "main", "onnx/text_model.onnx"); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(g.Path); !bytes.Equal(b, f4.graph) {
		t.Error("restart after an ignored Range differs")
	}
}

func TestChecksum(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	ctx := context.Background()
	bad := append([]byte(nil), f.graph...)
	bad[1234] ^= 1
	f.srv.SetFault("org/tiny", "onnx/text_model.onnx", &hubtest.Fault{Corrupt: bad})
	_, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx")
	if !errors.Is(err, hub.ErrChecksum) || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("corrupt LFS file: %v", err)
	}
	blobs := filepath.Join(f.cache, "models--org--tiny", "blobs")
	if m, _ := filepath.Glob(filepath.Join(blobs, "*")); len(m) != 0 {
		t.Errorf("corrupt download left %v", m)
	}
	if _, ok := c.Cache().File("org/tiny", commit1, "onnx/text_model.onnx"); ok {
		t.Error("corrupt file is in the snapshot")
	}
	// A file kept in git: its etag is the git blob sha1.
	f.srv.SetFault("org/tiny", "config.json", &hubtest.Fault{Corrupt: []byte(`{"projection_dim": 61}`)})
	if _, err := c.Download(ctx, "org/tiny", "main", "config.json"); !errors.Is(err, hub.ErrChecksum) || !strings.Contains(err.Error(), "git sha1") {
		t.Errorf("corrupt git file: %v", err)
	}
	// Shorter than announced: retried, then a size error.
	f.srv.SetFault("org/tiny", "config.json", &hubtest.Fault{Corrupt: []byte(`{}`)})
	c.Retries = 1
	if _, err := c.Download(ctx, "org/tiny", "main", "config.json"); err == nil {
		t.Error("short file: no error")
	}
	f.srv.SetFault("org/tiny", "config.json", nil)
	f.srv.SetFault("org/tiny", "onnx/text_model.onnx", nil)
	if _, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx"); err != nil {
		t.Fatal(err)
	}
	// Verify re-hashes the cache; a flipped byte in a blob is caught.
	checks, err := c.Cache().Verify("org/tiny", commit1, nil)
	if err != nil || len(checks) != 1 || !checks[0].OK || checks[0].Kind != "sha256" {
		t.Fatalf("verify: %+v %v", checks, err)
	}
	p := filepath.Join(blobs, hubtest.SHA256(f.graph))
	os.Chmod(p, 0o644)
	os.WriteFile(p, bad, 0o644)
	checks, _ = c.Cache().Verify("org/tiny", commit1, nil)
	if len(checks) != 1 || checks[0].OK || !strings.Contains(checks[0].Reason, "sha256") {
		t.Errorf("verify after corruption: %+v", checks)
	}
}

func TestOffline(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client().Download(ctx, "org/tiny", "main", "config.json"); err != nil {
		t.Fatal(err)
	}
	f.srv.Reset()
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_HUB_CACHE", f.cache)
	t.Setenv("HF_ENDPOINT", f.srv.URL())
	c := hub.FromEnv()
	if !c.Offline || c.CacheDir != f.cache || c.Endpoint != f.srv.URL() {
		t.Fatalf("FromEnv %+v", c)
	}
	if g, err := c.Download(ctx, "org/tiny", "main", "config.json"); err != nil || g.Commit != commit1 {
		t.Errorf("offline, cached: %+v %v", g, err)
	}
	_, err := c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx")
	if !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") || !strings.Contains(err.Error(), "onnx/text_model.onnx") {
		t.Errorf("offline, missing: %v", err)
	}
	if _, err := c.Download(ctx, "org/other", "main", "config.json"); !errors.Is(err, hub.ErrOffline) {
		t.Errorf("offline, unknown repo: %v", err)
	}
	if r := f.srv.Requests(); len(r) != 0 {
		t.Errorf("offline mode made requests: %+v", r)
	}
}

func TestConcurrentDownloads(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.client().Download(context.Background(), "org/tiny", "main", "onnx/text_model.onnx")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	p, ok := f.client().Cache().File("org/tiny", commit1, "onnx/text_model.onnx")
	if b, _ := os.ReadFile(p); !ok || !bytes.Equal(b, f.graph) {
		t.Fatal("contents differ after concurrent downloads")
	}
	// The lock serialises the writers: whoever waited found the blob done.
	if n := count(f.srv.Requests(), "cdn", "GET"); n != 1 {
		t.Errorf("%d CDN downloads for one blob", n)
	}
}

// safetensorsHub serves tensors as org/pt's model.safetensors (an LFS file,
// at commit1 on main), and returns the server, a client of it with an empty
// cache, and the file's bytes.
func safetensorsHub(t *testing.T, tensors map[string]tensorio.Tensor) (*hubtest.Server, *hub.Client, []byte) {
	t.Helper()
	st, err := tensorio.EncodeSafetensors(tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := hubtest.New(t, map[string]*hubtest.Repo{"org/pt": {
		Commits:  map[string]map[string]hubtest.File{commit1: {"model.safetensors": {Data: st, LFS: true}}},
		Branches: map[string]string{"main": commit1},
	}})
	return srv, &hub.Client{Endpoint: srv.URL(), CacheDir: t.TempDir()}, st
}

func TestReadTensors(t *testing.T) {
	// A checkpoint with a large tensor and two small heads.
	big := make([]float32, 1<<20) // 4 MiB
	heads := map[string]tensorio.Tensor{
		"text_model.embeddings.big": tensorio.F32([]int{1 << 20}, big),
		"text_projection.weight":    tensorio.F32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		"logit_scale":               tensorio.F32([]int{}, []float32{2.5}),
	}
	srv, c, st := safetensorsHub(t, heads)
	got, meta, err := c.ReadTensors(context.Background(), "org/pt", "main", "model.safetensors", []string{"text_projection.weight", "logit_scale"})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Commit != commit1 {
		t.Errorf("commit %s", meta.Commit)
	}
	w, _ := got["text_projection.weight"].Float32()
	ls, _ := got["logit_scale"].Float32()
	if len(w) != 6 || w[5] != 6 || len(ls) != 1 || ls[0] != 2.5 {
		t.Errorf("tensors %v %v", w, ls)
	}
	var served int64
	for _, r := range srv.Requests() {
		served += r.Bytes
		if r.Role == "cdn" && r.Range == "" {
			t.Errorf("a GET without a range: %+v", r)
		}
	}
	if served > 4096 {
		t.Errorf("read %d bytes of a %d-byte file for two small tensors", served, len(st))
	}
	if _, _, err := c.ReadTensors(context.Background(), "org/pt", "main", "model.safetensors", []string{"nope"}); err == nil || !strings.Contains(err.Error(), "no tensor nope") {
		t.Errorf("missing tensor: %v", err)
	}
}

// TestReadTensorsFunc reads the tensors a filter keeps from metadata the
// caller already has: no second HEAD request.
func TestReadTensorsFunc(t *testing.T) {
	srv, c, st := safetensorsHub(t, map[string]tensorio.Tensor{
		"big":                    tensorio.F32([]int{1 << 18}, make([]float32, 1<<18)),
		"text_projection.weight": tensorio.F32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		"logit_scale":            tensorio.F32([]int{}, []float32{2.5}),
	})
	ctx := context.Background()
	meta, err := c.Metadata(ctx, "org/pt", "main", "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ReadTensorsFunc(ctx, meta, func(n string) bool { return n != "big" && n != "missing" })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["logit_scale"].Shape == nil {
		t.Errorf("tensors %v", got)
	}
	if n := count(srv.Requests(), "hub", "HEAD"); n != 1 {
		t.Errorf("%d HEAD requests, want 1 (Metadata's)", n)
	}
	// Fetch reuses the metadata too.
	srv.Reset()
	f, err := c.Fetch(ctx, meta)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.Path); !bytes.Equal(b, st) || !f.Downloaded || f.Commit != commit1 {
		t.Errorf("Fetch: %+v", f)
	}
	reqs := srv.Requests()
	if count(reqs, "hub", "HEAD") != 0 || count(reqs, "cdn", "GET") != 1 {
		t.Errorf("Fetch made %+v", reqs)
	}
	if _, err := c.Fetch(ctx, &hub.FileMeta{Repo: "org/pt"}); err == nil {
		t.Error("Fetch of empty metadata: no error")
	}
	c.Offline = true
	if _, err := c.ReadTensorsFunc(ctx, meta, func(string) bool { return true }); !errors.Is(err, hub.ErrOffline) {
		t.Errorf("offline ReadTensorsFunc: %v", err)
	}
}

func TestListFiles(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	info, err := c.ListFiles(context.Background(), "org/tiny", "main")
	if err != nil || info.Commit != commit1 || strings.Join(info.Files, ",") != "config.json,onnx/text_model.onnx" {
		t.Fatalf("%+v %v", info, err)
	}
	if _, err := c.ListFiles(context.Background(), "org/nope", "main"); !errors.Is(err, hub.ErrUnauthorized) {
		t.Errorf("unknown repo: %v", err)
	}
}

func TestParseRefAndEnv(t *testing.T) {
	for ok, want := range map[string]hub.Ref{
		"org/name":      {Repo: "org/name"},
		"org/name@main": {Repo: "org/name", Revision: "main"},
		"openai/clip-vit-base-patch32@" + commit1: {Repo: "openai/clip-vit-base-patch32", Revision: commit1},
		"a/b@refs/pr/1":                         {Repo: "a/b", Revision: "refs/pr/1"},
		"Xenova/clip-vit-base-patch16@v1.0":     {Repo: "Xenova/clip-vit-base-patch16", Revision: "v1.0"},
		"laion/CLIP-ViT-B-32-laion2B-s34B-b79K": {Repo: "laion/CLIP-ViT-B-32-laion2B-s34B-b79K"},
		"_org/n_@refs/convert/parquet":          {Repo: "_org/n_", Revision: "refs/convert/parquet"},
		"o/" + strings.Repeat("n", 96):          {Repo: "o/" + strings.Repeat("n", 96)},
	} {
		if r, err := hub.ParseRef(ok); err != nil || r != want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", ok, r, err, want)
		}
	}
	for _, bad := range []string{"", "name", "org/name/x", "../x/y", "org/..", "org/name@", "org/name@../x", "org/name@a b",
		"/org/name", "org/", "/name", "org/na--me", "o--rg/name", "org/na..me", "org/.name", "org/name.", "org/-name", "org/name-",
		"org/" + strings.Repeat("n", 97), "org/name@-x", "org/name@refs//pr", "org/name@refs/pr/", "org/name@.", "org/name@a/./b",
		"org/name@main@v1", "org/na me", "org/name+org/pt"} {
		if r, err := hub.ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) = %+v: no error", bad, r)
		}
	}
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_ENDPOINT", "https://mirror.example/")
	t.Setenv("HF_HUB_OFFLINE", "")
	os.WriteFile(filepath.Join(home, "token"), []byte("hf_fromfile\n"), 0o600)
	c := hub.FromEnv()
	if c.CacheDir != filepath.Join(home, "hub") || c.Token != "hf_fromfile" || c.Endpoint != "https://mirror.example" || c.Offline {
		t.Errorf("FromEnv %+v", c)
	}
	t.Setenv("HF_TOKEN", "hf_env")
	t.Setenv("HF_HUB_OFFLINE", "true")
	if c := hub.FromEnv(); c.Token != "hf_env" || !c.Offline {
		t.Errorf("FromEnv %+v", c)
	}
	if u := c.ResolveURL("org/n", "refs/pr/1", "onnx/a b.onnx"); u != "https://mirror.example/org/n/resolve/refs%2Fpr%2F1/onnx/a%20b.onnx" {
		t.Errorf("ResolveURL %s", u)
	}
}
