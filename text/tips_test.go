package text

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"
)

const tinyTipsDir = "../testdata/tinytips"

// TestTipsGolden checks Tipsv2Tokenizer (testdata/tinytips: a trained
// SentencePiece Unigram as tokenizer.model, tokenizer_class
// Tipsv2Tokenizer) against the SentencePiece library's ids of each string
// lower-cased by Python's str.lower (golden/tokenizer.jsonl): no BOS, no
// EOS, padding with id 0, cut at 16 positions (model_max_length).
func TestTipsGolden(t *testing.T) {
	tok, err := LoadTokenizerDir(tinyTipsDir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != -1 || tok.EOS() != -1 || tok.Pad() != 0 || tok.ContextLength() != 16 {
		t.Fatalf("BOS %d, EOS %d, pad %d, context %d; want -1, -1, 0, 16", tok.BOS(), tok.EOS(), tok.Pad(), tok.ContextLength())
	}
	f, err := os.Open(filepath.Join(tinyTipsDir, "golden", "tokenizer.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var c struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		got, err := tok.Encode(c.Text)
		if err != nil || !slices.Equal(got, c.IDs) {
			t.Errorf("%q: got %v (%v), the library's %v", c.Text, got, err, c.IDs)
		}
		if len(c.IDs) == 0 || len(c.IDs) > 16 {
			continue
		}
		ids, mask, err := tok.EncodePadded(c.Text, 16)
		if err != nil {
			t.Errorf("%q: %v", c.Text, err)
			continue
		}
		for i := range 16 {
			want, wm := int64(0), int64(0)
			if i < len(c.IDs) {
				want, wm = int64(c.IDs[i]), 1
			}
			if ids[i] != want || mask[i] != wm {
				t.Errorf("%q padded: %v %v", c.Text, ids, mask)
				break
			}
		}
	}
	if err := sc.Err(); err != nil || n < 20 {
		t.Fatalf("%d strings read (%v)", n, err)
	}
	// Truncation keeps the first 16 ids.
	trunc, err := tok.WithOptions(Options{ContextLength: 16})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := tok.Encode("x x x x x x x x x x x x x x x x x x x x")
	ids, _, truncated, err := trunc.Fit(full, 16)
	if err != nil || !truncated || len(full) <= 16 || ids[15] != int64(full[15]) {
		t.Errorf("truncation: %v %v %v (full %v)", ids, truncated, err, full)
	}
}

// TestTipsFiles: a TIPSv2 folder with tokenizer.model alone is read as
// Tipsv2Tokenizer's SentencePiece (lower-cased, no BOS or EOS, pad 0);
// config.json's model_type tipsv2 names it when tokenizer_config.json does
// not; do_lower_case false keeps the case; a pad token other than id 0 is
// refused. (With a tokenizer.json beside it, that is read: TestTipsJSONFiles.)
func TestTipsFiles(t *testing.T) {
	model, err := os.ReadFile(filepath.Join(tinyTipsDir, "tokenizer.model"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := LoadTokenizer(fstest.MapFS{"tokenizer.model": {Data: model}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := plain.Encode("the cat") // plain SentencePiece, on the lower-cased text
	for name, fsys := range map[string]fstest.MapFS{
		"tokenizer_class": {"tokenizer.model": {Data: model},
			"tokenizer_config.json": {Data: []byte(`{"tokenizer_class": "Tipsv2Tokenizer"}`)}},
		"model_type": {"tokenizer.model": {Data: model},
			"config.json": {Data: []byte(`{"model_type": "tipsv2"}`)}},
	} {
		tok, err := LoadTokenizer(fsys)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := tok.Encode("THE CAT")
		if err != nil || !slices.Equal(got, want) || tok.BOS() != -1 || tok.EOS() != -1 || tok.Pad() != 0 {
			t.Errorf("%s: %v %v, BOS %d EOS %d pad %d; want %v (tokenizer.model, lower-cased)", name, got, err, tok.BOS(), tok.EOS(), tok.Pad(), want)
		}
	}
	// Plain SentencePiece (no class, no config) does not lower-case; nor
	// does do_lower_case false.
	cased, err := LoadTokenizer(fstest.MapFS{"tokenizer.model": {Data: model},
		"tokenizer_config.json": {Data: []byte(`{"tokenizer_class": "Tipsv2Tokenizer", "do_lower_case": false}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := cased.Encode("THE CAT"); slices.Equal(got, want) {
		t.Errorf("do_lower_case false: %v, the lower-cased ids", got)
	}
	if _, err := LoadTokenizer(fstest.MapFS{"tokenizer.model": {Data: model},
		"tokenizer_config.json": {Data: []byte(`{"tokenizer_class": "Tipsv2Tokenizer", "pad_token": "<unk>"}`)}}); err == nil {
		t.Error("pad token <unk> (id 2): no error")
	}
}
