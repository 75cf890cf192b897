package text

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// testdata/siglip_json is made by scripts/tokenizers/make_siglip_json.js: the
// SentencePiece Unigram model of testdata/spm/unigram_nfkc.model converted to
// a tokenizer.json as transformers converts T5's, its variants, and the ids
// the Hugging Face tokenizers library gives for each string.
const siglipJSONDir = "testdata/siglip_json"

var siglipJSONVariants = []string{"first", "canon", "bytes"}

type siglipJSONGolden struct {
	Text    string  `json:"text"`
	IDs     []int   `json:"ids"`     // without </s>
	Special []int   `json:"special"` // with it
	IDs64   []int64 `json:"ids_64"`  // the library's truncation to 64, when it cut
}

func siglipJSONGoldens(tb testing.TB) []siglipJSONGolden {
	g := readSPJSONL[siglipJSONGolden](tb, filepath.Join(siglipJSONDir, "golden.jsonl"))
	if len(g) < 500 {
		tb.Fatalf("%d golden strings, want at least 500", len(g))
	}
	return g
}

// siglipJSONVariant returns the base tokenizer.json of testdata/siglip_json
// with variant name's changes applied ("" for the base file).
func siglipJSONVariant(tb testing.TB, name string) []byte {
	return jsonVariant(tb, siglipJSONDir, name)
}

// jsonVariant returns dir's base tokenizer.json with variant name's changes
// applied as dir/variants.json says ("" for the base file).
func jsonVariant(tb testing.TB, dir, name string) []byte {
	tb.Helper()
	base, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if name == "" {
		return base
	}
	vb, err := os.ReadFile(filepath.Join(dir, "variants.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var variants map[string]struct {
		Set         map[string]json.RawMessage `json:"set"`
		Model       map[string]json.RawMessage `json:"model"`
		AppendVocab []json.RawMessage          `json:"append_vocab"`
	}
	if err := json.Unmarshal(vb, &variants); err != nil {
		tb.Fatal(err)
	}
	v, ok := variants[name]
	if !ok {
		tb.Fatalf("variants.json has no %q", name)
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(base, &file); err != nil {
		tb.Fatal(err)
	}
	var model map[string]json.RawMessage
	if err := json.Unmarshal(file["model"], &model); err != nil {
		tb.Fatal(err)
	}
	charsmap := siglipJSONCharsmap(tb, base)
	for k, raw := range v.Set {
		file[k] = json.RawMessage(strings.ReplaceAll(string(raw), `"<base>"`, `"`+charsmap+`"`))
	}
	for k, raw := range v.Model {
		model[k] = raw
	}
	if len(v.AppendVocab) > 0 {
		var vocab []json.RawMessage
		if err := json.Unmarshal(model["vocab"], &vocab); err != nil {
			tb.Fatal(err)
		}
		model["vocab"], _ = json.Marshal(append(vocab, v.AppendVocab...))
	}
	file["model"], _ = json.Marshal(model)
	out, err := json.Marshal(file)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// siglipJSONCharsmap returns the base64 precompiled_charsmap of the file b.
func siglipJSONCharsmap(tb testing.TB, b []byte) string {
	var f struct {
		Normalizer struct {
			Normalizers []struct {
				Type     string `json:"type"`
				Charsmap string `json:"precompiled_charsmap"`
			} `json:"normalizers"`
		} `json:"normalizer"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		tb.Fatal(err)
	}
	for _, n := range f.Normalizer.Normalizers {
		if n.Type == "Precompiled" {
			return n.Charsmap
		}
	}
	tb.Fatal("tokenizer.json has no Precompiled normalizer")
	return ""
}

func loadSiglipJSON(tb testing.TB, variant string) *Tokenizer {
	tb.Helper()
	return loadJSONVariant(tb, siglipJSONDir, variant)
}

// loadJSONVariant loads dir's tokenizer.json, changed as variant says, with
// dir's tokenizer_config.json.
func loadJSONVariant(tb testing.TB, dir, variant string) *Tokenizer {
	tb.Helper()
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := LoadTokenizer(fstest.MapFS{
		"tokenizer.json":        {Data: jsonVariant(tb, dir, variant)},
		"tokenizer_config.json": {Data: cfg},
	})
	if err != nil {
		tb.Fatalf("variant %q: %v", variant, err)
	}
	return tok
}

func unigramOf(tok *Tokenizer) *hfUnigram { return tok.pieces.(*hfEncoder).model.(*hfUnigram) }

// TestSiglipJSONGoldens compares every id the library gives for every golden
// string: without </s>, with it, and truncated or padded to 64 (the mask
// too); with the word cache cold, warm and off.
func TestSiglipJSONGoldens(t *testing.T) {
	goldens := siglipJSONGoldens(t)
	tok, err := LoadTokenizerDir(siglipJSONDir)
	if err != nil {
		t.Fatal(err)
	}
	m := unigramOf(tok)
	for _, run := range []string{"cold", "warm", "uncached"} {
		m.cache.off = run == "uncached"
		bad := 0
		var buf []byte
		for _, g := range goldens {
			ok := true
			if got := tok.appendContent(nil, g.Text, &buf); !slices.Equal(got, g.IDs) {
				t.Errorf("%s: content of %q\n got %v\nwant %v", run, g.Text, got, g.IDs)
				ok = false
			}
			if got, err := tok.Encode(g.Text); err != nil || !slices.Equal(got, g.Special) {
				t.Errorf("%s: Encode(%q)\n got %v %v\nwant %v", run, g.Text, got, err, g.Special)
				ok = false
			}
			want64, mask64 := g.IDs64, make([]int64, 64)
			if want64 == nil {
				want64 = make([]int64, 64)
				for i := range want64 {
					want64[i] = 1 // </s>
					if i < len(g.Special) {
						want64[i], mask64[i] = int64(g.Special[i]), 1
					}
				}
			} else {
				for i := range mask64 {
					mask64[i] = 1
				}
			}
			ids, mask, err := tok.EncodePadded(g.Text, 64)
			if err != nil || !slices.Equal(ids, want64) || !slices.Equal(mask, mask64) {
				t.Errorf("%s: EncodePadded(%q, 64)\n got %v %v %v\nwant %v %v", run, g.Text, ids, mask, err, want64, mask64)
				ok = false
			}
			if !ok {
				if bad++; bad > 20 {
					t.Fatal("too many mismatches")
				}
			}
		}
		t.Logf("%s: %d of %d strings match (ids, with </s>, padded to 64)", run, len(goldens)-bad, len(goldens))
	}
	m.cache.off = false
}

// TestSiglipJSONVariants compares the ids of each variant of the file.
func TestSiglipJSONVariants(t *testing.T) {
	goldens := siglipJSONGoldens(t)
	for _, name := range siglipJSONVariants {
		t.Run(name, func(t *testing.T) {
			tok := loadSiglipJSON(t, name)
			want := readSPJSONL[[]int](t, filepath.Join(siglipJSONDir, "golden_"+name+".jsonl"))
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
			// A variant that changes nothing would test nothing.
			if differ < 5 {
				t.Errorf("the variant's ids differ from the base file's for %d strings, want at least 5", differ)
			}
			t.Logf("%s: %d strings match, %d of them with ids other than the base file's", name, len(goldens)-bad, differ)
		})
	}
}

// TestSiglipJSONFiles checks what the files say: </s> after the text and
// padding with it to 64, no BOS, the unknown piece, byte pieces spelled as
// bytes in the byte-fallback variant.
func TestSiglipJSONFiles(t *testing.T) {
	tok, err := LoadTokenizerDir(siglipJSONDir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.ContextLength() != 64 || tok.BOS() != -1 || tok.EOS() != 1 || tok.Pad() != 1 || tok.VocabSize() != 3000 {
		t.Errorf("context %d BOS %d EOS %d pad %d vocabulary %d; want 64 -1 1 1 3000",
			tok.ContextLength(), tok.BOS(), tok.EOS(), tok.Pad(), tok.VocabSize())
	}
	if m := unigramOf(tok); m.unk != 2 || m.byteFallback {
		t.Errorf("unk %d byte_fallback %v, want 2 false", m.unk, m.byteFallback)
	}
	ids, _ := tok.Encode("a photo of a cat")
	words, err := tok.Words(ids)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, w := range words {
		texts = append(texts, w.Text)
	}
	if want := []string{"a", "photo", "of", "a", "cat", "</s>"}; !slices.Equal(texts, want) {
		t.Errorf("Words = %q, want %q", texts, want)
	}
	// The byte-fallback variant spells 🦜 (outside the vocabulary) in its
	// four bytes' pieces, and Words puts them back together.
	bt := loadSiglipJSON(t, "bytes")
	ids, _ = bt.Encode("a 🦜")
	pieces, _ := bt.Tokens(ids)
	if !slices.Contains(pieces, "<0xF0>") || !slices.Contains(pieces, "<0x9C>") {
		t.Errorf("Tokens = %q, want the byte pieces of U+1F99C", pieces)
	}
	words, _ = bt.Words(ids)
	if len(words) != 3 || words[1].Text != "🦜" {
		t.Errorf("Words = %+v, want a, 🦜, </s>", words)
	}
}

func siglipJSONEdit(tb testing.TB, edit func(f map[string]any)) []byte {
	tb.Helper()
	return editJSON(tb, siglipJSONVariant(tb, ""), edit)
}

// TestSiglipJSONErrors checks that bad files give errors naming the file,
// the part of it and what was expected.
func TestSiglipJSONErrors(t *testing.T) {
	good := siglipJSONVariant(t, "")
	model := func(f map[string]any) map[string]any { return f["model"].(map[string]any) }
	vocab := func(f map[string]any) []any { return model(f)["vocab"].([]any) }
	precompiled := func(f map[string]any, charsmap any) {
		f["normalizer"].(map[string]any)["normalizers"].([]any)[0].(map[string]any)["precompiled_charsmap"] = charsmap
	}
	blob := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)/3], "text: tokenizer.json: unexpected end of JSON input"},
		{"model type", siglipJSONEdit(t, func(f map[string]any) { model(f)["type"] = "WordLevel" }), `text: tokenizer.json: model.type "WordLevel" is not supported (want "BPE" or "Unigram")`},
		{"vocab object", siglipJSONEdit(t, func(f map[string]any) { model(f)["vocab"] = map[string]any{"a": 1} }), "text: tokenizer.json: model.vocab: want a list of [piece, score]"},
		{"vocab missing", siglipJSONEdit(t, func(f map[string]any) { delete(model(f), "vocab") }), "model.vocab is missing"},
		{"vocab empty", siglipJSONEdit(t, func(f map[string]any) { model(f)["vocab"] = []any{} }), "model.vocab is empty"},
		{"entry short", siglipJSONEdit(t, func(f map[string]any) { vocab(f)[7] = []any{"x"} }), `model.vocab[7]: ["x"] is not [piece, score]`},
		{"entry object", siglipJSONEdit(t, func(f map[string]any) { vocab(f)[8] = map[string]any{"x": 1} }), `model.vocab[8]: {"x":1} is not [piece, score]`},
		{"entry piece", siglipJSONEdit(t, func(f map[string]any) { vocab(f)[9] = []any{12, -1.5} }), "model.vocab[9]: piece 12 is not a string"},
		{"entry score", siglipJSONEdit(t, func(f map[string]any) { vocab(f)[10] = []any{"x", "-1.5"} }), `model.vocab[10] ("x"): score "-1.5" is not a number`},
		{"entry null score", siglipJSONEdit(t, func(f map[string]any) { vocab(f)[11] = []any{"x", nil} }), `model.vocab[11] ("x"): score null is not a number`},
		{"unk null", siglipJSONEdit(t, func(f map[string]any) { model(f)["unk_id"] = nil }), "model.unk_id is null or missing"},
		{"unk range", siglipJSONEdit(t, func(f map[string]any) { model(f)["unk_id"] = 3000 }), "model.unk_id 3000: want an id below the vocabulary's 3000 pieces"},
		{"unk negative", siglipJSONEdit(t, func(f map[string]any) { model(f)["unk_id"] = -1 }), "model.unk_id -1"},
		{"charsmap base64", siglipJSONEdit(t, func(f map[string]any) { precompiled(f, "not base64!") }), "normalizer Precompiled: precompiled_charsmap is not base64"},
		{"charsmap type", siglipJSONEdit(t, func(f map[string]any) { precompiled(f, 7) }), "text: tokenizer.json: normalizer: json: cannot unmarshal number"},
		{"charsmap missing", siglipJSONEdit(t, func(f map[string]any) { precompiled(f, nil) }), `normalizer Precompiled: want a "precompiled_charsmap" string`},
		{"charsmap short", siglipJSONEdit(t, func(f map[string]any) { precompiled(f, blob([]byte{1, 2})) }), "normalizer Precompiled: precompiled_charsmap is 2 bytes"},
		{"charsmap size", siglipJSONEdit(t, func(f map[string]any) { precompiled(f, blob([]byte{0xff, 0, 0, 0, 1, 2, 3, 4})) }), "normalizer Precompiled: precompiled_charsmap: trie size 255 does not fit its 8 bytes"},
		{"charsmap strings", siglipJSONEdit(t, func(f map[string]any) { precompiled(f, blob([]byte{4, 0, 0, 0, 0, 0, 0, 0, 0xff, 0})) }), "precompiled_charsmap: the normalized strings are not valid UTF-8"},
		{"pre_tokenizer", siglipJSONEdit(t, func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "BertPreTokenizer"} }), `pre_tokenizer "BertPreTokenizer" is not supported`},
		{"regex", siglipJSONEdit(t, func(f map[string]any) {
			f["normalizer"].(map[string]any)["normalizers"].([]any)[2].(map[string]any)["pattern"] = map[string]any{"Regex": "[\\S]"}
		}), `normalizer Replace: Regex "[\\S]": \S inside a character class is not supported`},
	} {
		_, err := LoadTokenizer(fstest.MapFS{"tokenizer.json": {Data: c.data}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "text: tokenizer.json: ") {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestUnigramLattice checks the model on a hand-made vocabulary: the best
// path by the sum of float64 scores, unknown characters at the lowest score
// minus 10 and fused, a fused run that is a piece taking its id, duplicate
// pieces taking the last id.
func TestUnigramLattice(t *testing.T) {
	vocab := `[["<unk>", 0], ["a", -1], ["b", -1], ["ab", -1.5], ["abc", -4], ["c", -2.25], ["xy", -30], ["b", -0.5], ["é", -1]]`
	m, err := buildHFUnigram(hfUnigramModel{UnkID: json.RawMessage("0"), Vocab: json.RawMessage(vocab)})
	if err != nil {
		t.Fatal(err)
	}
	if m.unkScore != -40 {
		t.Errorf("unknown score %v, want -40 (the lowest score minus 10)", m.unkScore)
	}
	sc := new(hfScratch)
	for _, c := range []struct {
		in   string
		want []int32
	}{
		{"ab", []int32{3}},         // -1.5 beats a+b (-1 + -0.5: the last "b")
		{"abc", []int32{3, 5}},     // ab+c -3.75 beats abc -4
		{"b", []int32{7}},          // the last of the two "b"
		{"zz", []int32{0}},         // two unknown characters fused
		{"azzb", []int32{1, 0, 7}}, // fused between pieces
		{"xy", []int32{6}},         // -30 beats two unknowns (-80)
		{"éz€a", []int32{8, 0, 1}},
	} {
		if got := m.encode(nil, c.in, sc); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.in, got, c.want)
		}
	}
	if _, err := buildHFUnigram(hfUnigramModel{UnkID: json.RawMessage("0"), Vocab: json.RawMessage(`[["", 0], ["a", -1]]`)}); err != nil {
		t.Errorf("an empty piece: %v", err)
	}
}

// TestGraphemeLen checks cluster boundaries on cases of each rule.
func TestGraphemeLen(t *testing.T) {
	for _, c := range []struct {
		s    string
		want string // the first cluster
	}{
		{"ab", "a"}, {"\r\nx", "\r\n"}, {"\n\r", "\n"}, {"e\u0301x", "e\u0301"}, {"e\u0301\u0302x", "e\u0301\u0302"},
		{"\x01\u0301", "\x01"}, {"a\u200dx", "a\u200d"}, {"\u0600ab", "\u0600a"}, {"\u0600\n", "\u0600"},
		{"\u1100\u1161\u11a8\u1100", "\u1100\u1161\u11a8"}, {"\uac00\u11a8x", "\uac00\u11a8"}, {"\uac01\u1161", "\uac01"},
		{"\U0001F468\u200d\U0001F469\u200d\U0001F467x", "\U0001F468\u200d\U0001F469\u200d\U0001F467"},
		{"a\u200d\U0001F469", "a\u200d"}, {"\u00a9\u200d\u00a9", "\u00a9\u200d\u00a9"},
		{"\U0001F1EF\U0001F1F5\U0001F1FA\U0001F1F8", "\U0001F1EF\U0001F1F5"}, {"\U0001F1EF\U0001F1F5\U0001F1FA", "\U0001F1EF\U0001F1F5"},
		{"\U0001F44D\U0001F3FDx", "\U0001F44D\U0001F3FD"}, {"\u0e01\u0e33x", "\u0e01\u0e33"}, {"\u0915\u093e\u0915", "\u0915\u093e"},
		{"\uff76\uff9e", "\uff76\uff9e"}, {"x\ufe0fy", "x\ufe0f"}, {"\u200b\u0301", "\u200b"}, {"\U000E0001a", "\U000E0001"},
	} {
		if n := graphemeLen(c.s); c.s[:n] != c.want {
			t.Errorf("graphemeLen(%+q) = %d (%+q), want %+q", c.s, n, c.s[:n], c.want)
		}
	}
}

// siglipJSONFuzzSeeds are small files for the fuzzer to change (the
// committed one, mostly its charsmap, is too large for it to mutate
// quickly): its first 300 pieces, a charsmap of two rules, with and without
// byte fallback.
func siglipJSONFuzzSeeds(f *testing.F) [][]byte {
	// A darts-clone array of 4 units, then the strings "x" and "yz" (as in
	// spFuzzSeeds): "a" → "x".
	charsmap := []byte{16, 0, 0, 0, 0, 4, 0, 0, 'a', 1, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 'x', 0, 'y', 'z', 0}
	small := func(byteFallback bool) []byte {
		return siglipJSONEdit(f, func(m map[string]any) {
			model := m["model"].(map[string]any)
			model["vocab"] = model["vocab"].([]any)[:300]
			model["byte_fallback"] = byteFallback
			if byteFallback {
				for b := range 256 {
					model["vocab"] = append(model["vocab"].([]any), []any{bytePieceName(byte(b)), -5})
				}
			}
			m["normalizer"].(map[string]any)["normalizers"].([]any)[0].(map[string]any)["precompiled_charsmap"] = base64.StdEncoding.EncodeToString(charsmap)
		})
	}
	return [][]byte{small(false), small(true)}
}

// FuzzUnigramJSON checks that no tokenizer.json with a Unigram model makes
// the reader panic, and that a tokenizer it accepts encodes text into ids of
// its vocabulary.
func FuzzUnigramJSON(f *testing.F) {
	for _, b := range siglipJSONFuzzSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := LoadTokenizer(fstest.MapFS{"tokenizer.json": {Data: b}})
		if err != nil {
			return
		}
		for _, s := range []string{"", "a photo of a cat", "</s> ZEBRA crossing 🦜 猫\t\n  x", "e\u0301\r\n\u0600a", string(b[:min(len(b), 64)])} {
			checkIDs(t, tok, s)
		}
	})
}

// FuzzSiglipJSONEncode checks that any text encodes without a panic into
// ids of the vocabulary with the base file and each variant, with the cache
// giving what the model gives.
func FuzzSiglipJSONEncode(f *testing.F) {
	toks := []*Tokenizer{loadSiglipJSON(f, "")}
	for _, v := range siglipJSONVariants {
		toks = append(toks, loadSiglipJSON(f, v))
	}
	for i, g := range siglipJSONGoldens(f) {
		if i%7 == 0 {
			f.Add(g.Text)
		}
	}
	f.Add("\xff\xfe</s")
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			checkIDs(t, tok, s)
			m := unigramOf(tok)
			cached, _ := tok.Encode(s)
			m.cache.off = true
			fresh, _ := tok.Encode(s)
			m.cache.off = false
			if !slices.Equal(cached, fresh) {
				t.Fatalf("%q: cached %v, fresh %v", s, cached, fresh)
			}
		}
	})
}

// BenchmarkSiglipJSONCaptions encodes short captions into 64 ids and a mask
// with the Unigram tokenizer.json, with the word cache (prompts repeat in a
// job).
func BenchmarkSiglipJSONCaptions(b *testing.B) { benchSiglipJSON(b, false) }

// BenchmarkSiglipJSONCaptionsNoCache is BenchmarkSiglipJSONCaptions with the
// cache off: every caption goes through normalization and Viterbi.
func BenchmarkSiglipJSONCaptionsNoCache(b *testing.B) { benchSiglipJSON(b, true) }

func benchSiglipJSON(b *testing.B, noCache bool) {
	tok, err := LoadTokenizerDir(siglipJSONDir)
	if err != nil {
		b.Fatal(err)
	}
	m := unigramOf(tok)
	m.cache.off = noCache
	defer func() { m.cache.off = false }()
	ids, mask := make([]int64, 64), make([]int64, 64)
	benchSentencePiece(b, func(s string) {
		if err := tok.encodeInto(ids, mask, s); err != nil {
			b.Fatal(err)
		}
	})
}

// TestSiglipJSONConcurrent encodes the golden strings from several
// goroutines at once through one tokenizer.json Tokenizer and one
// SentencePiece SigLIP Tokenizer (shared word caches and scratch pools).
func TestSiglipJSONConcurrent(t *testing.T) {
	goldens := siglipJSONGoldens(t)
	tok, err := LoadTokenizerDir(siglipJSONDir)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := LoadTokenizer(siglipFS(t))
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]int, len(goldens))
	for i, g := range goldens {
		want[i], _ = sp.Encode(g.Text) // checked against sentencepiece by TestSiglipGolden
	}
	sp, _ = LoadTokenizer(siglipFS(t)) // cold caches again
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for i := range goldens {
				k := (i*7 + g*131) % len(goldens)
				ids, err := tok.Encode(goldens[k].Text)
				spIDs, spErr := sp.Encode(goldens[k].Text)
				if err != nil || spErr != nil || !slices.Equal(ids, goldens[k].Special) || !slices.Equal(spIDs, want[k]) {
					errs <- goldens[k].Text
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if s := <-errs; s != "" {
			t.Errorf("concurrent Encode(%q) differs", s)
		}
	}
}

// TestHFRegexRuns checks the scan for one-class patterns against Go's
// regexp on the same (translated) pattern.
func TestHFRegexRuns(t *testing.T) {
	texts := []string{"", " ", "a  b   c    d", "  lead", "trail  ", "x\t\t y\u00a0\u00a0z\u3000", "12 345 6789x0", "aaa", "a+b++c", "é  ü", "\U0001F99C  \U0001F99C"}
	for _, pattern := range []string{` {2,}`, ` `, `\s+`, `[0-9]+`, `\d{3,}`, `[a-c]`, `a+?`, `[^a-z ]+`, `[\s\p{Nd}]+`, `\w+`, `x|y`} {
		rx, err := compileHFRegex(pattern)
		if err != nil {
			t.Fatalf("%q: %v", pattern, err)
		}
		for _, s := range texts {
			got := string(rx.replaceAll(nil, s, "<>"))
			if want := rx.re.ReplaceAllLiteralString(s, "<>"); got != want {
				t.Errorf("%q on %q: %q, regexp gives %q", pattern, s, got, want)
			}
		}
	}
	for pattern, runs := range map[string]bool{` {2,}`: true, `\s+`: true, `[0-9]+`: true, `a`: true, `x|y`: true, `ab`: false, `a*`: false, `(?i)a`: false} {
		rx, err := compileHFRegex(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if (rx.runs != nil) != runs {
			t.Errorf("%q: scanned %v, want %v", pattern, rx.runs != nil, runs)
		}
	}
	if p, _ := onigPattern(`[\s,]\S\d\w\h`); p != `[`+onigSpace+`,][^`+onigSpace+`]\p{Nd}[`+onigWord+`][`+onigHex+`]` {
		t.Errorf("onigPattern = %q", p)
	}
}

// TestSiglipLoadChoice checks which file a SigLIP directory is read from:
// spiece.model when it also has tokenizer.json (transformers' AutoTokenizer
// builds the slow SiglipTokenizer from it), tokenizer.json when that is all
// it has, and tokenizer.json for other tokenizer classes.
func TestSiglipLoadChoice(t *testing.T) {
	spFS := siglipFS(t) // spiece.model (unigram_nfkc) and SigLIP's tokenizer_config.json
	tj := siglipJSONVariant(t, "")
	corpus := spmCorpus(t)
	spWant := readSPJSONL[[]int](t, filepath.Join("testdata", "spm", "siglip.jsonl"))
	jsonWant := siglipJSONGoldens(t)
	config := func(class string) []byte {
		return []byte(`{"tokenizer_class": "` + class + `", "model_max_length": 64, "pad_token": "</s>", "eos_token": "</s>", "unk_token": "<unk>"}`)
	}
	// The number of corpus strings whose 64 ids are SiglipTokenizer's (the
	// sentencepiece reference) and those whose ids with </s> are the
	// tokenizers library's on the converted file.
	count := func(tok *Tokenizer) (sp, lib int) {
		for i, s := range corpus {
			ids, _, _ := tok.EncodePadded(s, 64)
			got := make([]int, len(ids))
			for j, id := range ids {
				got[j] = int(id)
			}
			if slices.Equal(got, spWant[i]) {
				sp++
			}
			if full, _ := tok.Encode(s); slices.Equal(full, jsonWant[i].Special) {
				lib++
			}
		}
		return sp, lib
	}
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		sp   bool // read from spiece.model
	}{
		{"both, SiglipTokenizer", fstest.MapFS{"spiece.model": spFS["spiece.model"], "tokenizer.json": {Data: tj}, "tokenizer_config.json": spFS["tokenizer_config.json"]}, true},
		{"both, no class, model_type siglip", fstest.MapFS{"spiece.model": spFS["spiece.model"], "tokenizer.json": {Data: tj}, "config.json": {Data: []byte(`{"model_type": "siglip"}`)}}, true},
		{"tokenizer.json only", fstest.MapFS{"tokenizer.json": {Data: tj}, "tokenizer_config.json": spFS["tokenizer_config.json"]}, false},
		{"both, T5Tokenizer", fstest.MapFS{"spiece.model": spFS["spiece.model"], "tokenizer.json": {Data: tj}, "tokenizer_config.json": {Data: config("T5Tokenizer")}}, false},
		{"both, no class, not siglip", fstest.MapFS{"spiece.model": spFS["spiece.model"], "tokenizer.json": {Data: tj}, "config.json": {Data: []byte(`{"model_type": "t5"}`)}}, false},
	} {
		tok, err := LoadTokenizer(c.fsys)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		sp, lib := count(tok)
		if c.sp && sp != len(corpus) || !c.sp && lib != len(corpus) {
			t.Errorf("%s: %d strings give SiglipTokenizer's ids, %d the tokenizer.json's (of %d); want all of the %s", c.name, sp, lib, len(corpus), map[bool]string{true: "first", false: "second"}[c.sp])
		}
		if sp == len(corpus) && lib == len(corpus) {
			t.Errorf("%s: the corpus does not tell the two apart", c.name)
		}
	}
}
