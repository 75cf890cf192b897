package ortinstall_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/ortinstall"
	"github.com/conditionhq/condition/internal/orttest"
)

// npmLinuxAMD64SHA256 is the sha256 of libonnxruntime.so.1 in onnxruntime-node@1.30.0 (linux/x64).
const npmLinuxAMD64SHA256 = "ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23"

// releaseNames returns the library's path in the GitHub release tarball (below its
// top folder) and the release asset name, for this platform.
func releaseNames(t *testing.T, version string) (asset, top, member, npmMember string) {
	switch runtime.GOOS + "/" + runtime.GOARCH {
	case "linux/amd64":
		return "onnxruntime-linux-x64-" + version + ".tgz", "onnxruntime-linux-x64-" + version,
			"lib/libonnxruntime.so." + version, "package/bin/napi-v6/linux/x64/libonnxruntime.so.1"
	case "linux/arm64":
		return "onnxruntime-linux-aarch64-" + version + ".tgz", "onnxruntime-linux-aarch64-" + version,
			"lib/libonnxruntime.so." + version, "package/bin/napi-v6/linux/arm64/libonnxruntime.so.1"
	}
	t.Skipf("install tests build Linux tarballs; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	return
}

type entry struct {
	name    string
	body    []byte
	symlink string
}

func makeTgz(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression) // fast; the gzip framing and CRC are still checked
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o755, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.symlink != "" {
			h = &tar.Header{Name: e.name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: e.symlink}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var (
	libOnce  sync.Once
	libBytes []byte
	libErr   error
)

// realLibrary returns the bytes of the ONNX Runtime library the tests loaded.
func realLibrary(t *testing.T) []byte {
	rt := orttest.Load(t)
	libOnce.Do(func() { libBytes, libErr = os.ReadFile(rt.Path) })
	if libErr != nil {
		t.Fatal(libErr)
	}
	return libBytes
}

// releaseTgz is a release tarball laid out like the official one (a real
// file and two symlinks to it).
func releaseTgz(t *testing.T, version string, lib []byte) (asset string, tgz []byte) {
	asset, top, member, _ := releaseNames(t, version)
	return asset, makeTgz(t, []entry{
		{name: top + "/README.md", body: []byte("onnxruntime\n")},
		{name: top + "/lib/libonnxruntime.so", symlink: "libonnxruntime.so.1"},
		{name: top + "/lib/libonnxruntime.so.1", symlink: filepath.Base(member)},
		{name: top + "/" + member, body: lib},
		{name: top + "/include/onnxruntime_c_api.h", body: []byte("/* header */\n")},
	})
}

type fakeRelease struct {
	srv   *httptest.Server
	hits  atomic.Int32
	mu    sync.Mutex
	files map[string][]byte
}

func newFakeRelease(t *testing.T) *fakeRelease {
	f := &fakeRelease{files: map[string][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		f.mu.Lock()
		b, ok := f.files[r.URL.Path]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRelease) serve(path string, b []byte) {
	f.mu.Lock()
	f.files[path] = b
	f.mu.Unlock()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// assertClean checks that no staging or half-installed folder is left in root.
func assertClean(t *testing.T, root string, wantVersions ...string) {
	t.Helper()
	ents, _ := os.ReadDir(root)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(wantVersions, ",") {
		t.Errorf("cache folder holds %v, want %v", got, wantVersions)
	}
}

// countingHandler counts the records logged through it.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *countingHandler) WithGroup(string) slog.Handler { return h }

// TestInstallFromRelease installs from a fake release with no Logger, which
// must log nothing, not even to slog's default logger.
func TestInstallFromRelease(t *testing.T) {
	lib := realLibrary(t)
	var logged countingHandler
	old := slog.Default()
	slog.SetDefault(slog.New(&logged))
	t.Cleanup(func() { slog.SetDefault(old) })
	defer func() {
		if n := logged.n.Load(); n != 0 {
			t.Errorf("Install with no Logger logged %d records to the default logger", n)
		}
	}()
	rel := newFakeRelease(t)
	asset, tgz := releaseTgz(t, ort.InstallVersion, lib)
	rel.serve("/v"+ort.InstallVersion+"/"+asset, tgz)
	root := filepath.Join(t.TempDir(), "onnxruntime")
	opts := ortinstall.InstallOptions{CacheDir: root, NoNPM: true, ReleaseURL: rel.srv.URL}
	var progressed atomic.Int64
	opts.Progress = func(done, total int64) { progressed.Store(done) }

	res, err := ortinstall.Install(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	wantPath := filepath.Join(root, ort.InstallVersion, ort.InstalledLibName())
	if res.Path != wantPath || res.Source != ortinstall.FromGitHub || res.Version != ort.InstallVersion || res.AlreadyInstalled {
		t.Fatalf("result %+v", res)
	}
	if res.SHA256 != sha(lib) || res.Size != int64(len(lib)) {
		t.Fatalf("sha256 %s size %d, want %s %d", res.SHA256, res.Size, sha(lib), len(lib))
	}
	if got, err := os.ReadFile(wantPath); err != nil || !bytes.Equal(got, lib) {
		t.Fatalf("installed file differs from the one served (%v)", err)
	}
	if progressed.Load() != int64(len(tgz)) {
		t.Errorf("progress reached %d bytes, want %d", progressed.Load(), len(tgz))
	}
	if v, err := ort.Probe(wantPath); err != nil || v != ort.InstallVersion {
		t.Fatalf("Probe(installed) = %q, %v", v, err)
	}
	assertClean(t, root, ort.InstallVersion)

	// Installed: a second call downloads nothing.
	hits := rel.hits.Load()
	res, err = ortinstall.Install(context.Background(), opts)
	if err != nil || !res.AlreadyInstalled || res.Path != wantPath {
		t.Fatalf("second install: %+v, %v", res, err)
	}
	if rel.hits.Load() != hits {
		t.Errorf("second install downloaded again")
	}
	// Force downloads and replaces it.
	opts.Force = true
	res, err = ortinstall.Install(context.Background(), opts)
	if err != nil || res.AlreadyInstalled {
		t.Fatalf("forced install: %+v, %v", res, err)
	}
	if rel.hits.Load() != hits+1 {
		t.Errorf("forced install made %d requests, want 1", rel.hits.Load()-hits)
	}
	assertClean(t, root, ort.InstallVersion)

	// The search finds what Install put there.
	t.Setenv(ort.EnvLibraryPath, "")
	var found bool
	for _, c := range ort.Candidates(ort.LoadOptions{CacheDir: root}) {
		if c.Source == ort.SourceCache && c.Path == wantPath {
			found = true
		}
	}
	if !found {
		t.Errorf("Candidates does not list the installed %s", wantPath)
	}

	// A broken install (library gone) is repaired without Force.
	if err := os.Remove(wantPath); err != nil {
		t.Fatal(err)
	}
	opts.Force = false
	res, err = ortinstall.Install(context.Background(), opts)
	if err != nil || res.AlreadyInstalled {
		t.Fatalf("repair: %+v, %v", res, err)
	}
	assertClean(t, root, ort.InstallVersion)
}

func TestInstallRejects(t *testing.T) {
	lib := realLibrary(t)
	asset, top, member, _ := releaseNames(t, ort.InstallVersion)
	_, good := releaseTgz(t, ort.InstallVersion, bytes.Repeat([]byte("0123456789abcdef"), 1<<16))
	notELF := makeTgz(t, []entry{{name: top + "/" + member, body: []byte("#!/bin/sh\necho not a library\n")}})
	// An ELF file for another machine: the real library with e_machine changed.
	other := append([]byte(nil), lib[:4096]...)
	other[18], other[19] = 0x28, 0 // EM_ARM
	wrongArch := makeTgz(t, []entry{{name: top + "/" + member, body: other}})
	noMember := makeTgz(t, []entry{{name: top + "/README.md", body: []byte("hi")}})
	// A shared library that loads but is not ONNX Runtime: its entry point renamed.
	renamed := bytes.ReplaceAll(lib, []byte("OrtGetApiBase\x00"), []byte("OrtGetApiBasX\x00"))
	if bytes.Equal(renamed, lib) {
		t.Fatal("the library has no OrtGetApiBase symbol name")
	}
	notLoadable := makeTgz(t, []entry{{name: top + "/" + member, body: renamed}})
	for _, c := range []struct {
		name  string
		body  []byte // nil: 404
		wants []string
	}{
		{"404", nil, []string{"404"}},
		{"truncated", good[:len(good)/2], []string{"damaged archive"}},
		{"not gzip", []byte("<html>rate limited</html>"), []string{"not a gzip'd tar archive"}},
		{"not ELF", notELF, []string{"not an ELF"}},
		{"wrong arch", wrongArch, []string{"ELF file for"}},
		{"no member", noMember, []string{"has no " + member}},
		{"not ONNX Runtime", notLoadable, []string{"does not load", "OrtGetApiBase"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel := newFakeRelease(t)
			if c.body != nil {
				rel.serve("/v"+ort.InstallVersion+"/"+asset, c.body)
			}
			root := filepath.Join(t.TempDir(), "onnxruntime")
			_, err := ortinstall.Install(context.Background(), ortinstall.InstallOptions{CacheDir: root, NoNPM: true, ReleaseURL: rel.srv.URL})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			assertClean(t, root)
		})
	}
}

func TestInstallVersionMismatch(t *testing.T) {
	lib := realLibrary(t)
	rel := newFakeRelease(t)
	asset, tgz := releaseTgz(t, "1.29.0", lib) // a 1.30.0 library where 1.29.0 should be
	rel.serve("/v1.29.0/"+asset, tgz)
	root := filepath.Join(t.TempDir(), "onnxruntime")
	_, err := ortinstall.Install(context.Background(), ortinstall.InstallOptions{Version: "1.29.0", CacheDir: root, NoNPM: true, ReleaseURL: rel.srv.URL})
	if err == nil || !strings.Contains(err.Error(), "asked for ONNX Runtime 1.29.0") {
		t.Fatalf("error %v, want a version mismatch", err)
	}
	assertClean(t, root)
}

// fakeNPM writes an npm stand-in that copies tgz into --pack-destination and
// records its arguments.
func fakeNPM(t *testing.T, tgz []byte) (npm, argsFile string) {
	dir := t.TempDir()
	src := filepath.Join(dir, "pkg.tgz")
	if err := os.WriteFile(src, tgz, 0o644); err != nil {
		t.Fatal(err)
	}
	argsFile = filepath.Join(dir, "args")
	npm = filepath.Join(dir, "npm")
	script := "#!/bin/sh\necho \"$@\" > '" + argsFile + "'\n" +
		"dest=''\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --pack-destination ]; then dest=\"$2\"; fi; shift; done\n" +
		"cp '" + src + "' \"$dest/onnxruntime-node-" + ort.InstallVersion + ".tgz\"\necho onnxruntime-node-" + ort.InstallVersion + ".tgz\n"
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return npm, argsFile
}

func TestInstallFromNPM(t *testing.T) {
	lib := realLibrary(t)
	_, _, _, npmMember := releaseNames(t, ort.InstallVersion)
	pkg := func(lib []byte) []byte {
		return makeTgz(t, []entry{
			{name: "package/package.json", body: []byte(`{"name":"onnxruntime-node"}`)},
			{name: npmMember, body: lib},
			{name: "package/script/install.js", body: []byte("throw new Error('must not run')")},
		})
	}
	npm, argsFile := fakeNPM(t, pkg(lib))
	root := filepath.Join(t.TempDir(), "onnxruntime")
	res, err := ortinstall.Install(context.Background(), ortinstall.InstallOptions{CacheDir: root, NPM: npm})
	pinned := runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && sha(lib) == npmLinuxAMD64SHA256
	switch {
	case pinned && err != nil:
		t.Fatal(err)
	case pinned:
		if res.Source != ortinstall.FromNPM || res.SHA256 != npmLinuxAMD64SHA256 || res.URL != "onnxruntime-node@"+ort.InstallVersion {
			t.Fatalf("result %+v", res)
		}
		assertClean(t, root, ort.InstallVersion)
	default:
		t.Logf("the loaded library is not the npm build (sha256 %s); expecting the pin to reject it", sha(lib))
		if err == nil || !strings.Contains(err.Error(), "sha256") {
			t.Fatalf("error %v, want a sha256 mismatch", err)
		}
	}
	args, _ := os.ReadFile(argsFile)
	if a := string(args); !strings.HasPrefix(a, "pack onnxruntime-node@"+ort.InstallVersion) || !strings.Contains(a, "--ignore-scripts") {
		t.Errorf("npm was run as `npm %s`, want `npm pack onnxruntime-node@%s --ignore-scripts ...`", strings.TrimSpace(a), ort.InstallVersion)
	}

	// A library that differs from the pinned build is refused.
	tampered := append([]byte(nil), lib...)
	tampered[len(tampered)-1] ^= 0xff
	npm, _ = fakeNPM(t, pkg(tampered))
	root = filepath.Join(t.TempDir(), "onnxruntime")
	_, err = ortinstall.Install(context.Background(), ortinstall.InstallOptions{CacheDir: root, NPM: npm})
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && (err == nil || !strings.Contains(err.Error(), "expected "+npmLinuxAMD64SHA256)) {
		t.Fatalf("tampered library: error %v, want a sha256 mismatch", err)
	}
	assertClean(t, root)
}

// TestInstallNPMFailsFallsBack: when npm cannot fetch the package, Install
// downloads the GitHub release instead.
func TestInstallNPMFailsFallsBack(t *testing.T) {
	lib := realLibrary(t)
	rel := newFakeRelease(t)
	asset, tgz := releaseTgz(t, ort.InstallVersion, lib)
	rel.serve("/v"+ort.InstallVersion+"/"+asset, tgz)
	npm := filepath.Join(t.TempDir(), "npm")
	if err := os.WriteFile(npm, []byte("#!/bin/sh\necho 'npm ERR! network unreachable' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "onnxruntime")
	res, err := ortinstall.Install(context.Background(), ortinstall.InstallOptions{CacheDir: root, NPM: npm, ReleaseURL: rel.srv.URL})
	if err != nil || res.Source != ortinstall.FromGitHub {
		t.Fatalf("Install: %+v, %v", res, err)
	}
	// Both failing: the error tells both stories.
	root = filepath.Join(t.TempDir(), "onnxruntime")
	_, err = ortinstall.Install(context.Background(), ortinstall.InstallOptions{CacheDir: root, NPM: npm, ReleaseURL: rel.srv.URL + "/missing"})
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "network unreachable") {
		t.Fatalf("error %v, want the download's and npm's failures", err)
	}
	assertClean(t, root)
}
