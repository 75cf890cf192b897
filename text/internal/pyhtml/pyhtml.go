// Package pyhtml holds the part of Python's html.unescape that the
// tokenizer's cleaning and ftfy's fixes both need: what a numeric character
// reference becomes (HTML5's replacements for the Windows-1252 range and
// NUL, the surrogates and code points past U+10FFFF replaced, the invalid
// code points dropped). It is ours because Go's html package resolves
// numeric references by other rules.
package pyhtml

import (
	"strconv"
	"strings"
)

// invalidCharrefs is Python's html._invalid_charrefs: HTML5's replacements
// for numeric references 0x80..0x9F (and 0x00, 0x0D).
var invalidCharrefs = map[uint64]string{
	0x00: "\ufffd", 0x0d: "\r", 0x80: "\u20ac", 0x81: "\u0081", 0x82: "\u201a", 0x83: "\u0192",
	0x84: "\u201e", 0x85: "\u2026", 0x86: "\u2020", 0x87: "\u2021", 0x88: "\u02c6", 0x89: "\u2030",
	0x8a: "\u0160", 0x8b: "\u2039", 0x8c: "\u0152", 0x8d: "\u008d", 0x8e: "\u017d", 0x8f: "\u008f",
	0x90: "\u0090", 0x91: "\u2018", 0x92: "\u2019", 0x93: "\u201c", 0x94: "\u201d", 0x95: "\u2022",
	0x96: "\u2013", 0x97: "\u2014", 0x98: "\u02dc", 0x99: "\u2122", 0x9a: "\u0161", 0x9b: "\u203a",
	0x9c: "\u0153", 0x9d: "\u009d", 0x9e: "\u017e", 0x9f: "\u0178",
}

// NumericRef returns what Python's html.unescape makes of a numeric
// character reference with these digits in base (10 or 16).
func NumericRef(digits string, base int) string {
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		digits = "0"
	}
	num, err := strconv.ParseUint(digits, base, 64)
	if err != nil { // overflow: far beyond U+10FFFF
		return "\ufffd"
	}
	if rep, ok := invalidCharrefs[num]; ok {
		return rep
	}
	if (num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF {
		return "\ufffd"
	}
	if invalidCodepoint(num) {
		return ""
	}
	return string(rune(num))
}

// invalidCodepoint is Python's html._invalid_codepoints: C0 and C1 controls
// but tab, newline, form feed and carriage return; the noncharacters.
func invalidCodepoint(c uint64) bool {
	switch {
	case c >= 0x1 && c <= 0x8, c == 0xB, c >= 0xE && c <= 0x1F, c >= 0x7F && c <= 0x9F,
		c >= 0xFDD0 && c <= 0xFDEF:
		return true
	}
	return c&0xFFFE == 0xFFFE
}
