package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// queryJob runs a real job with --index over the scenes (a folder and a
// tar shard of three of them), two parts of 8 images, and returns its
// output folder and the folder of its inputs.
func queryJob(t *testing.T) (out, in string) {
	t.Helper()
	orttest.Load(t)
	in = t.TempDir()
	src := "../../testdata/scenes/images"
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(in, "scenes"), 0o755); err != nil {
		t.Fatal(err)
	}
	var shard bytes.Buffer
	tw := tar.NewWriter(&shard)
	for i, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if err := tw.WriteHeader(&tar.Header{Name: strings.TrimSuffix(e.Name(), ".png") + ".png", Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			tw.Write(b)
		}
		if err := os.WriteFile(filepath.Join(in, "scenes", e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	if err := os.WriteFile(filepath.Join(in, "shard.tar"), shard.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(t.TempDir(), "out")
	code, _, errs := runCLI(t, "run", "--images", filepath.Join(in, "scenes"), "--images", filepath.Join(in, "shard.tar"), "-p", "x", "--index", "--shard-size", "8", "--out", out)
	if code != 0 {
		t.Fatalf("run --index: exit %d: %s", code, errs)
	}
	return out, in
}

func TestQueryJSONAndHeatmaps(t *testing.T) {
	out, in := queryJob(t)
	// One original gone: its sheet is drawn over a plain panel.
	if err := os.Remove(filepath.Join(in, "scenes", "scene_001.png")); err != nil {
		t.Fatal(err)
	}
	heat := filepath.Join(t.TempDir(), "heat")
	code, stdout, errs := runCLI(t, "query", out, "-p", "a black star", "-p", "an orange cross", "--top", "15", "--json", "--heatmap-dir", heat)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	hits := parseQueryHits(t, stdout)
	if len(hits) != 30 {
		t.Fatalf("%d hits, want 15 per prompt (every image)", len(hits))
	}
	members := 0
	for i, h := range hits {
		if h.Rank != i%15+1 || (h.Rank > 1 && h.Score > hits[i-1].Score) {
			t.Fatalf("hit %d: rank %d score %g after %g", i, h.Rank, h.Score, hits[max(i-1, 0)].Score)
		}
		if len(h.Words) != 2 || len(h.Words[0].Map) != 64 {
			t.Fatalf("hit %d: words %+v", i, h.Words)
		}
		if h.Member != "" {
			members++
		}
		f, err := os.Open(h.Heatmap)
		if err != nil {
			t.Fatalf("hit %d: %v", i, err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Fatalf("%s: %v", h.Heatmap, err)
		}
		f.Close()
	}
	if members != 6 {
		t.Errorf("%d hits of tar members, want 3 per prompt", members)
	}
	if hits[0].Path != "scenes/scene_000.png" && hits[0].Path != "shard/scene_000.png" {
		t.Errorf("the best hit of %q is %s, want scene_000 (its caption)", hits[0].Prompt, hits[0].Path)
	}
	// Only the removed original falls back to a plain panel.
	if n := strings.Count(errs, "plain panel"); n != 2 || !strings.Contains(errs, "scene_001") {
		t.Errorf("%d plain-panel warnings, want 2 (scene_001, per prompt):\n%s", n, errs)
	}

	code, stdout, errs = runCLI(t, "query", out, "-p", "a black star", "--top", "3")
	if code != 0 || !strings.Contains(stdout, "rank") || strings.Count(stdout, "scene_") != 3 || !strings.Contains(stdout, "black ") || strings.Contains(stdout, "segment") {
		t.Fatalf("table: exit %d\n%s\n%s", code, stdout, errs)
	}
}

func TestQueryMistakes(t *testing.T) {
	out, _ := queryJob(t)
	for _, args := range [][]string{
		{"query", out, "-p", "x", "--top", "0"},
		{"query", out, "-p", "x", "--top", "-3"},
		{"query", out, "-p", "x", "--top", "20000"},
		{"query", out, "-p", "x", "--box", "1.5"},
		{"query", out},
		{"query", "-p", "x"},
	} {
		if code, _, errs := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errs)
		}
	}
	// An index of one readout queried asking another: both named.
	if code, _, errs := runCLI(t, "query", out, "-p", "x", "--readout", "clearclip"); code != exitUsage || !strings.Contains(errs, "readout raw") || !strings.Contains(errs, "--readout clearclip") {
		t.Errorf("another readout: exit %d, stderr %s", code, errs)
	}
	code, _, errs := runCLI(t, "query", out, "-p", "zzqx", "--top", "1")
	if code != 0 || !strings.Contains(errs, "no word the model knows") {
		t.Errorf("unknown words: exit %d, stderr %s", code, errs)
	}
	// A truncated part is named, and --partial searches the other.
	p := filepath.Join(out, "index", "000001", "patches.npy")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, st.Size()-64); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI(t, "query", out, "-p", "a red square")
	if code == 0 || !strings.Contains(errs, "000001") || !strings.Contains(errs, "truncated") {
		t.Errorf("truncated part: exit %d, stderr %s", code, errs)
	}
	code, stdout, errs := runCLI(t, "query", out, "-p", "a red square", "--partial", "--top", "100", "--json")
	if code != 0 || strings.Count(stdout, "\n") != 8 || !strings.Contains(errs, "000001") {
		t.Errorf("--partial: exit %d, %d hits (want the first part's 8), stderr %s", code, strings.Count(stdout, "\n"), errs)
	}
	code, _, errs = runCLI(t, "query", out, "-p", "x", "--partial", "--model", "../../testdata/tinyclip")
	if code == 0 || !strings.Contains(errs, "default") {
		t.Errorf("another model: exit %d, stderr %s", code, errs)
	}
}

// parseQueryHits parses query --json's output, one hit a line.
func parseQueryHits(t *testing.T, stdout string) []queryHit {
	t.Helper()
	var hits []queryHit
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var h queryHit
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		hits = append(hits, h)
	}
	return hits
}
