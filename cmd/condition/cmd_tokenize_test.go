package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models/hub/hubtest"
	"github.com/conditionhq/condition/tensorio"
)

// clipDir is the real CLIP vocabulary and its reference ids (test data of
// package text).
const clipDir = "../../text/testdata/clip"

func tokRun(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = mainContext(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestTokenizeJSON(t *testing.T) {
	code, out, errs := tokRun(t, "", "tokenize", "--model", clipDir, "--json", "a photo of a cat", "Don't PANIC!!")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out)
	}
	var r struct {
		IDs    []int    `json:"ids"`
		Tokens []string `json:"tokens"`
		Words  []struct {
			Text string `json:"text"`
		} `json:"words"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	// golden.jsonl's hf ids for "a photo of a cat".
	if !slices.Equal(r.IDs, []int{49406, 320, 1125, 539, 320, 2368, 49407}) || r.Tokens[2] != "photo</w>" || r.Words[5].Text != "cat" {
		t.Fatalf("got %+v", r)
	}
}

func TestTokenizeStdin(t *testing.T) {
	in := `"a photo of a cat"` + "\n\n" + `""` + "\n" + `"<|endoftext|>"` + "\n"
	code, out, errs := tokRun(t, in, "tokenize", "--model", clipDir, "--json", "--pad", "--context-length", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got [][]int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			IDs  []int   `json:"ids"`
			Mask []int64 `json:"mask"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Mask) != 8 {
			t.Fatalf("mask %v", r.Mask)
		}
		got = append(got, r.IDs)
	}
	want := [][]int{
		{49406, 320, 1125, 539, 320, 2368, 49407, 49407},
		{49406, 49407, 49407, 49407, 49407, 49407, 49407, 49407},
		{49406, 49407, 49407, 49407, 49407, 49407, 49407, 49407},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("line %d: %v, want %v", i, got[i], want[i])
		}
	}
	code, _, errs = tokRun(t, "not json\n", "tokenize", "--model", clipDir, "--json")
	if code != 1 || !strings.Contains(errs, "stdin line 1") {
		t.Errorf("bad stdin: exit %d, %s", code, errs)
	}
}

func TestTokenizeOverflow(t *testing.T) {
	long := strings.Repeat("cat ", 80)
	code, out, errs := tokRun(t, "", "tokenize", "--model", clipDir, long)
	if code != 0 || !strings.Contains(out, "77 tokens, truncated") || !strings.Contains(errs, "truncated") {
		t.Fatalf("truncate: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = tokRun(t, "", "tokenize", "--model", clipDir, "--error-on-overflow", long)
	if code != 1 || !strings.Contains(errs, "82 tokens") {
		t.Fatalf("--error-on-overflow: exit %d, %s", code, errs)
	}
	code, _, _ = tokRun(t, "", "tokenize", "--model", clipDir, "--context-length", "1", "x")
	if code != 2 {
		t.Fatalf("--context-length 1: exit %d, want 2", code)
	}
}

func TestTokenizeOpenAIGz(t *testing.T) {
	code, out, errs := tokRun(t, "", "tokenize", "--model", clipDir+"/bpe_simple_vocab_16e6.txt.gz", "--openai", "--json", "Tom &amp; Jerry")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, `"&</w>"`) {
		t.Fatalf("want the unescaped & token, got %s", out)
	}
}

func TestTokenizeBadModel(t *testing.T) {
	code, _, errs := tokRun(t, "", "tokenize", "--model", t.TempDir(), "x")
	if code != 1 || !strings.Contains(errs, "tokenizer.json") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// TestTokenizeHubSigLIP fetches a SigLIP repository from a fake hub (the
// files of testdata/tinysiglip: spiece.model, no tokenizer.json or
// vocab.json) and tokenizes with it: the ids are those SiglipTokenizer gave
// (golden/prompts.json). The PyTorch checkpoint beside the graphs is not
// fetched.
func TestTokenizeHubSigLIP(t *testing.T) {
	const dir = "../../testdata/tinysiglip"
	files := map[string]hubtest.File{}
	for name, lfs := range map[string]bool{"config.json": false, "preprocessor_config.json": false, "special_tokens_map.json": false,
		"tokenizer_config.json": false, "spiece.model": true, "model.safetensors": true,
		"onnx/text_model.onnx": true, "onnx/vision_model.onnx": true} {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = hubtest.File{Data: b, LFS: lfs}
	}
	files["pytorch_model.bin"] = hubtest.File{Data: []byte("not fetched"), LFS: true}
	commit := strings.Repeat("5e", 20)
	srv := hubtest.New(t, map[string]*hubtest.Repo{
		"org/tinysiglip": {Commits: map[string]map[string]hubtest.File{commit: files}, Branches: map[string]string{"main": commit}},
	})
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL())
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())

	var golden struct {
		Prompts  []string `json:"prompts"`
		InputIDs [][]int  `json:"input_ids"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "golden", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"tokenize", "--model", "org/tinysiglip", "--json"}, golden.Prompts[:4]...)
	code, out, errs := tokRun(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 lines, got %q", out)
	}
	for i, l := range lines {
		var r struct {
			IDs []int `json:"ids"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.IDs, golden.InputIDs[i]) {
			t.Errorf("%q: ids %v, SiglipTokenizer gave %v", golden.Prompts[i], r.IDs, golden.InputIDs[i])
		}
	}
	snap := filepath.Join(cache, "models--org--tinysiglip", "snapshots", commit)
	if _, err := os.Stat(filepath.Join(snap, "spiece.model")); err != nil {
		t.Errorf("spiece.model not in the snapshot: %v", err)
	}
	for _, r := range srv.Requests() {
		if strings.HasSuffix(r.Path, ".bin") {
			t.Errorf("requested %s %s", r.Method, r.Path)
		}
	}
}

// TestTokenizeOpenCLIP: a folder in OpenCLIP's layout tokenizes as
// OpenCLIP's tokenizer does (scripts/openclip/make_tiny.py's transcription
// of it): HTML unescaped, cut to open_clip_config.json's context_length 16
// with the end of text last.
func TestTokenizeOpenCLIP(t *testing.T) {
	dir := "../../testdata/tinyopenclip"
	x, err := tensorio.ReadNPY(filepath.Join(dir, "golden", "input_ids.npy"))
	if err != nil {
		t.Fatal(err)
	}
	ids := x.Data.([]int64)
	code, out, errs := tokRun(t, "", "tokenize", "--model", dir, "--json", "Two  dogs, running!", "salt &amp; pepper")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out)
	}
	for i, line := range lines {
		var r struct {
			IDs []int64 `json:"ids"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		want := ids[(i+1)*16 : (i+2)*16]
		if n := slices.Index(want, 0); n >= 0 {
			want = want[:n]
		}
		if !slices.Equal(r.IDs, want) {
			t.Errorf("line %d: ids %v, OpenCLIP's tokenizer %v", i, r.IDs, want)
		}
	}
}

// TestTokenizeOpenCLIPBuiltinBPE tokenizes with a folder in OpenCLIP's
// layout that has no tokenizer files (its config alone, CLIP's vocabulary
// size, context 16): OpenCLIP's built-in CLIP BPE with openai's cleaning
// gives openai's ids (golden.jsonl's openai field, or openai_ftfy.jsonl's
// where ftfy changes the text), padded with zeros to
// the config's context_length.
func TestTokenizeOpenCLIPBuiltinBPE(t *testing.T) {
	b, err := os.ReadFile("../../testdata/tinyopenclip/open_clip_config.json")
	if err != nil {
		t.Fatal(err)
	}
	config := strings.Replace(string(b), `"vocab_size": 594`, `"vocab_size": 49408`, 1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "open_clip_config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.ReadFile(filepath.Join(clipDir, "golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// golden.jsonl's openai ids are without ftfy: where ftfy changes a
	// text, the ids are openai_ftfy.jsonl's (the real ftfy, then openai's).
	fb, err := os.ReadFile("../../text/testdata/openai_ftfy.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ftfyIDs := map[string][]int64{}
	for _, line := range strings.Split(string(fb), "\n") {
		var l struct {
			Text   string  `json:"text"`
			Fixed  string  `json:"fixed"`
			OpenAI []int64 `json:"openai"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Text != l.Fixed {
			ftfyIDs[l.Text] = l.OpenAI
		}
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(f)), "\n") {
		var g struct {
			Text   string  `json:"text"`
			OpenAI []int64 `json:"openai"`
		}
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatal(err)
		}
		if ids, ok := ftfyIDs[g.Text]; ok {
			g.OpenAI = ids
		}
		if len(g.OpenAI) > 16 || strings.TrimSpace(g.Text) == "" || strings.HasPrefix(g.Text, "-") {
			continue
		}
		code, out, errs := tokRun(t, "", "tokenize", "--model", dir, "--json", "--pad", "--", g.Text)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", g.Text, code, errs)
		}
		var r struct {
			IDs []int64 `json:"ids"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if want := append(slices.Clone(g.OpenAI), make([]int64, 16-len(g.OpenAI))...); !slices.Equal(r.IDs, want) {
			t.Errorf("%q: ids %v, want openai's %v", g.Text, r.IDs, want)
		}
		n++
	}
	if n < 15 {
		t.Fatalf("only %d lines of golden.jsonl checked", n)
	}
}
