package text

import (
	"errors"
	"fmt"
	"strings"
)

// pieceEncoder is the model of a tokenizer other than CLIP's byte-level BPE:
// a SentencePiece model (Unigram, or BPE with byte fallback) or a
// tokenizer.json BPE with byte fallback (Gemma). It normalizes the text as
// its files say (charsmap, canonicalisation, prepended "▁") and splits it
// into piece ids. Implementations are safe for concurrent use.
type pieceEncoder interface {
	// appendIDs appends to dst the ids of s, valid UTF-8, with no special
	// tokens around it (the Tokenizer adds its prefix and suffix).
	appendIDs(dst []int, s string) []int
}

// wordMark is the "▁" (U+2581) SentencePiece and Gemma spell a space with;
// a piece that starts with it starts a word.
const wordMark = "\u2581"

// pieceSpec is what the files of a non-CLIP tokenizer give newPieceTokenizer.
type pieceSpec struct {
	enc pieceEncoder
	// tokens are the pieces by id as the vocabulary spells them: "▁cat",
	// "<0xE2>" (a byte-fallback piece), "</s>"; "" for ids it does not define.
	tokens []string
	// vocab maps tokens to ids (ID); nil: each token's first id.
	vocab map[string]int
	// prefix and suffix are the ids put around the content (SigLIP: none and
	// </s>; Gemma: <bos> and none); truncation keeps both.
	prefix, suffix []int
	// pad is the id padding is done with.
	pad int
	// bos and eos are the model's start and end tokens, -1 when it has none.
	bos, eos int
	// special are the control and added-token ids: each is a word of its own.
	special []int
	// bytePieces says that "<0xNN>" pieces spell the byte NN.
	bytePieces bool
	// context is model_max_length from the files (0: none).
	context int
}

// newPieceTokenizer makes a Tokenizer over a non-CLIP model.
func newPieceTokenizer(s pieceSpec) (*Tokenizer, error) {
	if s.enc == nil {
		return nil, errors.New("text: tokenizer has no model")
	}
	vocab := s.vocab
	if vocab == nil {
		vocab = make(map[string]int, len(s.tokens))
		for id, tok := range s.tokens {
			if tok == "" {
				continue
			}
			if _, dup := vocab[tok]; !dup {
				vocab[tok] = id
			}
		}
	}
	check := func(what string, id int, none bool) error {
		if (none && id == -1) || (id >= 0 && id < len(s.tokens) && s.tokens[id] != "") {
			return nil
		}
		return fmt.Errorf("text: %s id %d is not in the vocabulary (size %d)", what, id, len(s.tokens))
	}
	if err := check("pad", s.pad, false); err != nil {
		return nil, err
	}
	if err := check("BOS", s.bos, true); err != nil {
		return nil, err
	}
	if err := check("EOS", s.eos, true); err != nil {
		return nil, err
	}
	t := &Tokenizer{
		pieces: s.enc, tokens: s.tokens, vocab: vocab, bos: s.bos, eos: s.eos, pad: s.pad,
		prefix: s.prefix, suffixIDs: s.suffix, bytePieces: s.bytePieces,
		modelContext: s.context, special: map[int]bool{},
	}
	for _, ids := range [][]int{s.prefix, s.suffix, s.special} {
		for _, id := range ids {
			if err := check("special token", id, false); err != nil {
				return nil, err
			}
			t.special[id] = true
		}
	}
	if s.bos >= 0 {
		t.special[s.bos] = true
	}
	if s.eos >= 0 {
		t.special[s.eos] = true
	}
	t.special[s.pad] = true
	return t.WithOptions(Options{})
}

// appendPieceBytes appends the text a piece spells: "▁" as a space, a
// byte-fallback piece "<0xNN>" as its byte.
func (t *Tokenizer) appendPieceBytes(dst []byte, tok string) []byte {
	if t.bytePieces {
		if b, ok := bytePiece(tok); ok {
			return append(dst, b)
		}
	}
	for tok != "" {
		i := strings.Index(tok, wordMark)
		if i < 0 {
			return append(dst, tok...)
		}
		dst = append(append(dst, tok[:i]...), ' ')
		tok = tok[i+len(wordMark):]
	}
	return dst
}

// bytePiece parses a byte-fallback piece, "<0x" two upper-case hex digits ">".
func bytePiece(tok string) (byte, bool) {
	if len(tok) != 6 || tok[:3] != "<0x" || tok[5] != '>' {
		return 0, false
	}
	hex := func(c byte) (byte, bool) {
		switch {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'A' && c <= 'F':
			return c - 'A' + 10, true
		}
		return 0, false
	}
	hi, ok1 := hex(tok[3])
	lo, ok2 := hex(tok[4])
	return hi<<4 | lo, ok1 && ok2
}

// pieceWords groups the ids of a piece tokenizer into words: a word starts
// at a piece that starts with "▁" (or after a special token); a special token
// is a word by itself. The word's text is its pieces' text without the
// leading space.
func (t *Tokenizer) pieceWords(ids []int) ([]Word, error) {
	var words []Word
	var buf []byte
	start := 0
	flush := func(end int) {
		if end > start {
			text := strings.TrimLeft(strings.ToValidUTF8(string(buf), "\uFFFD"), " ")
			words = append(words, Word{Text: text, Start: start, End: end})
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
		if strings.HasPrefix(tok, wordMark) {
			flush(i)
		}
		buf = t.appendPieceBytes(buf, tok)
	}
	flush(len(ids))
	return words, nil
}
