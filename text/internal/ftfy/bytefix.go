package ftfy

import "bytes"

// byteSet is a set of bytes, one bit each.
type byteSet [4]uint64

// set returns the byteSet of the inclusive ranges in pairs (lo, hi, lo, hi...).
func set(pairs ...byte) byteSet {
	var s byteSet
	for i := 0; i+1 < len(pairs); i += 2 {
		for c := int(pairs[i]); c <= int(pairs[i+1]); c++ {
			s[c>>6] |= 1 << (c & 63)
		}
	}
	return s
}

func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// bytePattern is a regular expression of fixed length: one set per byte.
type bytePattern []byteSet

// matchAt returns the length of the first of pats (in order: Python's
// alternation) that matches b at i, or 0.
func matchAt(b []byte, i int, pats []bytePattern) int {
next:
	for _, p := range pats {
		if i+len(p) > len(b) {
			continue
		}
		for k := range p {
			if !p[k].has(b[i+k]) {
				continue next
			}
		}
		return len(p)
	}
	return 0
}

var (
	space     = set(' ', ' ')
	cont      = set(0x80, 0xBF)
	contNoA0  = set(0x80, 0x84, 0x86, 0x9F, 0xA1, 0xBF) // continuation bytes but 0x85 and 0xA0
	sub       = set(0x1A, 0x1A)
	subQ      = set(0x1A, 0x1A, '?', '?')
	subCont   = set(0x1A, 0x1A, 0x80, 0xBF)
	subQCont  = set(0x1A, 0x1A, '?', '?', 0x80, 0xBF)
	leadF0    = set(0xF0, 0xF0)
	leadF0F4  = set(0xF0, 0xF4)
	leadE0EF  = set(0xE0, 0xEF)
	leadED    = set(0xED, 0xED)
	highSurr  = set(0xA0, 0xAF)
	lowSurr   = set(0xB0, 0xBF)
	lead2Byte = set(0xC2, 0xDF)
)

// alteredUTF8 is ftfy's ALTERED_UTF8_RE: UTF-8 sequences whose 0xA0 byte a
// program turned into a space.
var alteredUTF8 = []bytePattern{
	{set(0xC2, 0xC3, 0xC5, 0xC5, 0xCE, 0xCE, 0xD0, 0xD0, 0xD9, 0xD9), space},
	{set(0xE2, 0xE3), space, contNoA0},
	{set(0xE0, 0xE3), contNoA0, space},
	{leadF0, space, cont, cont},
	{leadF0, cont, space, cont},
	{leadF0, cont, cont, space},
}

// lossyUTF8 is ftfy's LOSSY_UTF8_RE: UTF-8 and CESU-8 sequences in which
// bytes were lost (0x1A, or at most one '?').
var lossyUTF8 = []bytePattern{
	{lead2Byte, sub},
	{set(0xC2, 0xC3), set('?', '?')},
	{leadED, highSurr, subQ, leadED, lowSurr, subQCont},
	{leadED, highSurr, subQCont, leadED, lowSurr, subQ},
	{leadE0EF, subQ, subCont},
	{leadE0EF, subCont, subQ},
	{leadF0F4, subQ, subCont, subCont},
	{leadF0F4, subCont, subQ, subCont},
	{leadF0F4, subCont, subCont, subQ},
	{sub},
}

// hasMatch reports whether any of pats matches somewhere in b.
func hasMatch(b []byte, pats []bytePattern) bool {
	for i := range b {
		if matchAt(b, i, pats) > 0 {
			return true
		}
	}
	return false
}

// replaceAll is Python's re.sub over pats: each match, left to right and not
// overlapping, becomes repl(match).
func replaceAll(b []byte, pats []bytePattern, repl func(m []byte) []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		n := matchAt(b, i, pats)
		if n == 0 {
			i++
			continue
		}
		out = append(out, b[last:i]...)
		out = append(out, repl(b[i:i+n])...)
		i += n
		last = i
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// restoreByteA0 is ftfy's restore_byte_a0: "Ã " standing for "à" as a word
// gets its 0xA0 back before the space (but not before "  ", "quele",
// "quela", "quilo" or "s "), then the spaces of alteredUTF8's matches become
// 0xA0.
func restoreByteA0(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); i++ {
		out = append(out, b[i])
		if b[i] == 0xC3 && i+1 < len(b) && b[i+1] == ' ' && !aGraveException(b[i+2:]) {
			out = append(out, 0xA0)
		}
	}
	return replaceAll(out, alteredUTF8, func(m []byte) []byte {
		return bytes.ReplaceAll(m, []byte{' '}, []byte{0xA0})
	})
}

// aGraveException reports whether the bytes after "Ã " begin one of the
// words restore_byte_a0 leaves alone.
func aGraveException(rest []byte) bool {
	for _, w := range []string{" ", "quele", "quela", "quilo", "s "} {
		if bytes.HasPrefix(rest, []byte(w)) {
			return true
		}
	}
	return false
}

// replaceLossy is ftfy's replace_lossy_sequences: each lossyUTF8 match
// becomes the UTF-8 of U+FFFD.
func replaceLossy(b []byte) []byte {
	return replaceAll(b, lossyUTF8, func([]byte) []byte { return []byte("\ufffd") })
}
