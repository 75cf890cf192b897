package text

import (
	"math"
	"unicode/utf8"
	"unsafe"
)

// siglipFast is siglipEncoder.appendIDs for the common prompt, ASCII text
// with no special token in it, over a Unigram model whose lattice is found
// word by word: canonicalisation, normalization and the search done in one
// pass over the words.
//
// For such text the general path's steps are simple. Lower-casing maps each
// byte alone. No special token is found (the text has no byte that starts
// one), so the whole text is one part. Canonicalisation gives "▁" (the mark
// appendIDs puts in front), a space when whitespace comes before the first
// kept byte, then the words (runs of bytes between whitespace, punctuation
// dropped; empty ones skipped) joined by one space. The model's normalizer
// leaves each kept byte as it is and makes each space the space mark, and
// it turns what comes before the words, the unknown token's text
// (encodePart's) and the "▁", into head followed by the mark whatever
// follows, and a space after them into a mark or nothing (newSiglipFast
// checks all this). The normalized text is thus head, then the mark and
// each word, and the search takes its words one at a time
// (spModel.appendWord).
type siglipFast struct {
	// class[c] is what the input byte c is: siglipKeep (kept, as keep[c]),
	// siglipDrop (punctuation), siglipSpace (whitespace), or 0: the text
	// takes the general path. keep[c] is 0 for bytes not kept (NUL takes
	// the general path).
	class [256]uint8
	keep  [256]byte
	mark  string
	// leadMark says that whitespace before the first kept byte is a word
	// of its own, the mark alone.
	leadMark bool
	// headIDs are the ids of head (the unknown token's text normalized,
	// before the mark), headWords the state of the search after it.
	headIDs   []int
	headWords spWords
}

const (
	siglipKeep = 1 + iota
	siglipDrop
	siglipSpace
)

// newSiglipFast returns the fast path of e, nil when its model or files
// need the general one.
func newSiglipFast(e *siglipEncoder) *siglipFast {
	m := e.m
	n := &m.norm
	if m.bpe || !m.unigramWords || m.wordPieces == nil || !n.plain[' '] {
		return nil
	}
	f := &siglipFast{mark: n.mark()}
	lower := func(c byte) byte {
		if e.lower && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	for c := range utf8.RuneSelf {
		switch l := lower(byte(c)); asciiCanon[l] {
		case canonDrop:
			f.class[c] = siglipDrop
		case canonSpace:
			f.class[c] = siglipSpace
		default:
			// Copied by the normalizer, an ASCII byte or the end after it.
			if n.fast[l] != 0 && l != 0 {
				f.class[c], f.keep[c] = siglipKeep, l
			}
		}
	}
	// A text holding a special token has a byte that lower-cases to its
	// first; special tokens with other bytes could start in the mark.
	for _, sp := range e.specials {
		for i := 0; i < len(sp.text); i++ {
			if sp.text[i] >= utf8.RuneSelf {
				return nil
			}
		}
		for c := range utf8.RuneSelf {
			if lower(byte(c)) == sp.text[0] {
				f.class[c], f.keep[c] = 0, 0
			}
		}
	}
	// No charsmap key or user-defined piece that starts within the unknown
	// token's text and the mark goes past them: the normalizer's output
	// for them, and its state after, do not depend on what follows.
	p := e.unkText + wordMark
	for i := range len(p) {
		if (n.charsmap != nil && n.charsmap.extends(p[i:])) || (n.matcher != nil && n.matcher.extends(p[i:])) {
			return nil
		}
	}
	keep := byte(0)
	for c := range utf8.RuneSelf {
		if f.keep[c] != 0 {
			keep = f.keep[c]
			break
		}
	}
	if keep == 0 {
		return nil
	}
	k := string(keep)
	got := string(n.normalize(nil, p+k))
	head := got[:len(got)-1]
	if got[len(got)-1] != keep || len(head) < len(f.mark) || head[len(head)-len(f.mark):] != f.mark {
		return nil
	}
	// A space after them is a mark of its own, or none (when the
	// normalizer makes "▁" a space, which takes the next).
	switch string(n.normalize(nil, p+" "+k)) {
	case head + f.mark + k:
		f.leadMark = true
	case head + k:
	default:
		return nil
	}
	head = head[:len(head)-len(f.mark)]
	if !utf8.ValidString(head) {
		return nil
	}
	// The search over head is the start of every text's: no piece crosses
	// the mark after it.
	if head != "" {
		sc := new(spScratch)
		spans := m.encodeUnigram(nil, head, sc)
		f.headIDs = m.appendSpanIDs(nil, head, spans)
		f.headWords.bound = math.Abs(float64(sc.best[len(head)].score))
		f.headWords.prevUnk = !m.byteFallback && spans[len(spans)-1].id == m.unk
	}
	return f
}

// appendIDs appends the ids of s as siglipEncoder.appendIDs does before its
// end (the EOS check), or reports false, appending nothing, when s needs
// the general path.
func (f *siglipFast) appendIDs(e *siglipEncoder, dst []int, s string) ([]int, bool) {
	begin := len(dst)
	var sc *spScratch
	dst, ok := f.appendWords(e.m, append(dst, f.headIDs...), s, &sc)
	if sc != nil {
		spScratchPool.Put(sc)
	}
	if !ok {
		return dst[:begin], false
	}
	// SiglipTokenizer drops the pieces of the unknown token's text.
	if len(dst)-begin >= e.unkLen {
		dst = append(dst[:begin], dst[begin+e.unkLen:]...)
	}
	return dst, true
}

// appendWords appends the ids of the words of s after head's, or reports
// false when s needs the general path (or has no word).
func (f *siglipFast) appendWords(m *spModel, dst []int, s string, sc **spScratch) ([]int, bool) {
	st := f.headWords
	var key [wordCacheMaxWord]byte
	mark := copy(key[:], f.mark)
	words, lead := 0, false
	for i := 0; i < len(s); {
		switch f.class[s[i]] {
		case siglipDrop:
			i++
		case siglipSpace:
			lead = lead || words == 0
			i++
		case siglipKeep:
			// A word: kept bytes and punctuation up to whitespace, a
			// byte for the general path, or the end.
			n := mark
			for ; i < len(s); i++ {
				l := f.keep[s[i]]
				if l == 0 {
					if f.class[s[i]] == siglipDrop {
						continue
					}
					break
				}
				if n >= len(key) {
					return dst, false
				}
				key[n] = l
				n++
			}
			ok := true
			if words == 0 && lead && f.leadMark {
				// Whitespace before the first word: a mark alone.
				dst, ok = m.appendWord(dst, f.mark, &st, sc)
			}
			if ok {
				// The cache copies the words it keeps.
				dst, ok = m.appendWord(dst, unsafe.String(&key[0], n), &st, sc)
			}
			if !ok {
				return dst, false
			}
			words++
		default:
			return dst, false
		}
	}
	return dst, words > 0
}
