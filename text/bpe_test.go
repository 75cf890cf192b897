package text

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"unicode/utf8"
)

// tinyFS is a hand-made CLIP-style model directory: the 512 byte symbols,
// a few merges, the two special tokens.
func tinyFS(tb testing.TB, merges []string, extra map[string]any) fstest.MapFS {
	tb.Helper()
	vocab := map[string]int{}
	var syms []string
	for r := range rune(len(runeBytes)) {
		if runeBytes[r] >= 0 {
			syms = append(syms, string(r))
		}
	}
	for _, s := range syms {
		vocab[s] = len(vocab)
	}
	for _, s := range syms {
		vocab[s+"</w>"] = len(vocab)
	}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		if _, ok := vocab[a+b]; !ok {
			vocab[a+b] = len(vocab)
		}
	}
	n := len(vocab)
	vocab[startOfText], vocab[endOfText] = n, n+1
	tj := map[string]any{
		"added_tokens": []map[string]any{
			{"id": n, "content": startOfText, "normalized": true, "special": true},
			{"id": n + 1, "content": endOfText, "normalized": false, "special": true},
		},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []map[string]any{
			{"type": "NFC"}, {"type": "Replace", "pattern": map[string]string{"Regex": `\s+`}, "content": " "}, {"type": "Lowercase"}}},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []map[string]any{
			{"type": "Split", "pattern": map[string]string{"Regex": clipSplitPattern}, "behavior": "Removed", "invert": true},
			{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}}},
		"post_processor": map[string]any{"type": "RobertaProcessing", "sep": []any{endOfText, n + 1}, "cls": []any{startOfText, n}},
		"model": map[string]any{"type": "BPE", "unk_token": endOfText, "end_of_word_suffix": "</w>",
			"continuing_subword_prefix": "", "vocab": vocab, "merges": merges},
	}
	for k, v := range extra {
		tj[k] = v
	}
	b, err := json.Marshal(tj)
	if err != nil {
		tb.Fatal(err)
	}
	return fstest.MapFS{
		"tokenizer.json":        {Data: b},
		"tokenizer_config.json": {Data: []byte(`{"model_max_length": 16, "pad_token": {"content": "!"}}`)},
	}
}

var tinyMerges = []string{"h e", "l l", "he ll", "l o</w>", "hell o</w>", "a a", "aa a", "a a</w>"}

func loadTiny(tb testing.TB) *Tokenizer {
	tb.Helper()
	tok, err := LoadTokenizer(tinyFS(tb, tinyMerges, nil))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// TestTiny checks BPE by hand on a tiny vocabulary.
func TestTiny(t *testing.T) {
	tok := loadTiny(t)
	id := func(s string) int {
		v, ok := tok.ID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return v
	}
	bos, eos := tok.BOS(), tok.EOS()
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"", []int{bos, eos}},
		{"Hello", []int{bos, id("hello</w>"), eos}},
		// h e l</w>: "h e" merges; "he l</w>" is no merge.
		{"hel", []int{bos, id("he"), id("l</w>"), eos}},
		// "hello" then "!" then "o": three words.
		{"HELLO!o", []int{bos, id("hello</w>"), id("!</w>"), id("o</w>"), eos}},
		// a a a a</w>: "a a" (rank 6) merges leftmost first, twice: aa aa</w>?
		// No: the last a is "a</w>", so pairs are (a,a),(a,a),(a,a</w>); rank 6
		// merges positions 0-1, then (aa,a) rank 7 beats (a,a</w>) rank 8.
		{"aaaa", []int{bos, id("aaa"), id("a</w>"), eos}},
		{"<|endoftext|>x<|STARTOFTEXT|>", []int{bos, eos, id("x</w>"), bos, eos}},
	} {
		got, err := tok.Encode(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if tok.ContextLength() != 16 || tok.Pad() != id("!") {
		t.Errorf("context %d pad %d, want 16 and %d (tokenizer_config.json)", tok.ContextLength(), tok.Pad(), id("!"))
	}
	ids, mask, err := tok.EncodePadded("hello", 0)
	if err != nil || len(ids) != 16 || ids[2] != int64(eos) || ids[3] != int64(id("!")) || mask[2] != 1 || mask[3] != 0 {
		t.Errorf("EncodePadded = %v %v %v", ids, mask, err)
	}
}

func TestLoadErrors(t *testing.T) {
	for name, extra := range map[string]map[string]any{
		"normalizer":    {"normalizer": map[string]any{"type": "NFKC"}},
		"pre_tokenizer": {"pre_tokenizer": map[string]any{"type": "Whitespace"}},
		"split pattern": {"pre_tokenizer": map[string]any{"type": "Split", "pattern": map[string]string{"Regex": `\w+`}, "behavior": "Removed", "invert": true}},
		"model":         {"model": map[string]any{"type": "WordPiece", "vocab": map[string]int{"a": 0}}},
	} {
		_, err := LoadTokenizer(tinyFS(t, tinyMerges, extra))
		if err == nil || !strings.HasPrefix(err.Error(), "text: tokenizer.json: ") {
			t.Errorf("%s: err = %v, want a tokenizer.json error", name, err)
		}
	}
	if _, err := LoadTokenizer(tinyFS(t, []string{"qq zz"}, nil)); err == nil || !strings.Contains(err.Error(), "merge 0") {
		t.Errorf("merge of unknown tokens: err = %v", err)
	}
	if _, err := LoadTokenizer(fstest.MapFS{}); err == nil || !strings.Contains(err.Error(), "vocab.json") {
		t.Errorf("empty dir: err = %v", err)
	}
	if _, err := LoadTokenizerDir(t.TempDir()); err == nil {
		t.Error("empty dir accepted")
	}
	if _, err := LoadOpenAIBPE("testdata/missing.gz"); err == nil {
		t.Error("missing file accepted")
	}
}

// TestMergeHeap checks that the O(n log n) merge gives the quadratic loop's
// result, on the tiny vocabulary and on the real one.
func TestMergeHeap(t *testing.T) {
	for _, c := range []struct {
		name     string
		tok      *Tokenizer
		alphabet []string
	}{
		{"tiny", loadTiny(t), []string{"a", "h", "e", "l", "o", "!", " "}},
		{"clip", loadCLIP(t), []string{"a", "b", "e", "i", "n", "s", "t", "r", "o", "!", ".", "é", "日", "ab", "in", "er"}},
	} {
		tok, alphabet := c.tok, c.alphabet
		r := rand.New(rand.NewPCG(1, 2))
		for range 3000 {
			var b strings.Builder
			for range 1 + r.IntN(120) {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			w := b.String()
			syms := symbols(tok.model, w)
			small := tok.model.mergeSmall(slices.Clone(syms))
			big := tok.model.mergeHeap(slices.Clone(syms))
			if !slices.Equal(small, big) {
				t.Fatalf("%s, word %q: mergeSmall %v, mergeHeap %v", c.name, w, small, big)
			}
		}
	}
}

func symbols(m *bpe, w string) []int32 {
	var s []int32
	for i := 0; i < len(w); i++ {
		if i == len(w)-1 {
			s = append(s, m.byteEndID[w[i]])
		} else {
			s = append(s, m.byteID[w[i]])
		}
	}
	return s
}

// loadCLIP loads the real CLIP vocabulary from testdata/clip.
func loadCLIP(tb testing.TB) *Tokenizer {
	tb.Helper()
	tok, err := LoadTokenizerDir(clipDir)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// TestConcurrent encodes from many goroutines at once (run with -race).
func TestConcurrent(t *testing.T) {
	tok := loadTiny(t)
	want := map[string][]int{}
	words := []string{"hello", "hel", "aaaa", "hello hello aaa", "ollehh"}
	for _, w := range words {
		want[w], _ = tok.Encode(w)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				w := words[(i+g)%len(words)]
				if i%7 == 0 {
					w = fmt.Sprintf("%s %d", w, i) // new words fill the cache concurrently
				}
				got, _ := tok.Encode(w)
				if i%7 != 0 && !slices.Equal(got, want[w]) {
					t.Errorf("Encode(%q) = %v, want %v", w, got, want[w])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzEncode: any byte string gives ids (never a panic), framed by BOS and
// EOS, each in the vocabulary; invalid UTF-8 encodes as its U+FFFD repair.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "a photo of a cat", "Don't PANIC!!", "\xff\xfe", "<|endoftext|>", "&amp;&#0;", "ΟΔΟΣ", "İ", strings.Repeat("!", 300), "e\u0301\u0301", "'s'S'ſ"} {
		f.Add(s)
	}
	toks := []*Tokenizer{loadTiny(f), loadCLIP(f)}
	for _, tok := range slices.Clone(toks) {
		oa, err := tok.WithOptions(Options{OpenAIClean: true, ContextLength: 8})
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, oa)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			ids, err := tok.Encode(s)
			if err != nil {
				t.Fatalf("Encode(%q): %v", s, err)
			}
			if len(ids) < 2 || ids[0] != tok.BOS() || ids[len(ids)-1] != tok.EOS() {
				t.Fatalf("Encode(%q) = %v: not BOS ... EOS", s, ids)
			}
			if !utf8.ValidString(s) {
				fixed, _ := tok.Encode(sanitizeUTF8(s))
				if !slices.Equal(ids, fixed) {
					t.Fatalf("Encode(%q) = %v, but its repair gives %v", s, ids, fixed)
				}
			}
			words, err := tok.Words(ids)
			if err != nil {
				t.Fatalf("Words: %v", err)
			}
			if len(words) == 0 || words[0].Start != 0 || words[len(words)-1].End != len(ids) {
				t.Fatalf("Words(%v) = %+v: does not cover the ids", ids, words)
			}
			p, mask, err := tok.EncodePadded(s, 0)
			if err != nil || len(p) != tok.ContextLength() || len(mask) != len(p) || mask[0] != 1 {
				t.Fatalf("EncodePadded(%q) = %v %v %v", s, p, mask, err)
			}
		}
	})
}

// benchCaptions are short captions made of common words, with a fixed seed.
func benchCaptions(n int) []string {
	words := strings.Fields("a an the photo picture painting of on in with and red blue green small large cat dog man woman " +
		"child car tree house street sunset beach mountain city night sitting standing running wearing holding next to " +
		"bowl table window field river snowy old young two three happy close-up view detailed, 4k portrait landscape")
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]string, n)
	for i := range out {
		k := 5 + r.IntN(12)
		var b strings.Builder
		for j := range k {
			if j > 0 {
				b.WriteByte(' ')
			}
			w := words[r.IntN(len(words))]
			if j == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		}
		out[i] = b.String()
	}
	return out
}

func benchEncode(b *testing.B, cache bool) {
	tok := loadCLIP(b)
	if !cache {
		c := *tok
		m := *tok.model
		m.cache = &bpeCache{off: true}
		c.model = &m
		tok = &c
	}
	caps := benchCaptions(1024)
	b.ReportAllocs()
	cpu0 := processCPU()
	for i := 0; b.Loop(); i++ {
		if _, _, err := tok.EncodePadded(caps[i%len(caps)], 0); err != nil {
			b.Fatal(err)
		}
	}
	// Wall-clock rate, and the rate per CPU-second the process used (less
	// sensitive to other work on a shared machine; includes GC).
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "captions/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "captions/cpu-s")
	}
}

// BenchmarkEncode encodes short captions to 77 ids and a mask, with the BPE
// cache (a job's steady state), on one goroutine.
func BenchmarkEncode(b *testing.B) { benchEncode(b, true) }

// BenchmarkEncodeNoCache is BenchmarkEncode with every word BPE'd afresh.
func BenchmarkEncodeNoCache(b *testing.B) { benchEncode(b, false) }
