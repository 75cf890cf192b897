package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// runCLI runs condition-bench with args and returns its exit code and
// outputs.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := Main(context.Background(), args, &out, &errs)
	return code, out.String(), errs.String()
}

// flagLine is one line of pflag's flag list: the flag, its value's name,
// then the description after a wide gap.
var flagLine = regexp.MustCompile(`^\s+(?:-\S, )?(--\S+)(.*?)\s{2,}\S`)

// TestHelp: the list of subcommands, and each one's help, go to stdout
// with exit code 0, each flag with a one-word value name; mistakes exit 2
// with the message on stderr.
func TestHelp(t *testing.T) {
	names := subcommandNames()
	if strings.Join(names, " ") != "dedup graphs naflex pipeline query serve video xattn" {
		t.Fatalf("subcommands %v", names)
	}
	code, out, errs := runCLI(t, "--help")
	if code != exitOK || errs != "" {
		t.Fatalf("--help: exit %d, stderr %q", code, errs)
	}
	for _, n := range names {
		if !strings.Contains(out, "  "+n+" ") {
			t.Errorf("--help does not list %s:\n%s", n, out)
		}
	}
	for _, n := range names {
		for _, h := range []string{"--help", "-h"} {
			code, out, errs := runCLI(t, n, h)
			if code != exitOK || !strings.Contains(out, "usage: condition-bench "+n) || errs != "" {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", n, h, code, out, errs)
				continue
			}
			for _, line := range strings.Split(out, "\n") {
				if m := flagLine.FindStringSubmatch(line); m != nil && len(strings.Fields(m[2])) > 1 {
					t.Errorf("%s: flag %s shows the value name %q", n, m[1], strings.TrimSpace(m[2]))
				}
			}
		}
	}
	for _, args := range [][]string{{}, {"nope"}, {"xattn", "extra"}, {"xattn", "--json", "--markdown"}, {"xattn", "--impl", "sse"},
		{"xattn", "--threads", "0"}, {"pipeline", "--n", "0"}, {"pipeline", "--threads", "-1"}, {"pipeline", "--precision", "int9"},
		{"pipeline", "--precision", "int8", "--variant", "fp16"}, {"pipeline", "--readout", "dense"}, {"pipeline", "--readout", "raw,raw"},
		{"pipeline", "--readout", "raw,clearclip", "--tune"}, {"pipeline", "--readout", "raw,naclip", "--rss"}, {"pipeline", "--no-job", "--tune"},
		{"graphs"}, {"xattn", "--nope"}, {"dedup", "--n", "1"}, {"dedup", "--threshold", "0"}, {"dedup", "extra"}, {"dedup", "--clusters", "-1"}, {"dedup", "--probe", "3"}, {"dedup", "--faiss-queries", "-1"}, {"dedup", "--impl", "sse"},
		{"video", "--fps", "0"}, {"video", "extra"}, {"video", "--width", "15"}, {"video", "--batch", "0"}} {
		code, out, errs := runCLI(t, args...)
		if code != exitUsage || out != "" || errs == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and a message on stderr", args, code, out, errs, exitUsage)
		}
	}
}

// TestInterrupted: a cancelled run exits 130.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errs bytes.Buffer
	code := Main(ctx, []string{"xattn", "--tq", "4", "--tk", "4", "--dq", "8", "--dkv", "8", "--heads", "2", "--count", "1", "--time", "1ms"}, &out, &errs)
	if code != exitInterrupted || !strings.Contains(errs.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q; want %d", code, errs.String(), exitInterrupted)
	}
}
