package text

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// sentencePieceFiles are the names a SentencePiece model has in a model
// directory: SigLIP's and T5's spiece.model, Llama's tokenizer.model.
var sentencePieceFiles = []string{"spiece.model", "tokenizer.model"}

// sentencePieceFile returns the SentencePiece model file of fsys, "" when
// it has none.
func sentencePieceFile(fsys fs.FS) string {
	for _, name := range sentencePieceFiles {
		if st, err := fs.Stat(fsys, name); err == nil && !st.IsDir() {
			return name
		}
	}
	return ""
}

// spConfig is what the SentencePiece path reads from tokenizer_config.json
// beyond tokenizerConfig.
type spConfig struct {
	class            string
	addBOS, addEOS   *bool
	lower            *bool
	hasConfig, isSig bool
}

func readSPConfig(fsys fs.FS) (spConfig, error) {
	var c spConfig
	b, err := fs.ReadFile(fsys, "tokenizer_config.json")
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("text: tokenizer_config.json: %w", err)
	}
	var m struct {
		Class  string `json:"tokenizer_class"`
		AddBOS *bool  `json:"add_bos_token"`
		AddEOS *bool  `json:"add_eos_token"`
		Lower  *bool  `json:"do_lower_case"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return c, fmt.Errorf("text: tokenizer_config.json: %w", err)
	}
	c = spConfig{class: m.Class, addBOS: m.AddBOS, addEOS: m.AddEOS, lower: m.Lower, hasConfig: true}
	c.isSig = strings.HasPrefix(m.Class, "Siglip")
	return c, nil
}

// loadSentencePiece makes the tokenizer of a model directory whose model is
// the SentencePiece file name: SigLIP's (SiglipTokenizer) when
// tokenizer_config.json names it or config.json says model_type "siglip",
// else plain SentencePiece with the BOS and EOS tokenizer_config.json asks
// for (add_bos_token, add_eos_token).
func loadSentencePiece(fsys fs.FS, name string, cfg tokenizerConfig) (*Tokenizer, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("text: %s: %w", name, err)
	}
	sc, err := readSPConfig(fsys)
	if err != nil {
		return nil, err
	}
	if sc.class == "" {
		sc.isSig = configSaysSiglip(fsys)
	}
	tips := sc.class == "Tipsv2Tokenizer" || (sc.class == "" && configModelType(fsys) == "tipsv2")
	p, err := parseSPProto(b)
	if err != nil {
		return nil, fmt.Errorf("text: %s: not a SentencePiece model: %w", name, err)
	}
	if sc.isSig {
		p.dummyPrefix = false // SiglipTokenizer loads the model so, and adds "▁" itself
	}
	m, err := newSPModel(p)
	if err != nil {
		return nil, fmt.Errorf("text: %s: %w", name, err)
	}
	tokens := make([]string, len(p.pieces))
	var special []int
	for i, pc := range p.pieces {
		tokens[i] = pc.text
		if pc.typ == spControl {
			special = append(special, i)
		}
	}
	lookup := func(what, tok string, id int) (int, error) {
		if tok == "" {
			if id >= 0 && id < len(tokens) {
				return id, nil
			}
			return -1, nil
		}
		if i, ok := m.reserved[tok]; ok {
			return int(i), nil
		}
		if i := m.trie.lookup(tok); i >= 0 {
			return int(i), nil
		}
		return -1, fmt.Errorf("text: %s: %s token %q (tokenizer_config.json) is not a piece of the model", name, what, tok)
	}
	spec := pieceSpec{tokens: tokens, special: special, bytePieces: p.byteFallback, context: cfg.maxLength}
	if sc.isSig {
		eos, err := lookup("EOS", firstNonEmpty(cfg.eos, "</s>"), -1)
		if err != nil {
			return nil, err
		}
		unk, err := lookup("unknown", firstNonEmpty(cfg.unk, "<unk>"), -1)
		if err != nil {
			return nil, err
		}
		pad, err := lookup("pad", firstNonEmpty(cfg.pad, "</s>"), -1)
		if err != nil {
			return nil, err
		}
		if eos < 0 || unk < 0 || pad < 0 {
			return nil, fmt.Errorf("text: %s: SigLIP needs </s> and <unk> pieces", name)
		}
		lower := sc.lower == nil || *sc.lower
		spec.enc = newSiglipEncoder(m, tokens, eos, unk, pad, lower)
		spec.bos, spec.eos, spec.pad = -1, eos, pad
		spec.suffix = []int{eos}
		spec.special = append(spec.special, unk)
		if spec.context == 0 {
			spec.context = 64
		}
	} else if tips {
		// Tipsv2Tokenizer: the text lower-cased as Python's str.lower does
		// (do_lower_case, true unless tokenizer_config.json says false),
		// then SentencePiece; no BOS or EOS; padding with the piece of
		// max(pad_id, 0), which must be id 0.
		spec.enc = m
		if sc.lower == nil || *sc.lower {
			spec.enc = lowerEncoder{m}
		}
		spec.bos, spec.eos = -1, -1
		pad, err := lookup("pad", cfg.pad, max(p.padID, 0))
		if err != nil {
			return nil, err
		}
		if pad != 0 {
			return nil, fmt.Errorf("text: %s: Tipsv2Tokenizer pads with id 0, and its pad token %q is id %d", name, cfg.pad, pad)
		}
		spec.pad = pad
		if unk := int(m.unk); unk >= 0 {
			spec.special = append(spec.special, unk)
		}
		if spec.context == 0 {
			spec.context = 64
		}
	} else {
		spec.enc = m
		if spec.bos, err = lookup("BOS", cfg.bos, p.bosID); err != nil {
			return nil, err
		}
		if spec.eos, err = lookup("EOS", cfg.eos, p.eosID); err != nil {
			return nil, err
		}
		pad, err := lookup("pad", cfg.pad, p.padID)
		if err != nil {
			return nil, err
		}
		switch {
		case pad >= 0:
		case spec.eos >= 0:
			pad = spec.eos
		default:
			pad = int(m.unk)
		}
		spec.pad = pad
		// transformers' defaults: LlamaTokenizer adds <s>, T5Tokenizer </s>.
		addBOS := strings.HasPrefix(sc.class, "Llama")
		addEOS := strings.HasPrefix(sc.class, "T5")
		if sc.addBOS != nil {
			addBOS = *sc.addBOS
		}
		if sc.addEOS != nil {
			addEOS = *sc.addEOS
		}
		if addBOS && spec.bos >= 0 {
			spec.prefix = []int{spec.bos}
		}
		if addEOS && spec.eos >= 0 {
			spec.suffix = []int{spec.eos}
		}
	}
	t, err := newPieceTokenizer(spec)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, name)
	}
	return t, nil
}

// configSaysSiglip reports whether config.json has model_type "siglip".
func configSaysSiglip(fsys fs.FS) bool { return configModelType(fsys) == "siglip" }

// configModelType returns config.json's model_type ("" when the file is
// absent or does not parse).
func configModelType(fsys fs.FS) string {
	b, err := fs.ReadFile(fsys, "config.json")
	if err != nil {
		return ""
	}
	var c struct {
		ModelType string `json:"model_type"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.ModelType
}

// lowerEncoder is Tipsv2Tokenizer's encoding: the text lower-cased as
// Python's str.lower does, then plain SentencePiece.
type lowerEncoder struct{ m *spModel }

func (e lowerEncoder) appendIDs(dst []int, s string) []int { return e.m.encode(dst, lowerPython(s)) }

// appendIDs makes spModel a pieceEncoder: plain SentencePiece, as
// SentencePieceProcessor.encode gives ids.
func (m *spModel) appendIDs(dst []int, s string) []int { return m.encode(dst, s) }

// siglipEncoder is Hugging Face's SiglipTokenizer over its SentencePiece
// model (loaded without the dummy prefix): "▁" put in front of the text
// (and every "▁" in it made a space), each character lower-cased (do_lower_case),
// the text split at </s> and <unk> typed in it (which eat the whitespace
// around them), and each other part canonicalized (string.punctuation
// removed, whitespace runs made one space, stripped) and encoded behind
// "<unk>", whose pieces are then dropped.
type siglipEncoder struct {
	m                 *spModel
	eos, unk, pad     int
	specials          []siglipSpecial
	unkText           string
	unkLen            int // pieces of unkText alone
	wordMarkID        int // the id of the piece "▁", -1 when none
	lower             bool
	eosText, unkPiece string
	fast              *siglipFast // nil: every text takes appendGeneral
}

type siglipSpecial struct {
	text string
	id   int
}

func newSiglipEncoder(m *spModel, tokens []string, eos, unk, pad int, lower bool) *siglipEncoder {
	e := &siglipEncoder{m: m, eos: eos, unk: unk, pad: pad, lower: lower, unkText: tokens[unk], wordMarkID: -1}
	e.specials = []siglipSpecial{{tokens[eos], eos}, {tokens[unk], unk}}
	if pad != eos && pad != unk {
		e.specials = append(e.specials, siglipSpecial{tokens[pad], pad})
	}
	e.unkLen = len(m.encode(nil, e.unkText))
	if id := m.trie.lookup(wordMark); id >= 0 {
		e.wordMarkID = int(id)
	}
	e.fast = newSiglipFast(e)
	return e
}

func (e *siglipEncoder) appendIDs(dst []int, s string) []int {
	begin := len(dst)
	ok := false
	if e.fast != nil {
		dst, ok = e.fast.appendIDs(e, dst, s)
	}
	if !ok {
		dst = e.appendGeneral(dst, s)
	}
	// The EOS is added only when the ids do not already end with it.
	if len(dst) > begin && dst[len(dst)-1] == e.eos {
		dst = dst[:len(dst)-1]
	}
	return dst
}

// appendGeneral is appendIDs for any text, but for the EOS check.
func (e *siglipEncoder) appendGeneral(dst []int, s string) []int {
	sc := spScratchPool.Get().(*spScratch)
	defer spScratchPool.Put(sc)
	// "▁" + text with "▁" made a space, lower-cased one character at a time.
	t := append(sc.text[:0], wordMark...)
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			// A run of ASCII, copied, then lower-cased in place.
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf {
				j++
			}
			k := len(t)
			t = append(t, s[i:j]...)
			if e.lower {
				for ; k < len(t); k++ {
					if c := t[k]; 'A' <= c && c <= 'Z' {
						t[k] = c + 'a' - 'A'
					}
				}
			}
			i = j
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '\u2581':
			t = append(t, ' ')
		case r < utf8.RuneSelf:
			if 'A' <= r && r <= 'Z' && e.lower {
				r += 'a' - 'A'
			}
			t = append(t, byte(r))
		case !e.lower:
			t = utf8.AppendRune(t, r)
		case r == 'İ':
			t = append(t, "i\u0307"...)
		default:
			t = utf8.AppendRune(t, unicode.ToLower(r))
		}
	}
	sc.text = t
	text := unsafe.String(&t[0], len(t))
	begin := len(dst)
	first := true
	stripLeft := false // the previous part was a special token (rstrip)
	for text != "" {
		at, sp := e.findSpecial(text)
		part := text
		if at >= 0 {
			part = text[:at]
		}
		if stripLeft {
			part = strings.TrimLeftFunc(part, isSpacePy)
		}
		if at >= 0 {
			part = strings.TrimRightFunc(part, isSpacePy)
		}
		if part != "" {
			n := len(dst)
			dst = e.encodePart(dst, part, sc)
			if first && at >= 0 && len(dst)-n == 1 && dst[n] == e.wordMarkID && e.wordMarkID >= 0 && n == begin {
				dst = dst[:n] // a lone "▁" before a special token is dropped
			}
		}
		first = false
		if at < 0 {
			break
		}
		dst = append(dst, sp.id)
		text = text[at+len(sp.text):]
		stripLeft = true
	}
	return dst
}

// findSpecial returns the leftmost special token in s (the longest at the
// same place) and its offset, or -1.
func (e *siglipEncoder) findSpecial(s string) (int, siglipSpecial) {
	at, best := -1, siglipSpecial{}
	for _, sp := range e.specials {
		i := strings.Index(s, sp.text)
		if i >= 0 && (at < 0 || i < at || (i == at && len(sp.text) > len(best.text))) {
			at, best = i, sp
		}
	}
	return at, best
}

// encodePart is SiglipTokenizer._tokenize: canonicalize, encode behind
// the unknown token's text, drop that text's pieces.
func (e *siglipEncoder) encodePart(dst []int, part string, sc *spScratch) []int {
	b := append(sc.canon[:0], e.unkText...)
	pending := false
	wrote := false
	for i := 0; i < len(part); {
		if c := part[i]; c < utf8.RuneSelf {
			switch asciiCanon[c] {
			case canonDrop:
				i++
			case canonSpace:
				pending = wrote
				i++
			default:
				// A run of ASCII bytes that are kept.
				j := i + 1
				for j < len(part) && part[j] < utf8.RuneSelf && asciiCanon[part[j]] == canonKeep {
					j++
				}
				if pending {
					b = append(b, ' ')
					pending = false
				}
				b = append(b, part[i:j]...)
				wrote = true
				i = j
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(part[i:])
		i += n
		switch {
		case isSpacePy(r):
			pending = wrote
		default:
			if pending {
				b = append(b, ' ')
				pending = false
			}
			b = utf8.AppendRune(b, r)
			wrote = true
		}
	}
	sc.canon = b
	ids := e.m.encodeScratch(sc.ids[:0], unsafe.String(&b[0], len(b)), sc)
	sc.ids = ids
	if len(ids) >= e.unkLen {
		ids = ids[e.unkLen:]
	}
	return append(dst, ids...)
}

// What canonicalisation does with an ASCII byte: keep it, drop it (Python's
// string.punctuation), or take it as whitespace (Python's str.isspace).
const (
	canonKeep = iota
	canonDrop
	canonSpace
)

var asciiCanon = func() (t [utf8.RuneSelf]uint8) {
	for _, c := range []byte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") {
		t[c] = canonDrop
	}
	for c := range rune(utf8.RuneSelf) {
		if isSpacePy(c) {
			t[c] = canonSpace
		}
	}
	return t
}()
