package text

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// hfEncoder encodes text as the Hugging Face tokenizers library does with a
// tokenizer.json whose model is a BPE over characters: added tokens found in
// the raw text, the normalizer run on each piece between them, added tokens
// found in the normalized text, the pre-tokenizer, then BPE on each word.
type hfEncoder struct {
	raw, normed *hfAddedSet
	norm        hfNormalizer
	pre         hfPreTokenizer
	model       hfModel
	pool        sync.Pool
}

// hfScratch is the reusable memory of one encoding.
type hfScratch struct {
	a, b           []byte     // normalizer buffers
	splits, nsplit []hfSplit  // added-token splits of the raw and the normalized text
	words          []hfWord   // pre-tokenized words
	words2         []hfWord   // pre-tokenizer scratch
	syms           []hfSymbol // BPE symbols
	heap           []candidate
	ranks, made    []int32
	ids            []int32
	meta           []byte    // Metaspace's output
	lattice        []uniNode // Unigram's Viterbi
	uspans         []spSpan  // Unigram's best path, last piece first
}

// hfSplit is a piece of text [start, end) and the added token it is (id), or
// -1 for text.
type hfSplit struct {
	start, end int
	id         int32
}

// hfWord is a pre-token and whether it starts where the text started
// (Metaspace's "first" scheme prepends only there).
type hfWord struct {
	s     string
	first bool
}

func (e *hfEncoder) scratch() *hfScratch {
	if sc, ok := e.pool.Get().(*hfScratch); ok {
		return sc
	}
	return new(hfScratch)
}

// appendIDs appends the ids of s (valid UTF-8), without the template's
// special tokens.
func (e *hfEncoder) appendIDs(dst []int, s string) []int {
	sc := e.scratch()
	defer e.pool.Put(sc)
	sc.splits = e.raw.split(sc.splits[:0], s)
	for _, sp := range sc.splits {
		if sp.id >= 0 {
			dst = append(dst, int(sp.id))
			continue
		}
		if sp.start >= sp.end {
			continue
		}
		normalized := e.norm.apply(sc, s[sp.start:sp.end])
		if len(normalized) == 0 {
			continue
		}
		// normalized lives in sc.a or sc.b until the next apply; the words
		// made of it are encoded before then.
		ns := unsafe.String(&normalized[0], len(normalized))
		sc.nsplit = e.normed.split(sc.nsplit[:0], ns)
		for _, nsp := range sc.nsplit {
			if nsp.id >= 0 {
				dst = append(dst, int(nsp.id))
				continue
			}
			if nsp.start >= nsp.end {
				continue
			}
			first := sp.start == 0 && nsp.start == 0
			sc.words = e.pre.apply(sc, ns[nsp.start:nsp.end], first)
			for _, w := range sc.words {
				dst = e.model.word(dst, w.s, sc)
			}
		}
	}
	return dst
}

// Added tokens.

// hfAdded is an added token as the added vocabulary matches it.
type hfAdded struct {
	content                    string
	id                         int32
	lstrip, rstrip, singleWord bool
}

// hfAddedSet finds added tokens in text: leftmost, then longest, never
// overlapping, as the library's Aho-Corasick automaton (LeftmostLongest).
type hfAddedSet struct {
	toks  []hfAdded
	first [256]bool // first bytes of the contents
	// only is the one first byte of all contents, -1 when they have several.
	only int
}

func newHFAddedSet(toks []hfAdded) *hfAddedSet {
	a := &hfAddedSet{toks: toks, only: -1}
	for i, t := range toks {
		a.first[t.content[0]] = true
		switch {
		case i == 0:
			a.only = int(t.content[0])
		case a.only != int(t.content[0]):
			a.only = -2
		}
	}
	a.only = max(a.only, -1)
	return a
}

// split cuts s into text and added tokens, as the library's find_matches
// does: a single_word token must not touch a word character on either side
// (else it is skipped, its span still consumed), lstrip and rstrip take the
// whitespace beside the token into it.
func (a *hfAddedSet) split(dst []hfSplit, s string) []hfSplit {
	if len(a.toks) == 0 || s == "" {
		return append(dst, hfSplit{0, len(s), -1})
	}
	startOffset := 0
	for i := 0; i < len(s); {
		if a.only >= 0 {
			j := strings.IndexByte(s[i:], byte(a.only))
			if j < 0 {
				break
			}
			i += j
		} else if !a.first[s[i]] {
			i++
			continue
		}
		best := -1
		for k := range a.toks {
			c := a.toks[k].content
			if strings.HasPrefix(s[i:], c) && (best < 0 || len(c) > len(a.toks[best].content)) {
				best = k
			}
		}
		if best < 0 {
			i++
			continue
		}
		t := &a.toks[best]
		start, stop := i, i+len(t.content)
		i = stop
		if t.singleWord {
			startSpace := start == 0 || !hfEndsWithWordChar(s[:start])
			stopSpace := stop == len(s) || !hfStartsWithWordChar(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.lstrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), startOffset)
		}
		if t.rstrip {
			rest := s[stop:]
			stop += len(rest) - len(strings.TrimLeftFunc(rest, unicode.IsSpace))
		}
		if startOffset < start {
			dst = append(dst, hfSplit{startOffset, start, -1})
		}
		dst = append(dst, hfSplit{start, stop, t.id})
		startOffset = stop
	}
	if startOffset < len(s) {
		dst = append(dst, hfSplit{startOffset, len(s), -1})
	}
	return dst
}

// hfIsWordChar is the regex class \w of the library's Rust regex: Alphabetic,
// marks, decimal digits, connector punctuation, and the join controls.
func hfIsWordChar(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
	}
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Nl, r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Other_Alphabetic, r) || r == 0x200C || r == 0x200D
}

func hfEndsWithWordChar(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && hfIsWordChar(r)
}

func hfStartsWithWordChar(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && hfIsWordChar(r)
}

// Normalizer.

// apply runs the normalizer on s and returns the result, in sc.a or sc.b (or
// s itself when there are no steps).
func (n *hfNormalizer) apply(sc *hfScratch, s string) []byte {
	if len(n.steps) == 0 {
		sc.a = append(sc.a[:0], s...)
		return sc.a
	}
	cur := s
	var out []byte
	for i := range n.steps {
		st := &n.steps[i]
		buf := &sc.a
		if i%2 == 1 {
			buf = &sc.b
		}
		out = st.apply((*buf)[:0], cur)
		*buf = out
		if len(out) == 0 {
			cur = ""
		} else {
			cur = unsafe.String(&out[0], len(out))
		}
	}
	return out
}

func (st *hfNormStep) apply(dst []byte, s string) []byte {
	switch st.kind {
	case normReplace:
		if len(st.from) == 1 {
			c := st.from[0]
			for i := 0; i < len(s); i++ {
				if s[i] == c {
					dst = append(dst, st.to...)
				} else {
					dst = append(dst, s[i])
				}
			}
			return dst
		}
		for {
			i := strings.Index(s, st.from)
			if i < 0 {
				return append(dst, s...)
			}
			dst = append(append(dst, s[:i]...), st.to...)
			s = s[i+len(st.from):]
		}
	case normReplaceRegex:
		return st.re.replaceAll(dst, s, st.to)
	case normPrecompiled:
		return st.charsmap.appendNormalized(dst, s)
	case normPrepend:
		if s == "" {
			return dst
		}
		return append(append(dst, st.to...), s...)
	case normNFC:
		return norm.NFC.AppendString(dst, s)
	case normNFKC:
		return norm.NFKC.AppendString(dst, s)
	case normNFD:
		return norm.NFD.AppendString(dst, s)
	case normNFKD:
		return norm.NFKD.AppendString(dst, s)
	case normLower:
		return appendNormalizedHF(dst, s, false, true)
	case normStrip:
		if st.left {
			s = strings.TrimLeftFunc(s, unicode.IsSpace)
		}
		if st.right {
			s = strings.TrimRightFunc(s, unicode.IsSpace)
		}
		return append(dst, s...)
	}
	return append(dst, s...)
}

// Pre-tokenizer.

// apply pre-tokenizes s (normalized text, first when it starts where the
// whole text starts) into sc.words.
func (p *hfPreTokenizer) apply(sc *hfScratch, s string, first bool) []hfWord {
	words := append(sc.words[:0], hfWord{s, first})
	sc.meta = sc.meta[:0]
	for i := range p.steps {
		st := &p.steps[i]
		next := sc.words2[:0]
		for _, w := range words {
			next = st.apply(next, w, sc)
		}
		sc.words2 = words
		words = next
	}
	return words
}

func (st *hfPreStep) apply(dst []hfWord, w hfWord, sc *hfScratch) []hfWord {
	switch st.kind {
	case preMetaspace:
		s := st.metaspace(w, sc)
		if !st.split {
			return append(dst, hfWord{s, w.first})
		}
		// Split before each replacement (MergedWithNext).
		start := 0
		for i := 0; ; {
			j := strings.Index(s[i:], st.repl)
			if j < 0 {
				break
			}
			if at := i + j; at > start {
				dst = append(dst, hfWord{s[start:at], w.first && start == 0})
				start = at
			}
			i += j + len(st.repl)
		}
		if start < len(s) {
			dst = append(dst, hfWord{s[start:], w.first && start == 0})
		}
		return dst
	case preSplit:
		return st.split2(dst, w)
	case preWhitespaceSplit:
		// The words between runs of White_Space (Rust's char::is_whitespace,
		// Go's unicode.IsSpace: the same set), the whitespace dropped.
		s := w.s
		for start := 0; ; {
			i := strings.IndexFunc(s[start:], unicode.IsSpace)
			end := len(s)
			if i >= 0 {
				end = start + i
			}
			if end > start {
				dst = append(dst, hfWord{s[start:end], w.first && start == 0})
			}
			if i < 0 {
				return dst
			}
			_, size := utf8.DecodeRuneInString(s[end:])
			start = end + size
		}
	}
	return append(dst, w)
}

// metaspace returns w with each ' ' made the replacement and the
// replacement put in front when the scheme says so and it is not there. The
// result is written into sc.meta, which is not reused for new text until the
// next apply: a string made of it stays valid until then (when sc.meta grows,
// the strings keep the old array alive).
func (st *hfPreStep) metaspace(w hfWord, sc *hfScratch) string {
	s := w.s
	spaces := strings.Count(s, " ")
	starts := strings.HasPrefix(s, " ") || strings.HasPrefix(s, st.repl)
	prepend := !starts && (st.prepend == prependAlways || (st.prepend == prependFirst && w.first))
	if spaces == 0 && !prepend {
		return s
	}
	need := len(s) + spaces*(len(st.repl)-1)
	if prepend {
		need += len(st.repl)
	}
	buf := sc.meta
	if cap(buf)-len(buf) < need {
		buf = make([]byte, 0, max(2*cap(buf), need+256))
	}
	start := len(buf)
	if prepend {
		buf = append(buf, st.repl...)
	}
	for {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			buf = append(buf, s...)
			break
		}
		buf = append(append(buf, s[:i]...), st.repl...)
		s = s[i+1:]
	}
	sc.meta = buf
	return unsafe.String(&buf[start], len(buf)-start)
}

// split2 runs a Split pre-tokenizer on one word: the pattern's matches (or,
// inverted, the text between them) are delimiters, kept or merged as the
// behaviour says; empty pieces are dropped.
func (st *hfPreStep) split2(dst []hfWord, w hfWord) []hfWord {
	s := w.s
	type piece struct {
		start, end int
		match      bool
	}
	var pieces []piece
	add := func(a, b int, m bool) { pieces = append(pieces, piece{a, b, m != st.invert}) }
	prev := 0
	if st.re == nil {
		if strings.Index(s, st.lit) < 0 {
			if st.invert && st.behavior == splitRemoved {
				return dst
			}
			return append(dst, w)
		}
		for i := 0; ; {
			j := strings.Index(s[i:], st.lit)
			if j < 0 {
				break
			}
			if i+j != prev {
				add(prev, i+j, false)
			}
			add(i+j, i+j+len(st.lit), true)
			prev = i + j + len(st.lit)
			i = prev
		}
	} else {
		for _, m := range st.re.FindAllStringIndex(s, -1) {
			if m[0] != prev {
				add(prev, m[0], false)
			}
			add(m[0], m[1], true)
			prev = m[1]
		}
	}
	if prev != len(s) {
		add(prev, len(s), false)
	}
	type kept struct {
		start, end int
		remove     bool
	}
	var out []kept
	switch st.behavior {
	case splitRemoved:
		for _, p := range pieces {
			out = append(out, kept{p.start, p.end, p.match})
		}
	case splitIsolated:
		for _, p := range pieces {
			out = append(out, kept{p.start, p.end, false})
		}
	case splitContiguous:
		prevMatch := false
		for _, p := range pieces {
			if p.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = p.end
			} else {
				out = append(out, kept{p.start, p.end, false})
			}
			prevMatch = p.match
		}
	case splitMergedWithPrevious:
		prevMatch := false
		for _, p := range pieces {
			if p.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = p.end
			} else {
				out = append(out, kept{p.start, p.end, false})
			}
			prevMatch = p.match
		}
	case splitMergedWithNext:
		prevMatch := false
		for i := len(pieces) - 1; i >= 0; i-- {
			p := pieces[i]
			if p.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = p.start
			} else {
				out = append(out, kept{p.start, p.end, false})
			}
			prevMatch = p.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	for _, k := range out {
		if !k.remove && k.end > k.start {
			dst = append(dst, hfWord{s[k.start:k.end], w.first && k.start == 0})
		}
	}
	return dst
}

// The BPE model.

// hfBPE is a BPE model over characters, as the library's models::bpe with
// no continuing-subword prefix and no end-of-word suffix: each character is
// a symbol (its UTF-8 bytes as <0xNN> pieces when the vocabulary lacks it and
// byte_fallback is set, else the unknown token), then merges by rank.
type hfBPE struct {
	vocab  map[string]int32
	tokens []string // by id
	// lowRune[r] is the id of the one-character token r (noID when none),
	// for r < len(lowRune); runeID holds the others.
	lowRune      []int32
	runeID       map[rune]int32
	byteID       [256]int32
	byteFallback bool
	unk          int32
	fuseUnk      bool
	ignoreMerges bool
	merges       hfPairTable
	cache        hfCache
	// splitAtMark says that no merge joins a symbol ending in a character
	// other than "▁" to one starting with "▁", and that "▁" is in the
	// vocabulary: a word can then be cut before each "▁" that follows
	// another character and its parts merged (and cached) alone, with the
	// same ids.
	splitAtMark bool
}

const hfLowRunes = 0x2600 // through U+25FF: Latin, Greek, Cyrillic, ..., "▁" (U+2581)

// buildHFBPE builds the BPE model of tj, whose vocabulary is vocab.
func buildHFBPE(tj *hfTokenizerJSON, vocab map[string]int) (*hfBPE, error) {
	const where = "text: tokenizer.json: model"
	m := tj.Model
	switch {
	case len(vocab) == 0:
		return nil, errors.New(where + ".vocab is empty or missing")
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf(where+".dropout %g is not supported (want null)", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf(where+".continuing_subword_prefix %q is not supported (want null)", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf(where+".end_of_word_suffix %q is not supported (want null)", *m.EndOfWordSuffix)
	}
	b := &hfBPE{
		vocab: make(map[string]int32, len(vocab)), runeID: map[rune]int32{},
		byteFallback: m.ByteFallback, unk: noID, fuseUnk: m.FuseUnk, ignoreMerges: m.IgnoreMerges,
		lowRune: make([]int32, hfLowRunes),
	}
	maxID := -1
	for tok, id := range vocab {
		if id < 0 || id >= hfMaxID {
			return nil, fmt.Errorf(where+".vocab: %q has id %d, want 0..%d", tok, id, hfMaxID-1)
		}
		maxID = max(maxID, id)
	}
	if maxID >= hfMaxSparse(len(vocab)) {
		return nil, fmt.Errorf(where+".vocab: id %d for %d tokens, want ids below %d (near the vocabulary's size)", maxID, len(vocab), hfMaxSparse(len(vocab)))
	}
	b.tokens = make([]string, maxID+1)
	for i := range b.lowRune {
		b.lowRune[i] = noID
	}
	for tok, id := range vocab {
		if b.tokens[id] != "" {
			a, c := b.tokens[id], tok
			if a > c {
				a, c = c, a
			}
			return nil, fmt.Errorf(where+".vocab: id %d is both %q and %q", id, a, c)
		}
		b.tokens[id] = tok
		b.vocab[tok] = int32(id)
		if r, n := utf8.DecodeRuneInString(tok); n == len(tok) && (r != utf8.RuneError || n == 3) {
			if r < hfLowRunes {
				b.lowRune[r] = int32(id)
			} else {
				b.runeID[r] = int32(id)
			}
		}
	}
	for i := range b.byteID {
		b.byteID[i] = noID
		if id, ok := b.vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
			b.byteID[i] = id
		}
	}
	if m.UnkToken != nil && *m.UnkToken != "" {
		id, ok := b.vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf(where+".unk_token %q is not in model.vocab", *m.UnkToken)
		}
		b.unk = id
	}
	b.merges.init(len(m.Merges))
	cross := false
	for i, raw := range m.Merges {
		var x, y string
		var s string
		if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '"' && json.Unmarshal(raw, &s) == nil {
			var ok bool
			x, y, ok = strings.Cut(s, " ")
			if !ok || strings.Contains(y, " ") {
				return nil, fmt.Errorf(where+".merges[%d]: %q is not %q", i, s, "a b")
			}
		} else {
			var ab []string
			if err := json.Unmarshal(raw, &ab); err != nil || len(ab) != 2 {
				return nil, fmt.Errorf(where+".merges[%d]: %.40s is neither \"a b\" nor [\"a\", \"b\"]", i, raw)
			}
			x, y = ab[0], ab[1]
		}
		a, okA := b.vocab[x]
		c, okC := b.vocab[y]
		ac, okAC := b.vocab[x+y]
		if !okA || !okC || !okAC {
			missing := x
			switch {
			case !okA:
			case !okC:
				missing = y
			default:
				missing = x + y
			}
			return nil, fmt.Errorf(where+".merges[%d] (%q %q): %q is not in model.vocab", i, x, y, missing)
		}
		// The library collects merges into a map: of duplicate pairs, the
		// last one is kept.
		b.merges.put(pairKey(a, c), merge{rank: int32(i), id: ac})
		if strings.HasPrefix(y, wordMark) && !strings.HasSuffix(x, wordMark) {
			cross = true
		}
	}
	b.splitAtMark = !cross && !b.ignoreMerges && b.lowRune[hfMarkRune] != noID
	b.cache.init()
	return b, nil
}

func (m *hfBPE) vocabSize() int             { return len(m.vocab) }
func (m *hfBPE) tokenIDs() map[string]int32 { return m.vocab }
func (m *hfBPE) idTokens() []string         { return m.tokens }
func (m *hfBPE) bytePieces() bool           { return m.byteFallback }

// hfSymbol is one symbol of a word being merged: its id and its neighbours
// (-1: none); dead once merged into its left neighbour.
type hfSymbol struct {
	id         int32
	prev, next int32
	dead       bool
}

const hfMarkRune = '\u2581'

// hfMaxSparse bounds the ids of a vocabulary of n tokens, so that a small
// file cannot make the reader allocate tables for ids it never uses.
func hfMaxSparse(n int) int { return min(hfMaxID, 2*n+1<<16) }

// word appends the ids of one pre-token w, through the cache.
func (m *hfBPE) word(dst []int, w string, sc *hfScratch) []int {
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(dst, int(id))
		}
	}
	if ids, ok := m.cache.get(w); ok {
		return widen(dst, ids)
	}
	var ids []int32
	if m.splitAtMark {
		// Cut before each "▁" that follows another character; the parts
		// go through the cache too.
		ids = sc.ids[:0]
		start := 0
		for i := 1; i+len(wordMark) <= len(w); {
			j := strings.Index(w[i:], wordMark)
			if j < 0 {
				break
			}
			at := i + j
			if r, _ := utf8.DecodeLastRuneInString(w[:at]); r != hfMarkRune {
				ids = m.part(ids, w[start:at], sc)
				start = at
			}
			i = at + len(wordMark)
		}
		ids = m.part(ids, w[start:], sc)
	} else {
		ids = m.encode(sc.ids[:0], w, sc)
	}
	sc.ids = ids
	putCopy(&m.cache, w, ids)
	return widen(dst, ids)
}

// part appends the ids of a part of a word, through the cache.
func (m *hfBPE) part(dst []int32, w string, sc *hfScratch) []int32 {
	if ids, ok := m.cache.get(w); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = m.encode(dst, w, sc)
	putCopy(&m.cache, w, dst[start:])
	return dst
}

// encode runs BPE on w, appending its ids to dst.
func (m *hfBPE) encode(dst []int32, w string, sc *hfScratch) []int32 {
	start := len(dst)
	pendingUnk := false
	for i := 0; i < len(w); {
		r, size := rune(w[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(w[i:])
		}
		id := int32(noID)
		if r < hfLowRunes {
			id = m.lowRune[r]
		} else if v, ok := m.runeID[r]; ok {
			id = v
		}
		if id != noID {
			if pendingUnk {
				dst = append(dst, m.unk)
				pendingUnk = false
			}
			dst = append(dst, id)
			i += size
			continue
		}
		if m.byteFallback {
			all := true
			for k := i; k < i+size; k++ {
				if m.byteID[w[k]] == noID {
					all = false
					break
				}
			}
			if all {
				// As the library does, a pending unknown token stays pending
				// past the byte pieces.
				for k := i; k < i+size; k++ {
					dst = append(dst, m.byteID[w[k]])
				}
				i += size
				continue
			}
		}
		if m.unk != noID {
			if pendingUnk && !m.fuseUnk {
				dst = append(dst, m.unk)
			}
			pendingUnk = true
		}
		i += size
	}
	if pendingUnk {
		dst = append(dst, m.unk)
	}
	if len(dst)-start <= hfSmallWord {
		return m.mergeSmall(dst, start, sc)
	}
	syms := sc.syms[:0]
	for i, id := range dst[start:] {
		syms = append(syms, hfSymbol{id: id, prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	sc.syms = syms
	m.mergeAll(syms, sc)
	dst = dst[:start]
	for i := 0; i >= 0 && i < len(syms); i = int(syms[i].next) {
		dst = append(dst, syms[i].id)
	}
	return dst
}

// hfSmallWord is the number of symbols up to which mergeSmall is used.
const hfSmallWord = 32

const hfNoRank = int32(1<<31 - 1)

// mergeSmall gives mergeAll's result for a short word, dst[start:], in place:
// again and again, the pair of lowest rank (leftmost on ties) merges. The
// queue always yields the lowest (rank, position) of the pairs that still
// exist, so the two agree; this is O(n²), with a scan of an array of ranks
// rather than a heap, which is faster for a few dozen symbols.
func (m *hfBPE) mergeSmall(dst []int32, start int, sc *hfScratch) []int32 {
	ids := dst[start:]
	n := len(ids)
	if cap(sc.ranks) < n {
		sc.ranks, sc.made = make([]int32, n), make([]int32, n)
	}
	ranks, made := sc.ranks[:n], sc.made[:n]
	set := func(i int) {
		if mg, ok := m.merges.get(pairKey(ids[i], ids[i+1])); ok {
			ranks[i], made[i] = mg.rank, mg.id
		} else {
			ranks[i] = hfNoRank
		}
	}
	for i := 0; i+1 < n; i++ {
		set(i)
	}
	for n > 1 {
		best, rank := -1, hfNoRank
		for i, r := range ranks[:n-1] {
			if r < rank {
				best, rank = i, r
			}
		}
		if best < 0 {
			break
		}
		ids[best] = made[best]
		copy(ids[best+1:], ids[best+2:n])
		copy(ranks[best+1:], ranks[best+2:n])
		copy(made[best+1:], made[best+2:n])
		n--
		if best > 0 {
			set(best - 1)
		}
		if best+1 < n {
			set(best)
		}
	}
	return dst[:start+n]
}

// mergeAll merges syms as the library's Word::merge_all does: a priority
// queue of adjacent pairs by (rank, position), lowest first; an entry whose
// pair has changed since it was queued is skipped.
func (m *hfBPE) mergeAll(syms []hfSymbol, sc *hfScratch) {
	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges.get(pairKey(syms[i].id, syms[i+1].id)); ok {
			h = hfHeapPush(h, candidate{mg.rank, int32(i), mg.id})
		}
	}
	for len(h) > 0 {
		var c candidate
		c, h = hfHeapPop(h)
		s := &syms[c.pos]
		if s.dead || s.next < 0 {
			continue
		}
		right := syms[s.next]
		if mg, ok := m.merges.get(pairKey(s.id, right.id)); !ok || mg.id != c.id {
			continue
		}
		s.id = c.id
		syms[s.next].dead = true
		s.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = c.pos
		}
		if s.prev >= 0 {
			if mg, ok := m.merges.get(pairKey(syms[s.prev].id, s.id)); ok {
				h = hfHeapPush(h, candidate{mg.rank, s.prev, mg.id})
			}
		}
		if s.next >= 0 {
			if mg, ok := m.merges.get(pairKey(s.id, syms[s.next].id)); ok {
				h = hfHeapPush(h, candidate{mg.rank, c.pos, mg.id})
			}
		}
	}
	sc.heap = h
}

func hfCandLess(x, y candidate) bool {
	return x.rank < y.rank || (x.rank == y.rank && x.pos < y.pos)
}

func hfHeapPush(h []candidate, c candidate) []candidate {
	h = append(h, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !hfCandLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func hfHeapPop(h []candidate) (candidate, []candidate) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		k := l
		if r := l + 1; r < n && hfCandLess(h[r], h[l]) {
			k = r
		}
		if !hfCandLess(h[k], h[i]) {
			break
		}
		h[i], h[k] = h[k], h[i]
		i = k
	}
	return top, h
}

// hfPairTable maps a pair of ids to its merge: open addressing with linear
// probing over entries that hold the key (plus one: 0 marks an empty slot)
// beside the merge, so that a probe reads one cache line.
type hfPairTable struct {
	slots []hfPairSlot
	shift uint
}

type hfPairSlot struct {
	key uint64
	merge
}

func (t *hfPairTable) init(n int) {
	size, shift := 16, uint(60)
	for size < 2*n {
		size <<= 1
		shift--
	}
	t.slots, t.shift = make([]hfPairSlot, size), shift
}

func (t *hfPairTable) slot(k uint64) int { return int((k * 0x9E3779B97F4A7C15) >> t.shift) }

func (t *hfPairTable) put(k uint64, v merge) {
	mask := len(t.slots) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case 0:
			t.slots[i] = hfPairSlot{k + 1, v}
			return
		case k + 1:
			t.slots[i].merge = v
			return
		}
	}
}

func (t *hfPairTable) get(k uint64) (merge, bool) {
	mask := len(t.slots) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case k + 1:
			return t.slots[i].merge, true
		case 0:
			return merge{}, false
		}
	}
}

// hfCache maps words to their ids (see wordCache). With no pre-tokenizer a
// whole prompt is one word, so words up to wordCacheMaxWord bytes are kept.
type hfCache = wordCache[[]int32]
