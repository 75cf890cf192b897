package text

import (
	"math"
	"slices"
	"strings"
)

// A Unigram model whose lattice is found word by word (spModel.unigramWords)
// still searches the whole text: sentencepiece's EncodeOptimized keeps each
// position's best score as a float32 sum from the start of the text, so a
// word's pieces can depend on the text before it through rounding (see
// TestSentencePieceWordRounding). They do not when, at each position of the
// word, the best piece ending there beats the others by more than rounding
// can move them: then the word's pieces found on their own are the whole
// search's. spWordPieces keeps that margin beside a word's ids, and a
// text's words are taken from the cache only while it holds; otherwise the
// whole search runs.
//
// Why the margin suffices. Let T be the float32 score of the best path to
// the word's start, V(p) the best sum, in real numbers, of the scores of
// pieces from the word's start to its position p, M a bound on
// |T| + |V(s)| + |score| over the pieces the search may take in the word (s:
// where one starts), and u = 2⁻²⁴. No piece crosses the word's start, so
// the search within the word sees only T and the word. Each of its steps
// adds a score to a float32 sum (in float64, or in float32 for the unknown
// piece) and keeps the result as a float32, an error of at most u·M (plus
// 2⁻⁵³·M), and a path within the word has at most len(w) pieces: each
// candidate it compares at a position, kept or not, is within about
// u·M·(len(w)+1) of T plus its real value. Where the best real value beats
// every other by more than twice that, the search keeps the best candidate
// whatever T is and whichever comes first; when that holds at every
// position, its pieces in the word are those of the real-number search,
// which newSPWord runs in float64 (an error of about 2⁻⁵³·M·len(w)) to find
// the pieces and the margins. Holding a word to
// margin > 2⁻²¹·M·(len(w)+2), four times what is needed, leaves room for
// both. The score at the word's end is then at most
// (|T| + reach)·(1 + 2⁻¹⁴) in magnitude for a word of at most
// wordCacheMaxWord bytes: the next word's bound on |T|.

// spWordPieces is a word of the normalized text (from one space mark to the
// next, or the text's start to its first mark) as its lattice alone gives
// it: its ids, with byte pieces for unknown characters (byte fallback) or
// runs of unknown pieces as one id, and what says when they are the ids
// the search over the whole text gives.
type spWordPieces struct {
	ids []int32
	// firstUnk and lastUnk say that the word starts and ends with the
	// unknown piece (never with byte fallback): a run of unknowns across
	// two words is one id.
	firstUnk, lastUnk bool
	// reach is the largest |V(s)| + |score| over the pieces the search may
	// take in the word; limit the largest bound on |T| for which the ids
	// hold (see above): margin / (2⁻²¹·(len(w)+2)) − reach, −Inf when the
	// best path ties with another at some position.
	reach, limit float64
}

// spWordNode is a position of newSPWord's search: the best and second-best
// sums of scores reaching it, the last piece of the best and where it
// starts plus one (0: not reached).
type spWordNode struct {
	best, second float64
	from, id     int32
}

// spWords is the state of a text's search between words: bound is at
// least the magnitude of the best path's score to here, prevUnk says that
// the ids so far end with the unknown piece.
type spWords struct {
	bound   float64
	prevUnk bool
}

// newSPWord finds the pieces of the word w on its own and their margins. It
// reports false for a word whose characters run past its end (invalid UTF-8
// from a charsmap).
func (m *spModel) newSPWord(w string, sc *spScratch) (spWordPieces, bool) {
	edges, ok := m.wordEdges(sc.edges[:0], w)
	sc.edges = edges
	if !ok {
		return spWordPieces{}, false
	}
	nodes := slices.Grow(sc.wordNodes[:0], len(w)+1)[:len(w)+1]
	clear(nodes)
	sc.wordNodes = nodes
	nodes[0].from = 1
	unkScore := float64(m.minScore - spUnkPenalty)
	reach := 0.0
	for _, e := range edges {
		s := &nodes[e.start]
		if s.from == 0 {
			continue
		}
		score, id := e.score, e.id
		if e.unk {
			score = unkScore
		}
		reach = max(reach, math.Abs(s.best)+math.Abs(score))
		v := s.best + score
		switch t := &nodes[e.end]; {
		case t.from == 0:
			*t = spWordNode{best: v, second: math.Inf(-1), from: e.start + 1, id: id}
		case v > t.best:
			*t = spWordNode{best: v, second: t.best, from: e.start + 1, id: id}
		default:
			t.second = max(t.second, v)
		}
	}
	margin := math.Inf(1)
	for _, nd := range nodes[1:] {
		if nd.from != 0 {
			margin = min(margin, nd.best-nd.second)
		}
	}
	wd := spWordPieces{reach: reach, limit: math.Inf(-1)}
	if margin > 0 {
		wd.limit = margin/(0x1p-21*float64(len(w)+2)) - reach
	}
	// Backtrack into spans (last piece first), then the ids as
	// encodeScratch makes them.
	spans := sc.spans[:0]
	for end := len(w); end > 0; {
		nd := nodes[end]
		id := nd.id
		if id != m.unk {
			id = m.pieceID("", id)
		}
		spans = append(spans, spSpan{start: nd.from - 1, end: int32(end), id: id})
		end = int(nd.from) - 1
	}
	sc.spans = spans
	var ids []int32
	prevUnk := false
	for i := len(spans) - 1; i >= 0; i-- {
		p := spans[i]
		isUnk := p.id == m.unk
		switch {
		case isUnk && m.byteFallback:
			for j := p.start; j < p.end; j++ {
				ids = append(ids, m.byteID[w[j]])
			}
		case isUnk && prevUnk:
		default:
			ids = append(ids, p.id)
		}
		prevUnk = isUnk
	}
	wd.ids = ids
	if !m.byteFallback && len(spans) > 0 {
		wd.firstUnk, wd.lastUnk = spans[len(spans)-1].id == m.unk, spans[0].id == m.unk
	}
	return wd, true
}

// word returns the spWordPieces of w through m.wordPieces (not to be
// written), nil for a word longer than wordCacheMaxWord bytes or whose
// characters run past its end. *sc is scratch memory, taken from
// spScratchPool when nil and needed.
func (m *spModel) word(w string, sc **spScratch) *spWordPieces {
	if len(w) > wordCacheMaxWord {
		return nil // not cached, and past what the bounds above assume
	}
	if wd := m.wordPieces.ref(w); wd != nil {
		return wd
	}
	if *sc == nil {
		*sc = spScratchPool.Get().(*spScratch)
	}
	wd, ok := m.newSPWord(w, *sc)
	if !ok {
		return nil
	}
	m.wordPieces.put(w, wd)
	return &wd
}

// appendWord appends the ids of the word w, next in a text whose search so
// far st describes, and updates st. It reports false, appending nothing,
// when the word's pieces on their own may not be the whole search's.
func (m *spModel) appendWord(dst []int, w string, st *spWords, sc **spScratch) ([]int, bool) {
	wd := m.word(w, sc)
	if wd == nil || !(st.bound < wd.limit) {
		return dst, false
	}
	ids := wd.ids
	if st.prevUnk && wd.firstUnk {
		ids = ids[1:]
	}
	dst = widen(dst, ids)
	st.bound = (st.bound + wd.reach) * (1 + 0x1p-14)
	st.prevUnk = wd.lastUnk
	return dst, true
}

// appendWords appends the ids of the normalized text (not empty) word by
// word, as encodeScratch would give them, when every word's pieces are the
// whole search's; it reports false, appending nothing, when one may not be.
func (m *spModel) appendWords(dst []int, text string, sc *spScratch) ([]int, bool) {
	begin := len(dst)
	mark := m.norm.mark()
	var st spWords
	for lo := 0; lo < len(text); {
		hi := len(text)
		if i := strings.Index(text[lo+1:], mark); i >= 0 {
			hi = lo + 1 + i
		}
		var ok bool
		if dst, ok = m.appendWord(dst, text[lo:hi], &st, &sc); !ok {
			return dst[:begin], false
		}
		lo = hi
	}
	return dst, true
}
