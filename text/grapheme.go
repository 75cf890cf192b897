package text

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// This file finds extended grapheme clusters (Unicode's UAX #29), which the
// Hugging Face library's Precompiled normalizer works on (it takes them from
// the unicode-segmentation crate). The rules are GB3 to GB13 but GB9c (Indic
// conjuncts), with the Grapheme_Cluster_Break property derived from Go's
// unicode tables (Unicode 15.0) and Extended_Pictographic from
// grapheme_tables.go. What the normalizer does with a cluster differs from
// what it does with its characters only for a cluster of several
// characters shorter than 6 bytes; GB9c only joins clusters of 9 bytes and
// more, so leaving it out can change a result only where a cluster it would
// have joined continues with a 2-byte combining mark after an Indic
// consonant.

// Grapheme_Cluster_Break values.
const (
	gcbOther uint8 = iota
	gcbCR
	gcbLF
	gcbControl
	gcbExtend
	gcbZWJ
	gcbRI
	gcbPrepend
	gcbSpacingMark
	gcbL
	gcbV
	gcbT
	gcbLV
	gcbLVT
)

// graphemeLen returns the length in bytes of the first extended grapheme
// cluster of s (0 for an empty s).
func graphemeLen(s string) int {
	if s == "" {
		return 0
	}
	r, n := utf8.DecodeRuneInString(s)
	prev, ep := gcbOf(r)
	// emoji: the text so far ends with Extended_Pictographic Extend*;
	// emojiZWJ: with that and a ZWJ (GB11). ri: regional indicators
	// ending the text so far (GB12, GB13).
	emoji, emojiZWJ := ep, false
	ri := 0
	if prev == gcbRI {
		ri = 1
	}
	i := n
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		next, ep := gcbOf(r)
		if graphemeBreak(prev, next, ep, emojiZWJ, ri) {
			break
		}
		switch {
		case ep:
			emoji, emojiZWJ = true, false
		case next == gcbExtend:
			emojiZWJ = false
		case next == gcbZWJ:
			emoji, emojiZWJ = false, emoji
		default:
			emoji, emojiZWJ = false, false
		}
		if next == gcbRI {
			ri++
		} else {
			ri = 0
		}
		prev = next
		i += n
	}
	return i
}

// graphemeBreak reports whether a cluster ends between a character of
// class prev and one of class next (nextEP: Extended_Pictographic).
func graphemeBreak(prev, next uint8, nextEP, emojiZWJ bool, ri int) bool {
	switch {
	case prev == gcbCR && next == gcbLF: // GB3
		return false
	case prev == gcbCR || prev == gcbLF || prev == gcbControl: // GB4
		return true
	case next == gcbCR || next == gcbLF || next == gcbControl: // GB5
		return true
	case prev == gcbL && (next == gcbL || next == gcbV || next == gcbLV || next == gcbLVT): // GB6
		return false
	case (prev == gcbLV || prev == gcbV) && (next == gcbV || next == gcbT): // GB7
		return false
	case (prev == gcbLVT || prev == gcbT) && next == gcbT: // GB8
		return false
	case next == gcbExtend || next == gcbZWJ: // GB9
		return false
	case next == gcbSpacingMark: // GB9a
		return false
	case prev == gcbPrepend: // GB9b
		return false
	case prev == gcbZWJ && nextEP && emojiZWJ: // GB11
		return false
	case prev == gcbRI && next == gcbRI: // GB12, GB13
		return ri%2 == 0
	}
	return true // GB999
}

// gcbOf returns the Grapheme_Cluster_Break of r and whether it is
// Extended_Pictographic.
func gcbOf(r rune) (uint8, bool) {
	if r < utf8.RuneSelf {
		switch {
		case r == '\r':
			return gcbCR, false
		case r == '\n':
			return gcbLF, false
		case r < 0x20 || r == 0x7F:
			return gcbControl, false
		}
		return gcbOther, false
	}
	ep := isExtPict(r)
	switch {
	case r == 0x200D:
		return gcbZWJ, false
	case 0x1F1E6 <= r && r <= 0x1F1FF:
		return gcbRI, false
	case 0x1100 <= r && r <= 0x115F, 0xA960 <= r && r <= 0xA97C:
		return gcbL, false
	case 0x1160 <= r && r <= 0x11A7, 0xD7B0 <= r && r <= 0xD7C6:
		return gcbV, false
	case 0x11A8 <= r && r <= 0x11FF, 0xD7CB <= r && r <= 0xD7FB:
		return gcbT, false
	case 0xAC00 <= r && r <= 0xD7A3:
		if (r-0xAC00)%28 == 0 {
			return gcbLV, false
		}
		return gcbLVT, false
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Other_Grapheme_Extend), 0x1F3FB <= r && r <= 0x1F3FF:
		return gcbExtend, ep
	case unicode.Is(unicode.Prepended_Concatenation_Mark, r) || isPrependLetter(r):
		return gcbPrepend, ep
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp):
		return gcbControl, ep
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) && !isAssigned(r):
		return gcbControl, ep
	case r == 0x0E33 || r == 0x0EB3:
		return gcbSpacingMark, ep
	case unicode.Is(unicode.Mc, r) && !isNotSpacingMark(r):
		return gcbSpacingMark, ep
	}
	return gcbOther, ep
}

// isPrependLetter reports the letters of Indic_Syllabic_Category
// Consonant_Preceding_Repha and Consonant_Prefixed, which are
// Grapheme_Cluster_Break Prepend.
func isPrependLetter(r rune) bool {
	switch {
	case r == 0x0D4E, r == 0x111C2, r == 0x111C3, r == 0x1193F, r == 0x11941, r == 0x11A3A,
		0x11A84 <= r && r <= 0x11A89, r == 0x11D46, r == 0x11F02:
		return true
	}
	return false
}

// isNotSpacingMark reports the spacing marks (General_Category Mc) that
// UAX #29 leaves out of SpacingMark.
func isNotSpacingMark(r rune) bool {
	switch {
	case r == 0x102B, r == 0x102C, r == 0x1038, 0x1062 <= r && r <= 0x1064, 0x1067 <= r && r <= 0x106D,
		r == 0x1083, 0x1087 <= r && r <= 0x108C, r == 0x108F, 0x109A <= r && r <= 0x109C,
		r == 0x1A61, r == 0x1A63, r == 0x1A64, r == 0xAA7B, r == 0xAA7D, r == 0x11720, r == 0x11721:
		return true
	}
	return false
}

// isAssigned reports whether r has a General_Category other than Cn.
func isAssigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.C)
}

// isExtPict reports whether r is Extended_Pictographic.
func isExtPict(r rune) bool {
	if r < extPict[0][0] {
		return false
	}
	i := sort.Search(len(extPict), func(i int) bool { return extPict[i][1] >= r })
	return i < len(extPict) && extPict[i][0] <= r
}
