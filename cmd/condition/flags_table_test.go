package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite the flags table of docs/commands.md")

// commandFlags returns, for every command of the tree that runs, its path
// ("models list") and the flag set it parses, caught from newFlagSet while
// the command answers --help.
func commandFlags(t *testing.T) (paths []string, sets map[string]*pflag.FlagSet) {
	t.Helper()
	sets = map[string]*pflag.FlagSet{}
	var walk func(c *command, path []string)
	walk = func(c *command, path []string) {
		for _, s := range c.subs {
			p := append(slices.Clip(path), s.name)
			if s.run != nil {
				var got *pflag.FlagSet
				flagSetMade = func(fs *pflag.FlagSet) {
					if got == nil {
						got = fs
					}
				}
				code, _, errs := runCLI(t, append(slices.Clip(p), "--help")...)
				flagSetMade = nil
				if code != exitOK || got == nil {
					t.Fatalf("%s --help: exit %d, flag set caught %v: %s", strings.Join(p, " "), code, got != nil, errs)
				}
				paths = append(paths, strings.Join(p, " "))
				sets[strings.Join(p, " ")] = got
			}
			walk(s, p)
		}
	}
	walk(commands, nil)
	return paths, sets
}

// clauses splits a flag's usage into its clauses at "; " and ": " outside
// brackets and quotes, dropping what is in parentheses.
func clauses(usage string) []string {
	var out []string
	var cur strings.Builder
	depth, quoted := 0, false
	rs := []rune(usage)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\'' && !quoted && (i == 0 || rs[i-1] == ' '):
			quoted = true
		case r == '\'' && quoted && (i+1 == len(rs) || strings.ContainsRune(" ,;:)", rs[i+1])):
			quoted = false
		case quoted:
		case r == '(' && depth == 0:
			depth++
			continue
		case r == '(' || r == '[' || r == '{':
			depth++
		case r == ')' || r == ']' || r == '}':
			depth--
			if r == ')' && depth == 0 {
				continue
			}
		case depth == 0 && (r == ';' || r == ':') && i+1 < len(rs) && rs[i+1] == ' ':
			out = append(out, cur.String())
			cur.Reset()
			i++
			continue
		}
		if depth == 0 || (r != '(' && depth > 0 && !inParens(rs, i)) {
			cur.WriteRune(r)
		}
	}
	return append(out, cur.String())
}

// inParens reports whether rs[i] lies inside parentheses (what clauses
// drops), as opposed to brackets or braces only.
func inParens(rs []rune, i int) bool {
	depth := 0
	for _, r := range rs[:i] {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		}
	}
	return depth > 0
}

// shortMeaning is a flag's usage cut to its first clause (parentheses
// dropped), at most about 56 characters; a first clause saying when the
// flag applies ("with --index weaviate://...") or of one word ("model")
// gives way to the next; for a deprecated alias, what to use instead.
func shortMeaning(f *pflag.Flag) string {
	if f.Deprecated != "" {
		use, _, _ := strings.Cut(f.Deprecated, " (")
		return "deprecated: " + use
	}
	cs := clauses(f.Usage)
	s := strings.Join(strings.Fields(cs[0]), " ")
	if len(cs) > 1 && (strings.HasPrefix(s, "with ") || !strings.Contains(s, " ")) {
		s = strings.Join(strings.Fields(cs[1]), " ")
	}
	s = strings.TrimRight(strings.ReplaceAll(s, " ,", ","), " ,.")
	if r := []rune(s); len(r) > 56 {
		cut := string(r[:56])
		if i := strings.LastIndex(cut, " "); i > 0 {
			cut = cut[:i]
		}
		s = strings.TrimRight(cut, " ,") + "…"
	}
	if f.Shorthand != "" {
		s = "-" + f.Shorthand + ": " + s
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// flagsTable is the markdown table of every flag name (a row) by every
// command (a column), each cell the flag's short meaning in that command.
func flagsTable(paths []string, sets map[string]*pflag.FlagSet) string {
	rows := map[string]map[string]string{}
	for _, p := range paths {
		sets[p].VisitAll(func(f *pflag.Flag) {
			if rows[f.Name] == nil {
				rows[f.Name] = map[string]string{}
			}
			rows[f.Name][p] = shortMeaning(f)
		})
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| flag |")
	for _, p := range paths {
		fmt.Fprintf(&b, " %s |", p)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(paths)))
	b.WriteString("\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| `--%s` |", n)
		for _, p := range paths {
			fmt.Fprintf(&b, " %s |", rows[n][p])
		}
		b.WriteString("\n")
	}
	return b.String()
}

const (
	flagsTableStart = "<!-- flags table: made by go test ./cmd/condition -run TestFlagsTable -update; do not edit by hand -->\n"
	flagsTableEnd   = "<!-- end of the flags table -->"
)

// TestFlagsTable: the table of docs/commands.md between its markers is the
// one the commands' real flag sets give (one row per flag name, one column
// per command); -update rewrites it.
func TestFlagsTable(t *testing.T) {
	paths, sets := commandFlags(t)
	if len(paths) < 20 {
		t.Fatalf("%d commands: %v", len(paths), paths)
	}
	table := flagsTable(paths, sets)
	const doc = "../../docs/commands.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, flagsTableStart), strings.Index(s, flagsTableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no flags table markers (%q … %q)", doc, flagsTableStart, flagsTableEnd)
	}
	got := s[i+len(flagsTableStart) : j]
	if got == table {
		return
	}
	if !*update {
		t.Fatalf("%s: the flags table differs from the commands' flags; run go test ./cmd/condition -run TestFlagsTable -update", doc)
	}
	if err := os.WriteFile(doc, []byte(s[:i+len(flagsTableStart)]+table+s[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mentionedFlag is a flag named in help text, with up to two words before
// it (a command such as "run" or "bench pipeline" names another's flag).
var mentionedFlag = regexp.MustCompile("(\\S+ )?(\\S+ )?[\\[(`'\"]*--([a-z][a-z0-9-]*)")

// TestHelpNamesOnlyItsFlags: a command's help (its usage line and flags)
// names only flags it has, unless the words before one name the command
// (or program) it belongs to; and a flag name means one thing: a name some
// command gives as a switch (a boolean) is a switch wherever it appears.
func TestHelpNamesOnlyItsFlags(t *testing.T) {
	paths, sets := commandFlags(t)
	others := map[string]bool{"condition-bench": true, "bench": true}
	for _, p := range paths {
		for _, w := range strings.Fields(p) {
			others[w] = true
		}
	}
	kind := map[string]map[string][]string{} // flag → value type → commands
	for _, p := range paths {
		fs := sets[p]
		_, out, _ := runCLI(t, append(strings.Fields(p), "--help")...)
		for _, m := range mentionedFlag.FindAllStringSubmatch(out, -1) {
			name := m[3]
			if fs.Lookup(name) != nil {
				continue
			}
			before := strings.Trim(m[1]+m[2], " `'\"(")
			named := false
			for _, w := range strings.Fields(before) {
				named = named || others[strings.Trim(w, "`'\"(,")]
			}
			if !named {
				t.Errorf("%s --help names --%s, which it has not (%q)", p, name, m[0])
			}
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Deprecated != "" {
				return
			}
			if kind[f.Name] == nil {
				kind[f.Name] = map[string][]string{}
			}
			typ := f.Value.Type()
			if typ != "bool" {
				typ = "value"
			}
			kind[f.Name][typ] = append(kind[f.Name][typ], p)
		})
	}
	for name, k := range kind {
		if len(k["bool"]) > 0 && len(k["value"]) > 0 {
			t.Errorf("--%s is a switch in %v and takes a value in %v", name, k["bool"], k["value"])
		}
	}
}

// TestRenamedFlagsKeepTheirOldNames: serve --workers (now --streams) and
// query --heatmaps DIR (now --heatmap-dir) still set the same setting,
// with a warning naming the new flag; their help lists only the new names.
func TestRenamedFlagsKeepTheirOldNames(t *testing.T) {
	for _, c := range []struct {
		args     []string
		old, new string
		value    string
	}{
		{[]string{"serve", "--workers", "3"}, "workers", "streams", "3"},
		{[]string{"query", "idx", "--heatmaps", "hits/"}, "heatmaps", "heatmap-dir", "hits/"},
	} {
		var fs *pflag.FlagSet
		flagSetMade = func(f *pflag.FlagSet) { fs = f }
		code, out, errs := runCLI(t, append(c.args, "--help")...)
		flagSetMade = nil
		if code != exitOK || fs == nil {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if got := fs.Lookup(c.new).Value.String(); got != c.value {
			t.Errorf("%v: --%s is %q, want %q", c.args, c.new, got, c.value)
		}
		if !strings.Contains(errs, "--"+c.old+" has been deprecated") || !strings.Contains(errs, "--"+c.new) {
			t.Errorf("%v: no deprecation warning naming --%s: %q", c.args, c.new, errs)
		}
		if strings.Contains(out, "--"+c.old+" ") || !strings.Contains(out, "--"+c.new+" ") {
			t.Errorf("%v: the help lists --%s or not --%s:\n%s", c.args, c.old, c.new, out)
		}
	}
}
