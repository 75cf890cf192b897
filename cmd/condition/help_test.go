package main

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

// helpInvocations lists every command and subcommand with its help flag.
func helpInvocations() [][]string {
	var out [][]string
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, []string{n, "--help"}, []string{n, "-h"})
	}
	for _, sub := range []string{"list", "fetch", "info", "verify", "expose", "eval"} {
		out = append(out, []string{"models", sub, "--help"})
	}
	out = append(out, []string{"runtime", "install", "--help"}, []string{"help", "run"})
	return out
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
