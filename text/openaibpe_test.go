package text

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// gunzip returns the decompressed contents of the gzip file b.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpenAIBPE checks the built-in merges: they are the first lines of
// openai's bpe_simple_vocab_16e6.txt.gz (testdata/clip), and the tokenizer
// built from them gives openai's ids (golden.jsonl's openai field) for
// every line with openai's cleaning, the Hugging Face ids (hf) without it,
// and pads with 0 to 77 after the end of text, as openai's clip.tokenize
// and OpenCLIP's tokenizer do.
func TestOpenAIBPE(t *testing.T) {
	full, err := os.ReadFile(filepath.Join(clipDir, "bpe_simple_vocab_16e6.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	head, all := gunzip(t, openAIMerges), gunzip(t, full)
	if n := bytes.Count(head, []byte("\n")); n != 48895 || !bytes.HasPrefix(all, head) {
		t.Fatalf("the built-in merges: %d lines, a prefix of openai's file: %v; want its first 48,895 (a header and 48,894 merges)", n, bytes.HasPrefix(all, head))
	}
	tok, err := OpenAIBPE()
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != 49406 || tok.EOS() != 49407 || tok.Pad() != 0 || tok.ContextLength() != 77 {
		t.Fatalf("BOS %d, EOS %d, pad %d, context %d; want 49406, 49407, 0, 77", tok.BOS(), tok.EOS(), tok.Pad(), tok.ContextLength())
	}
	oa, err := tok.WithOptions(Options{OpenAIClean: true})
	if err != nil {
		t.Fatal(err)
	}
	golden := readGolden(t, filepath.Join(clipDir, "golden.jsonl"))
	for _, g := range golden {
		got, err := oa.Encode(g.Text)
		if err != nil {
			t.Fatalf("openai Encode(%q): %v", g.Text, err)
		}
		// golden.jsonl's openai ids are without ftfy: where ftfy changes
		// the text, openai_ftfy.jsonl has the ids.
		want := openAIWant(t, g.Text, g.OpenAI)
		if !slices.Equal(got, want) {
			t.Errorf("openai Encode(%q)\n got %v\nwant %v", g.Text, got, want)
		}
		if got, _ = tok.Encode(g.Text); !slices.Equal(got, g.HF) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", g.Text, got, g.HF)
		}
		ids, mask, err := oa.EncodePadded(g.Text, 0)
		if err != nil {
			t.Fatalf("EncodePadded(%q): %v", g.Text, err)
		}
		n := min(len(want), 77)
		if len(ids) != 77 || ids[n-1] != 49407 || slices.ContainsFunc(ids[n:], func(id int64) bool { return id != 0 }) ||
			!slices.Equal(toInts(ids[:n-1]), want[:n-1]) || mask[n-1] != 1 || n < 77 && mask[n] != 0 {
			t.Errorf("EncodePadded(%q) = %v (mask %v); want openai's ids cut to 76 and the end of text, then zeros", g.Text, ids, mask)
		}
	}
	t.Logf("%d lines of golden.jsonl", len(golden))
}

// BenchmarkOpenAIBPE builds the built-in tokenizer (decompression,
// vocabulary and merge tables).
func BenchmarkOpenAIBPE(b *testing.B) {
	for b.Loop() {
		if _, err := OpenAIBPE(); err != nil {
			b.Fatal(err)
		}
	}
}
