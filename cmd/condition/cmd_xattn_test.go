package main

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

const xattnTestdata = "../../xattn/testdata/"

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainContext(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func readF32(t *testing.T, x tensorio.Tensor) []float32 {
	t.Helper()
	f, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestXattnGolden runs the command on the torch fixture of
// xattn/testdata/generate.py and compares with torch within 1e-5
// relative (+1e-6 absolute).
func TestXattnGolden(t *testing.T) {
	for _, perHead := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "o.safetensors")
		args := []string{"xattn", "--weights", xattnTestdata + "attn2.safetensors",
			"--prefix", "down_blocks.0.attentions.0.transformer_blocks.0.attn2.", "--heads", "2",
			"--query", xattnTestdata + "query.npy", "--kv", xattnTestdata + "kv.npy",
			"--mask", xattnTestdata + "mask.npy", "--out", out, "--threads", "2"}
		golden := "attention.npy"
		if perHead {
			args = append(args, "--per-head")
			golden = "attention_heads.npy"
		}
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "wrote") {
			t.Errorf("stdout %q", stdout)
		}
		ts, meta, err := tensorio.ReadSafetensors(out)
		if err != nil {
			t.Fatal(err)
		}
		if meta["heads"] != "2" {
			t.Errorf("metadata %v", meta)
		}
		for name, file := range map[string]string{"output": "output.npy", "attention": golden} {
			want, err := tensorio.ReadNPY(xattnTestdata + file)
			if err != nil {
				t.Fatal(err)
			}
			got := ts[name]
			if !slices.Equal(got.Shape, want.Shape) {
				t.Fatalf("%s: shape %v, want %v", name, got.Shape, want.Shape)
			}
			g, w := readF32(t, got), readF32(t, want)
			for i := range w {
				if d := math.Abs(float64(g[i] - w[i])); d > 1e-6+1e-5*math.Abs(float64(w[i])) {
					t.Fatalf("%s[%d] = %v, want %v", name, i, g[i], w[i])
				}
			}
		}
	}
}

func TestXattnErrors(t *testing.T) {
	dir := t.TempDir()
	base := []string{"xattn", "--weights", xattnTestdata + "attn2.safetensors",
		"--prefix", "down_blocks.0.attentions.0.transformer_blocks.0.attn2.", "--heads", "2",
		"--out", filepath.Join(dir, "o.safetensors")}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--query", xattnTestdata + "query.npy"}, 2, "--kv is required"},
		{[]string{"--query", xattnTestdata + "kv.npy", "--kv", xattnTestdata + "kv.npy"}, 1, "want [T, 40] or [1, T, 40]"},
		{[]string{"--query", xattnTestdata + "query.npy", "--kv", xattnTestdata + "query.npy"}, 1, "want [T, 24]"},
		{[]string{"--query", xattnTestdata + "query.npy", "--kv", xattnTestdata + "kv.npy", "--mask", xattnTestdata + "attention.npy"}, 1, "want [9] or [1, 9]"},
		{[]string{"--query", xattnTestdata + "query.npy", "--kv", xattnTestdata + "attn2.safetensors"}, 2, "choose one with --kv-tensor"},
		{[]string{"--query", xattnTestdata + "query.npy", "--kv", xattnTestdata + "kv.npy", "--heads", "3"}, 1, "3 heads"},
		{[]string{"--query", xattnTestdata + "query.npy", "--kv", xattnTestdata + "kv.npy", "--prefix", "x."}, 1, `"x.to_q.weight" missing`},
	} {
		code, _, stderr := runCLI(t, append(append([]string{}, base...), c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
