package gobuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestCached builds a program of a local module (by a replace directive)
// once for two concurrent callers, into the cache folder, and runs it; a
// program that does not compile is an error naming the build and its
// compiler message, with no binary left behind.
func TestCached(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	src := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/hello\n\ngo 1.26\n")
	write("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello from the cache\") }\n")
	w := Wrapper{Dir: "hello-v1", Bin: "hello", Package: "example.com/hello",
		GoMod: "module hellowrap\n\ngo 1.26\n\nrequire example.com/hello v0.0.0\n\nreplace example.com/hello => " + src + "\n"}
	var wg sync.WaitGroup
	paths := make([]string, 2)
	errs := make([]error, 2)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = Cached(context.Background(), w) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || paths[0] != paths[1] {
		t.Fatalf("two callers: %q %v, %q %v", paths[0], errs[0], paths[1], errs[1])
	}
	cache, _ := os.UserCacheDir()
	if want := filepath.Join(cache, "condition", "test", "hello-v1", "hello"); paths[0] != want {
		t.Errorf("binary at %s, want %s", paths[0], want)
	}
	out, err := exec.Command(paths[0]).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello from the cache" {
		t.Fatalf("the binary: %q, %v", out, err)
	}
	write("main.go", "package main\n\nfunc main() { undefinedThing() }\n")
	w.Dir = "hello-v2"
	_, err = Cached(context.Background(), w)
	if err == nil || !strings.Contains(err.Error(), "go build") || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("a program that does not compile: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "condition", "test", "hello-v2")); len(ents) != 1 || ents[0].Name() != ".lock" {
		t.Errorf("left after a failed build: %v", ents)
	}
}
