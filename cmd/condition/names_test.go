package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestShown: a name with a control character or invalid UTF-8 is quoted
// with Go's escapes; a plain name (spaces and non-ASCII letters included)
// is printed as it is.
func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"photo 1.jpg":           "photo 1.jpg",
		"café/été.png":          "café/été.png",
		"bad\x1b[31m\nname.png": `"bad\x1b[31m\nname.png"`,
		"tab\there.png":         `"tab\there.png"`,
		"bad\xffutf8.png":       `"bad\xffutf8.png"`,
	} {
		if got := shown(in); got != want {
			t.Errorf("shown(%q) = %s, want %s", in, got, want)
		}
	}
	msg := shownMessage("input x\x1b[31m\ny: stat x\x1b[31m\ny: missing\nfound z\x07", []string{"--images=x\x1b[31m\ny"})
	if want := `input "x\x1b[31m\ny": stat "x\x1b[31m\ny": missing` + "\nfound z\\a"; msg != want {
		t.Errorf("shownMessage: %q, want %q", msg, want)
	}
}

// TestControlCharactersInNames: an image and an output folder whose names
// hold an escape sequence and a newline are printed quoted by run (its
// summary and errors), embed (its lines, its table and a failure) and
// attend (its heatmap line and errors): no raw escape or newline of a name
// reaches the terminal.
func TestControlCharactersInNames(t *testing.T) {
	orttest.Load(t)
	const bad = "red\x1b[31m\nname"
	in := t.TempDir()
	writeImages(t, in, 1)
	good := filepath.Join(in, bad+".png")
	if err := os.Rename(filepath.Join(in, "d0", "000.png"), good); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(in, "broken"+bad+".png")
	if err := os.WriteFile(broken, []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out"+bad)
	heat := filepath.Join(t.TempDir(), "h"+bad+".png")
	for _, c := range []struct {
		args  []string
		quote []string // names that must appear quoted
	}{
		{[]string{"run", "--images", in, "--out", out, "-p", "a red circle"}, []string{out}},
		{[]string{"run", "--images", filepath.Join(in, "none"+bad), "--out", t.TempDir(), "-p", "a red circle"}, []string{filepath.Join(in, "none"+bad)}},
		{[]string{"embed", "-p", "a red circle", good, broken}, []string{good, "red\x1b[31m\nname.png", broken}},
		{[]string{"attend", "-p", "a red circle", "--heatmap", heat, good}, []string{heat}},
		{[]string{"attend", "-p", "a red circle", broken}, []string{broken}},
		{[]string{"attend", "-p", "a red circle", filepath.Join(in, "none"+bad+".png")}, []string{filepath.Join(in, "none"+bad+".png")}},
	} {
		_, stdout, stderr := runCLI(t, c.args...)
		all := stdout + stderr
		if strings.Contains(all, "\x1b") || strings.Contains(all, "\nname") {
			t.Errorf("%s: a raw name is printed:\n%s", c.args[0], all)
		}
		for _, q := range c.quote {
			if !strings.Contains(all, shown(q)) && !strings.Contains(all, shown(filepath.Base(q))) {
				t.Errorf("%s: %s is not printed quoted:\n%s", c.args[0], shown(q), all)
			}
		}
	}
}
