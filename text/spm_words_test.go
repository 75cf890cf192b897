package text

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSentencePieceWordRounding is a word whose pieces depend on the text
// before it: sentencepiece's search keeps float32 sums from the start of the
// text, and "▁ab" is "▁ab" or "▁a" + "b" by the rounding of those sums (an
// exact tie, and a near one). Taking a word's pieces found on their own
// would give the wrong ids; spWordPieces' margins send such words to the
// whole search.
func TestSentencePieceWordRounding(t *testing.T) {
	base := []testPiece{{"<unk>", 0, spUnknown}, {"<s>", 0, spControl}, {"</s>", 0, spControl}, {"▁a", -1, spNormal}, {"b", -2, spNormal}}
	for _, tc := range []struct {
		name   string
		ab, c  float32 // the scores of "▁ab" and "▁c"
		inputs []string
		want   [][]int
	}{
		// The ids sentencepiece 0.1.97 gives for these ModelProtos
		// (spProtoBytes, loaded with model_proto=).
		{"tie", -3, -0.4,
			[]string{"ab", "c ab", "c c ab", "ab ab", "c ab c ab", "c ab ab"},
			[][]int{{5}, {6, 3, 4}, {6, 6, 5}, {5, 5}, {6, 3, 4, 6, 5}, {6, 3, 4, 5}}},
		{"near", math.Nextafter32(-3, -4), -1,
			[]string{"ab", "c ab", "c c ab", "ab ab", "c ab c ab", "c ab ab"},
			[][]int{{3, 4}, {6, 5}, {6, 6, 5}, {3, 4, 5}, {6, 5, 6, 5}, {6, 5, 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pieces := append(slices.Clone(base), testPiece{"▁ab", tc.ab, spNormal}, testPiece{"▁c", tc.c, spNormal})
			m := testSPModel(t, pieces, spUnigram)
			if !m.unigramWords || m.wordPieces == nil {
				t.Fatal("the lattice is not found word by word")
			}
			// The word alone gives the ids of "ab"; in "c ab" the search
			// takes others.
			if slices.Equal(tc.want[0], tc.want[1][1:]) {
				t.Fatalf("%v and %v: the case does not depend on the text before", tc.want[0], tc.want[1])
			}
			var sc spScratch
			wd, ok := m.newSPWord("▁ab", &sc)
			if !ok || wd.limit > math.Abs(float64(tc.c)) {
				t.Errorf("▁ab: limit %v (ok %v), want below %v (the bound after ▁c)", wd.limit, ok, math.Abs(float64(tc.c)))
			}
			for _, pass := range []string{"cold", "warm"} {
				for i, s := range tc.inputs {
					if got := m.appendIDs(nil, s); !slices.Equal(got, tc.want[i]) {
						t.Errorf("%s %q: ids %v, want %v", pass, s, got, tc.want[i])
					}
				}
			}
		})
	}
}

// TestSentencePieceWordMargins checks that the words of real text mostly
// take their pieces from the cache, and that those pieces are the search's.
func TestSentencePieceWordMargins(t *testing.T) {
	m := loadSPModel(t, "unigram_nfkc")
	var sc spScratch
	words, held := 0, 0
	for _, s := range append(spmCorpus(t), benchCaptions(256)...) {
		norm := string(m.norm.normalize(nil, s))
		if norm == "" {
			continue
		}
		if got, ok := m.appendWords(nil, norm, &sc); ok {
			whole := *m
			whole.unigramWords = false
			if want := whole.appendIDs(nil, s); !slices.Equal(got, want) {
				t.Errorf("%q: word by word %v, whole search %v", s, got, want)
			}
		}
		for w := range strings.SplitSeq(norm, wordMark) {
			if w == "" {
				continue
			}
			words++
			if wd, ok := m.newSPWord(wordMark+w, &sc); ok && wd.limit > 1000 {
				held++
			}
		}
	}
	if held < words*9/10 {
		t.Errorf("%d of %d words hold after a path scoring -1000, want 9 in 10", held, words)
	}
	t.Logf("%d of %d words hold after a path scoring -1000", held, words)
}

// siglipFastInputs are texts at the edges of what siglipFast takes.
var siglipFastInputs = []string{
	"", " ", "a", "A", "  a photo", "a photo  ", "\ta\nphoto\r\n", "- a photo", "a - photo", "--", "!!! ?",
	"A Photo Of A CAT.", "don't", "close-up, 4k", "a,b.c", "\x00a", "a\x01b", "a\x1fb", "a\x7fb",
	"a </s> b", "a </S> b", "<unk>", "a<unk>b", "</s>", "a < b", "café", "a\u00a0b", "a\u2581b",
	strings.Repeat("x", 300), strings.Repeat("ab ", 100), strings.Repeat("x", 250) + " y",
	"0123456789", "a_b|c~d", "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz",
}

// TestSiglipFastPath checks siglipFast against the general path on texts
// at its edges and on captions, with the SigLIP model and with that model
// without its charsmap, whose normalizer keeps "▁" (so that whitespace
// before the first word is a word of its own).
func TestSiglipFastPath(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "spm", "unigram_nfkc.model"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		charsmap bool
		leadMark bool
	}{{"nmt_nfkc", true, false}, {"identity", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseSPProto(b)
			if err != nil {
				t.Fatal(err)
			}
			p.dummyPrefix = false // as loadSentencePiece loads SigLIP's
			if !tc.charsmap {
				p.charsmap = nil
			}
			m, err := newSPModel(p)
			if err != nil {
				t.Fatal(err)
			}
			tokens := make([]string, len(p.pieces))
			for i, pc := range p.pieces {
				tokens[i] = pc.text
			}
			e := newSiglipEncoder(m, tokens, 1, 2, 1, true)
			if e.fast == nil {
				t.Fatal("no fast path")
			}
			if e.fast.leadMark != tc.leadMark {
				t.Errorf("leadMark %v, want %v", e.fast.leadMark, tc.leadMark)
			}
			general := *e
			general.fast = nil
			captions := benchCaptions(256)
			taken := map[string]bool{}
			for _, s := range append(slices.Clone(siglipFastInputs), captions...) {
				got, ok := e.fast.appendIDs(e, nil, s)
				taken[s] = ok
				if !ok {
					continue
				}
				if len(got) > 0 && got[len(got)-1] == e.eos {
					got = got[:len(got)-1]
				}
				if want := general.appendIDs(nil, s); !slices.Equal(got, want) {
					t.Errorf("%q: fast %v, general %v", s, got, want)
				}
			}
			for _, s := range captions {
				if !taken[s] {
					t.Errorf("%q: the fast path did not take it", s)
				}
			}
			for _, s := range []string{"  a photo", "- a photo", "A Photo Of A CAT.", "close-up, 4k", "\ta\nphoto\r\n"} {
				if !taken[s] {
					t.Errorf("%q: the fast path did not take it", s)
				}
			}
			notTaken := []string{"", "--", "a </s> b", "a < b", "café", strings.Repeat("x", 300)}
			if tc.charsmap {
				notTaken = append(notTaken, "a\x01b") // nmt_nfkc removes U+0001
			}
			for _, s := range notTaken {
				if taken[s] {
					t.Errorf("%q: the fast path took it", s)
				}
			}
		})
	}
}
