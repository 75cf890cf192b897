package text

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The folders under testdata/ made by scripts/tokenizers/make_gemma_json.js:
// tokenizer.json and tokenizer_config.json in the structure of Gemma's (and
// SigLIP 2's), of Llama/Mistral-style files and of TIPSv2's, and golden.jsonl with the ids
// the Hugging Face tokenizers library gives.
var gemmaDirs = []string{"gemma", "gemma_bos", "gemma_metaspace", "gemma_llama", "tipsv2"}

type gemmaGolden struct {
	Text    string  `json:"text"`
	IDs     []int   `json:"ids"`     // without special tokens
	Special []int   `json:"special"` // with the post-processor's
	IDs64   []int64 `json:"ids_64"`  // truncated and padded to 64 by the library
	Mask64  []int64 `json:"mask_64"`
}

func readGemmaGoldens(tb testing.TB, dir string) []gemmaGolden {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", dir, "golden.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []gemmaGolden
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var g gemmaGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			tb.Fatal(err)
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

func loadGemma(tb testing.TB, dir string) *Tokenizer {
	tb.Helper()
	tok, err := LoadTokenizerDir(filepath.Join("testdata", dir))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// TestGemmaGoldens compares every id of every golden string: without special
// tokens, with them, and truncated and padded to 64 with the mask.
func TestGemmaGoldens(t *testing.T) {
	for _, c := range []struct {
		dir   string
		plain bool
	}{{"gemma", false}, {"gemma_bos", false}, {"gemma_metaspace", false}, {"gemma_llama", false}, {"tipsv2", false}, {"gemma", true}, {"gemma_llama", true}} {
		dir := c.dir
		name := dir
		if c.plain {
			name += "/whole_words_no_cache"
		}
		t.Run(name, func(t *testing.T) {
			tok := loadGemma(t, dir)
			m := tok.pieces.(*hfEncoder).model.(*hfBPE)
			if !m.splitAtMark {
				t.Fatalf("%s: words are not cut at \"▁\" (a merge joins across it?)", dir)
			}
			if c.plain {
				// BPE on each whole word, without the cache: the same ids.
				m.splitAtMark, m.cache.off = false, true
			}
			goldens := readGemmaGoldens(t, dir)
			if len(goldens) < 500 {
				t.Fatalf("%d golden strings, want at least 500", len(goldens))
			}
			matched, bad := 0, 0
			var buf []byte
			for _, g := range goldens {
				ok := true
				content := tok.appendContent(nil, g.Text, &buf)
				if !slices.Equal(content, g.IDs) {
					t.Errorf("content of %q\n got %v\nwant %v", g.Text, content, g.IDs)
					ok = false
				}
				full, err := tok.Encode(g.Text)
				if err != nil || !slices.Equal(full, g.Special) {
					t.Errorf("Encode(%q)\n got %v %v\nwant %v", g.Text, full, err, g.Special)
					ok = false
				}
				ids, mask, err := tok.EncodePadded(g.Text, 64)
				if err != nil || !slices.Equal(ids, g.IDs64) || !slices.Equal(mask, g.Mask64) {
					t.Errorf("EncodePadded(%q, 64)\n got %v %v %v\nwant %v %v", g.Text, ids, mask, err, g.IDs64, g.Mask64)
					ok = false
				}
				if ok {
					matched++
				} else if bad++; bad > 20 {
					t.Fatal("too many mismatches")
				}
			}
			t.Logf("%s: %d of %d golden strings match (ids, ids with special tokens, padded to 64)", name, matched, len(goldens))
		})
	}
}

// TestGemmaFiles checks what the SigLIP 2-style files say: <eos> after the
// text and no <bos>, <pad> (id 0) padding to 64; Gemma's own: <bos> first.
func TestGemmaFiles(t *testing.T) {
	tok := loadGemma(t, "gemma")
	if tok.ContextLength() != 64 || tok.Pad() != 0 || tok.EOS() != 1 || tok.BOS() != 2 || tok.VocabSize() < 2000 {
		t.Errorf("gemma: context %d pad %d eos %d bos %d vocab %d, want 64 0 1 2 and >= 2000",
			tok.ContextLength(), tok.Pad(), tok.EOS(), tok.BOS(), tok.VocabSize())
	}
	if !slices.Equal(tok.prefix, nil) || !slices.Equal(tok.suffixIDs, []int{1}) {
		t.Errorf("gemma: prefix %v suffix %v, want none and [1]", tok.prefix, tok.suffixIDs)
	}
	bos := loadGemma(t, "gemma_bos")
	if !slices.Equal(bos.prefix, []int{2}) || len(bos.suffixIDs) != 0 || bos.ContextLength() != DefaultContextLength {
		t.Errorf("gemma_bos: prefix %v suffix %v context %d", bos.prefix, bos.suffixIDs, bos.ContextLength())
	}
	// A character outside the vocabulary is spelled in byte pieces, and
	// Words puts them back together.
	ids, err := tok.Encode("a 🦜 bird")
	if err != nil {
		t.Fatal(err)
	}
	pieces, _ := tok.Tokens(ids)
	if !slices.Contains(pieces, "<0xF0>") || !slices.Contains(pieces, "<0x9C>") {
		t.Errorf("Tokens = %q, want the byte pieces of U+1F99C", pieces)
	}
	words, err := tok.Words(ids)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, w := range words {
		texts = append(texts, w.Text)
	}
	if want := []string{"a", "🦜", "bird", "<eos>"}; !slices.Equal(texts, want) {
		t.Errorf("Words = %q, want %q", texts, want)
	}
}

// TestTipsJSONFiles checks what TIPSv2's tokenizer.json files say: no BOS
// or EOS, <pad> (id 0) padding, 64 positions, the text lower-cased; and
// that a TIPSv2 folder with both files is read from tokenizer.json, as
// transformers' Tipsv2Tokenizer (a tokenizers-library tokenizer) reads it.
func TestTipsJSONFiles(t *testing.T) {
	tok := loadGemma(t, "tipsv2")
	if tok.ContextLength() != 64 || tok.Pad() != 0 || len(tok.prefix) != 0 || len(tok.suffixIDs) != 0 {
		t.Errorf("tipsv2: context %d pad %d prefix %v suffix %v, want 64, 0 and no special tokens",
			tok.ContextLength(), tok.Pad(), tok.prefix, tok.suffixIDs)
	}
	a, _ := tok.Encode("A Photo Of A CAT")
	b, _ := tok.Encode("a photo of a cat")
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Errorf("tipsv2: %v and %v: the text is not lower-cased", a, b)
	}
	js, err := os.ReadFile("testdata/tipsv2/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	spm, err := os.ReadFile("testdata/spm/unigram_nfkc.model")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("testdata/tipsv2/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	both, err := LoadTokenizer(fstest.MapFS{"tokenizer.json": {Data: js}, "tokenizer.model": {Data: spm}, "tokenizer_config.json": {Data: cfg}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := both.Encode("a photo of a cat"); !slices.Equal(got, b) {
		t.Errorf("tipsv2 with tokenizer.model beside tokenizer.json: %v, want tokenizer.json's %v", got, b)
	}
}

// TestGemmaConfig checks tokenizer_config.json's add_bos_token and
// add_eos_token, applied as GemmaTokenizerFast applies them.
func TestGemmaConfig(t *testing.T) {
	b, err := os.ReadFile("testdata/gemma/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		config         string
		prefix, suffix []int
	}{
		{`{}`, nil, []int{1}}, // no class: the post-processor's
		{`{"tokenizer_class": "GemmaTokenizer"}`, []int{2}, nil},
		{`{"tokenizer_class": "GemmaTokenizerFast", "add_eos_token": true}`, []int{2}, []int{1}},
		{`{"add_bos_token": false, "add_eos_token": true}`, nil, []int{1}},
		{`{"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false}`, nil, nil},
		{`{"tokenizer_class": "T5Tokenizer"}`, nil, []int{1}},
	} {
		tok, err := LoadTokenizer(fstest.MapFS{"tokenizer.json": {Data: b}, "tokenizer_config.json": {Data: []byte(c.config)}})
		if err != nil {
			t.Errorf("%s: %v", c.config, err)
			continue
		}
		if !slices.Equal(tok.prefix, c.prefix) || !slices.Equal(tok.suffixIDs, c.suffix) {
			t.Errorf("%s: prefix %v suffix %v, want %v %v", c.config, tok.prefix, tok.suffixIDs, c.prefix, c.suffix)
		}
	}
	for config, want := range map[string]string{
		`{"add_bos_token": "yes"}`:                   "tokenizer_config.json: add_bos_token: want true or false",
		`{"pad_token": "<nopad>"}`:                   `tokenizer_config.json: pad_token "<nopad>" is not in`,
		`{"eos_token": {"content": "</s>"}}`:         `tokenizer_config.json: eos_token "</s>" is not in`,
		`{"add_bos_token": true, "bos_token": null}`: "", // <bos> is found by name
	} {
		_, err = LoadTokenizer(fstest.MapFS{"tokenizer.json": {Data: b}, "tokenizer_config.json": {Data: []byte(config)}})
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: err = %v, want %q", config, err, want)
		}
	}
}

// TestGemmaMergeHeap checks a word of thousands of characters (the whole
// text is one word without a pre-tokenizer), which merges through the
// priority queue, against the same text cut into its words.
func TestGemmaMergeHeap(t *testing.T) {
	tok := loadGemma(t, "gemma_bos") // no pre-tokenizer
	long := strings.Repeat("a photo of the cat ", 300)
	var buf []byte
	cut := tok.appendContent(nil, long, &buf)
	m := tok.pieces.(*hfEncoder).model.(*hfBPE)
	m.splitAtMark, m.cache.off = false, true
	defer func() { m.splitAtMark, m.cache.off = true, false }()
	whole := tok.appendContent(nil, long, &buf)
	if !slices.Equal(whole, cut) {
		t.Fatalf("a long word merged whole gives %d ids, cut at its words %d", len(whole), len(cut))
	}
	var spelled []byte
	for _, id := range whole {
		spelled = tok.appendPieceBytes(spelled, tok.tokens[id])
	}
	if string(spelled) != long {
		t.Fatalf("the ids of a long word spell %.40q..., want %.40q...", spelled, long)
	}
}

func gemmaJSON(tb testing.TB, edit func(m map[string]any)) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/gemma/tokenizer.json")
	if err != nil {
		tb.Fatal(err)
	}
	return editJSON(tb, b, edit)
}

// editJSON returns the JSON object b with edit applied to it.
func editJSON(tb testing.TB, b []byte, edit func(m map[string]any)) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestGemmaErrors checks that bad files give errors naming the part of the
// file and what was expected.
func TestGemmaErrors(t *testing.T) {
	good, err := os.ReadFile("testdata/gemma/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)/2], "text: tokenizer.json: unexpected end of JSON input"},
		{"not JSON", []byte("{\"model\": [}"), "text: tokenizer.json: invalid character"},
		{"model type", gemmaJSON(t, func(m map[string]any) { model(m)["type"] = "WordPiece" }), `model.type "WordPiece" is not supported`},
		{"normalizer", gemmaJSON(t, func(m map[string]any) { m["normalizer"] = map[string]any{"type": "StripAccents"} }), `normalizer "StripAccents" is not supported`},
		{"nested normalizer", gemmaJSON(t, func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "BertNormalizer"}}}
		}), `normalizer "BertNormalizer" is not supported`},
		{"replace regex", gemmaJSON(t, func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "(("}, "content": "x"}
		}), `normalizer Replace: Regex "(("`},
		{"pre_tokenizer", gemmaJSON(t, func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }), `pre_tokenizer "Whitespace" is not supported`},
		{"split behavior", gemmaJSON(t, func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Sideways"}
		}), `pre_tokenizer Split: behavior "Sideways"`},
		{"prepend_scheme", gemmaJSON(t, func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"}
		}), `prepend_scheme "sometimes"`},
		{"merge not in vocab", gemmaJSON(t, func(m map[string]any) { model(m)["merges"] = []any{[]any{"qq", "zz"}} }), `model.merges[0] ("qq" "zz"): "qq" is not in model.vocab`},
		{"merge result not in vocab", gemmaJSON(t, func(m map[string]any) { model(m)["merges"] = []any{"a <0x00>"} }), `"a<0x00>" is not in model.vocab`},
		{"merge shape", gemmaJSON(t, func(m map[string]any) { model(m)["merges"] = []any{[]any{"a"}} }), `model.merges[0]: ["a"] is neither`},
		{"merge string", gemmaJSON(t, func(m map[string]any) { model(m)["merges"] = []any{"a b c"} }), `model.merges[0]: "a b c" is not "a b"`},
		{"vocab id", gemmaJSON(t, func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = -4 }), `model.vocab: "zz" has id -4`},
		{"vocab duplicate id", gemmaJSON(t, func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = 0 }), `model.vocab: id 0 is both`},
		{"vocab empty", gemmaJSON(t, func(m map[string]any) { model(m)["vocab"] = map[string]any{} }), `model.vocab is empty`},
		{"unk", gemmaJSON(t, func(m map[string]any) { model(m)["unk_token"] = "<nothing>" }), `model.unk_token "<nothing>" is not in model.vocab`},
		{"dropout", gemmaJSON(t, func(m map[string]any) { model(m)["dropout"] = 0.1 }), `model.dropout 0.1 is not supported`},
		{"suffix", gemmaJSON(t, func(m map[string]any) { model(m)["end_of_word_suffix"] = "</w>" }), `model.end_of_word_suffix "</w>" is not supported`},
		{"added id", gemmaJSON(t, func(m map[string]any) { m["added_tokens"].([]any)[0].(map[string]any)["id"] = 1 << 30 }), `added_tokens[0] ("<pad>"): id 1073741824`},
		{"added content", gemmaJSON(t, func(m map[string]any) { m["added_tokens"].([]any)[0].(map[string]any)["content"] = "" }), `added_tokens[0] (id 0): empty content`},
		{"template token", gemmaJSON(t, func(m map[string]any) {
			m["post_processor"].(map[string]any)["special_tokens"] = map[string]any{}
		}), `post_processor TemplateProcessing: single[1]: special token "<eos>" is not in special_tokens`},
		{"template id", gemmaJSON(t, func(m map[string]any) {
			m["post_processor"].(map[string]any)["special_tokens"].(map[string]any)["<eos>"].(map[string]any)["ids"] = []any{99999}
		}), `special token id 99999 is not in the vocabulary`},
		{"post_processor", gemmaJSON(t, func(m map[string]any) { m["post_processor"] = map[string]any{"type": "ByteLevel"} }), `post_processor "ByteLevel" is not supported`},
		{"padding", gemmaJSON(t, func(m map[string]any) { m["padding"].(map[string]any)["direction"] = "Left" }), `padding.direction "Left" is not supported`},
	} {
		_, err := LoadTokenizer(fstest.MapFS{"tokenizer.json": {Data: c.data}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "text: ") {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// gemmaFuzzSeeds are the committed files the fuzz tests start from.
func gemmaFuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, dir := range gemmaDirs {
		b, err := os.ReadFile(filepath.Join("testdata", dir, "tokenizer.json"))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzTokenizerJSON checks that no tokenizer.json makes the reader panic, and
// that a tokenizer it accepts encodes text into ids of its vocabulary.
func FuzzTokenizerJSON(f *testing.F) {
	for _, b := range gemmaFuzzSeeds(f) {
		f.Add(b)
		// Smaller seeds the fuzzer can change more of: the vocabulary and
		// merges cut short.
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			model := m["model"].(map[string]any)
			vocab := map[string]any{}
			for k, v := range model["vocab"].(map[string]any) {
				if id := v.(float64); id < 300 {
					vocab[k] = v
				}
			}
			model["vocab"] = vocab
			model["merges"] = []any{}
			small, _ := json.Marshal(m)
			f.Add(small)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := LoadTokenizer(fstest.MapFS{"tokenizer.json": {Data: b}})
		if err != nil {
			return
		}
		for _, s := range []string{"", "a photo of a cat", "<eos> ZEBRA crossing 🦜 猫\t\n  x", string(b[:min(len(b), 64)])} {
			checkIDs(t, tok, s)
		}
	})
}

// FuzzGemmaEncode checks that any text encodes without a panic into ids of
// the vocabulary, with each of the committed files.
func FuzzGemmaEncode(f *testing.F) {
	var toks []*Tokenizer
	for _, dir := range gemmaDirs {
		toks = append(toks, loadGemma(f, dir))
		for i, g := range readGemmaGoldens(f, dir) {
			if i%5 == 0 {
				f.Add(g.Text)
			}
		}
	}
	f.Add("\xff\xfe<eos")
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			checkIDs(t, tok, s)
		}
	})
}

func checkIDs(t *testing.T, tok *Tokenizer, s string) {
	t.Helper()
	ids, err := tok.Encode(s)
	if err != nil {
		t.Fatalf("Encode(%q): %v", s, err)
	}
	for _, id := range ids {
		if id < 0 || id >= tok.VocabSize() {
			t.Fatalf("Encode(%q): id %d out of range (vocabulary %d)", s, id, tok.VocabSize())
		}
	}
	if _, err := tok.Words(ids); err != nil {
		t.Fatalf("Words(Encode(%q)): %v", s, err)
	}
	if _, _, err := tok.EncodePadded(s, 64); err != nil {
		t.Fatalf("EncodePadded(%q): %v", s, err)
	}
}

// BenchmarkGemmaCaptions encodes short captions into 64 ids and a mask, as
// SigLIP 2 takes them, with the word cache (prompts repeat in a job).
func BenchmarkGemmaCaptions(b *testing.B) {
	benchGemma(b, false)
}

// BenchmarkGemmaCaptionsNoCache is BenchmarkGemmaCaptions with the cache
// off: every caption goes through normalization and BPE.
func BenchmarkGemmaCaptionsNoCache(b *testing.B) {
	benchGemma(b, true)
}

func benchGemma(b *testing.B, noCache bool) {
	tok := loadGemma(b, "gemma")
	caps := benchCaptions(1024) // the captions BenchmarkEncode (CLIP) encodes
	m := tok.pieces.(*hfEncoder).model.(*hfBPE)
	m.cache.off = noCache
	defer func() { m.cache.off = false }()
	ids, mask := make([]int64, 64), make([]int64, 64)
	b.ReportAllocs()
	cpu0 := processCPU()
	for i := 0; b.Loop(); i++ {
		if err := tok.encodeInto(ids, mask, caps[i%len(caps)]); err != nil {
			b.Fatal(err)
		}
	}
	// Wall-clock rate, and the rate per CPU-second the process used (less
	// sensitive to other work on a shared machine).
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "captions/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "captions/cpu-s")
	}
}

// TestGemmaConcurrent encodes the golden strings from several goroutines at
// once through one Tokenizer (shared cache and scratch pool).
func TestGemmaConcurrent(t *testing.T) {
	tok := loadGemma(t, "gemma")
	goldens := readGemmaGoldens(t, "gemma")
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for i := range goldens {
				gd := goldens[(i*7+g*131)%len(goldens)]
				ids, err := tok.Encode(gd.Text)
				if err != nil || !slices.Equal(ids, gd.Special) {
					errs <- gd.Text
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if s := <-errs; s != "" {
			t.Errorf("concurrent Encode(%q) differs from the golden ids", s)
		}
	}
}
