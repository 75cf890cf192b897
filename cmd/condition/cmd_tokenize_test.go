package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
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
