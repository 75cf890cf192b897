package text

import (
	"container/heap"
	"strings"
	"sync"
)

// byteRunes is GPT-2's bytes_to_unicode table: the printable bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves, the other 68 bytes map in order to
// U+0100 and up. Byte-level vocabularies spell every token with these runes.
var byteRunes = func() (t [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// runeBytes inverts byteRunes: runeBytes[r] is the byte rune r stands for, or
// -1 when r is not a byte-level rune.
var runeBytes = func() (t [324]int16) {
	for i := range t {
		t[i] = -1
	}
	for b, r := range byteRunes {
		t[r] = int16(b)
	}
	return t
}()

// merge is one BPE merge: its rank (priority, lower first) and the id of the
// token it makes.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpe holds a byte-level BPE model with an end-of-word suffix.
type bpe struct {
	merges map[uint64]merge
	// byteID[b] and byteEndID[b] are the ids of byte b's symbol inside a word
	// and at its end (with the suffix); noID when the vocabulary lacks it.
	byteID, byteEndID [256]int32
	unk               int32 // noID when there is no unknown token
	fuseUnk           bool
	// whole maps a whole word plus suffix to its id when the model sets
	// ignore_merges (nil otherwise).
	whole map[string]int32
	cache *bpeCache
}

const noID = -1

// word appends the ids BPE makes of one pre-token (raw bytes, before the
// byte-level mapping), using and filling the cache.
func (m *bpe) word(dst []int, w string) []int {
	if ids, ok := m.cache.get(w); ok {
		return widen(dst, ids)
	}
	ids := m.encodeWord(w)
	m.cache.put(w, ids)
	return widen(dst, ids)
}

// encodeWord runs BPE on one pre-token without the cache.
func (m *bpe) encodeWord(w string) []int32 {
	if m.whole != nil {
		if id, ok := m.whole[w]; ok {
			return []int32{id}
		}
	}
	syms := make([]int32, 0, len(w))
	for i := 0; i < len(w); i++ {
		id := m.byteID[w[i]]
		if i == len(w)-1 {
			id = m.byteEndID[w[i]]
		}
		if id == noID {
			if m.unk == noID {
				continue // HF drops symbols it cannot spell when there is no unk token
			}
			if m.fuseUnk && len(syms) > 0 && syms[len(syms)-1] == m.unk {
				continue
			}
			id = m.unk
		}
		syms = append(syms, id)
	}
	if len(syms) <= smallWord {
		return m.mergeSmall(syms)
	}
	return m.mergeHeap(syms)
}

// smallWord is the length up to which the quadratic merge loop is used.
const smallWord = 48

// mergeSmall applies merges to syms in place: again and again, the pair with
// the lowest rank (leftmost on ties) becomes one symbol. Quadratic; for short
// words, where it is fastest.
func (m *bpe) mergeSmall(syms []int32) []int32 {
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			mg, ok := m.merges[pairKey(syms[i], syms[i+1])]
			if ok && (at < 0 || mg.rank < best.rank) {
				best, at = mg, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// mergeHeap gives the same result as mergeSmall in O(n log n), as Hugging
// Face's tokenizers does it: a priority queue of candidate pairs by (rank,
// position) over a linked list of symbols, skipping stale candidates.
func (m *bpe) mergeHeap(syms []int32) []int32 {
	n := len(syms)
	prev := make([]int, n)
	next := make([]int, n)
	alive := make([]bool, n)
	for i := range syms {
		prev[i], next[i], alive[i] = i-1, i+1, true
	}
	next[n-1] = -1
	q := &pairQueue{}
	for i := 0; i+1 < n; i++ {
		if mg, ok := m.merges[pairKey(syms[i], syms[i+1])]; ok {
			q.items = append(q.items, candidate{mg.rank, int32(i), mg.id})
		}
	}
	heap.Init(q)
	for q.Len() > 0 {
		c := heap.Pop(q).(candidate)
		i := int(c.pos)
		if !alive[i] || next[i] < 0 {
			continue
		}
		j := next[i]
		if mg, ok := m.merges[pairKey(syms[i], syms[j])]; !ok || mg.id != c.id {
			continue
		}
		syms[i] = c.id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		if p := prev[i]; p >= 0 {
			if mg, ok := m.merges[pairKey(syms[p], syms[i])]; ok {
				heap.Push(q, candidate{mg.rank, int32(p), mg.id})
			}
		}
		if k := next[i]; k >= 0 {
			if mg, ok := m.merges[pairKey(syms[i], syms[k])]; ok {
				heap.Push(q, candidate{mg.rank, int32(i), mg.id})
			}
		}
	}
	out := syms[:0]
	for i := 0; i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

type candidate struct {
	rank, pos, id int32
}

type pairQueue struct{ items []candidate }

func (q *pairQueue) Len() int { return len(q.items) }
func (q *pairQueue) Less(a, b int) bool {
	x, y := q.items[a], q.items[b]
	return x.rank < y.rank || (x.rank == y.rank && x.pos < y.pos)
}
func (q *pairQueue) Swap(a, b int) { q.items[a], q.items[b] = q.items[b], q.items[a] }
func (q *pairQueue) Push(x any)    { q.items = append(q.items, x.(candidate)) }
func (q *pairQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// bpeCache maps pre-tokens to their BPE ids. It is safe for concurrent use.
// Words longer than cacheMaxWord bytes are not cached; when it holds
// cacheMaxEntries words it is emptied and starts again.
type bpeCache struct {
	mu  sync.RWMutex
	m   map[string][]int32
	off bool // for benchmarks: never cache
}

const (
	cacheMaxWord    = 100
	cacheMaxEntries = 1 << 17
)

func newBPECache() *bpeCache { return &bpeCache{m: make(map[string][]int32)} }

func (c *bpeCache) get(w string) ([]int32, bool) {
	if len(w) > cacheMaxWord || c.off {
		return nil, false
	}
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *bpeCache) put(w string, ids []int32) {
	if len(w) > cacheMaxWord || c.off {
		return
	}
	ids = append([]int32(nil), ids...)
	w = strings.Clone(w) // w may be a slice of a long prompt
	c.mu.Lock()
	if len(c.m) >= cacheMaxEntries {
		c.m = make(map[string][]int32)
	}
	c.m[w] = ids
	c.mu.Unlock()
}
