package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/pipeline/batch"
)

// listFiles returns every file under dir, relative and sorted.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// TestRunOutputInsideInput: an output folder inside the input folder is
// never walked: a resumed run skips what the first did and writes nothing
// under out/out.
func TestRunOutputInsideInput(t *testing.T) {
	orttest.Load(t)
	nest := t.TempDir()
	writeImages(t, nest, 3)
	out := filepath.Join(nest, "out")
	args := []string{"run", "--images", nest, "--out", out, "-p", "a red circle", "--heatmaps", "--quiet"}
	for i, extra := range [][]string{nil, {"--resume"}, {"--resume"}} {
		code, _, errs := runCLI(t, append(args, extra...)...)
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s", i, code, errs)
		}
		if i > 0 && !strings.Contains(errs, "done 0, skipped 3") {
			t.Errorf("run %d: %s", i, errs)
		}
	}
	for _, f := range listFiles(t, out) {
		if strings.HasPrefix(f, "out/") || strings.Count(f, ".heatmap.") > 1 {
			t.Errorf("the job walked its own output: %s", f)
		}
	}
}

// TestRunRefusesEarlierOutput: a second job into an earlier job's folder is
// refused (exit 2) naming --resume and --overwrite; --overwrite removes
// only what the earlier job listed, so its heatmaps of another prompt do not
// linger beside the new ones.
func TestRunRefusesEarlierOutput(t *testing.T) {
	orttest.Load(t)
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 2)
	mine := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A folder with other files: refused too.
	code, _, errs := runCLI(t, "run", "--images", in, "--out", out, "-p", "a red circle", "--quiet")
	if code != exitUsage || !strings.Contains(errs, "not empty") || !strings.Contains(errs, "--overwrite") {
		t.Fatalf("a non-empty --out: exit %d\n%s", code, errs)
	}
	base := []string{"run", "--images", in, "--out", out, "--heatmaps", "--quiet", "--overwrite"}
	if code, _, errs := runCLI(t, append(base, "-p", "a red circle", "-p", "a blue square")...); code != 0 {
		t.Fatalf("first job: exit %d\n%s", code, errs)
	}
	code, _, errs = runCLI(t, "run", "--images", in, "--out", out, "-p", "a green star", "--quiet")
	if code != exitUsage || !strings.Contains(errs, "--resume") || !strings.Contains(errs, "--overwrite") || !strings.Contains(errs, "manifest.jsonl") {
		t.Fatalf("second job without --resume or --overwrite: exit %d\n%s", code, errs)
	}
	if code, _, errs := runCLI(t, append(base, "-p", "a green star")...); code != 0 {
		t.Fatalf("second job with --overwrite: exit %d\n%s", code, errs)
	}
	for _, f := range listFiles(t, out) {
		if strings.HasSuffix(f, ".heatmap.1.png") {
			t.Errorf("the first job's heatmap of its prompt 1 is still there: %s", f)
		}
	}
	if b, err := os.ReadFile(mine); err != nil || string(b) != "mine" {
		t.Errorf("--overwrite removed a file no job wrote: %v", err)
	}
	if code, _, errs := runCLI(t, "run", "--images", in, "--out", out, "-p", "x", "--resume", "--overwrite"); code != exitUsage {
		t.Errorf("--resume with --overwrite: exit %d\n%s", code, errs)
	}
}

// TestRunChecksInputsFirst: a missing input, inputs with no image, or
// inputs that are the output folder stop the job before any work (exit 2,
// naming the path, the extensions or the output folder), and leave no
// manifest.
func TestRunChecksInputsFirst(t *testing.T) {
	orttest.Load(t)
	good := t.TempDir()
	writeImages(t, good, 2)
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("not an image"), 0o644)
	for _, tc := range []struct {
		name   string
		inputs []string
		want   []string
		out    string // default: a new folder
	}{
		{"missing", []string{good, filepath.Join(good, "nope")}, []string{"nope", "no such file"}, ""},
		{"no images", []string{empty}, []string{"no images found", ".jpg", ".png"}, ""},
		// The images are there, but in the output folder, which the job
		// leaves out: the error says so rather than "no images found".
		{"input is the output", []string{good}, []string{"outside the job's output folder " + good}, good},
	} {
		out := tc.out
		if out == "" {
			out = filepath.Join(t.TempDir(), "out")
		}
		args := []string{"run", "--out", out, "-p", "a red circle", "--quiet"}
		for _, in := range tc.inputs {
			args = append(args, "--images", in)
		}
		code, _, errs := runCLI(t, args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d\n%s", tc.name, code, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: the error lacks %q: %s", tc.name, w, errs)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "manifest.jsonl")); err == nil {
			t.Errorf("%s: a manifest was left behind", tc.name)
		}
	}
}

// TestRunPrompts: prompts numbered from 0 in errors, files and the
// manifest; usage errors exit 2; --truncate cuts a long prompt; a
// byte-order mark in a prompts file is not a token; duplicate prompts keep
// a score each.
func TestRunPrompts(t *testing.T) {
	orttest.Load(t)
	in := t.TempDir()
	writeImages(t, in, 1)
	long := strings.Repeat("red circle ", 60)
	code, _, errs := runCLI(t, "run", "--images", in, "--out", filepath.Join(t.TempDir(), "o"), "-p", "a red circle", "-p", long, "--quiet")
	if code != exitUsage || !strings.Contains(errs, "prompt 1") || !strings.Contains(errs, "--truncate") || strings.Contains(errs, long) {
		t.Errorf("a long prompt: exit %d\n%s", code, errs)
	}
	code, _, errs = runCLI(t, "run", "--images", in, "--out", filepath.Join(t.TempDir(), "o"), "-p", "a red circle", "-p", " ", "--quiet")
	if code != exitUsage || !strings.Contains(errs, "prompt 1 is empty") {
		t.Errorf("an empty prompt: exit %d\n%s", code, errs)
	}
	file := filepath.Join(t.TempDir(), "prompts.txt")
	os.WriteFile(file, []byte("\ufeffa red circle\r\na red circle\r\n"), 0o644)
	out := filepath.Join(t.TempDir(), "o")
	if code, _, errs := runCLI(t, "run", "--images", in, "--out", out, "--prompts", file, "-p", long, "--truncate", "--quiet"); code != 0 {
		t.Fatalf("--truncate: exit %d\n%s", code, errs)
	}
	f, err := os.Open(filepath.Join(out, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := batch.ParseManifest(f)
	if err != nil || len(entries) != 1 {
		t.Fatalf("manifest: %v, %d entries", err, len(entries))
	}
	sc := entries[0].Scores
	if len(sc) != 3 || sc[0].Prompt != 0 || sc[1].Prompt != 1 || sc[2].Prompt != 2 || sc[1].Text != "a red circle" || sc[1].Score != sc[2].Score {
		b, _ := json.Marshal(sc)
		t.Errorf("scores by prompt number: %s (the byte-order mark must not change prompt 0)", b)
	}
}

// TestProgressLine: the line fits the terminal and says "counting…" until
// the total is known; --quiet silences INFO logs; --log-format json makes
// the summary JSON too.
func TestProgressLine(t *testing.T) {
	if got := fit("abcdefgh", 5); got != "abcd…" {
		t.Errorf("fit = %q", got)
	}
	if got := fit("abc", 5); got != "abc" {
		t.Errorf("fit of a short line = %q", got)
	}
	line := progressText(batch.Progress{Done: 3, Seen: 10, Elapsed: time.Second}, true)
	if !strings.Contains(line, "3/10+ (counting…) images") || strings.Contains(line, "[") {
		t.Errorf("while counting: %q", line)
	}
	line = progressText(batch.Progress{Done: 3, Seen: 10, Walked: true, Elapsed: time.Second}, true)
	if !strings.HasPrefix(line, "[=========") || !strings.Contains(line, "3/10 images") || !strings.Contains(line, "ETA 2s") {
		t.Errorf("counted: %q", line)
	}
	orttest.Load(t)
	in := t.TempDir()
	writeImages(t, in, 2)
	code, _, errs := runCLI(t, "run", "--images", in, "--out", filepath.Join(t.TempDir(), "o"), "-p", "a red circle", "--quiet")
	if code != 0 || strings.Contains(errs, "level=INFO") || !strings.Contains(errs, "done 2") {
		t.Errorf("--quiet: exit %d\n%s", code, errs)
	}
	code, _, errs = runCLI(t, "run", "--images", in, "--out", filepath.Join(t.TempDir(), "o"), "-p", "a red circle", "--quiet", "--log-format", "json")
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	var sum struct {
		Summary struct {
			Done int `json:"done"`
		} `json:"summary"`
	}
	if code != 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &sum) != nil || sum.Summary.Done != 2 {
		t.Errorf("--log-format json: exit %d\n%s", code, errs)
	}
}

// TestUnknownWordWarning: a word the built-in model can only spell out
// letter by letter is named in a warning, once per prompt.
func TestUnknownWordWarning(t *testing.T) {
	orttest.Load(t)
	img := filepath.Join("..", "..", "testdata", "scenes", "images", "scene_000.png")
	code, _, errs := runCLI(t, "attend", img, "-p", "a dog near a red circle", "-p", "a black star", "--no-heatmap")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if strings.Count(errs, "does not know") != 1 || !strings.Contains(errs, `\"dog\" (d o g</w>)`) || strings.Contains(errs, "black") {
		t.Errorf("warnings:\n%s", errs)
	}
}

// TestResumeOtherSettingsWarns: --resume into a job of other prompts says
// so, and attend takes --truncate.
func TestResumeOtherSettingsWarns(t *testing.T) {
	orttest.Load(t)
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "o")
	writeImages(t, in, 1)
	if code, _, errs := runCLI(t, "run", "--images", in, "--out", out, "-p", "a red circle"); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	code, _, errs := runCLI(t, "run", "--images", in, "--out", out, "-p", "a blue square", "--resume")
	if code != 0 || !strings.Contains(errs, "settings differ") || !strings.Contains(errs, "done 1") {
		t.Errorf("--resume with other prompts: exit %d\n%s", code, errs)
	}
	img := filepath.Join("..", "..", "testdata", "scenes", "images", "scene_000.png")
	long := strings.Repeat("a black star ", 40)
	if code, _, errs := runCLI(t, "attend", img, "-p", long, "--no-heatmap"); code != exitUsage || !strings.Contains(errs, "--truncate") {
		t.Errorf("attend, a long prompt: exit %d\n%s", code, errs)
	}
	if code, _, errs := runCLI(t, "attend", img, "-p", long, "--no-heatmap", "--truncate"); code != 0 {
		t.Errorf("attend --truncate: exit %d\n%s", code, errs)
	}
}

// TestRunFlagErrorsNameTheFlag: a bad value is reported against its own flag.
func TestRunFlagErrorsNameTheFlag(t *testing.T) {
	for flag, args := range map[string][]string{
		"--streams":      {"--streams", "-2"},
		"--workers":      {"--workers", "-1"},
		"--max-failures": {"--max-failures", "-1"},
		"--batch":        {"--batch", "0"},
		"--max-pixels":   {"--max-pixels", "-5"},
		"--fps":          {"--fps", "0"},
		"--frames":       {"--frames", "every"},
	} {
		code, _, errs := runCLI(t, append([]string{"run", "--images", ".", "--out", t.TempDir(), "-p", "a red circle"}, args...)...)
		if code != exitUsage || !strings.Contains(errs, flag) || (flag != "--batch" && strings.Contains(errs, "--batch")) {
			t.Errorf("%v: exit %d\n%s", args, code, errs)
		}
	}
}

// TestEmptyConfigNamesTheMismatch: a model folder whose config.json is {}
// (Hugging Face's CLIPConfig() defaults: 224-pixel images in 32-pixel
// patches) beside graphs of another grid fails to embed an image with an
// error naming config.json, the missing vision_config, the defaults taken
// and the graph they do not match; models info says the sizes are defaults.
func TestEmptyConfigNamesTheMismatch(t *testing.T) {
	orttest.Load(t)
	src, err := filepath.Abs("../../testdata/tinyclip")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"model.safetensors", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
		"onnx/text_model.onnx", "onnx/vision_model.onnx"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "embed", "--model", dir, "--readout", "raw", "../../testdata/images/src/png_224x224.png")
	for _, want := range []string{filepath.Join(dir, "config.json") + ": no vision_config given", "image_size 224, patch_size 32", "onnx/vision_model.onnx", "16 patch tokens"} {
		if code == 0 || !strings.Contains(errs, want) {
			t.Errorf("config.json {}: exit %d, want an error with %q:\n%s", code, want, errs)
		}
	}
	code, out, errs := runCLI(t, "models", "info", dir)
	if code != 0 || !strings.Contains(out, "config.json gives no vision_config") {
		t.Errorf("models info: exit %d\n%s%s", code, out, errs)
	}
}

// TestOutNotWritableNamesTheFolder: an --out that cannot be written (below
// a regular file; in a read-only folder; in a missing folder for a file
// output) is refused before any work (exit 2) by run, embed and
// preprocess, naming the folder that stops it and why.
func TestOutNotWritableNamesTheFolder(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeImages(t, in, 1)
	img := filepath.Join(in, "d0", "000.png")
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	commands := func(out, outFile string) [][]string {
		return [][]string{
			{"run", "--images", in, "--out", out, "-p", "a red circle", "--quiet"},
			{"embed", "--out", outFile + ".safetensors", img},
			{"preprocess", "--out", outFile + ".npy", img},
		}
	}
	check := func(t *testing.T, args []string, want ...string) {
		t.Helper()
		code, _, errs := runCLI(t, args...)
		for _, w := range want {
			if code != exitUsage || !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, want 2 and %q in:\n%s", strings.Join(args, " "), code, w, errs)
			}
		}
	}
	t.Run("under a file", func(t *testing.T) {
		for _, args := range commands(filepath.Join(file, "sub"), filepath.Join(file, "x")) {
			check(t, args, file+" is a file, not a folder", "--out "+file)
		}
	})
	t.Run("missing folder of a file", func(t *testing.T) {
		for _, args := range commands(filepath.Join(dir, "new", "deeper"), filepath.Join(dir, "none", "x"))[1:] {
			check(t, args, "no folder "+filepath.Join(dir, "none"))
		}
		// run makes its folder with its parents: nothing to refuse.
		if code, _, errs := runCLI(t, commands(filepath.Join(dir, "new", "deeper"), "")[0]...); code != 0 {
			t.Errorf("run into a new nested folder: exit %d\n%s", code, errs)
		}
	})
	t.Run("read-only folder", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root, which writes into a 0555 folder anyway: the case under a file covers this check")
		}
		for _, args := range commands(ro, filepath.Join(ro, "x")) {
			check(t, args, "folder "+ro+" cannot be written", "permission denied")
		}
		check(t, commands(filepath.Join(ro, "new"), "")[0], "folder "+ro+" cannot be written")
	})
}
