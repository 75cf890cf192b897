package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestRunPrecision: run --precision int8 makes the built-in model's int8
// variant once and runs it, a job whose resume settings differ from the
// float32 job's (so --resume never mixes the two); a wrong --precision, or
// int8 beside another --variant, is a usage error before any work.
func TestRunPrecision(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	images := filepath.Join("..", "..", "testdata", "scenes", "images")
	settings := map[string]string{}
	for _, p := range []string{"fp32", "int8"} {
		out := filepath.Join(t.TempDir(), p)
		code, _, errs := runCLI(t, "run", "--images", images, "-p", "a red circle", "--out", out, "--precision", p)
		if code != exitOK {
			t.Fatalf("--precision %s: exit %d\n%s", p, code, errs)
		}
		b, err := os.ReadFile(filepath.Join(out, "manifest.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var e struct {
			Status, Settings string
		}
		if err := json.Unmarshal([]byte(lines[0]), &e); err != nil || e.Status != "ok" || len(lines) != 12 {
			t.Fatalf("--precision %s: %d lines, first %s", p, len(lines), lines[0])
		}
		settings[p] = e.Settings
		if p == "int8" && !strings.Contains(errs, "making the int8 variant") {
			t.Errorf("--precision int8 did not say it made the variant:\n%s", errs)
		}
	}
	if settings["fp32"] == settings["int8"] {
		t.Errorf("fp32 and int8 jobs share the resume settings %s", settings["fp32"])
	}
	for _, args := range [][]string{{"--precision", "int4"}, {"--precision", "int8", "--variant", "fp16"}} {
		code, _, errs := runCLI(t, append([]string{"run", "--images", images, "-p", "x", "--out", t.TempDir()}, args...)...)
		if code != exitUsage || !strings.Contains(errs, "--precision") {
			t.Errorf("%v: exit %d, %s", args, code, errs)
		}
	}
}
