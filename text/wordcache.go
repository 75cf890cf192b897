package text

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
)

// wordCache maps words to what encoding them gives (ids, lattice edges, a
// Unigram word's pieces and their margins): a table of wordCacheSlots
// immutable entries, each slot an atomic pointer, where a word may sit in
// one of two slots its hash picks. A lookup takes no lock; a word put goes
// to a free one of its slots, else replaces what the first held, so the
// cache stays within a few megabytes. Words longer than wordCacheMaxWord
// bytes are not kept. It is safe for concurrent use once init has run; the
// zero value and nil cache nothing.
type wordCache[V any] struct {
	slots []atomic.Pointer[wordCacheEntry[V]]
	seed  maphash.Seed
	off   bool // for benchmarks and tests: never cache
}

type wordCacheEntry[V any] struct {
	word string
	v    V
}

const (
	wordCacheMaxWord = 256
	wordCacheSlots   = 1 << 14
)

func (c *wordCache[V]) init() {
	c.slots = make([]atomic.Pointer[wordCacheEntry[V]], wordCacheSlots)
	c.seed = maphash.MakeSeed()
}

// keeps reports whether the cache holds words such as w.
func (c *wordCache[V]) keeps(w string) bool {
	return c != nil && len(w) <= wordCacheMaxWord && !c.off && c.slots != nil
}

// where returns the two slots of w.
func (c *wordCache[V]) where(w string) (a, b *atomic.Pointer[wordCacheEntry[V]]) {
	h := maphash.String(c.seed, w)
	return &c.slots[h&(wordCacheSlots-1)], &c.slots[(h>>32)&(wordCacheSlots-1)]
}

func (c *wordCache[V]) get(w string) (V, bool) {
	var none V
	if !c.keeps(w) {
		return none, false
	}
	a, b := c.where(w)
	if e := a.Load(); e != nil && e.word == w {
		return e.v, true
	}
	if e := b.Load(); e != nil && e.word == w {
		return e.v, true
	}
	return none, false
}

// ref is get without the copy: a pointer to the cached value of w, which
// must not be written; nil when w is not cached.
func (c *wordCache[V]) ref(w string) *V {
	if !c.keeps(w) {
		return nil
	}
	a, b := c.where(w)
	if e := a.Load(); e != nil && e.word == w {
		return &e.v
	}
	if e := b.Load(); e != nil && e.word == w {
		return &e.v
	}
	return nil
}

// put keeps a copy of w and v as it is: v must not be written afterwards
// (pass a copy of scratch memory).
func (c *wordCache[V]) put(w string, v V) {
	if !c.keeps(w) {
		return
	}
	e := &wordCacheEntry[V]{word: strings.Clone(w), v: v}
	a, b := c.where(w)
	if a.Load() != nil && b.Load() == nil {
		b.Store(e)
		return
	}
	a.Store(e)
}

// putCopy is put with a copy of v, made only when c keeps w.
func putCopy[T any](c *wordCache[[]T], w string, v []T) {
	if c.keeps(w) {
		c.put(w, slices.Clone(v))
	}
}

// widen appends ids, as a word cache holds them, to dst as ints.
func widen(dst []int, ids []int32) []int {
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	return dst
}
