package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/tensorio"
)

// TestMain lets tests run the program as a separate process (to kill it):
// with CONDITION_TEST_MAIN set, the test binary is the program.
func TestMain(m *testing.M) {
	if os.Getenv("CONDITION_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// program returns a command running the program with args.
func program(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CONDITION_TEST_MAIN=1")
	return cmd
}

func writeImages(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 24+i%9, 20+i%5))
		for y := range img.Bounds().Dy() {
			for x := range img.Bounds().Dx() {
				img.Set(x, y, color.RGBA{uint8(i * 41), uint8(x * 9), uint8(y * 11), 255})
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%4), fmt.Sprintf("%03d.png", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		var buf bytes.Buffer
		png.Encode(&buf, img)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var jobArgs = []string{"run", "--model", "../../testdata/tinyclip", "--prompt", "a red circle", "--prompt", "blue square",
	"--batch", "1", "--workers", "1", "--threads", "1", "--quiet", "--heatmaps"}

// outputs maps every file under dir but manifests to its bytes.
func outputs(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "manifest") {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel], _ = os.ReadFile(p)
		return nil
	})
	return got
}

func manifestLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// killAfter starts cmd and SIGKILLs it once its manifest has n lines.
func killAfter(t *testing.T, cmd *exec.Cmd, manifest string, n int) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for manifestLines(manifest) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if manifestLines(manifest) < n {
		t.Fatalf("the job did not reach %d images in time", n)
	}
}

func TestRunKilledThenResumedEqualsUninterrupted(t *testing.T) {
	orttest.Load(t)
	tmp := t.TempDir()
	in := filepath.Join(tmp, "in")
	writeImages(t, in, 24)
	ref, killed := filepath.Join(tmp, "ref"), filepath.Join(tmp, "killed")

	if out, err := program(append(jobArgs, "--images", in, "--out", ref)...).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	killAfter(t, program(append(jobArgs, "--images", in, "--out", killed)...), filepath.Join(killed, "manifest.jsonl"), 5)
	// The kill left the job unfinished: fewer images listed than given,
	// so that the resumed run below has work to do.
	if n := manifestLines(filepath.Join(killed, "manifest.jsonl")); n >= 24 {
		t.Fatalf("the job finished (%d manifest lines for 24 images) before it was killed; nothing tests the resume", n)
	}
	// Whatever the kill left is whole: every output file parses.
	for name, b := range outputs(t, killed) {
		if strings.Contains(name, ".tmp-") {
			continue // a temporary file; --resume removes it
		}
		if strings.HasSuffix(name, ".safetensors") {
			if _, _, err := tensorio.DecodeSafetensors(b); err != nil {
				t.Fatalf("truncated output after kill: %s: %v", name, err)
			}
		} else if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Fatalf("truncated heatmap after kill: %s: %v", name, err)
		}
	}
	out, err := program(append(jobArgs, "--images", in, "--out", killed, "--resume")...).CombinedOutput()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "skipped") {
		t.Errorf("summary: %s", out)
	}
	want, got := outputs(t, ref), outputs(t, killed)
	if len(want) != 24*3 {
		t.Fatalf("reference run wrote %d files, want %d", len(want), 24*3)
	}
	if len(got) != len(want) {
		t.Fatalf("resumed run has %d files, uninterrupted %d", len(got), len(want))
	}
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s differs between the resumed and the uninterrupted run", name)
		}
	}
	f, _ := os.Open(filepath.Join(killed, "manifest.jsonl"))
	defer f.Close()
	es, err := batch.ParseManifest(f)
	if err != nil {
		t.Fatal(err)
	}
	if l := batch.Latest(es); len(l) != 24 {
		t.Fatalf("manifest has %d images, want 24", len(l))
	}
}

func TestRunShardsDisjointCompleteAndRerun(t *testing.T) {
	orttest.Load(t)
	tmp := t.TempDir()
	in, out := filepath.Join(tmp, "in"), filepath.Join(tmp, "out")
	writeImages(t, in, 30)
	const n = 3
	var cmds []*exec.Cmd
	for i := range n {
		cmd := program(append(jobArgs, "--images", in, "--out", out, "--shard-count", fmt.Sprint(n), "--shard-index", fmt.Sprint(i))...)
		if i == 1 {
			continue // killed below, then rerun
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	// Shard 1 through the environment variable Kubernetes Indexed Jobs set.
	s1 := program(append(jobArgs, "--images", in, "--out", out, "--shard-count", "3")...)
	s1.Env = append(s1.Env, "JOB_COMPLETION_INDEX=1")
	killAfter(t, s1, filepath.Join(out, "manifest-1-of-3.jsonl"), 2)
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("shard: %v", err)
		}
	}
	rep, err := batch.Merge(context.Background(), out, []string{in})
	if err != nil {
		t.Fatal(err)
	}
	// The killed shard's images that it did not reach must be reported
	// missing (unless it happened to finish before the kill).
	want1 := 0
	filepath.WalkDir(in, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(in, p)
			if batch.ShardOf(filepath.ToSlash(rel), 3) == 1 {
				want1++
			}
		}
		return nil
	})
	if got := manifestLines(filepath.Join(out, "manifest-1-of-3.jsonl")); got < want1 && len(rep.Missing) != want1-got {
		t.Fatalf("shard 1 was killed after %d of its %d images; merge reports %d missing: %+v", got, want1, len(rep.Missing), rep)
	}
	rerun := program(append(jobArgs, "--images", in, "--out", out, "--shard-count", "3", "--shard-index", "1", "--resume")...)
	if b, err := rerun.CombinedOutput(); err != nil {
		t.Fatalf("rerun: %v\n%s", err, b)
	}
	var stdout bytes.Buffer
	if code := mainContext(context.Background(), []string{"merge", "--images", in, out}, nil, &stdout, &stdout); code != 0 {
		t.Fatalf("merge exit %d: %s", code, stdout.String())
	}
	rep, err = batch.Merge(context.Background(), out, []string{in})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Images != 30 || rep.OK != 30 || len(rep.Duplicated) != 0 || len(rep.Missing) != 0 || len(rep.MissingShards) != 0 {
		t.Fatalf("merge: %+v", rep)
	}
	// Disjoint: each image is in exactly the manifest of its shard.
	seen := map[string]int{}
	for i := range n {
		f, _ := os.Open(filepath.Join(out, fmt.Sprintf("manifest-%d-of-3.jsonl", i)))
		es, _ := batch.ParseManifest(f)
		f.Close()
		for _, e := range batch.Latest(es) {
			seen[e.Path]++
			if got := batch.ShardOf(e.Path, 3); got != i {
				t.Errorf("%s is in shard %d's manifest, hashes to %d", e.Path, i, got)
			}
		}
	}
	var dups []string
	for p, c := range seen {
		if c != 1 {
			dups = append(dups, p)
		}
	}
	sort.Strings(dups)
	if len(seen) != 30 || len(dups) > 0 {
		t.Fatalf("%d images over the shards, duplicated %v", len(seen), dups)
	}
}

func TestRunExitCodes(t *testing.T) {
	orttest.Load(t)
	in := t.TempDir()
	writeImages(t, in, 2)
	os.WriteFile(filepath.Join(in, "bad.png"), []byte("nope"), 0o644)
	var buf bytes.Buffer
	args := append(append([]string{}, jobArgs...), "--images", in, "--out", t.TempDir())
	if code := mainContext(context.Background(), args, nil, &buf, &buf); code != exitFailed {
		t.Fatalf("one failure with --max-failures 0: exit %d\n%s", code, buf.String())
	}
	buf.Reset()
	// The same folder again: refused (exit 2) without --resume or --overwrite.
	if code := mainContext(context.Background(), append(args, "--max-failures", "1"), nil, &buf, &buf); code != exitUsage ||
		!strings.Contains(buf.String(), "--resume") || !strings.Contains(buf.String(), "--overwrite") {
		t.Fatalf("a second job into the same --out: exit %d\n%s", code, buf.String())
	}
	buf.Reset()
	if code := mainContext(context.Background(), append(args, "--max-failures", "1", "--overwrite"), nil, &buf, &buf); code != exitOK {
		t.Fatalf("one failure with --max-failures 1: exit %d\n%s", code, buf.String())
	}
	args = append(append([]string{}, jobArgs...), "--images", in, "--out", t.TempDir())
	if code := mainContext(context.Background(), []string{"run", "--images", in}, nil, &buf, &buf); code != exitUsage {
		t.Fatalf("no --out: exit %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := mainContext(ctx, args, nil, &buf, &buf); code != exitInterrupted {
		t.Fatalf("cancelled: exit %d", code)
	}
}

// TestRunShardsKilledThenResumed: a shards-layout job killed (SIGKILL)
// midway shows no half shard (a shard's arrays exist exactly when its
// metadata does), and resumed it writes the same bytes as a job never
// killed.
func TestRunShardsKilledThenResumed(t *testing.T) {
	orttest.Load(t)
	tmp := t.TempDir()
	in := filepath.Join(tmp, "in")
	writeImages(t, in, 24)
	args := append(append([]string{}, jobArgs...), "--layout", "shards", "--shard-size", "5", "--images", in)
	ref, killed := filepath.Join(tmp, "ref"), filepath.Join(tmp, "killed")
	if out, err := program(append(args, "--out", ref)...).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	killAfter(t, program(append(args, "--out", killed)...), filepath.Join(killed, "manifest.jsonl"), 7)
	if n := manifestLines(filepath.Join(killed, "manifest.jsonl")); n >= 24 {
		t.Fatalf("the job finished (%d lines) before it was killed", n)
	}
	for i := range 5 {
		name := fmt.Sprintf("%06d", i)
		_, metaErr := os.Stat(filepath.Join(killed, "metadata", "metadata_"+name+".parquet"))
		_, dirErr := os.Stat(filepath.Join(killed, "shards", name))
		if (metaErr == nil) != (dirErr == nil) {
			t.Errorf("shard %s half there after the kill: metadata %v, arrays %v", name, metaErr, dirErr)
		}
	}
	if out, err := program(append(args, "--out", killed, "--resume")...).CombinedOutput(); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	want, got := outputs(t, ref), outputs(t, killed)
	for name, b := range want {
		if strings.HasSuffix(name, ".png") {
			continue // heatmaps: compared by TestRunKilledThenResumedEqualsUninterrupted
		}
		if !bytes.Equal(b, got[name]) {
			t.Errorf("%s differs after kill and resume", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok && !strings.Contains(name, ".tmp-") {
			t.Errorf("%s only after kill and resume", name)
		}
	}
}
