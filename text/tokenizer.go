package text

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Options change how a Tokenizer encodes. The zero value is the Hugging Face
// fast tokenizer's behaviour with the model's context length.
type Options struct {
	// ContextLength is the length EncodePadded pads and truncates to when it
	// is given 0: BOS, at most ContextLength-2 content tokens, EOS, padding.
	// 0 means the model's model_max_length from tokenizer_config.json, or 77.
	ContextLength int
	// OpenAIClean cleans text as openai's simple_tokenizer.py (and
	// OpenCLIP's tokenizer) does instead of the tokenizer.json normalizer:
	// ftfy's fix_text (ftfy 6.3.1, default configuration: mojibake repaired,
	// HTML entities, curly quotes, Latin ligatures, full-width characters,
	// line breaks, terminal escapes and control characters fixed, then NFC),
	// HTML unescape (twice), whitespace runs to one space, Python's lower()
	// (with final sigma). Special tokens typed in the text are then
	// recognised only where openai's pattern finds them (at the start of a
	// match, any case).
	OpenAIClean bool
	// ErrorOnOverflow makes EncodePadded and EncodeBatch fail with a
	// *TooLongError (errors.Is ErrTooLong) instead of truncating.
	ErrorOnOverflow bool
}

// DefaultContextLength is CLIP's text context length, used when the model
// files give none.
const DefaultContextLength = 77

// ErrTooLong is matched (errors.Is) by the *TooLongError a prompt longer than
// the context length gives when Options.ErrorOnOverflow is set.
var ErrTooLong = errors.New("text: prompt longer than the context length")

// TooLongError says how many tokens a prompt has (BOS and EOS included) and
// the context length it had to fit.
type TooLongError struct {
	Tokens, Limit int
	// Around is how many of the tokens are put around the prompt (CLIP: BOS
	// and EOS, 2; SigLIP: </s>, 1).
	Around int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("text: prompt is %d tokens with the %d around it, more than the context length %d (at most %d content tokens)",
		e.Tokens, e.Around, e.Limit, e.Limit-e.Around)
}

// Is makes errors.Is(err, ErrTooLong) true.
func (e *TooLongError) Is(target error) bool { return target == ErrTooLong }

// addedToken is a special token found in the text before BPE; normalized ones
// are looked for after normalization, the others in the raw text.
type addedToken struct {
	content    string
	id         int
	normalized bool
}

// Tokenizer turns prompts into the ids a text tower takes: CLIP's byte-level
// BPE, or a SentencePiece or tokenizer.json model (SigLIP, Gemma) behind the
// same methods. It is safe for concurrent use; copies made by WithOptions
// share its tables and caches.
type Tokenizer struct {
	model *bpe // CLIP's BPE; nil when pieces is set
	// pieces is the model of a non-CLIP tokenizer (nil for CLIP).
	pieces pieceEncoder
	// prefix and suffixIDs are the ids around the content: CLIP's BOS and
	// EOS, SigLIP's </s> after it.
	prefix, suffixIDs []int
	// bytePieces says that "<0xNN>" pieces spell the byte NN.
	bytePieces bool
	tokens     []string // by id; "" for ids the files do not define
	vocab      map[string]int
	suffix     string // end-of-word suffix, "</w>"
	bos, eos   int
	pad        int
	special    map[int]bool
	rawAdded   []addedToken
	normAdded  []addedToken
	nfc        bool
	lower      bool
	// modelContext is model_max_length from the files, 0 when absent.
	modelContext int
	opts         Options
	context      int
}

// WithOptions returns a tokenizer that encodes with o and shares t's
// vocabulary and cache.
func (t *Tokenizer) WithOptions(o Options) (*Tokenizer, error) {
	if o.ContextLength < 0 || o.ContextLength == 1 {
		return nil, fmt.Errorf("text: context length %d: want 0 (the model's) or at least 2", o.ContextLength)
	}
	c := *t
	c.opts = o
	c.context = o.ContextLength
	if c.context == 0 {
		c.context = t.modelContext
	}
	if c.context == 0 {
		c.context = DefaultContextLength
	}
	return &c, nil
}

// ForModel returns t with its context length cut to maxPositions, the
// position table of the text model it feeds, when that is smaller
// (maxPositions < 2: t itself). Tokenizer files often give a larger
// model_max_length than the model takes (some exports say 10^30), and ids
// past the position table are an error in the graph.
func (t *Tokenizer) ForModel(maxPositions int) *Tokenizer {
	if maxPositions < 2 || t.context <= maxPositions {
		return t
	}
	c := *t
	c.context = maxPositions
	c.opts.ContextLength = maxPositions
	return &c
}

// Options returns the options t encodes with.
func (t *Tokenizer) Options() Options { return t.opts }

// ContextLength returns the length EncodePadded pads to by default.
func (t *Tokenizer) ContextLength() int { return t.context }

// BOS returns the id of the start-of-text token (CLIP's <|startoftext|>),
// -1 for a model that has none (SigLIP).
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the id of the end-of-text token (CLIP's <|endoftext|>,
// SigLIP's </s>), -1 for a model that has none.
func (t *Tokenizer) EOS() int { return t.eos }

// Pad returns the id EncodePadded pads with (the pad token of
// tokenizer_config.json; EOS when it names none).
func (t *Tokenizer) Pad() int { return t.pad }

// VocabSize returns the number of token ids (the largest id plus one).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// ID returns the id of a token as the vocabulary spells it ("cat</w>").
func (t *Tokenizer) ID(token string) (int, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// Encode returns the ids of s: BOS, the tokens of s, EOS; no padding and no
// truncation. Invalid UTF-8 in s is first replaced, each maximal invalid
// subpart by one U+FFFD, as Python's decode(errors="replace") does; the
// result is what the Hugging Face tokenizer gives for that decoded string.
func (t *Tokenizer) Encode(s string) ([]int, error) {
	ids := make([]int, 0, len(s)/4+8)
	ids = append(ids, t.prefix...)
	var buf []byte
	ids = t.appendContent(ids, s, &buf)
	return append(ids, t.suffixIDs...), nil
}

// EncodePadded returns the ids of s as the text model takes them, n of them
// (n <= 0: the context length): BOS, the tokens, EOS, then padding; and the
// attention mask (1 for BOS through EOS, 0 for padding). A prompt longer than
// n keeps its first n-2 tokens and ends with EOS, unless
// Options.ErrorOnOverflow is set: then the error is a *TooLongError.
func (t *Tokenizer) EncodePadded(s string, n int) (ids, mask []int64, err error) {
	if n <= 0 {
		n = t.context
	}
	ids = make([]int64, n)
	mask = make([]int64, n)
	if err := t.encodeInto(ids, mask, s); err != nil {
		return nil, nil, err
	}
	return ids, mask, nil
}

// Fit turns full, the ids Encode returned, into the n ids the text model
// takes (n <= 0: the context length) as EncodePadded does, and says whether
// it cut full.
func (t *Tokenizer) Fit(full []int, n int) (ids, mask []int64, truncated bool, err error) {
	if n <= 0 {
		n = t.context
	}
	if err := t.checkLength(n); err != nil {
		return nil, nil, false, err
	}
	ids, mask = make([]int64, n), make([]int64, n)
	if truncated, err = t.fitInto(ids, mask, full); err != nil {
		return nil, nil, false, err
	}
	return ids, mask, truncated, nil
}

// checkLength checks that n positions hold the prefix and the suffix.
func (t *Tokenizer) checkLength(n int) error {
	if min := max(1, len(t.prefix)+len(t.suffixIDs)); n < min {
		return fmt.Errorf("text: length %d: want at least %d (the tokens around the prompt)", n, min)
	}
	return nil
}

// fitInto writes full (prefix, tokens, suffix) into ids and mask (long
// enough for the prefix and the suffix): padded, or cut to its first
// len(ids)-len(suffix) ids and the suffix (an error with
// Options.ErrorOnOverflow); it reports whether it cut.
func (t *Tokenizer) fitInto(ids, mask []int64, full []int) (truncated bool, err error) {
	n := len(ids)
	if len(full) > n {
		if t.opts.ErrorOnOverflow {
			return false, &TooLongError{Tokens: len(full), Limit: n, Around: len(t.prefix) + len(t.suffixIDs)}
		}
		truncated = true
	}
	mask = mask[:n]
	if truncated {
		cut := n - len(t.suffixIDs)
		for i, id := range full[:cut] {
			ids[i] = int64(id)
		}
		for i, id := range t.suffixIDs {
			ids[cut+i] = int64(id)
		}
		for i := range mask {
			mask[i] = 1
		}
		return true, nil
	}
	for i, id := range full {
		ids[i], mask[i] = int64(id), 1
	}
	pad := int64(t.pad)
	for i := len(full); i < n; i++ {
		ids[i], mask[i] = pad, 0
	}
	return false, nil
}

// EncodeBatch encodes texts as EncodePadded does into ids and mask of shape
// [len(texts), n] (row-major), n <= 0 meaning the context length.
func (t *Tokenizer) EncodeBatch(texts []string, n int) (ids, mask []int64, err error) {
	if n <= 0 {
		n = t.context
	}
	ids = make([]int64, len(texts)*n)
	mask = make([]int64, len(texts)*n)
	for i, s := range texts {
		if err := t.encodeInto(ids[i*n:(i+1)*n], mask[i*n:(i+1)*n], s); err != nil {
			return nil, nil, fmt.Errorf("text: prompt %d: %w", i, err)
		}
	}
	return ids, mask, nil
}

func (t *Tokenizer) encodeInto(ids, mask []int64, s string) error {
	if err := t.checkLength(len(ids)); err != nil {
		return err
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	full := append(sc.ids[:0], t.prefix...)
	full = t.appendContent(full, s, &sc.buf)
	full = append(full, t.suffixIDs...)
	sc.ids = full
	_, err := t.fitInto(ids, mask, full)
	return err
}

// scratch is reusable memory for encodeInto.
type scratch struct {
	ids []int
	buf []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// appendContent appends the ids of s without BOS and EOS; *bufp is scratch
// memory for the normalized text.
func (t *Tokenizer) appendContent(dst []int, s string, bufp *[]byte) []int {
	s = sanitizeUTF8(s)
	if t.pieces != nil {
		return t.pieces.appendIDs(dst, s)
	}
	if t.opts.OpenAIClean {
		return t.split(dst, cleanOpenAI(s), true)
	}
	buf := *bufp
	defer func() { *bufp = buf }()
	for s != "" {
		at, tok := findAdded(s, t.rawAdded)
		piece := s
		if at >= 0 {
			piece = s[:at]
		}
		if piece != "" {
			buf = appendNormalizedHF(buf[:0], piece, t.nfc, t.lower)
			if len(buf) > 0 {
				// The string lives only while buf is not written: the BPE
				// cache copies the keys it keeps.
				dst = t.splitNormalized(dst, unsafe.String(&buf[0], len(buf)))
			}
		}
		if at < 0 {
			break
		}
		dst = append(dst, tok.id)
		s = s[at+len(tok.content):]
	}
	return dst
}

// splitNormalized finds the normalized added tokens in s, then splits and
// encodes the text between them.
func (t *Tokenizer) splitNormalized(dst []int, s string) []int {
	for s != "" {
		at, tok := findAdded(s, t.normAdded)
		if at < 0 {
			return t.split(dst, s, false)
		}
		dst = t.split(dst, s[:at], false)
		dst = append(dst, tok.id)
		s = s[at+len(tok.content):]
	}
	return dst
}

// findAdded returns the leftmost (then longest) added token in s and its
// byte offset, or -1.
func findAdded(s string, added []addedToken) (int, addedToken) {
	best, at := addedToken{}, -1
	for _, a := range added {
		i := strings.Index(s, a.content)
		if i >= 0 && (at < 0 || i < at || (i == at && len(a.content) > len(best.content))) {
			best, at = a, i
		}
	}
	return at, best
}

// split runs CLIP's pre-tokenizer pattern over normalized text,
//
//	's|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
//
// keeping the matches and dropping the whitespace between them, and appends
// the BPE ids of each match. Go's regexp has no leftmost-first alternation
// with these semantics at this speed, so it is a hand-written scanner. With
// py, whitespace is Python's and openai's <|startoftext|> and <|endoftext|>
// alternatives come first (case-insensitive, as openai compiles its pattern).
func (t *Tokenizer) split(dst []int, s string, py bool) []int {
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		cls := classOf(r, py)
		if cls == clsSpace {
			i += size
			continue
		}
		if py && r == '<' {
			if n, id, ok := t.openAISpecial(s[i:]); ok {
				if id >= 0 {
					dst = append(dst, id)
				} else { // matched only under case folding ("ſ"): BPE'd as text
					dst = t.model.word(dst, s[i:i+n])
				}
				i += n
				continue
			}
		}
		if r == '\'' {
			if n := contraction(s[i+1:], py); n > 0 {
				dst = t.model.word(dst, s[i:i+1+n])
				i += 1 + n
				continue
			}
		}
		if cls == clsNumber {
			dst = t.model.word(dst, s[i:i+size])
			i += size
			continue
		}
		j := i + size
		for j < len(s) {
			r, n := rune(s[j]), 1
			if r >= utf8.RuneSelf {
				r, n = utf8.DecodeRuneInString(s[j:])
			}
			c := classOf(r, py)
			if (cls == clsLetter) != (c == clsLetter) || c == clsSpace || c == clsNumber {
				break
			}
			j += n
		}
		dst = t.model.word(dst, s[i:j])
		i = j
	}
	return dst
}

// openAISpecial matches openai's first two alternatives, <|startoftext|> and
// <|endoftext|> (case-insensitive), at the start of s. It returns the match
// length and the token's id, or -1 when the match is not spelled exactly:
// openai's bpe() knows the specials only as they are spelled.
func (t *Tokenizer) openAISpecial(s string) (n, id int, ok bool) {
	for _, sp := range [...]struct {
		text string
		id   int
	}{{startOfText, t.bos}, {endOfText, t.eos}} {
		if n, ok := hasPrefixFold(s, sp.text); ok {
			if s[:n] == sp.text {
				return n, sp.id, true
			}
			return n, -1, true
		}
	}
	return 0, 0, false
}

// contraction returns the length of the contraction suffix (s, t, re, ve, m,
// ll, d) that s starts with, or 0. With py, the long s (U+017F) counts as s, as
// under openai's re.IGNORECASE.
func contraction(s string, py bool) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && s[1] == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && s[1] == 'l' {
			return 2
		}
	}
	if py && strings.HasPrefix(s, "ſ") {
		return len("ſ")
	}
	return 0
}

// hasPrefixFold reports whether s starts with prefix under simple case
// folding, and how many bytes of s the match takes.
func hasPrefixFold(s, prefix string) (int, bool) {
	i := 0
	for _, p := range prefix {
		if i >= len(s) {
			return 0, false
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != p && !strings.EqualFold(string(r), string(p)) {
			return 0, false
		}
		i += n
	}
	return i, true
}

// Tokens returns the vocabulary spelling of each id: byte-level runes, with
// "</w>" ending each word ("a</w>", "photo</w>", "<|startoftext|>").
func (t *Tokenizer) Tokens(ids []int) ([]string, error) {
	out := make([]string, len(ids))
	for i, id := range ids {
		tok, err := t.token(id)
		if err != nil {
			return nil, err
		}
		out[i] = tok
	}
	return out, nil
}

func (t *Tokenizer) token(id int) (string, error) {
	if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" {
		return "", fmt.Errorf("text: token id %d not in the vocabulary (size %d)", id, len(t.tokens))
	}
	return t.tokens[id], nil
}

// Word is a run of tokens that forms one word: the tokens [Start, End) of the
// ids it was made from. A word ends at a token ending in "</w>"; each special
// token (BOS, EOS, padding) is a word by itself.
type Word struct {
	// Text is the word as text: its tokens' bytes, without "</w>"; a special
	// token as it is spelled.
	Text    string `json:"text"`
	Start   int    `json:"start"`
	End     int    `json:"end"`
	Special bool   `json:"special,omitempty"`
}

// Words groups ids into words, for labelling per-word outputs such as
// attention heatmaps. Tokens after the last word end (a truncated word) form
// a last word.
func (t *Tokenizer) Words(ids []int) ([]Word, error) {
	if t.pieces != nil {
		return t.pieceWords(ids)
	}
	var words []Word
	var buf []byte
	start := 0
	flush := func(end int) {
		if end > start {
			words = append(words, Word{Text: strings.ToValidUTF8(string(buf), "\uFFFD"), Start: start, End: end})
		}
		buf = buf[:0]
		start = end
	}
	for i, id := range ids {
		tok, err := t.token(id)
		if err != nil {
			return nil, err
		}
		if t.special[id] {
			flush(i)
			words = append(words, Word{Text: tok, Start: i, End: i + 1, Special: true})
			start = i + 1
			continue
		}
		end := t.suffix != "" && strings.HasSuffix(tok, t.suffix)
		if end {
			tok = tok[:len(tok)-len(t.suffix)]
		}
		buf = appendTokenBytes(buf, tok)
		if end {
			flush(i + 1)
		}
	}
	flush(len(ids))
	return words, nil
}

// appendTokenBytes appends the bytes a byte-level token spells; runes that
// are not byte-level symbols are kept as UTF-8.
func appendTokenBytes(dst []byte, tok string) []byte {
	for _, r := range tok {
		if r >= 0 && int(r) < len(runeBytes) && runeBytes[r] >= 0 {
			dst = append(dst, byte(runeBytes[r]))
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// Unknown returns the words of ids, grouped as Words groups them, that the
// vocabulary does not know: words holding a letter or a pictograph (an
// emoji, unicode's other symbols) that BPE could only spell out in pieces
// of one character or less (single letters, or single bytes of
// a character). The text encoder then sees a run of letters rather than the
// word, and what it makes of them, its attention maps among it, means little.
// Special tokens, words of one token, and words with any piece longer than
// one character are not reported; ids are checked as Words checks them.
//
// With a vocabulary that has "a</w>" and every single letter but no "dog":
//
//	ids, _ := tok.Encode("a dog")     // <|startoftext|> a</w> d o g</w> <|endoftext|>
//	unknown, _ := tok.Unknown(ids)    // [{Text: "dog", Start: 2, End: 5}]
//	for _, w := range unknown {
//		pieces, _ := tok.Tokens(ids[w.Start:w.End]) // ["d" "o" "g</w>"]
//		...
//	}
func (t *Tokenizer) Unknown(ids []int) ([]Word, error) {
	words, err := t.Words(ids)
	if err != nil {
		return nil, err
	}
	var out []Word
	for _, w := range words {
		if !w.Special && w.End-w.Start > 1 && namesSomething(w.Text) && t.spelledOut(ids[w.Start:w.End]) {
			out = append(out, w)
		}
	}
	return out, nil
}

// spelledOut reports whether every token of ids (known ids) spells at most
// one character.
func (t *Tokenizer) spelledOut(ids []int) bool {
	var buf []byte
	for _, id := range ids {
		if t.pieces != nil {
			buf = t.appendPieceBytes(buf[:0], strings.TrimPrefix(t.tokens[id], wordMark))
		} else {
			buf = appendTokenBytes(buf[:0], strings.TrimSuffix(t.tokens[id], t.suffix))
		}
		if !oneCharOrLess(buf) {
			return false
		}
	}
	return true
}

// oneCharOrLess reports whether b is at most one character: one byte, one
// valid UTF-8 character, or a part of one (fewer bytes than UTF-8's longest).
func oneCharOrLess(b []byte) bool {
	switch {
	case len(b) <= 1:
		return true
	case utf8.Valid(b):
		return utf8.RuneCount(b) == 1
	}
	return len(b) < utf8.UTFMax
}

// namesSomething reports whether s holds a letter or a pictograph (an
// emoji: unicode's other symbols), not only punctuation and digits.
func namesSomething(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.Is(unicode.So, r) {
			return true
		}
	}
	return false
}
