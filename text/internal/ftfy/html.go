package ftfy

import (
	"strconv"
	"strings"
)

// unescapeHTML is ftfy's unescape_html: each &name; or &#number; of 1 to 24
// letters and digits that ftfy's table holds (HTML5's names ending in ';',
// and upper-case forms of the lower-case ones Python's html.unescape leaves
// alone) or that is a whole numeric reference becomes its text; anything else
// is kept.
func unescapeHTML(s string) string {
	i := strings.IndexByte(s, '&')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		b.WriteString(s[:i])
		s = s[i:]
		n := entityLen(s)
		if n == 0 {
			b.WriteByte('&')
			s = s[1:]
		} else {
			b.WriteString(entityText(s[:n]))
			s = s[n:]
		}
		i = strings.IndexByte(s, '&')
	}
	b.WriteString(s)
	return b.String()
}

// entityLen returns the length of the match of &#?[0-9A-Za-z]{1,24}; at the
// start of s, or 0.
func entityLen(s string) int {
	j := 1
	if j < len(s) && s[j] == '#' {
		j++
	}
	start := j
	for j < len(s) && j-start < 24 && isAlnum(s[j]) {
		j++
	}
	if j == start || j >= len(s) || s[j] != ';' {
		return 0
	}
	return j + 1
}

func isAlnum(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// entityText returns the text of the entity e ("&...;"), or e when ftfy
// leaves it: a numeric reference is replaced only when Python's html.unescape
// reads all of it, semicolon included.
func entityText(e string) string {
	if t, ok := htmlEntities[e]; ok {
		return t
	}
	if !strings.HasPrefix(e, "&#") {
		return e
	}
	digits, base := e[2:len(e)-1], 10
	if digits[0] == 'x' || digits[0] == 'X' {
		digits, base = digits[1:], 16
	}
	if digits == "" {
		return e
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		ok := c >= '0' && c <= '9' || base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')
		if !ok {
			return e
		}
	}
	t := numericRef(digits, base)
	if strings.IndexByte(t, ';') >= 0 {
		return e
	}
	return t
}

// invalidCharrefs holds Python's html._invalid_charrefs: HTML5's
// replacements for numeric references 0x00, 0x0D and 0x80..0x9F.
var invalidCharrefs = map[uint64]string{
	0x00: "\ufffd", 0x0d: "\r", 0x80: "\u20ac", 0x81: "\u0081", 0x82: "\u201a", 0x83: "\u0192",
	0x84: "\u201e", 0x85: "\u2026", 0x86: "\u2020", 0x87: "\u2021", 0x88: "\u02c6", 0x89: "\u2030",
	0x8a: "\u0160", 0x8b: "\u2039", 0x8c: "\u0152", 0x8d: "\u008d", 0x8e: "\u017d", 0x8f: "\u008f",
	0x90: "\u0090", 0x91: "\u2018", 0x92: "\u2019", 0x93: "\u201c", 0x94: "\u201d", 0x95: "\u2022",
	0x96: "\u2013", 0x97: "\u2014", 0x98: "\u02dc", 0x99: "\u2122", 0x9a: "\u0161", 0x9b: "\u203a",
	0x9c: "\u0153", 0x9d: "\u009d", 0x9e: "\u017e", 0x9f: "\u0178",
}

// numericRef returns what Python's html.unescape makes of a numeric
// reference with these digits.
func numericRef(digits string, base int) string {
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
	switch {
	case num >= 0x1 && num <= 0x8, num == 0xB, num >= 0xE && num <= 0x1F, num >= 0x7F && num <= 0x9F,
		num >= 0xFDD0 && num <= 0xFDEF, num&0xFFFE == 0xFFFE:
		return "" // html._invalid_codepoints
	}
	return string(rune(num))
}
