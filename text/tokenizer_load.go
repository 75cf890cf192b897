package text

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// CLIP's special tokens.
const (
	startOfText = "<|startoftext|>"
	endOfText   = "<|endoftext|>"
	wordSuffix  = "</w>"
)

// clipSplitPattern is the pre-tokenizer regex of CLIP's tokenizer.json, the
// one split implements.
const clipSplitPattern = `'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+`

// LoadTokenizerDir loads the tokenizer of the model directory dir; see
// LoadTokenizer.
func LoadTokenizerDir(dir string) (*Tokenizer, error) {
	t, err := LoadTokenizer(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	return t, nil
}

// LoadTokenizer loads the tokenizer of a model directory: tokenizer.json (a
// Hugging Face fast-tokenizer file), else a SentencePiece model, else
// vocab.json and merges.txt; and tokenizer_config.json, when present, for
// the special tokens and model_max_length.
//
// A tokenizer.json is read by its model's type: CLIP's byte-level BPE (NFC,
// whitespace, lowercase; the CLIP split pattern; an end-of-word suffix), a
// BPE over characters (Gemma's), or a Unigram (SigLIP's and T5's exports,
// and XLM-RoBERTa's, the layout of MetaCLIP 2's XLM-V tokenizer),
// each run as the Hugging Face tokenizers library runs it; a part it cannot
// run is an error naming it. A SentencePiece model (spiece.model or
// tokenizer.model) is SigLIP's tokenizer when tokenizer_config.json's
// tokenizer_class is SiglipTokenizer (or, without a tokenizer_class,
// config.json's model_type is siglip), else plain SentencePiece with the BOS
// and EOS its add_bos_token and add_eos_token ask for.
//
// A SigLIP directory with both spiece.model and tokenizer.json is read from
// spiece.model, as transformers does: it has no fast SigLIP tokenizer, so
// its AutoTokenizer builds SiglipTokenizer from spiece.model and leaves
// tokenizer.json unread. A TIPSv2 directory (Tipsv2Tokenizer, or
// config.json's model_type tipsv2) is read from its tokenizer.json when it
// has one, as transformers' Tipsv2Tokenizer (a tokenizers-library BPE:
// Lowercase and Precompiled normalizers, WhitespaceSplit and Metaspace)
// reads it; with tokenizer.model alone, as the SentencePiece Tipsv2Tokenizer
// of earlier transformers versions reads it: the text lower-cased as
// Python's str.lower does, then SentencePiece, with no BOS or EOS, padded
// with id 0 to 64 positions.
func LoadTokenizer(fsys fs.FS) (*Tokenizer, error) {
	cfg, err := readTokenizerConfig(fsys)
	if err != nil {
		return nil, err
	}
	var t *Tokenizer
	switch b, err := fs.ReadFile(fsys, "tokenizer.json"); {
	case err == nil && siglipSentencePiece(fsys, cfg):
		if t, err = loadSentencePiece(fsys, "spiece.model", cfg); err != nil {
			return nil, err
		}
	case err == nil:
		t, err = parseTokenizerJSON(b, cfg)
		if err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist):
		if name := sentencePieceFile(fsys); name != "" {
			if t, err = loadSentencePiece(fsys, name, cfg); err != nil {
				return nil, err
			}
			break
		}
		vb, err := fs.ReadFile(fsys, "vocab.json")
		if err != nil {
			return nil, fmt.Errorf("text: no tokenizer.json, and vocab.json: %w", err)
		}
		mb, err := fs.ReadFile(fsys, "merges.txt")
		if err != nil {
			return nil, fmt.Errorf("text: no tokenizer.json, and merges.txt: %w", err)
		}
		t, err = parseVocabMerges(vb, mb, cfg)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("text: tokenizer.json: %w", err)
	}
	return t.WithOptions(Options{})
}

// siglipSentencePiece reports whether fsys is a SigLIP directory with
// SiglipTokenizer's spiece.model: tokenizer_config.json's tokenizer_class is
// SiglipTokenizer, or it names none and config.json's model_type is siglip
// (SigLIP 2 names GemmaTokenizer, whose model is tokenizer.model).
func siglipSentencePiece(fsys fs.FS, cfg tokenizerConfig) bool {
	if st, err := fs.Stat(fsys, "spiece.model"); err != nil || st.IsDir() {
		return false
	}
	var class string
	if v, ok := cfg.raw["tokenizer_class"]; ok {
		_ = json.Unmarshal(v, &class)
	}
	return class == "SiglipTokenizer" || (class == "" && configSaysSiglip(fsys))
}

// LoadOpenAIBPE loads openai's bpe_simple_vocab_16e6.txt.gz (the merges list
// of the original CLIP repository) as a tokenizer with the same 49,408 ids.
// It pads with id 0, as openai's clip.tokenize does; the context length is 77.
func LoadOpenAIBPE(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("text: %w", err)
	}
	defer f.Close()
	return readOpenAIBPE(f, path)
}

// tokenizerConfig is what is read from tokenizer_config.json.
type tokenizerConfig struct {
	pad, bos, eos, unk string
	maxLength          int
	// raw is the whole file, for the keys only some tokenizers read.
	raw map[string]json.RawMessage
}

func readTokenizerConfig(fsys fs.FS) (tokenizerConfig, error) {
	var cfg tokenizerConfig
	b, err := fs.ReadFile(fsys, "tokenizer_config.json")
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("text: tokenizer_config.json: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return cfg, fmt.Errorf("text: tokenizer_config.json: %w", err)
	}
	cfg.raw = m
	for key, dst := range map[string]*string{"pad_token": &cfg.pad, "bos_token": &cfg.bos, "eos_token": &cfg.eos, "unk_token": &cfg.unk} {
		if v, ok := m[key]; ok {
			name, err := parseTokenName(v)
			if err != nil {
				return cfg, fmt.Errorf("text: tokenizer_config.json: %s: %w", key, err)
			}
			*dst = name
		}
	}
	if v, ok := m["model_max_length"]; ok {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return cfg, fmt.Errorf("text: tokenizer_config.json: model_max_length: %w", err)
		}
		// transformers writes 1e30 for "no limit"; only a real length is kept.
		if f >= 2 && f <= 1<<20 && f == float64(int(f)) {
			cfg.maxLength = int(f)
		}
	}
	return cfg, nil
}

// parseTokenName reads a special token of tokenizer_config.json: a string,
// an AddedToken object {"content": ...}, or null ("").
func parseTokenName(v json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(v, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(v, &obj); err != nil {
		return "", fmt.Errorf("want a string or an object with \"content\": %w", err)
	}
	return obj.Content, nil
}

// hfTokenizerJSON is the part of tokenizer.json that is read.
type hfTokenizerJSON struct {
	AddedTokens []struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Padding       *struct {
		PadID    *int   `json:"pad_id"`
		PadToken string `json:"pad_token"`
	} `json:"padding"`
	Model struct {
		Type                    string   `json:"type"`
		Dropout                 *float64 `json:"dropout"`
		UnkToken                *string  `json:"unk_token"`
		ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
		FuseUnk                 bool     `json:"fuse_unk"`
		ByteFallback            bool     `json:"byte_fallback"`
		IgnoreMerges            bool     `json:"ignore_merges"`
		// Vocab is an object of token → id (BPE) or a list of [piece,
		// score] (Unigram); see bpeVocab.
		Vocab  json.RawMessage   `json:"vocab"`
		Merges []json.RawMessage `json:"merges"`
		// UnkID is a Unigram model's unknown piece.
		UnkID json.RawMessage `json:"unk_id"`
	} `json:"model"`
}

// bpeVocab decodes a BPE model's vocabulary, an object of token → id.
func (tj *hfTokenizerJSON) bpeVocab() (map[string]int, error) {
	var v map[string]int
	if isNull(tj.Model.Vocab) {
		return v, nil
	}
	if err := json.Unmarshal(tj.Model.Vocab, &v); err != nil {
		return nil, fmt.Errorf("text: tokenizer.json: model.vocab: want an object of token → id (a BPE model): %w", err)
	}
	return v, nil
}

type component struct {
	Type          string      `json:"type"`
	Normalizers   []component `json:"normalizers"`
	Pretokenizers []component `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Content        string          `json:"content"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       *bool           `json:"use_regex"`
	Cls            json.RawMessage `json:"cls"`
	Sep            json.RawMessage `json:"sep"`
	Single         []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	} `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
	Processors []component `json:"processors"`
}

func parseTokenizerJSON(b []byte, cfg tokenizerConfig) (*Tokenizer, error) {
	var tj hfTokenizerJSON
	if err := json.Unmarshal(b, &tj); err != nil {
		return nil, fmt.Errorf("text: tokenizer.json: %w", err)
	}
	m := tj.Model
	switch m.Type {
	case "Unigram":
		// SigLIP's and T5's exports: SentencePiece's Unigram.
		um, err := buildHFUnigram(hfUnigramModel{UnkID: m.UnkID, ByteFallback: m.ByteFallback, Vocab: m.Vocab})
		if err != nil {
			return nil, err
		}
		return parseHFPieces(b, &tj, cfg, um)
	case "BPE", "":
	default:
		return nil, fmt.Errorf("text: tokenizer.json: model.type %q is not supported (want \"BPE\" or \"Unigram\")", m.Type)
	}
	vocab, err := tj.bpeVocab()
	if err != nil {
		return nil, err
	}
	if m.Type == "BPE" && (m.ByteFallback || !hasByteLevel(tj.PreTokenizer)) {
		// Not CLIP's byte-level pipeline: Gemma's, SentencePiece-style BPE.
		bm, err := buildHFBPE(&tj, vocab)
		if err != nil {
			return nil, err
		}
		return parseHFPieces(b, &tj, cfg, bm)
	}
	switch {
	case len(vocab) == 0:
		return nil, errors.New("text: tokenizer.json: model.vocab is empty or missing")
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("text: tokenizer.json: BPE dropout %g is not supported (want null)", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("text: tokenizer.json: continuing_subword_prefix %q is not supported (want \"\")", *m.ContinuingSubwordPrefix)
	case m.ByteFallback:
		return nil, errors.New("text: tokenizer.json: byte_fallback is not supported (CLIP's vocabulary spells every byte)")
	}
	bc := buildConfig{fuseUnk: m.FuseUnk, ignoreMerges: m.IgnoreMerges, context: cfg.maxLength}
	if m.EndOfWordSuffix != nil {
		bc.suffix = *m.EndOfWordSuffix
	}
	if m.UnkToken != nil {
		bc.unk = *m.UnkToken
	}
	pairs := make([][2]string, len(m.Merges))
	for i, raw := range m.Merges {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("text: tokenizer.json: merge %d: %q is not %q", i, s, "a b")
			}
			pairs[i] = [2]string{a, b}
			continue
		}
		var ab []string
		if err := json.Unmarshal(raw, &ab); err != nil || len(ab) != 2 {
			return nil, fmt.Errorf("text: tokenizer.json: merge %d: %s is neither \"a b\" nor [\"a\", \"b\"]", i, raw)
		}
		pairs[i] = [2]string{ab[0], ab[1]}
	}
	for _, a := range tj.AddedTokens {
		vocab[a.Content] = a.ID
		bc.added = append(bc.added, addedToken{content: a.Content, id: a.ID, normalized: a.Normalized})
	}
	if bc.nfc, bc.lower, err = checkNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	if err := checkPreTokenizer(tj.PreTokenizer); err != nil {
		return nil, err
	}
	if bc.bos, bc.eos, err = postProcessorTokens(tj.PostProcessor); err != nil {
		return nil, err
	}
	if bc.bos == "" {
		bc.bos = firstNonEmpty(cfg.bos, startOfText)
	}
	if bc.eos == "" {
		bc.eos = firstNonEmpty(cfg.eos, endOfText)
	}
	bc.pad = cfg.pad
	if tj.Padding != nil && tj.Padding.PadToken != "" {
		bc.pad = tj.Padding.PadToken
	}
	return build(vocab, pairs, bc)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// checkNormalizer accepts CLIP's normalizer, or parts of it: a Sequence of
// NFC, Replace(\s+ → " "), Lowercase (and Strip, which cannot change ids).
func checkNormalizer(raw json.RawMessage) (nfc, lower bool, err error) {
	if isNull(raw) {
		return false, false, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return false, false, fmt.Errorf("text: tokenizer.json: normalizer: %w", err)
	}
	var walk func(c component) error
	walk = func(c component) error {
		switch c.Type {
		case "Sequence":
			for _, n := range c.Normalizers {
				if err := walk(n); err != nil {
					return err
				}
			}
		case "NFC":
			nfc = true
		case "Lowercase":
			lower = true
		case "Strip":
		case "Replace":
			if c.Pattern.Regex == nil || *c.Pattern.Regex != `\s+` || c.Content != " " {
				return fmt.Errorf("text: tokenizer.json: normalizer Replace %+v → %q is not supported (want \\s+ → \" \")", c.Pattern, c.Content)
			}
		default:
			return fmt.Errorf("text: tokenizer.json: normalizer %q is not supported (CLIP's is NFC, Replace \\s+, Lowercase)", c.Type)
		}
		return nil
	}
	return nfc, lower, walk(c)
}

// checkPreTokenizer accepts CLIP's pre-tokenizer: the CLIP split pattern
// (matches kept, the rest removed) and ByteLevel without prefix space or regex.
func checkPreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("text: tokenizer.json: pre_tokenizer is null, want CLIP's Split and ByteLevel")
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("text: tokenizer.json: pre_tokenizer: %w", err)
	}
	split, byteLevel := false, false
	var walk func(c component) error
	walk = func(c component) error {
		switch c.Type {
		case "Sequence":
			for _, p := range c.Pretokenizers {
				if err := walk(p); err != nil {
					return err
				}
			}
		case "Split":
			if c.Pattern.Regex == nil || *c.Pattern.Regex != clipSplitPattern || c.Behavior != "Removed" || !c.Invert {
				return fmt.Errorf("text: tokenizer.json: pre_tokenizer Split is not CLIP's (want pattern %q, behavior Removed, invert true)", clipSplitPattern)
			}
			split = true
		case "ByteLevel":
			if c.AddPrefixSpace || (c.UseRegex != nil && *c.UseRegex) {
				return errors.New("text: tokenizer.json: pre_tokenizer ByteLevel with add_prefix_space or use_regex is not supported (CLIP's has both false)")
			}
			byteLevel = true
		default:
			return fmt.Errorf("text: tokenizer.json: pre_tokenizer %q is not supported (CLIP's is Split and ByteLevel)", c.Type)
		}
		return nil
	}
	if err := walk(c); err != nil {
		return err
	}
	if !split || !byteLevel {
		return errors.New("text: tokenizer.json: pre_tokenizer must hold CLIP's Split and ByteLevel")
	}
	return nil
}

// postProcessorTokens returns the tokens the post-processor puts around a
// single sequence ("" when it names none).
func postProcessorTokens(raw json.RawMessage) (bos, eos string, err error) {
	if isNull(raw) {
		return "", "", nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", "", fmt.Errorf("text: tokenizer.json: post_processor: %w", err)
	}
	switch c.Type {
	case "RobertaProcessing", "BertProcessing":
		var cls, sep []any
		if json.Unmarshal(c.Cls, &cls) != nil || json.Unmarshal(c.Sep, &sep) != nil || len(cls) != 2 || len(sep) != 2 {
			return "", "", fmt.Errorf("text: tokenizer.json: post_processor %s: cls and sep must be [token, id]", c.Type)
		}
		b, _ := cls[0].(string)
		e, _ := sep[0].(string)
		return b, e, nil
	case "TemplateProcessing":
		s := c.Single
		if len(s) != 3 || s[0].SpecialToken == nil || s[1].Sequence == nil || s[2].SpecialToken == nil {
			return "", "", errors.New("text: tokenizer.json: post_processor TemplateProcessing: want single = [special, $A, special]")
		}
		return s[0].SpecialToken.ID, s[2].SpecialToken.ID, nil
	case "Sequence":
		for _, p := range c.Processors {
			if p.Type == "ByteLevel" {
				continue
			}
			b, _ := json.Marshal(p)
			return postProcessorTokens(b)
		}
		return "", "", nil
	case "ByteLevel":
		return "", "", nil
	}
	return "", "", fmt.Errorf("text: tokenizer.json: post_processor %q is not supported", c.Type)
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// parseVocabMerges builds a tokenizer from Hugging Face's slow-tokenizer
// files, configured as transformers converts them to tokenizer.json.
func parseVocabMerges(vb, mb []byte, cfg tokenizerConfig) (*Tokenizer, error) {
	var vocab map[string]int
	if err := json.Unmarshal(vb, &vocab); err != nil {
		return nil, fmt.Errorf("text: vocab.json: %w", err)
	}
	var pairs [][2]string
	sc := bufio.NewScanner(bytes.NewReader(mb))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || (n == 1 && strings.HasPrefix(line, "#version")) {
			continue
		}
		a, b, ok := strings.Cut(line, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return nil, fmt.Errorf("text: merges.txt: line %d: %q is not a merge %q", n, line, "a b")
		}
		pairs = append(pairs, [2]string{a, b})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("text: merges.txt: %w", err)
	}
	bc := buildConfig{
		suffix: wordSuffix, nfc: true, lower: true,
		bos:   firstNonEmpty(cfg.bos, startOfText),
		eos:   firstNonEmpty(cfg.eos, endOfText),
		unk:   firstNonEmpty(cfg.unk, endOfText),
		pad:   cfg.pad,
		added: defaultAdded(vocab), context: cfg.maxLength,
	}
	return build(vocab, pairs, bc)
}

// defaultAdded returns CLIP's added tokens as its tokenizer.json has them:
// <|startoftext|> matched after normalization, <|endoftext|> before.
func defaultAdded(vocab map[string]int) []addedToken {
	var out []addedToken
	if id, ok := vocab[startOfText]; ok {
		out = append(out, addedToken{content: startOfText, id: id, normalized: true})
	}
	if id, ok := vocab[endOfText]; ok {
		out = append(out, addedToken{content: endOfText, id: id})
	}
	return out
}

type buildConfig struct {
	suffix, unk, bos, eos, pad string
	nfc, lower                 bool
	fuseUnk, ignoreMerges      bool
	added                      []addedToken
	context                    int
}

// build checks the vocabulary and merges and makes the tables.
func build(vocab map[string]int, pairs [][2]string, c buildConfig) (*Tokenizer, error) {
	maxID := -1
	for tok, id := range vocab {
		if id < 0 || id > 1<<24 {
			return nil, fmt.Errorf("text: vocabulary: token %q has id %d, want 0..%d", tok, id, 1<<24)
		}
		maxID = max(maxID, id)
	}
	tokens := make([]string, maxID+1)
	for tok, id := range vocab {
		if tokens[id] != "" && tokens[id] != tok {
			return nil, fmt.Errorf("text: vocabulary: id %d is both %q and %q", id, tokens[id], tok)
		}
		tokens[id] = tok
	}
	t := &Tokenizer{
		tokens: tokens, vocab: vocab, suffix: c.suffix, nfc: c.nfc, lower: c.lower,
		modelContext: c.context, special: map[int]bool{},
	}
	lookup := func(what, tok string) (int, error) {
		id, ok := vocab[tok]
		if !ok {
			return 0, fmt.Errorf("text: vocabulary: no %s token %q", what, tok)
		}
		return id, nil
	}
	var err error
	if t.bos, err = lookup("BOS", c.bos); err != nil {
		return nil, err
	}
	if t.eos, err = lookup("EOS", c.eos); err != nil {
		return nil, err
	}
	t.pad = t.eos
	if c.pad != "" {
		if t.pad, err = lookup("pad", c.pad); err != nil {
			return nil, err
		}
	}
	t.special[t.bos], t.special[t.eos] = true, true
	t.prefix, t.suffixIDs = []int{t.bos}, []int{t.eos}
	for _, a := range c.added {
		if a.content == "" {
			return nil, errors.New("text: added token with empty content")
		}
		t.special[a.id] = true
		if a.normalized {
			norm := string(appendNormalizedHF(nil, a.content, c.nfc, c.lower))
			t.normAdded = append(t.normAdded, addedToken{content: norm, id: a.id, normalized: true})
		} else {
			t.rawAdded = append(t.rawAdded, a)
		}
	}

	m := &bpe{merges: make(map[uint64]merge, len(pairs)), unk: noID, fuseUnk: c.fuseUnk, cache: newBPECache()}
	if c.unk != "" {
		if id, ok := vocab[c.unk]; ok {
			m.unk = int32(id)
		}
	}
	for b, r := range byteRunes {
		m.byteID[b], m.byteEndID[b] = noID, noID
		if id, ok := vocab[string(r)]; ok {
			m.byteID[b] = int32(id)
		}
		if id, ok := vocab[string(r)+c.suffix]; ok {
			m.byteEndID[b] = int32(id)
		}
	}
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		ab, okAB := vocab[p[0]+p[1]]
		if !okA || !okB || !okAB {
			return nil, fmt.Errorf("text: merge %d (%q %q): %q, %q or %q is not in the vocabulary", rank, p[0], p[1], p[0], p[1], p[0]+p[1])
		}
		k := pairKey(int32(a), int32(b))
		if _, dup := m.merges[k]; !dup { // the first (lowest-ranked) of duplicate merges wins
			m.merges[k] = merge{rank: int32(rank), id: int32(ab)}
		}
	}
	if c.ignoreMerges {
		m.whole = make(map[string]int32)
		for tok, id := range vocab {
			if w, ok := byteLevelBytes(tok); ok {
				m.whole[w] = int32(id)
			}
		}
	}
	t.model = m
	return t, nil
}

// byteLevelBytes returns the bytes a token spells when all its runes are
// byte-level symbols, for ignore_merges lookups (HF looks the pre-token up in
// the vocabulary as it is, without the end-of-word suffix).
func byteLevelBytes(tok string) (string, bool) {
	var b []byte
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeBytes) || runeBytes[r] < 0 {
			return "", false
		}
		b = append(b, byte(runeBytes[r]))
	}
	return string(b), len(b) > 0
}
