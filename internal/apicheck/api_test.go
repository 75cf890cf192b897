package apicheck

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt from the current tree")

// updateHint is what to do when the API changed on purpose.
const updateHint = "if the change is deliberate, run go test ./internal/apicheck -update and commit the goldens"

// goCommand returns the go command of the toolchain that built the test,
// else the one on PATH.
func goCommand(t *testing.T) string {
	t.Helper()
	exe := "go"
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", exe)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command (neither in GOROOT/bin nor on PATH) to run go doc with: %v", err)
	}
	return p
}

// goEnv is the environment go list and go doc run with: one build context
// whatever the machine, so that the goldens do not depend on it (files
// selected by build tags or by the platform are documented as on linux/amd64
// without tags), and the module on its own, outside any workspace.
func goEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, k := range []string{"GOFLAGS=", "GOOS=", "GOARCH=", "CGO_ENABLED=", "GOWORK="} {
			if strings.HasPrefix(kv, k) {
				return true
			}
		}
		return false
	})
	return append(env, "GOFLAGS=", "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=1", "GOWORK=off")
}

// run runs the go command in dir and returns its standard output.
func run(t *testing.T, goCmd, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// publicPackage is a package of the module that users can import.
type publicPackage struct {
	importPath string
	dir        string
	golden     string // its file name in testdata
}

// publicPackages lists the module's packages that are neither internal
// (under an internal directory) nor commands (package main, or under cmd/),
// with the module's root directory.
func publicPackages(t *testing.T, goCmd string) (root string, pkgs []publicPackage) {
	t.Helper()
	root = strings.TrimSpace(string(run(t, goCmd, ".", "list", "-m", "-f", "{{.Dir}}")))
	mod := strings.TrimSpace(string(run(t, goCmd, root, "list", "-m", "-f", "{{.Path}}")))
	out := run(t, goCmd, root, "list", "-e", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Dir}}", "./...")
	seen := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		path, name, dir := f[0], f[1], f[2]
		rel := strings.TrimPrefix(strings.TrimPrefix(path, mod), "/")
		if path != mod && !strings.HasPrefix(path, mod+"/") {
			t.Fatalf("go list: %s is not in module %s", path, mod)
		}
		if !isPublic(rel, name) {
			continue
		}
		golden := strings.ReplaceAll(rel, "/", "_") + ".txt"
		if rel == "" {
			golden = "root.txt"
		}
		if other, dup := seen[golden]; dup {
			t.Fatalf("packages %s and %s would share the golden %s", other, path, golden)
		}
		seen[golden] = path
		pkgs = append(pkgs, publicPackage{importPath: path, dir: dir, golden: golden})
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no public package")
	}
	return root, pkgs
}

// isPublic reports whether the package name at rel (its directory in the
// module, slash-separated) is one users can import: not a command (package
// main, or under cmd/), not under an internal directory.
func isPublic(rel, name string) bool {
	elems := strings.Split(rel, "/")
	return name != "main" && !slices.Contains(elems, "internal") && elems[0] != "cmd"
}

// readSources reads what go list and go doc read: every directory of the
// module and the Go files of its public packages. The go command caches a
// test's result keyed on the files the test itself opens, not on what its
// subprocesses read; reading them here makes a change to any of them (or a
// new package) run the test again instead of reporting the cached result.
func readSources(t *testing.T, root string, pkgs []publicPackage) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(p.dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			if _, err := os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range []string{"go.mod"} {
		if _, err := os.ReadFile(filepath.Join(root, f)); err != nil {
			t.Fatal(err)
		}
	}
}

var importComment = regexp.MustCompile(`(?m)^(package \w+) // import "[^"]*"$`)

// normalize removes what differs between Go versions in the same API's
// go doc output: the import comment on the package line (not printed by
// every version) and trailing spaces and blank lines.
func normalize(b []byte) []byte {
	s := importComment.ReplaceAllString(string(b), "$1")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return []byte(strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n")
}

// TestAPI compares go doc -all of each public package with its golden in
// testdata; a golden without a package, or a package without a golden,
// fails too.
func TestAPI(t *testing.T) {
	goCmd := goCommand(t)
	root, pkgs := publicPackages(t, goCmd)
	readSources(t, root, pkgs)
	want := map[string]bool{}
	for _, p := range pkgs {
		want[p.golden] = true
	}
	have, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range have {
		name := filepath.Base(g)
		if want[name] {
			continue
		}
		if *update {
			if err := os.Remove(g); err != nil {
				t.Fatal(err)
			}
			t.Logf("removed %s: no public package has it", g)
			continue
		}
		t.Errorf("%s is the golden of no public package (the package was removed, renamed or made internal); %s", g, updateHint)
	}
	for _, p := range pkgs {
		t.Run(strings.TrimSuffix(p.golden, ".txt"), func(t *testing.T) {
			t.Parallel()
			got := normalize(run(t, goCmd, root, "doc", "-all", p.importPath))
			path := filepath.Join("testdata", p.golden)
			if *update {
				if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, got) {
					return
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s", path)
				return
			}
			golden, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				t.Fatalf("%s has no golden %s (a new public package); %s", p.importPath, path, updateHint)
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := lineDiff(normalize(golden), got); d != "" {
				t.Errorf("the API of %s differs from %s (- golden, + now):\n%s\n%s", p.importPath, path, d, updateHint)
			}
		})
	}
}

// lineDiff returns the lines removed from a (-) and added in b (+), each
// run with up to two lines of context and the line numbers in a, or "" when
// a and b are equal.
func lineDiff(a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	x := strings.Split(strings.TrimSuffix(string(a), "\n"), "\n")
	y := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	// The common head and tail, then a longest common subsequence of the
	// middle (a quadratic table, so only when the middle is small).
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	type op struct {
		kind byte // ' ', '-' or '+'
		line string
		ai   int // index in x of the line, or of the next line of x
	}
	var ops []op
	for i := 0; i < pre; i++ {
		ops = append(ops, op{' ', x[i], i})
	}
	if len(mx)*len(my) <= 4<<20 {
		n, m := len(mx), len(my)
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if mx[i] == my[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && mx[i] == my[j]:
				ops = append(ops, op{' ', mx[i], pre + i})
				i++
				j++
			case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, op{'-', mx[i], pre + i})
				i++
			default:
				ops = append(ops, op{'+', my[j], pre + i})
				j++
			}
		}
	} else {
		for i, l := range mx {
			ops = append(ops, op{'-', l, pre + i})
		}
		for _, l := range my {
			ops = append(ops, op{'+', l, pre + len(mx)})
		}
	}
	for i := len(x) - suf; i < len(x); i++ {
		ops = append(ops, op{' ', x[i], i})
	}
	// Each change with up to two lines of context; a gap starts a new hunk.
	const context = 2
	show := make([]bool, len(ops))
	for k, o := range ops {
		if o.kind != ' ' {
			for c := max(k-context, 0); c <= min(k+context, len(ops)-1); c++ {
				show[c] = true
			}
		}
	}
	var sb strings.Builder
	for k, o := range ops {
		if !show[k] {
			continue
		}
		if k == 0 || !show[k-1] {
			fmt.Fprintf(&sb, "@@ golden line %d @@\n", o.ai+1)
		}
		fmt.Fprintf(&sb, "%c %s\n", o.kind, o.line)
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// TestIsPublic: which packages get a golden.
func TestIsPublic(t *testing.T) {
	for _, c := range []struct {
		rel, name string
		want      bool
	}{
		{"", "condition", true},
		{"models", "models", true},
		{"models/hub/hubtest", "hubtest", true},
		{"internal/ort", "ort", false},
		{"internal", "internal", false},
		{"xattn/internal/gemm", "gemm", false},
		{"cmd/condition", "main", false},
		{"cmd/tool/lib", "lib", false},
		{"scripts/gen", "main", false},
		{"internally", "internally", true},
	} {
		if got := isPublic(c.rel, c.name); got != c.want {
			t.Errorf("isPublic(%q, %q) = %v, want %v", c.rel, c.name, got, c.want)
		}
	}
}

// TestNormalize: the import comment and trailing blanks go, the rest stays.
func TestNormalize(t *testing.T) {
	in := "package text // import \"example.com/m/text\"\n\nPackage text is.  \n\n\nFUNCTIONS\n\n\n"
	want := "package text\n\nPackage text is.\n\n\nFUNCTIONS\n"
	if got := string(normalize([]byte(in))); got != want {
		t.Errorf("normalize = %q, want %q", got, want)
	}
}

// TestLineDiff: removed lines first, then added ones, with context, and
// hunks apart when the changes are.
func TestLineDiff(t *testing.T) {
	a := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	b := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	want := `@@ golden line 1 @@
  a
- b
+ B
  c
  d
@@ golden line 9 @@
  i
  j
+ k`
	if got := lineDiff([]byte(a), []byte(b)); got != want {
		t.Errorf("lineDiff =\n%s\nwant\n%s", got, want)
	}
	if got := lineDiff([]byte(a), []byte(a)); got != "" {
		t.Errorf("lineDiff of equal texts = %q", got)
	}
}
