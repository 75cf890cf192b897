package ftfy

import (
	"strings"
	"unicode/utf8"
)

// This file is ftfy's decode_inconsistent_utf8 and the UTF8_DETECTOR_RE it
// scans with: runs of characters that look like the UTF-8 of one character
// read in a single-byte codec (a lead character of a 2-, 3- or 4-byte
// sequence, then 1, 2 or 3 continuation characters), not preceded by a
// strict continuation character.

// clueAt returns the byte length of the detector's match at byte i of s, or
// 0. The run is greedy; at each step the 2-, 3- and 4-byte forms are tried
// in that order, as Python's alternation does.
func clueAt(s string, i int) int {
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		if classOf(r)&cContStrict != 0 {
			return 0
		}
	}
	j := i
	for {
		n := clueSequence(s[j:])
		if n == 0 {
			return j - i
		}
		j += n
	}
}

// clueSequence returns the byte length of one lead-and-continuations
// sequence at the start of s, or 0.
func clueSequence(s string) int {
	lead, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return 0
	}
	c := classOf(lead)
	for k, bit := range [...]uint32{cFirst2, cFirst3, cFirst4} {
		if c&bit == 0 {
			continue
		}
		if m := continuations(s[n:], k+1); m > 0 {
			return n + m
		}
	}
	return 0
}

// continuations returns the byte length of count continuation characters
// at the start of s, or 0.
func continuations(s string, count int) int {
	j := 0
	for range count {
		r, n := utf8.DecodeRuneInString(s[j:])
		if n == 0 || classOf(r)&cCont == 0 {
			return 0
		}
		j += n
	}
	return j
}

// hasUTF8Clue reports whether the detector matches somewhere in s.
func hasUTF8Clue(s string) bool {
	for i := range s {
		if clueAt(s, i) > 0 {
			return true
		}
	}
	return false
}

// decodeInconsistentUTF8 is decode_inconsistent_utf8: each detector match,
// left to right, shorter than s and bad by the heuristic, is replaced by its
// fix_encoding.
func decodeInconsistentUTF8(s string) string {
	total := utf8.RuneCountInString(s)
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; i < len(s); {
		n := clueAt(s, i)
		if n == 0 {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			continue
		}
		m := s[i : i+n]
		if utf8.RuneCountInString(m) < total && isBad(m) {
			b.WriteString(s[last:i])
			b.WriteString(fixEncoding(m))
			last = i + n
		}
		i += n
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
