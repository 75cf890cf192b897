package text

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// spModel is a SentencePiece model (Unigram or BPE) with its normalizer, as
// sentencepiece's SentencePieceProcessor::Encode runs it: normalize, split
// into pieces, turn unknown pieces into byte pieces (byte fallback) or merge
// runs of them into one unknown id. It is read-only after loading.
type spModel struct {
	norm   spNormalizer
	bpe    bool
	pieces []spPiece
	// trie holds the NORMAL, USER_DEFINED and UNUSED pieces; matcher the
	// USER_DEFINED ones (nil: none), which are never normalized or split.
	trie, matcher *trie
	// reserved are the CONTROL, UNKNOWN and BYTE pieces by text; PieceToId
	// looks them up first. override maps a trie id whose text is also
	// reserved to the reserved id; shortReserved says a reserved piece is one
	// character (so a character's id is looked up there too).
	reserved      map[string]int32
	override      map[int32]int32
	shortReserved bool
	unk           int32
	byteFallback  bool
	byteID        [256]int32
	// minScore and maxScore are unigram_model.cc's min_score_ and max_score_.
	minScore, maxScore float32
	// lattice is the trie as Unigram's Viterbi walks it: each node with the
	// piece that ends there, its id (-1: none, or an UNUSED piece, which the
	// search skips), score and whether it is USER_DEFINED (scored by its
	// length).
	lattice []spLatticeNode
	// pairs maps two adjacent BPE pieces to the piece they merge into.
	pairs pairTable
	// words says that BPE may merge each word (a run from one "▁" to the
	// next) on its own: no piece has "▁" past its first character, and
	// none is UNUSED (whose splitting looks at the whole text's merges).
	words bool
	// cache holds the pieces of the words seen (words mode only).
	cache *spCache
	// unigramWords says that no piece a Unigram search may take has the
	// space mark past its first byte (and the mark starts words): the
	// lattice is then found one word at a time, and edges keeps each
	// word's edges; wordPieces each word's pieces and margins (spWordPieces),
	// which spare the search while they hold.
	unigramWords bool
	edges        *wordCache[[]spEdge]
	wordPieces   *wordCache[spWordPieces]
}

// spUnkPenalty is unigram_model.cc's kUnkPenalty.
const spUnkPenalty = float32(10)

// spScratch is the per-call memory of an encoding.
type spScratch struct {
	norm, text, canon []byte
	ids               []int
	best              []viterbiNode
	spans             []spSpan
	syms              []bpeSymbol
	heap              []bpeCandidate
	rev               []bpeRev
	edges             []spEdge
	wordNodes         []spWordNode
}

var spScratchPool = sync.Pool{New: func() any { return new(spScratch) }}

// spSpan is a piece of the normalized text [start, end) and its id.
type spSpan struct {
	start, end, id int32
}

// encode appends the ids of s (valid UTF-8) to dst.
func (m *spModel) encode(dst []int, s string) []int {
	sc := spScratchPool.Get().(*spScratch)
	dst = m.encodeScratch(dst, s, sc)
	spScratchPool.Put(sc)
	return dst
}

func (m *spModel) encodeScratch(dst []int, s string, sc *spScratch) []int {
	sc.norm = m.norm.normalize(sc.norm[:0], s)
	if len(sc.norm) == 0 {
		return dst
	}
	text := unsafe.String(&sc.norm[0], len(sc.norm))
	if m.unigramWords && m.wordPieces != nil {
		if out, ok := m.appendWords(dst, text, sc); ok {
			return out
		}
	}
	if m.bpe {
		sc.spans = m.encodeBPE(sc.spans[:0], text, sc)
	} else {
		sc.spans = m.encodeUnigram(sc.spans[:0], text, sc)
	}
	return m.appendSpanIDs(dst, text, sc.spans)
}

// appendSpanIDs appends the ids of the pieces spans of the normalized text
// as PopulateSentencePieceText gives them: the bytes of unknown pieces
// (byte fallback), or runs of unknown pieces as one id.
func (m *spModel) appendSpanIDs(dst []int, text string, spans []spSpan) []int {
	prevUnk := false
	for _, p := range spans {
		isUnk := p.id == m.unk
		switch {
		case isUnk && m.byteFallback:
			for i := p.start; i < p.end; i++ {
				dst = append(dst, int(m.byteID[text[i]]))
			}
		case isUnk && prevUnk:
		default:
			dst = append(dst, int(p.id))
		}
		prevUnk = isUnk
	}
	return dst
}

// pieceID is ModelInterface::PieceToId for a piece of the text: reserved
// pieces first, then the trie, else the unknown id. tid is its trie id (-1
// when not known).
func (m *spModel) pieceID(s string, tid int32) int32 {
	if tid >= 0 {
		if m.override != nil {
			if r, ok := m.override[tid]; ok {
				return r
			}
		}
		return tid
	}
	if r, ok := m.reserved[s]; ok {
		return r
	}
	return m.unk
}

// oneCharLen is sentencepiece's OneCharLen: the length of a UTF-8 sequence
// by its first byte (1 for a stray continuation byte).
func oneCharLen(c byte) int {
	return int("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02\x02\x03\x04"[c>>4])
}

// spLatticeNode is a trie node as the Viterbi search reads it.
type spLatticeNode struct {
	base, check int32
	id          int32
	score       float32
	userDefined bool
}

// viterbiNode is a position of the lattice: the best path ending there, its
// last piece and where that piece starts plus one (from: 0 while the
// position is not reached, so that a cleared lattice is an empty one).
type viterbiNode struct {
	score float32
	from  int32
	id    int32
}

// viterbiWhole fills best (reset) with the best path to each position of
// text: for each character, the pieces starting there found by a walk of
// the trie along the text, and the unknown piece when none is the character
// alone.
func (m *spModel) viterbiWhole(best []viterbiNode, text string) {
	size := len(text)
	unkScore := m.minScore - spUnkPenalty
	nodes := m.lattice
	for start := 0; start < size; {
		till := best[start].score
		mblen := min(oneCharLen(text[start]), size-start)
		single := false
		n := int32(0)
		for i := start; i < size; i++ {
			c := nodes[n].base + int32(text[i])
			if uint(c) >= uint(len(nodes)) || nodes[c].check != n {
				break
			}
			n = c
			pc := &nodes[n]
			if pc.id < 0 {
				continue
			}
			id := pc.id
			length := i + 1 - start
			var score float64
			if pc.userDefined {
				score = float64(float32(length)*m.maxScore) - 0.1
			} else {
				score = float64(pc.score)
			}
			cand := score + float64(till)
			t := &best[i+1]
			if t.from == 0 || cand > float64(t.score) {
				*t = viterbiNode{score: float32(cand), from: int32(start) + 1, id: id}
			}
			if length == mblen {
				single = true
			}
		}
		if !single {
			t := &best[start+mblen]
			cand := unkScore + till
			if t.from == 0 || cand > t.score {
				*t = viterbiNode{score: cand, from: int32(start) + 1, id: m.unk}
			}
		}
		start += mblen
	}
}

// spEdge is a piece the Viterbi search may take: text [start, end) of a
// word, the piece's id and its score (for USER_DEFINED pieces, by length),
// or the unknown piece of one character (unk: scored in float32, as
// unigram_model.cc adds it).
type spEdge struct {
	start, end int32
	id         int32
	unk        bool
	score      float64
}

// viterbiWords is viterbiWhole with the edges of the lattice found one word
// at a time (from one space mark to the next) and kept in m.edges. When no
// piece has the mark past its first byte (m.unigramWords), no piece crosses
// the start of a word, so a word's edges are what the walks from its
// characters find within it, whatever text is around; the search over them
// then runs in the same order, with the same arithmetic, as viterbiWhole.
// It reports false, leaving best to be reset, for a text whose characters
// run past a word (invalid UTF-8 from a charsmap).
func (m *spModel) viterbiWords(best []viterbiNode, text string, sc *spScratch) bool {
	unkScore := m.minScore - spUnkPenalty
	mark := m.norm.mark()
	for lo := 0; lo < len(text); {
		hi := len(text)
		if i := strings.Index(text[lo+1:], mark); i >= 0 {
			hi = lo + 1 + i
		}
		w := text[lo:hi]
		edges, ok := m.edges.get(w)
		if !ok {
			if edges, ok = m.wordEdges(sc.edges[:0], w); !ok {
				clear(best)
				return false
			}
			sc.edges = edges
			putCopy(m.edges, w, edges)
		}
		for _, e := range edges {
			start := int32(lo) + e.start
			till := best[start].score
			t := &best[lo+int(e.end)]
			if e.unk {
				cand := unkScore + till
				if t.from == 0 || cand > t.score {
					*t = viterbiNode{score: cand, from: start + 1, id: m.unk}
				}
				continue
			}
			cand := e.score + float64(till)
			if t.from == 0 || cand > float64(t.score) {
				*t = viterbiNode{score: float32(cand), from: start + 1, id: e.id}
			}
		}
		lo = hi
	}
	return true
}

// wordEdges appends the lattice edges of the word w in viterbiWhole's order:
// by start, the pieces by length, then the unknown piece when no piece is
// the character alone. It reports false when a character runs past w.
func (m *spModel) wordEdges(dst []spEdge, w string) ([]spEdge, bool) {
	nodes := m.lattice
	for start := 0; start < len(w); {
		mblen := oneCharLen(w[start])
		if mblen > len(w)-start {
			return dst, false
		}
		single := false
		n := int32(0)
		for i := start; i < len(w); i++ {
			c := nodes[n].base + int32(w[i])
			if uint(c) >= uint(len(nodes)) || nodes[c].check != n {
				break
			}
			n = c
			pc := &nodes[n]
			if pc.id < 0 {
				continue
			}
			length := i + 1 - start
			score := float64(pc.score)
			if pc.userDefined {
				score = float64(float32(length)*m.maxScore) - 0.1
			}
			dst = append(dst, spEdge{start: int32(start), end: int32(i + 1), id: pc.id, score: score})
			if length == mblen {
				single = true
			}
		}
		if !single {
			dst = append(dst, spEdge{start: int32(start), end: int32(start + mblen), id: m.unk, unk: true})
		}
		start += mblen
	}
	return dst, true
}

// encodeUnigram is unigram_model.cc's EncodeOptimized: the best path of
// pieces by the sum of their scores, an unknown character costing the
// lowest score minus 10, a user-defined piece scoring length·max-0.1 (in
// double precision, as C++ promotes it).
func (m *spModel) encodeUnigram(out []spSpan, text string, sc *spScratch) []spSpan {
	size := len(text)
	best := slices.Grow(sc.best[:0], size+1)[:size+1]
	clear(best)
	sc.best = best
	if !m.unigramWords || !m.viterbiWords(best, text, sc) {
		m.viterbiWhole(best, text)
	}
	// Backtrack: count the pieces, then write them from the last.
	n := 0
	for end := size; end > 0; end = int(best[end].from) - 1 {
		n++
	}
	first := len(out)
	out = slices.Grow(out, n)[:first+n]
	k := first + n
	for end := size; end > 0; {
		nd := best[end]
		id := nd.id
		if id != m.unk {
			id = m.pieceID("", id)
		}
		k--
		out[k] = spSpan{start: nd.from - 1, end: int32(end), id: id}
		end = int(nd.from) - 1
	}
	return out
}

type bpeSymbol struct {
	start, end int32 // the symbol's text; start == end once merged away
	prev, next int32
	tid        int32   // its trie id, -1 when it is not a piece
	cand       int32   // mergeScan: what it merges into with the next, -1: nothing
	score      float32 // mergeScan: the score of cand
	freeze     bool
}

type bpeCandidate struct {
	score       float32
	left, right int32
	size        int32
	tid         int32
}

// bpeRev records that an UNUSED piece was made of two texts, for
// resegmenting it as bpe_model.cc does.
type bpeRev struct {
	tid                        int32
	lstart, lend, rstart, rend int32
}

// encodeBPE is bpe_model.cc's Encode: the text split into characters (and
// user-defined pieces, which never merge), then the adjacent pair whose
// merge is the highest-scoring piece merged first, leftmost on ties;
// UNUSED pieces are split back into what they were merged from.
//
// When no piece has "▁" past its first character (m.words), no merge can
// take a symbol that starts with "▁" as its right side, so each run from
// one "▁" to the next merges on its own, to the same pieces: the text is
// then merged one word at a time.
func (m *spModel) encodeBPE(out []spSpan, text string, sc *spScratch) []spSpan {
	sc.rev = sc.rev[:0]
	if !m.words {
		return m.bpeRun(out, text, 0, len(text), sc)
	}
	for lo := 0; lo < len(text); {
		hi := len(text)
		if i := strings.Index(text[lo+1:], m.norm.mark()); i >= 0 {
			hi = lo + 1 + i
		}
		if spans, ok := m.cache.get(text[lo:hi]); ok {
			for _, p := range spans {
				out = append(out, spSpan{start: p.start + int32(lo), end: p.end + int32(lo), id: p.id})
			}
		} else {
			first := len(out)
			out = m.bpeRun(out, text, lo, hi, sc)
			m.cache.put(text[lo:hi], out[first:], int32(lo))
		}
		lo = hi
	}
	return out
}

// spCache maps the words of a BPE model to their pieces (offsets within
// the word). It is safe for concurrent use; words longer than cacheMaxWord
// bytes are not kept, and it starts again empty when it holds
// cacheMaxEntries words.
type spCache struct {
	mu  sync.RWMutex
	m   map[string][]spSpan
	off bool // for benchmarks: never cache
}

func (c *spCache) get(w string) ([]spSpan, bool) {
	if c == nil || c.off || len(w) > cacheMaxWord {
		return nil, false
	}
	c.mu.RLock()
	spans, ok := c.m[w]
	c.mu.RUnlock()
	return spans, ok
}

func (c *spCache) put(w string, spans []spSpan, at int32) {
	if c == nil || c.off || len(w) > cacheMaxWord {
		return
	}
	rel := make([]spSpan, len(spans))
	for i, p := range spans {
		rel[i] = spSpan{start: p.start - at, end: p.end - at, id: p.id}
	}
	w = strings.Clone(w)
	c.mu.Lock()
	if len(c.m) >= cacheMaxEntries {
		c.m = make(map[string][]spSpan)
	}
	c.m[w] = rel
	c.mu.Unlock()
}

// bpeRun merges text[lo:hi] and appends its pieces.
func (m *spModel) bpeRun(out []spSpan, text string, lo, hi int, sc *spScratch) []spSpan {
	syms := sc.syms[:0]
	for i := lo; i < hi; {
		n, freeze := 0, false
		if m.matcher != nil {
			if n = m.matcher.longestPrefix(text[i:hi]); n > 0 {
				freeze = true
			}
		}
		if n == 0 {
			n = min(oneCharLen(text[i]), hi-i)
		}
		syms = append(syms, bpeSymbol{
			start: int32(i), end: int32(i + n), prev: int32(len(syms) - 1), next: int32(len(syms) + 1),
			tid: m.trie.lookup(text[i : i+n]), freeze: freeze,
		})
		i += n
	}
	if len(syms) == 0 {
		return out
	}
	syms[len(syms)-1].next = -1
	sc.syms = syms
	// pairOf is MaybeAddNewSymbolPair's lookup: the piece l and r merge
	// into, -1 when none (or when either is a user-defined piece).
	pairOf := func(l, r int32) int32 {
		if l < 0 || r < 0 || syms[l].freeze || syms[r].freeze {
			return -1
		}
		a, b := &syms[l], &syms[r]
		var tid int32
		if a.tid >= 0 && b.tid >= 0 && b.end-a.start <= pairMaxLen {
			tid = m.pairs.get(a.tid, b.tid)
		} else {
			tid = m.trie.lookup(text[a.start:b.end])
		}
		if tid >= 0 && m.pieces[tid].typ == spUnused {
			sc.rev = append(sc.rev, bpeRev{tid: tid, lstart: a.start, lend: a.end, rstart: b.start, rend: b.end})
		}
		return tid
	}
	if len(syms) <= bpeScanMax {
		m.mergeScan(syms, pairOf)
	} else {
		sc.heap = m.mergeHeap(syms, pairOf, sc.heap[:0])
	}
	for i := int32(0); i != -1; i = syms[i].next {
		out = m.resegment(out, text, syms[i].start, syms[i].end, syms[i].tid, sc.rev)
	}
	return out
}

// bpeScanMax is the most symbols mergeScan merges; longer texts use the
// heap, which both give the same merges.
const bpeScanMax = 32

// mergeScan merges the best pair until none is left, finding it by a scan
// of the symbols in text order (the highest score, the leftmost of equals).
func (m *spModel) mergeScan(syms []bpeSymbol, pairOf func(l, r int32) int32) {
	set := func(i int32) {
		c := pairOf(i, syms[i].next)
		syms[i].cand = c
		if c >= 0 {
			syms[i].score = m.pieces[c].score
		}
	}
	for i := range syms {
		set(int32(i))
	}
	for {
		best, score := int32(-1), float32(0)
		for i := range syms {
			if s := &syms[i]; s.cand >= 0 && (best < 0 || s.score > score) {
				best, score = int32(i), s.score
			}
		}
		if best < 0 {
			return
		}
		a := &syms[best]
		b := &syms[a.next]
		a.end, a.tid, a.next = b.end, a.cand, b.next
		if b.next >= 0 {
			syms[b.next].prev = best
		}
		b.start, b.cand = b.end, -1
		if a.prev >= 0 {
			set(a.prev)
		}
		set(best)
	}
}

// mergeHeap is bpe_model.cc's agenda: a priority queue of candidate pairs,
// stale ones skipped when they come up.
func (m *spModel) mergeHeap(syms []bpeSymbol, pairOf func(l, r int32) int32, h bpeHeap) bpeHeap {
	add := func(l, r int32) {
		if tid := pairOf(l, r); tid >= 0 {
			h.push(bpeCandidate{score: m.pieces[tid].score, left: l, right: r, size: syms[r].end - syms[l].start, tid: tid})
		}
	}
	for i := 1; i < len(syms); i++ {
		add(int32(i-1), int32(i))
	}
	for len(h) > 0 {
		top := h.pop()
		a, b := &syms[top.left], &syms[top.right]
		if a.start == a.end || b.start == b.end || (a.end-a.start)+(b.end-b.start) != top.size {
			continue
		}
		a.end, a.tid, a.next = b.end, top.tid, b.next
		if b.next >= 0 {
			syms[b.next].prev = top.left
		}
		b.start = b.end
		add(a.prev, top.left)
		add(top.left, a.next)
	}
	return h
}

func (m *spModel) resegment(out []spSpan, text string, start, end, tid int32, rev []bpeRev) []spSpan {
	if tid < 0 || m.pieces[tid].typ != spUnused {
		return append(out, spSpan{start: start, end: end, id: m.pieceID(text[start:end], tid)})
	}
	for i := len(rev) - 1; i >= 0; i-- {
		r := rev[i]
		if r.tid == tid {
			out = m.resegment(out, text, start, start+(r.lend-r.lstart), m.trie.lookup(text[r.lstart:r.lend]), rev)
			return m.resegment(out, text, start+(r.lend-r.lstart), end, m.trie.lookup(text[r.rstart:r.rend]), rev)
		}
	}
	return append(out, spSpan{start: start, end: end, id: m.pieceID(text[start:end], tid)})
}

// bpeHeap is a max-heap of merge candidates: highest score first, then the
// leftmost.
type bpeHeap []bpeCandidate

func (h bpeHeap) less(i, j int) bool {
	return h[i].score > h[j].score || (h[i].score == h[j].score && h[i].left < h[j].left)
}

func (h *bpeHeap) push(c bpeCandidate) {
	*h = append(*h, c)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *bpeHeap) pop() bpeCandidate {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l, r, s := 2*i+1, 2*i+2, i
		if l < n && q.less(l, s) {
			s = l
		}
		if r < n && q.less(r, s) {
			s = r
		}
		if s == i {
			break
		}
		q[i], q[s] = q[s], q[i]
		i = s
	}
	*h = q
	return top
}

// pairTable is an open-addressing hash table from two trie ids to the trie
// id of their concatenation.
type pairTable struct {
	keys  []uint64
	vals  []int32
	mask  uint64
	shift uint // 64 - log2(len(keys)): the hash is the product's top bits
}

func (p *pairTable) get(a, b int32) int32 {
	if len(p.keys) == 0 {
		return -1
	}
	k := pairKey(a, b) + 1 // 0 marks an empty slot
	for i := (k * pairMul) >> p.shift; ; i = (i + 1) & p.mask {
		switch p.keys[i] {
		case k:
			return p.vals[i]
		case 0:
			return -1
		}
	}
}

// pairMaxLen is the longest piece, in bytes, pairs holds; merges into
// longer ones are looked up in the trie.
const pairMaxLen = 64

// pairMul is Fibonacci hashing's multiplier, 2^64 over the golden ratio.
const pairMul = 0x9E3779B97F4A7C15

// buildPairs fills m.pairs with every way two pieces concatenate into a
// third.
func (m *spModel) buildPairs(normal map[string]int32) {
	type kv struct {
		k uint64
		v int32
	}
	var all []kv
	for s, id := range normal {
		if len(s) > pairMaxLen {
			continue // looked up in the trie when it comes up
		}
		for i := 1; i < len(s); i++ {
			a, ok1 := normal[s[:i]]
			b, ok2 := normal[s[i:]]
			if ok1 && ok2 {
				all = append(all, kv{pairKey(a, b) + 1, id})
			}
		}
	}
	n, bits := uint64(16), uint(4)
	for n < uint64(len(all))*2 {
		n, bits = n*2, bits+1
	}
	m.pairs = pairTable{keys: make([]uint64, n), vals: make([]int32, n), mask: n - 1, shift: 64 - bits}
	for _, e := range all {
		i := (e.k * pairMul) >> m.pairs.shift
		for m.pairs.keys[i] != 0 {
			i = (i + 1) & m.pairs.mask
		}
		m.pairs.keys[i], m.pairs.vals[i] = e.k, e.v
	}
}

// spNormalizer is sentencepiece's normalizer.cc: user-defined pieces kept
// as they are, the longest charsmap rule at each point (else one UTF-8
// character, an invalid byte becoming U+FFFD), extra whitespace removed,
// "▁" in front (add_dummy_prefix) and for each space.
type spNormalizer struct {
	charsmap                     *charsmap
	matcher                      *trie
	dummyPrefix, removeWS, escWS bool
	wsAsSuffix                   bool
	// plain[c] says that the ASCII byte c normalizes to itself.
	plain [utf8.RuneSelf]bool
	// fast[c] says how normalize may copy the byte c without looking the
	// text up: fastPlain (an ASCII byte, not a space, that normalizes to
	// itself), fastBeforeASCII (the same when an ASCII byte or the end
	// follows: no rule takes c with an ASCII byte after it and c alone is
	// not a rule, as letters that only start rules of combining sequences),
	// or 0 (look it up).
	fast [256]uint8
}

const (
	fastPlain = 1 + iota
	fastBeforeASCII
)

func newSPNormalizer(p *spProto, matcher *trie) (spNormalizer, error) {
	n := spNormalizer{matcher: matcher, dummyPrefix: p.dummyPrefix, removeWS: p.removeWS, escWS: p.escWS, wsAsSuffix: p.wsAsSuffix}
	if len(p.charsmap) > 0 {
		cm, err := parseCharsmap(p.charsmap)
		if err != nil {
			return n, fmt.Errorf("normalizer_spec %q: %w", p.normName, err)
		}
		n.charsmap = cm
	}
	for c := range utf8.RuneSelf {
		noMatcher := matcher == nil || matcher.longestPrefix(string(rune(c))) == 0 && !matcherStarts(matcher, byte(c))
		n.plain[c] = (n.charsmap == nil || !n.charsmap.first[c]) && noMatcher
		switch {
		case c == ' ':
		case n.plain[c]:
			n.fast[c] = fastPlain
		case noMatcher && n.charsmap.plainBeforeASCII(byte(c)):
			n.fast[c] = fastBeforeASCII
		}
	}
	return n, nil
}

// matcherStarts reports whether some key of t starts with c.
func matcherStarts(t *trie, c byte) bool {
	i := t.nodes[0].base + int32(c)
	return int(i) < len(t.nodes) && t.nodes[i].check == 0
}

// prefix is NormalizePrefix: the normalized text of the start of s and how
// many bytes of s it takes.
func (n *spNormalizer) prefix(s string) (string, int) {
	if c := s[0]; c < utf8.RuneSelf && n.plain[c] {
		return s[:1], 1
	}
	if n.matcher != nil {
		if l := n.matcher.longestPrefix(s); l > 0 {
			return s[:l], l
		}
	}
	if n.charsmap != nil {
		if rep, l := n.charsmap.longest(s); l > 0 {
			return rep, l
		}
	}
	if s[0] < utf8.RuneSelf {
		return s[:1], 1
	}
	r, l := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && l == 1 {
		return "\uFFFD", 1
	}
	return s[:l], l
}

// mark is what a space becomes: "▁", or " " without escape_whitespaces.
func (n *spNormalizer) mark() string {
	if n.escWS {
		return wordMark
	}
	return " "
}

func (n *spNormalizer) appendWS(dst []byte) []byte {
	if n.escWS {
		return append(dst, wordMark...)
	}
	return append(dst, ' ')
}

// normalize appends the normalized s to dst.
func (n *spNormalizer) normalize(dst []byte, s string) []byte {
	if n.removeWS {
		for s != "" {
			p, l := n.prefix(s)
			if p != " " {
				break
			}
			s = s[l:]
		}
	}
	if s == "" {
		return dst
	}
	start := len(dst)
	if !n.wsAsSuffix && n.dummyPrefix {
		dst = n.appendWS(dst)
	}
	prevSpace := n.removeWS
	for s != "" {
		// The common case: a run of ASCII bytes that are not spaces and
		// that neither rule nor user-defined piece starts with (or none
		// that an ASCII byte can continue, and one follows).
		j := 0
		for j < len(s) && n.fast[s[j]] != 0 {
			j++
		}
		// Only the run's last byte can have a non-ASCII byte after it.
		if j > 0 && j < len(s) && s[j] >= utf8.RuneSelf && n.fast[s[j-1]] == fastBeforeASCII {
			j--
		}
		if j > 0 {
			dst = append(dst, s[:j]...)
			s = s[j:]
			prevSpace = false
			continue
		}
		if s[0] == ' ' && n.plain[' '] {
			// A space no rule starts with: what the general case below
			// does with it.
			if !prevSpace {
				dst = n.appendWS(dst)
			}
			prevSpace = n.removeWS
			s = s[1:]
			continue
		}
		p, l := n.prefix(s)
		for prevSpace && p != "" && p[0] == ' ' {
			p = p[1:]
		}
		if p != "" {
			for i := 0; i < len(p); i++ {
				if n.escWS && p[i] == ' ' {
					dst = append(dst, wordMark...)
				} else {
					dst = append(dst, p[i])
				}
			}
			prevSpace = p[len(p)-1] == ' '
		}
		s = s[l:]
		if !n.removeWS {
			prevSpace = false
		}
	}
	if n.removeWS {
		sp := " "
		if n.escWS {
			sp = wordMark
		}
		for len(dst)-start >= len(sp) && strings.HasSuffix(unsafe.String(&dst[start], len(dst)-start), sp) {
			dst = dst[:len(dst)-len(sp)]
		}
	}
	if n.wsAsSuffix && n.dummyPrefix {
		dst = n.appendWS(dst)
	}
	return dst
}
