package text

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// wordCache maps words to what encoding them gives (ids, lattice edges): a
// table of wordCacheSlots immutable entries, each slot an atomic pointer,
// where a word may sit in one of two slots its hash picks. A lookup takes no
// lock; a word put goes to a free one of its slots, else replaces what the
// first held, so the cache stays within a few megabytes. Words longer than
// wordCacheMaxWord bytes are not kept. It is safe for concurrent use once
// init has run; the zero value and nil cache nothing.
type wordCache[T any] struct {
	slots []atomic.Pointer[wordCacheEntry[T]]
	seed  maphash.Seed
	off   bool // for benchmarks and tests: never cache
}

type wordCacheEntry[T any] struct {
	word string
	v    []T
}

const (
	wordCacheMaxWord = 256
	wordCacheSlots   = 1 << 14
)

func (c *wordCache[T]) init() {
	c.slots = make([]atomic.Pointer[wordCacheEntry[T]], wordCacheSlots)
	c.seed = maphash.MakeSeed()
}

// where returns the two slots of w.
func (c *wordCache[T]) where(w string) (a, b *atomic.Pointer[wordCacheEntry[T]]) {
	h := maphash.String(c.seed, w)
	return &c.slots[h&(wordCacheSlots-1)], &c.slots[(h>>32)&(wordCacheSlots-1)]
}

func (c *wordCache[T]) get(w string) ([]T, bool) {
	if c == nil || len(w) > wordCacheMaxWord || c.off || c.slots == nil {
		return nil, false
	}
	a, b := c.where(w)
	if e := a.Load(); e != nil && e.word == w {
		return e.v, true
	}
	if e := b.Load(); e != nil && e.word == w {
		return e.v, true
	}
	return nil, false
}

// put keeps copies of w and v.
func (c *wordCache[T]) put(w string, v []T) {
	if c == nil || len(w) > wordCacheMaxWord || c.off || c.slots == nil {
		return
	}
	e := &wordCacheEntry[T]{word: strings.Clone(w), v: append([]T(nil), v...)}
	a, b := c.where(w)
	if a.Load() != nil && b.Load() == nil {
		b.Store(e)
		return
	}
	a.Store(e)
}
