package apicheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// libraries are the library packages (and everything below them), which
// speak in their own terms: a message of theirs never names a CLI flag,
// the CLI adds its advice where it catches their errors.
var libraries = []string{"models", "pipeline", "text", "vision", "xattn", "tensorio"}

// flagLike finds a command-line flag in a string: two dashes and a lowercase
// letter, not inside a word (the hub cache's "models--org--name" is not one).
var flagLike = regexp.MustCompile(`(^|[^-\w])--[a-z]`)

// flagAllowed are the library files whose messages may name a flag, each
// with its reason.
var flagAllowed = map[string]string{}

// flagLiterals returns "file:line: literal" for each string literal in the
// Go file name, of text src, that names a flag.
func flagLiterals(t *testing.T, name string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		b, ok := n.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(b.Value)
		if err != nil {
			t.Fatalf("%s: %v", fset.Position(b.Pos()), err)
		}
		if flagLike.MatchString(s) {
			out = append(out, fset.Position(b.Pos()).String()+": "+strconv.Quote(s))
		}
		return true
	})
	return out
}

// TestLibrariesNameNoFlag scans every string literal of the libraries'
// code (tests and testdata aside) for a CLI flag.
func TestLibrariesNameNoFlag(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	for _, lib := range libraries {
		err := filepath.WalkDir(filepath.Join(root, lib), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			if _, ok := flagAllowed[filepath.ToSlash(rel)]; ok {
				return nil
			}
			files++
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, l := range flagLiterals(t, filepath.ToSlash(rel), src) {
				t.Errorf("%s: a library message names a CLI flag; say it in the library's terms (the CLI adds its advice)", l)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("scanned %d library files; the libraries have more", files)
	}
}

// TestLibrariesNameNoFlagCatch plants literals with and without a flag.
func TestLibrariesNameNoFlagCatch(t *testing.T) {
	src := "package p\n" +
		"var a = \"clip: readout %s: needs weights (use --readout raw)\"\n" +
		"var b = `--model`\n" +
		"var c = \"models--org--name\"\n" +
		"var d = \"readout raw; x -- y; a -1 --2\"\n"
	got := flagLiterals(t, "p.go", []byte(src))
	want := []string{
		`p.go:2:9: "clip: readout %s: needs weights (use --readout raw)"`,
		`p.go:3:9: "--model"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
}
