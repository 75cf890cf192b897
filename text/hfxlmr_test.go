package text

import (
	"path/filepath"
	"slices"
	"testing"
)

// testdata/xlmr_json is made by scripts/tokenizers/make_xlmr_json.js: the
// SentencePiece Unigram model of testdata/spm/unigram_nfkc.model converted to
// a tokenizer.json in XLM-RoBERTa's layout (that of XLM-V, MetaCLIP 2's
// tokenizer), its variants (WhitespaceSplit before Metaspace, the older
// add_prefix_space form), and the ids the Hugging Face tokenizers library
// gives for each string.
const xlmrJSONDir = "testdata/xlmr_json"

var xlmrJSONVariants = []string{"wsplit", "wsplit_first", "wsplit_raw", "legacy"}

type xlmrJSONGolden struct {
	Text    string  `json:"text"`
	IDs     []int   `json:"ids"`     // no special tokens
	Special []int   `json:"special"` // <s> … </s>
	IDs77   []int64 `json:"ids_77"`  // the library's truncation to 77, when it cut
}

// TestXLMRJSONGoldens compares every id the library gives for every golden
// string: without <s> and </s>, with them, and truncated or padded with
// <pad> to 77 (the mask too).
func TestXLMRJSONGoldens(t *testing.T) {
	goldens := readSPJSONL[xlmrJSONGolden](t, filepath.Join(xlmrJSONDir, "golden.jsonl"))
	if len(goldens) < 600 {
		t.Fatalf("%d golden strings, want at least 600", len(goldens))
	}
	tok, err := LoadTokenizerDir(xlmrJSONDir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != 0 || tok.EOS() != 2 || tok.Pad() != 1 || tok.VocabSize() != 3002 {
		t.Fatalf("BOS %d EOS %d pad %d vocabulary %d, want 0, 2, 1 and 3002 (<s> <pad> </s> <unk>, 2997 pieces, <mask>)",
			tok.BOS(), tok.EOS(), tok.Pad(), tok.VocabSize())
	}
	tok = tok.ForModel(77)
	bad, cut := 0, 0
	var buf []byte
	for _, g := range goldens {
		ok := true
		if got := tok.appendContent(nil, g.Text, &buf); !slices.Equal(got, g.IDs) {
			t.Errorf("content of %q\n got %v\nwant %v", g.Text, got, g.IDs)
			ok = false
		}
		if got, err := tok.Encode(g.Text); err != nil || !slices.Equal(got, g.Special) {
			t.Errorf("Encode(%q)\n got %v %v\nwant %v", g.Text, got, err, g.Special)
			ok = false
		}
		want, mask := g.IDs77, make([]int64, 77)
		if want == nil {
			want = make([]int64, 77)
			for i := range want {
				want[i] = 1 // <pad>
				if i < len(g.Special) {
					want[i], mask[i] = int64(g.Special[i]), 1
				}
			}
		} else {
			cut++
			for i := range mask {
				mask[i] = 1
			}
		}
		ids, m, err := tok.EncodePadded(g.Text, 77)
		if err != nil || !slices.Equal(ids, want) || !slices.Equal(m, mask) {
			t.Errorf("EncodePadded(%q, 77)\n got %v %v %v\nwant %v %v", g.Text, ids, m, err, want, mask)
			ok = false
		}
		if !ok {
			if bad++; bad > 20 {
				t.Fatal("too many mismatches")
			}
		}
	}
	if cut == 0 {
		t.Error("no golden string is cut at 77: truncation is not tested")
	}
	t.Logf("%d of %d strings match (ids, with <s> and </s>, padded or cut to 77: %d cut)", len(goldens)-bad, len(goldens), cut)
}

// TestXLMRJSONVariants compares the ids of each variant of the file: the
// WhitespaceSplit pre-tokenizer before Metaspace ("always" split, "first"
// unsplit, without a normalizer) and the older add_prefix_space form.
func TestXLMRJSONVariants(t *testing.T) {
	goldens := readSPJSONL[xlmrJSONGolden](t, filepath.Join(xlmrJSONDir, "golden.jsonl"))
	for _, name := range xlmrJSONVariants {
		t.Run(name, func(t *testing.T) {
			tok := loadJSONVariant(t, xlmrJSONDir, name)
			want := readSPJSONL[[]int](t, filepath.Join(xlmrJSONDir, "golden_"+name+".jsonl"))
			if len(want) != len(goldens) {
				t.Fatalf("%d golden lines for %d strings", len(want), len(goldens))
			}
			bad, differ := 0, 0
			for i, g := range goldens {
				got, err := tok.Encode(g.Text)
				if err != nil || !slices.Equal(got, want[i]) {
					if bad++; bad <= 10 {
						t.Errorf("Encode(%q)\n got %v %v\nwant %v", g.Text, got, err, want[i])
					}
				}
				if !slices.Equal(want[i], g.Special) {
					differ++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d strings differ", bad, len(goldens))
			}
			// A variant that changes nothing would test nothing (wsplit
			// differs little: the charsmap already makes most whitespace ' ').
			if differ == 0 {
				t.Error("the variant's ids are the base file's for every string")
			}
			t.Logf("%s: %d strings match, %d of them with ids other than the base file's", name, len(goldens)-bad, differ)
		})
	}
}
