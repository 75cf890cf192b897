package text

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// This file reads a tokenizer.json whose model is a BPE over characters
// (with byte fallback, as Gemma's and SigLIP 2's are, or Llama/Mistral-style
// files with a Metaspace pre-tokenizer) rather than CLIP's byte-level BPE: its
// normalizer, pre-tokenizer, added tokens, post-processor, padding and
// truncation, and the add_bos_token/add_eos_token of tokenizer_config.json.
// Each part runs as the Hugging Face tokenizers library runs it; hfbpe.go has
// the encoding.

// hfFile holds the parts of tokenizer.json that hfTokenizerJSON leaves out.
type hfFile struct {
	AddedTokens []hfAddedToken `json:"added_tokens"`
	Truncation  *struct {
		MaxLength int    `json:"max_length"`
		Direction string `json:"direction"`
	} `json:"truncation"`
	Padding *struct {
		Strategy  json.RawMessage `json:"strategy"`
		Direction string          `json:"direction"`
		PadID     *int            `json:"pad_id"`
		PadToken  string          `json:"pad_token"`
	} `json:"padding"`
}

type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfComponent is a normalizer, pre-tokenizer or post-processor object.
type hfComponent struct {
	Type          string        `json:"type"`
	Normalizers   []hfComponent `json:"normalizers"`
	Pretokenizers []hfComponent `json:"pretokenizers"`
	Processors    []hfComponent `json:"processors"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Content        *string `json:"content"`
	Prepend        *string `json:"prepend"`
	Charsmap       *string `json:"precompiled_charsmap"`
	StripLeft      *bool   `json:"strip_left"`
	StripRight     *bool   `json:"strip_right"`
	Behavior       string  `json:"behavior"`
	Invert         bool    `json:"invert"`
	Replacement    *string `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	AddPrefixSpace *bool   `json:"add_prefix_space"`
	Split          *bool   `json:"split"`
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
	Cls json.RawMessage `json:"cls"`
	Sep json.RawMessage `json:"sep"`
}

// hasByteLevel reports whether a pre_tokenizer is or holds ByteLevel (CLIP's
// and GPT-2's byte-level pipeline).
func hasByteLevel(raw json.RawMessage) bool {
	if isNull(raw) {
		return false
	}
	var c hfComponent
	if json.Unmarshal(raw, &c) != nil {
		return true // let the byte-level reader give its error
	}
	var walk func(c hfComponent) bool
	walk = func(c hfComponent) bool {
		if c.Type == "ByteLevel" {
			return true
		}
		for _, p := range c.Pretokenizers {
			if walk(p) {
				return true
			}
		}
		return false
	}
	return walk(c)
}

// hfMaxID bounds the ids a file may give, so that a bad file cannot make the
// reader allocate without end (see also hfMaxSparse).
const hfMaxID = 1 << 24

// hfModel is the model of a tokenizer.json other than CLIP's byte-level
// BPE: a BPE over characters (hfBPE) or a Unigram (hfUnigram).
type hfModel interface {
	// word appends the ids of one pre-token.
	word(dst []int, w string, sc *hfScratch) []int
	// vocabSize is the library's get_vocab_size, which numbers added
	// tokens the vocabulary lacks.
	vocabSize() int
	// tokenIDs maps the model's tokens to their ids (token_to_id).
	tokenIDs() map[string]int32
	// idTokens are the tokens by id ("" for ids it does not define).
	idTokens() []string
	// bytePieces says that "<0xNN>" pieces spell bytes (byte_fallback).
	bytePieces() bool
}

// parseHFPieces builds a Tokenizer from a tokenizer.json whose model m is
// not CLIP's byte-level BPE; tj is b already decoded.
func parseHFPieces(b []byte, tj *hfTokenizerJSON, cfg tokenizerConfig, m hfModel) (*Tokenizer, error) {
	const where = "text: tokenizer.json: "
	var f hfFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf(where+"%w", err)
	}
	var err error
	e := &hfEncoder{model: m}
	if e.norm, err = parseHFNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	if e.pre, err = parseHFPreTokenizer(tj.PreTokenizer); err != nil {
		return nil, err
	}

	// The added tokens' ids are the library's, not the file's: a token the
	// model's vocabulary (or an earlier added token) has keeps that id, a new
	// one takes the vocabulary's size (its number of entries) or, once an
	// added id reaches it, the largest added id plus one; in the file's order.
	// A consistent file gives the ids it states.
	addedIDs := make([]int, len(f.AddedTokens))
	addedByContent := map[string]int{}
	maxAdded := -1
	vocab, size := m.tokenIDs(), m.vocabSize()
	for i, a := range f.AddedTokens {
		if a.ID < 0 || a.ID >= hfMaxID {
			return nil, fmt.Errorf(where+"added_tokens[%d] (%q): id %d, want 0..%d", i, a.Content, a.ID, hfMaxID-1)
		}
		if a.Content == "" {
			return nil, fmt.Errorf(where+"added_tokens[%d] (id %d): empty content", i, a.ID)
		}
		id, ok := addedByContent[a.Content]
		if !ok {
			if v, inVocab := vocab[a.Content]; inVocab {
				id = int(v)
			} else if maxAdded < 0 || (maxAdded < size && size > 0) {
				id = size
			} else {
				id = maxAdded + 1
			}
		}
		if id >= hfMaxSparse(size+len(f.AddedTokens)) {
			return nil, fmt.Errorf(where+"added_tokens[%d] (%q): id %d, want 0..%d", i, a.Content, id, hfMaxSparse(size+len(f.AddedTokens))-1)
		}
		addedIDs[i] = id
		addedByContent[a.Content] = id
		maxAdded = max(maxAdded, id)
	}
	// Tokens by id: the model's vocabulary, then the added tokens (which
	// win, as the library's id_to_token looks them up first).
	mt := m.idTokens()
	n := len(mt)
	for _, id := range addedIDs {
		n = max(n, id+1)
	}
	tokens := make([]string, n)
	copy(tokens, mt)
	ids := make(map[string]int, len(vocab)+len(f.AddedTokens))
	for tok, id := range vocab {
		ids[tok] = int(id)
	}
	var special []int
	var rawSet, normSet []hfAdded
	// The library matches special tokens first, then the others, each list
	// in the file's order.
	for pass := 0; pass < 2; pass++ {
		for i, a := range f.AddedTokens {
			if a.Special != (pass == 0) {
				continue
			}
			id := addedIDs[i]
			tokens[id] = a.Content
			ids[a.Content] = id
			if a.Special {
				special = append(special, id)
			}
			normalized := !a.Special
			if a.Normalized != nil {
				normalized = *a.Normalized
			}
			t := hfAdded{content: a.Content, id: int32(id), lstrip: a.Lstrip, rstrip: a.Rstrip, singleWord: a.SingleWord}
			if normalized {
				sc := new(hfScratch)
				t.content = string(e.norm.apply(sc, a.Content))
				if t.content == "" {
					continue
				}
				normSet = append(normSet, t)
			} else {
				rawSet = append(rawSet, t)
			}
		}
	}
	e.raw, e.normed = newHFAddedSet(rawSet), newHFAddedSet(normSet)

	prefix, suffix, err := hfTemplate(tj.PostProcessor, ids)
	if err != nil {
		return nil, err
	}
	lookup := func(names ...string) int {
		for _, s := range names {
			if id, ok := ids[s]; ok && s != "" {
				return id
			}
		}
		return -1
	}
	for _, c := range []struct{ key, name string }{{"bos_token", cfg.bos}, {"eos_token", cfg.eos}, {"pad_token", cfg.pad}} {
		if c.name != "" && lookup(c.name) < 0 {
			return nil, fmt.Errorf("text: tokenizer_config.json: %s %q is not in tokenizer.json's vocabulary or added tokens", c.key, c.name)
		}
	}
	bos := lookup(cfg.bos, "<bos>", "<s>")
	eos := lookup(cfg.eos, "<eos>", "</s>")
	if prefix, suffix, err = gemmaSpecials(cfg, prefix, suffix, bos, eos); err != nil {
		return nil, err
	}

	pad := lookup(cfg.pad)
	context := 0
	if p := f.Padding; p != nil {
		if p.Direction != "" && p.Direction != "Right" {
			return nil, fmt.Errorf(where+"padding.direction %q is not supported (want \"Right\")", p.Direction)
		}
		if id := lookup(p.PadToken); id >= 0 {
			pad = id
		} else if p.PadID != nil && *p.PadID >= 0 && *p.PadID < len(tokens) && tokens[*p.PadID] != "" {
			pad = *p.PadID
		}
		var fixed struct {
			Fixed *int `json:"Fixed"`
		}
		if json.Unmarshal(p.Strategy, &fixed) == nil && fixed.Fixed != nil && *fixed.Fixed >= 2 && *fixed.Fixed <= 1<<20 {
			context = *fixed.Fixed
		}
	}
	if t := f.Truncation; t != nil {
		if t.Direction != "" && t.Direction != "Right" {
			return nil, fmt.Errorf(where+"truncation.direction %q is not supported (want \"Right\")", t.Direction)
		}
		if context == 0 && t.MaxLength >= 2 && t.MaxLength <= 1<<20 {
			context = t.MaxLength
		}
	}
	if context == 0 {
		context = cfg.maxLength
	}
	if pad < 0 {
		pad = lookup("<pad>")
	}
	if pad < 0 {
		pad = eos
	}
	if pad < 0 {
		return nil, errors.New(where + "no pad token (padding.pad_token, tokenizer_config.json's pad_token, <pad> or an EOS token)")
	}
	return newPieceTokenizer(pieceSpec{
		enc: e, tokens: tokens, vocab: ids, prefix: prefix, suffix: suffix, pad: pad, bos: bos, eos: eos,
		special: special, bytePieces: m.bytePieces(), context: context,
	})
}

// gemmaSpecials applies tokenizer_config.json's add_bos_token and
// add_eos_token as GemmaTokenizerFast and LlamaTokenizerFast do: they
// rebuild the post-processor as [BOS] $A [EOS], each part when its flag is set
// (add_bos_token defaults to true, add_eos_token to false). Other tokenizer
// classes keep tokenizer.json's post-processor.
func gemmaSpecials(cfg tokenizerConfig, prefix, suffix []int, bos, eos int) ([]int, []int, error) {
	var class string
	if v, ok := cfg.raw["tokenizer_class"]; ok {
		_ = json.Unmarshal(v, &class)
	}
	_, hasBOS := cfg.raw["add_bos_token"]
	_, hasEOS := cfg.raw["add_eos_token"]
	switch strings.TrimSuffix(class, "Fast") {
	case "GemmaTokenizer", "LlamaTokenizer", "CodeLlamaTokenizer":
	default:
		if !hasBOS && !hasEOS {
			return prefix, suffix, nil
		}
	}
	flag := func(key string, def bool) (bool, error) {
		v, ok := cfg.raw[key]
		if !ok || isNull(v) {
			return def, nil
		}
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return false, fmt.Errorf("text: tokenizer_config.json: %s: want true or false: %w", key, err)
		}
		return b, nil
	}
	addBOS, err := flag("add_bos_token", true)
	if err != nil {
		return nil, nil, err
	}
	addEOS, err := flag("add_eos_token", false)
	if err != nil {
		return nil, nil, err
	}
	prefix, suffix = nil, nil
	if addBOS {
		if bos < 0 {
			return nil, nil, errors.New("text: tokenizer_config.json: add_bos_token is true but there is no BOS token")
		}
		prefix = []int{bos}
	}
	if addEOS {
		if eos < 0 {
			return nil, nil, errors.New("text: tokenizer_config.json: add_eos_token is true but there is no EOS token")
		}
		suffix = []int{eos}
	}
	return prefix, suffix, nil
}

// hfTemplate returns the ids a post-processor puts before and after a single
// sequence.
func hfTemplate(raw json.RawMessage, ids map[string]int) (prefix, suffix []int, err error) {
	const where = "text: tokenizer.json: post_processor"
	if isNull(raw) {
		return nil, nil, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf(where+": %w", err)
	}
	var walk func(c hfComponent) error
	walk = func(c hfComponent) error {
		switch c.Type {
		case "TemplateProcessing":
			seq := 0
			for i, item := range c.Single {
				switch {
				case item.Sequence != nil:
					if item.Sequence.ID != "A" {
						return fmt.Errorf(where+" TemplateProcessing: single[%d] is sequence %q, want A", i, item.Sequence.ID)
					}
					seq++
				case item.SpecialToken != nil:
					st, ok := c.SpecialTokens[item.SpecialToken.ID]
					if !ok {
						return fmt.Errorf(where+" TemplateProcessing: single[%d]: special token %q is not in special_tokens", i, item.SpecialToken.ID)
					}
					for _, id := range st.IDs {
						if id < 0 || id >= hfMaxID {
							return fmt.Errorf(where+" TemplateProcessing: special token %q: id %d out of range", item.SpecialToken.ID, id)
						}
						if seq == 0 {
							prefix = append(prefix, id)
						} else {
							suffix = append(suffix, id)
						}
					}
				default:
					return fmt.Errorf(where+" TemplateProcessing: single[%d] is neither SpecialToken nor Sequence", i)
				}
			}
			if seq != 1 {
				return fmt.Errorf(where+" TemplateProcessing: single holds sequence A %d times, want once", seq)
			}
		case "BertProcessing", "RobertaProcessing":
			var cls, sep []any
			if json.Unmarshal(c.Cls, &cls) != nil || json.Unmarshal(c.Sep, &sep) != nil || len(cls) != 2 || len(sep) != 2 {
				return fmt.Errorf(where+" %s: cls and sep must be [token, id]", c.Type)
			}
			for _, p := range [][]any{cls, sep} {
				f, ok := p[1].(float64)
				if !ok || f < 0 || f >= hfMaxID || f != float64(int(f)) {
					return fmt.Errorf(where+" %s: id %v, want 0..%d", c.Type, p[1], hfMaxID-1)
				}
			}
			prefix, suffix = []int{int(cls[1].(float64))}, []int{int(sep[1].(float64))}
		case "Sequence":
			for _, p := range c.Processors {
				if p.Type == "ByteLevel" {
					continue
				}
				if err := walk(p); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf(where+" %q is not supported (want TemplateProcessing, BertProcessing, RobertaProcessing, a Sequence of them, or null)", c.Type)
		}
		return nil
	}
	if err := walk(c); err != nil {
		return nil, nil, err
	}
	return prefix, suffix, nil
}

// Normalizers.

type hfNormKind uint8

const (
	normReplace hfNormKind = iota
	normReplaceRegex
	normPrepend
	normNFC
	normNFKC
	normNFD
	normNFKD
	normLower
	normStrip
	normPrecompiled
)

type hfNormStep struct {
	kind        hfNormKind
	from, to    string
	re          *hfRegex
	left, right bool
	charsmap    *hfCharsmap
}

// hfNormalizer is a normalizer as a list of steps (a Sequence, flattened).
type hfNormalizer struct{ steps []hfNormStep }

func parseHFNormalizer(raw json.RawMessage) (hfNormalizer, error) {
	const where = "text: tokenizer.json: normalizer"
	var n hfNormalizer
	if isNull(raw) {
		return n, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return n, fmt.Errorf(where+": %w", err)
	}
	var walk func(c hfComponent, depth int) error
	walk = func(c hfComponent, depth int) error {
		if depth > 32 {
			return errors.New(where + ": Sequence nested too deep")
		}
		switch c.Type {
		case "Sequence":
			for _, s := range c.Normalizers {
				if err := walk(s, depth+1); err != nil {
					return err
				}
			}
		case "Replace":
			if c.Pattern == nil || c.Content == nil || (c.Pattern.String == nil) == (c.Pattern.Regex == nil) {
				return errors.New(where + " Replace: want a pattern {\"String\": ...} or {\"Regex\": ...} and a content")
			}
			if c.Pattern.String != nil {
				if *c.Pattern.String == "" {
					return errors.New(where + " Replace: empty String pattern")
				}
				n.steps = append(n.steps, hfNormStep{kind: normReplace, from: *c.Pattern.String, to: *c.Content})
				break
			}
			re, err := compileHFRegex(*c.Pattern.Regex)
			if err != nil {
				return fmt.Errorf(where+" Replace: Regex %q: %w", *c.Pattern.Regex, err)
			}
			n.steps = append(n.steps, hfNormStep{kind: normReplaceRegex, re: re, to: *c.Content})
		case "Prepend":
			if c.Prepend == nil {
				return errors.New(where + " Prepend: want a \"prepend\" string")
			}
			n.steps = append(n.steps, hfNormStep{kind: normPrepend, to: *c.Prepend})
		case "NFC":
			n.steps = append(n.steps, hfNormStep{kind: normNFC})
		case "NFKC":
			n.steps = append(n.steps, hfNormStep{kind: normNFKC})
		case "NFD":
			n.steps = append(n.steps, hfNormStep{kind: normNFD})
		case "NFKD":
			n.steps = append(n.steps, hfNormStep{kind: normNFKD})
		case "Lowercase":
			n.steps = append(n.steps, hfNormStep{kind: normLower})
		case "Strip":
			n.steps = append(n.steps, hfNormStep{kind: normStrip, left: c.StripLeft == nil || *c.StripLeft, right: c.StripRight == nil || *c.StripRight})
		case "Precompiled":
			if c.Charsmap == nil {
				return errors.New(where + " Precompiled: want a \"precompiled_charsmap\" string (base64)")
			}
			cm, err := parseHFCharsmap(*c.Charsmap)
			if err != nil {
				return fmt.Errorf(where+" Precompiled: %w", err)
			}
			n.steps = append(n.steps, hfNormStep{kind: normPrecompiled, charsmap: cm})
		default:
			return fmt.Errorf(where+" %q is not supported (want Sequence, Replace, Prepend, NFC, NFKC, NFD, NFKD, Lowercase, Strip, Precompiled, or null)", c.Type)
		}
		return nil
	}
	return n, walk(c, 0)
}

// Pre-tokenizers.

type hfPreKind uint8

const (
	preMetaspace hfPreKind = iota
	preSplit
	preWhitespaceSplit
)

// Split behaviours, as the library names them.
const (
	splitRemoved = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

// Metaspace prepend schemes.
const (
	prependAlways = iota
	prependFirst
	prependNever
)

type hfPreStep struct {
	kind hfPreKind
	// Metaspace: the replacement for ' ', when it is prepended, whether the
	// text is split before each replacement.
	repl    string
	prepend int
	split   bool
	// Split: a literal or a regular expression, the behaviour, inverted.
	lit      string
	re       *regexp.Regexp
	behavior int
	invert   bool
}

// hfPreTokenizer is a pre-tokenizer as a list of steps (a Sequence,
// flattened); no steps is the null pre-tokenizer, the whole text one word.
type hfPreTokenizer struct{ steps []hfPreStep }

func parseHFPreTokenizer(raw json.RawMessage) (hfPreTokenizer, error) {
	const where = "text: tokenizer.json: pre_tokenizer"
	var p hfPreTokenizer
	if isNull(raw) {
		return p, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return p, fmt.Errorf(where+": %w", err)
	}
	var walk func(c hfComponent, depth int) error
	walk = func(c hfComponent, depth int) error {
		if depth > 32 {
			return errors.New(where + ": Sequence nested too deep")
		}
		switch c.Type {
		case "Sequence":
			for _, s := range c.Pretokenizers {
				if err := walk(s, depth+1); err != nil {
					return err
				}
			}
		case "Metaspace":
			s := hfPreStep{kind: preMetaspace, repl: wordMark, prepend: prependAlways, split: true}
			if c.Replacement != nil {
				if utf8.RuneCountInString(*c.Replacement) != 1 {
					return fmt.Errorf(where+" Metaspace: replacement %q, want one character", *c.Replacement)
				}
				s.repl = *c.Replacement
			}
			switch {
			case c.PrependScheme != nil:
				switch *c.PrependScheme {
				case "always":
					s.prepend = prependAlways
				case "first":
					s.prepend = prependFirst
				case "never":
					s.prepend = prependNever
				default:
					return fmt.Errorf(where+" Metaspace: prepend_scheme %q, want \"always\", \"first\" or \"never\"", *c.PrependScheme)
				}
			case c.AddPrefixSpace != nil && !*c.AddPrefixSpace:
				s.prepend = prependNever
			}
			if c.Split != nil {
				s.split = *c.Split
			}
			p.steps = append(p.steps, s)
		case "WhitespaceSplit":
			p.steps = append(p.steps, hfPreStep{kind: preWhitespaceSplit})
		case "Split":
			s := hfPreStep{kind: preSplit, invert: c.Invert}
			switch c.Behavior {
			case "Removed":
				s.behavior = splitRemoved
			case "Isolated":
				s.behavior = splitIsolated
			case "MergedWithPrevious":
				s.behavior = splitMergedWithPrevious
			case "MergedWithNext":
				s.behavior = splitMergedWithNext
			case "Contiguous":
				s.behavior = splitContiguous
			default:
				return fmt.Errorf(where+" Split: behavior %q, want Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous", c.Behavior)
			}
			switch {
			case c.Pattern != nil && c.Pattern.String != nil && c.Pattern.Regex == nil:
				if *c.Pattern.String == "" {
					return errors.New(where + " Split: empty String pattern")
				}
				s.lit = *c.Pattern.String
			case c.Pattern != nil && c.Pattern.Regex != nil && c.Pattern.String == nil:
				re, err := compileHFRegex(*c.Pattern.Regex)
				if err != nil {
					return fmt.Errorf(where+" Split: Regex %q: %w", *c.Pattern.Regex, err)
				}
				s.re = re.re
			default:
				return errors.New(where + " Split: want a pattern {\"String\": ...} or {\"Regex\": ...}")
			}
			p.steps = append(p.steps, s)
		default:
			return fmt.Errorf(where+" %q is not supported here (want Metaspace, Split, WhitespaceSplit, a Sequence of them, or null)", c.Type)
		}
		return nil
	}
	return p, walk(c, 0)
}
