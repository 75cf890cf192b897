package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// helpInvocations lists every command and subcommand of the tree with
// its help flags, and help of each.
func helpInvocations() [][]string {
	var out [][]string
	var walk func(c *command, path []string)
	walk = func(c *command, path []string) {
		for _, s := range c.subs {
			p := append(slices.Clip(path), s.name)
			out = append(out, append(slices.Clip(p), "--help"), append(slices.Clip(p), "-h"), append([]string{"help"}, p...))
			walk(s, p)
		}
	}
	walk(commands, nil)
	return out
}

// TestCommandTree: every command of the tree is reached by its path, and
// the tree names no command twice among siblings.
func TestCommandTree(t *testing.T) {
	n := 0
	var walk func(c *command, path []string)
	walk = func(c *command, path []string) {
		seen := map[string]bool{}
		for _, s := range c.subs {
			if seen[s.name] {
				t.Errorf("%v: %s twice", path, s.name)
			}
			seen[s.name] = true
			p := append(slices.Clip(path), s.name)
			if got, name, rest := commands.find(p); got != s || name != strings.Join(p, " ") || len(rest) != 0 {
				t.Errorf("find(%v) = %s %q %v", p, got.name, name, rest)
			}
			if s.run == nil && len(s.subs) == 0 {
				t.Errorf("%v: neither runs nor has subcommands", p)
			}
			n++
			walk(s, p)
		}
	}
	walk(commands, nil)
	if n != 26 {
		t.Errorf("%d commands in the tree; want 26: run, attend, classify, embed, xattn, tokenize, preprocess, merge, query, dedup, serve, collection and its create, info and drop, runtime and its install, models and its 8 subcommands", n)
	}
}

// flagLine is one line of pflag's flag list: the flag, then its value's
// name, then the description after a wide gap.
var flagLine = regexp.MustCompile(`^\s+(?:-\S, )?(--\S+)(.*?)\s{2,}\S`)

// TestHelpGoesToStdout: --help and -h print to stdout and exit 0 for every
// command and subcommand (condition run --help | less shows the help), and
// every flag shows a one-word value name (a `quoted` word in a flag's
// description would become its value name).
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range append(helpInvocations(), []string{"--help"}, []string{"help"}) {
		code, out, errs := runCLI(t, args...)
		if code != exitOK || !strings.Contains(out, "usage") || errs != "" {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want exit 0, the help on stdout, nothing on stderr", args, code, len(out), errs)
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if v := strings.Fields(m[2]); len(v) > 1 {
				t.Errorf("%v: flag %s shows the value name %q: %q", args, m[1], strings.Join(v, " "), line)
			}
		}
	}
	// Without a command: the list on stderr, exit 2.
	if code, out, errs := runCLI(t); code != exitUsage || out != "" || !strings.Contains(errs, "commands:") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestThreadsHelpNamesStreamsWhereThereAre: --threads' help points at
// --streams only in the commands that have it.
func TestThreadsHelpNamesStreamsWhereThereAre(t *testing.T) {
	for _, c := range []struct {
		cmd     string
		streams bool
	}{{"run", true}, {"embed", true}, {"serve", true}, {"attend", false}, {"classify", false}, {"tokenize", false}} {
		_, out, _ := runCLI(t, c.cmd, "--help")
		if got := strings.Contains(out, "see --streams"); got != c.streams || strings.Contains(out, "--streams int") != c.streams {
			t.Errorf("%s --help: mentions --streams %v, has it %v; want %v", c.cmd, got, strings.Contains(out, "--streams int"), c.streams)
		}
	}
}
