package text

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// trieKey is a string and the value a trie maps it to.
type trieKey struct {
	s  string
	id int32
}

// trie is a double-array trie over bytes: the child of node n by byte c is
// t = base(n)+c when check(t) == n. It is built once and only read after.
type trie struct {
	nodes []trieNode
}

type trieNode struct {
	base, check, value int32 // value -1: no key ends here
}

// buildTrie builds a trie of keys (distinct, non-empty strings).
func buildTrie(keys []trieKey) *trie {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b trieKey) int { return strings.Compare(a.s, b.s) })
	t := &trie{nodes: make([]trieNode, 1, len(keys)*2+256)}
	t.nodes[0] = trieNode{check: -1, value: -1}
	b := trieBuilder{t: t, next: []int32{0}, prev: []int32{0}}
	b.build(0, keys, 0)
	return t
}

// trieBuilder places nodes; the free slots form a list in slot order
// (next and prev, with slot 0, the root, as its head) so that the search
// for a base skips the slots taken.
type trieBuilder struct {
	t          *trie
	next, prev []int32
}

// grow makes slots up to i exist, the new ones free.
func (b *trieBuilder) grow(i int) {
	for len(b.t.nodes) <= i {
		n := int32(len(b.t.nodes))
		b.t.nodes = append(b.t.nodes, trieNode{check: -2, value: -1})
		last := b.prev[0]
		b.next = append(b.next, 0)
		b.prev = append(b.prev, last)
		b.next[last] = n
		b.prev[0] = n
	}
}

// take marks the free slot i as node of parent.
func (b *trieBuilder) take(i, parent int) {
	b.t.nodes[i] = trieNode{check: int32(parent), value: -1}
	p, n := b.prev[i], b.next[i]
	b.next[p], b.prev[n] = n, p
}

// build places the children of node n, whose keys all share their first
// depth bytes.
func (b *trieBuilder) build(n int, keys []trieKey, depth int) {
	if len(keys) > 0 && len(keys[0].s) == depth {
		b.t.nodes[n].value = keys[0].id
		keys = keys[1:]
	}
	if len(keys) == 0 {
		return
	}
	var labels []byte
	for _, k := range keys {
		if c := k.s[depth]; len(labels) == 0 || labels[len(labels)-1] != c {
			labels = append(labels, c)
		}
	}
	first, last := int(labels[0]), int(labels[len(labels)-1])
	base := 0
	for p := int(b.next[0]); ; {
		if p == 0 { // past the last free slot: add slots
			p = len(b.t.nodes)
			b.grow(max(p, first+1))
			p = max(p, first+1)
		}
		if base = p - first; base >= 1 {
			b.grow(base + last)
			ok := true
			for _, c := range labels[1:] {
				if b.t.nodes[base+int(c)].check != -2 {
					ok = false
					break
				}
			}
			if ok {
				break
			}
		}
		p = int(b.next[p])
	}
	b.t.nodes[n].base = int32(base)
	for _, c := range labels {
		b.take(base+int(c), n)
	}
	for len(keys) > 0 {
		c := keys[0].s[depth]
		j := 1
		for j < len(keys) && keys[j].s[depth] == c {
			j++
		}
		b.build(base+int(c), keys[:j], depth+1)
		keys = keys[j:]
	}
}

// lookup returns the value of the key s, or -1.
func (t *trie) lookup(s string) int32 {
	n := int32(0)
	for i := 0; i < len(s); i++ {
		c := t.nodes[n].base + int32(s[i])
		if int(c) >= len(t.nodes) || t.nodes[c].check != n {
			return -1
		}
		n = c
	}
	return t.nodes[n].value
}

// longestPrefix returns the length of the longest key that s starts with
// (0: none).
func (t *trie) longestPrefix(s string) int {
	n, best := int32(0), 0
	for i := 0; i < len(s); i++ {
		c := t.nodes[n].base + int32(s[i])
		if int(c) >= len(t.nodes) || t.nodes[c].check != n {
			break
		}
		n = c
		if t.nodes[n].value >= 0 {
			best = i + 1
		}
	}
	return best
}

// charsmap is a precompiled_charsmap of a NormalizerSpec: a darts-clone
// double array whose values are offsets of NUL-terminated replacements in
// the normalized-strings blob.
type charsmap struct {
	units      []uint32
	normalized string
	// first[c] says that some key starts with byte c.
	first [256]bool
}

// parseCharsmap reads a precompiled_charsmap: a little-endian uint32 size
// of the trie, the trie's units, then the normalized strings.
func parseCharsmap(blob []byte) (*charsmap, error) {
	if len(blob) <= 4 {
		return nil, fmt.Errorf("precompiled_charsmap is %d bytes, want a 4-byte trie size and a trie", len(blob))
	}
	size := binary.LittleEndian.Uint32(blob)
	if uint64(size) >= uint64(len(blob)) || size%4 != 0 || size == 0 {
		return nil, fmt.Errorf("precompiled_charsmap: trie size %d does not fit its %d bytes (want a multiple of 4 below that)", size, len(blob))
	}
	cm := &charsmap{units: make([]uint32, size/4), normalized: string(blob[4+size:])}
	for i := range cm.units {
		cm.units[i] = binary.LittleEndian.Uint32(blob[4+4*i:])
	}
	if len(cm.normalized) > 0 && cm.normalized[len(cm.normalized)-1] != 0 {
		return nil, errors.New("precompiled_charsmap: the normalized strings do not end with NUL")
	}
	root := cm.units[0]
	for c := range 256 {
		id := dartsOffset(root) ^ uint32(c)
		if id < uint32(len(cm.units)) && dartsLabel(cm.units[id]) == uint32(c) {
			cm.first[c] = true
		}
	}
	return cm, nil
}

// plainBeforeASCII reports whether the ASCII byte c, followed by an ASCII
// byte or by nothing, is left as it is: it is not a key, and no key is c
// followed by an ASCII byte and more.
func (cm *charsmap) plainBeforeASCII(c byte) bool {
	if !cm.first[c] {
		return true
	}
	u := cm.units
	id := dartsOffset(u[0]) ^ uint32(c)
	unit := u[id] // cm.first[c]: in range, labelled c
	id ^= dartsOffset(unit)
	if dartsHasLeaf(unit) {
		return false // c alone is a key
	}
	for d := range uint32(utf8.RuneSelf) {
		if k := id ^ d; k < uint32(len(u)) && dartsLabel(u[k]) == d {
			return false
		}
	}
	return true
}

// The fields of a darts-clone unit.
func dartsHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func dartsValue(u uint32) uint32  { return u & (1<<31 - 1) }
func dartsLabel(u uint32) uint32  { return u & (1<<31 | 0xFF) }
func dartsOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }

// longest returns the replacement of the longest key s starts with and the
// key's length (0: none), as normalizer.cc's NormalizePrefix reads the
// first 32 results of darts-clone's commonPrefixSearch.
func (cm *charsmap) longest(s string) (string, int) {
	if !cm.first[s[0]] {
		return "", 0
	}
	u := cm.units
	id := dartsOffset(u[0])
	bestLen, bestVal, found := 0, uint32(0), 0
	for i := 0; i < len(s); i++ {
		c := uint32(s[i])
		id ^= c
		if id >= uint32(len(u)) {
			break
		}
		unit := u[id]
		if dartsLabel(unit) != c {
			break
		}
		id ^= dartsOffset(unit)
		if dartsHasLeaf(unit) {
			if id >= uint32(len(u)) {
				break
			}
			if found < 32 {
				bestLen, bestVal = i+1, dartsValue(u[id])
			}
			found++
		}
	}
	if bestLen == 0 || int(bestVal) >= len(cm.normalized) {
		return "", 0
	}
	rep := cm.normalized[bestVal:]
	end := 0
	for end < len(rep) && rep[end] != 0 {
		end++
	}
	return rep[:end], bestLen
}

// extends reports whether some key is longer than s (not empty) and starts
// with it.
func (cm *charsmap) extends(s string) bool {
	if !cm.first[s[0]] {
		return false
	}
	u := cm.units
	id := dartsOffset(u[0])
	for i := 0; i < len(s); i++ {
		c := uint32(s[i])
		id ^= c
		if id >= uint32(len(u)) || dartsLabel(u[id]) != c {
			return false
		}
		id ^= dartsOffset(u[id])
	}
	for c := range uint32(256) {
		if k := id ^ c; k < uint32(len(u)) && dartsLabel(u[k]) == c {
			return true
		}
	}
	return false
}

// extends reports whether some key is longer than s and starts with it.
func (t *trie) extends(s string) bool {
	n := int32(0)
	for i := 0; i < len(s); i++ {
		c := t.nodes[n].base + int32(s[i])
		if int(c) >= len(t.nodes) || t.nodes[c].check != n {
			return false
		}
		n = c
	}
	for c := range int32(256) {
		if k := t.nodes[n].base + c; k >= 0 && int(k) < len(t.nodes) && t.nodes[k].check == n {
			return true
		}
	}
	return false
}
