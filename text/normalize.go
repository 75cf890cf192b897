package text

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/conditionhq/condition/text/internal/ftfy"
	"github.com/conditionhq/condition/text/internal/pyhtml"
	"golang.org/x/text/unicode/norm"
)

// This file holds the text clean-up that runs before byte-level BPE: UTF-8
// repair, the Hugging Face normalizer (NFC, whitespace, lowercase), openai's
// optional cleaning (ftfy's fix_text, HTML unescape, Python's whitespace and
// lower()), and the CLIP split pattern.

// sanitizeUTF8 returns s with every maximal invalid subpart replaced by one
// U+FFFD, as Python's bytes.decode("utf-8", errors="replace") does (Unicode's
// "substitution of maximal subparts"). Go's own conversions make one U+FFFD per
// invalid byte instead, so this is done by hand. Valid input is returned as is.
func sanitizeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || n > 1 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteRune(utf8.RuneError)
		i += maximalSubpart(s[i:])
	}
	return b.String()
}

// maximalSubpart returns the length of the maximal subpart of an ill-formed
// sequence at the start of s: a valid lead byte followed by as many valid
// continuation bytes as the lead allows, before the sequence breaks (at least 1).
func maximalSubpart(s string) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		b := s[n]
		if b < lo || b > hi {
			break
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}

// isSpacePy reports whether r is whitespace for Python's str.isspace and
// re's \s, which openai's cleaning uses: White_Space plus U+001C..U+001F.
func isSpacePy(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F) }

// Character classes of the CLIP split pattern for ASCII bytes.
const (
	clsOther = iota
	clsSpace
	clsLetter
	clsNumber
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case c == ' ' || (c >= '\t' && c <= '\r'):
			t[c] = clsSpace
		case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			t[c] = clsLetter
		case c >= '0' && c <= '9':
			t[c] = clsNumber
		}
	}
	return t
}()

// classOf returns the class of r in the split pattern: \s, \p{L}, \p{N} or other.
func classOf(r rune, py bool) uint8 {
	if r < utf8.RuneSelf {
		if py && r >= 0x1C && r <= 0x1F {
			return clsSpace
		}
		return asciiClass[r]
	}
	switch {
	case unicode.IsSpace(r):
		return clsSpace
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	}
	return clsOther
}

// appendNormalizedHF appends s normalized as CLIP's tokenizer.json normalizer
// does: NFC, then lowercase character by character (Rust's char::to_lowercase:
// simple mappings, plus U+0130 to "i\u0307"; no final-sigma rule). The
// normalizer's third step, runs of \s to one space, is left out: the
// pre-tokenizer drops all whitespace, so it cannot change the ids.
func appendNormalizedHF(dst []byte, s string, nfc, lower bool) []byte {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		if !lower {
			return append(dst, s...)
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
		return dst
	}
	if nfc {
		s = norm.NFC.String(s)
	}
	if !lower {
		return append(dst, s...)
	}
	for _, r := range s {
		if r == 'İ' {
			dst = append(dst, "i\u0307"...)
			continue
		}
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst
}

// cleanOpenAI applies openai's simple_tokenizer cleaning (OpenCLIP's
// tokenizer does the same) to s: ftfy.fix_text (ftfy 6.3.1's defaults:
// mojibake, entities, quotes, ligatures, widths, controls, NFC; see
// text/internal/ftfy), HTML unescape twice (Python's html.unescape), strip,
// runs of whitespace to one space, strip, then Python's str.lower (full
// lowercase mapping with the Final_Sigma rule).
func cleanOpenAI(s string) string {
	s = ftfy.FixText(s)
	s = unescapeHTML(unescapeHTML(s))
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if isSpacePy(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return lowerPython(b.String())
}

// lowerPython lowercases s as Python's str.lower does: full case mapping
// (U+0130 becomes "i\u0307") and capital sigma becomes final sigma when it
// ends a word (Unicode's Final_Sigma context).
func lowerPython(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch r {
		case 'İ':
			b.WriteString("i\u0307")
		case 'Σ':
			if finalSigma(s, i) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports whether the capital sigma at byte i of s is in the
// Final_Sigma context: cased (case-ignorable)* Σ !((case-ignorable)* cased).
func finalSigma(s string, i int) bool {
	before := false
	for j := i; j > 0; {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		j -= n
		if caseIgnorable(r) {
			continue
		}
		before = isCased(r)
		break
	}
	if !before {
		return false
	}
	for _, r := range s[i+len("Σ"):] {
		if caseIgnorable(r) {
			continue
		}
		return !isCased(r)
	}
	return true
}

// isCased is Unicode's Cased property: Lowercase, Uppercase or Lt.
func isCased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

// caseIgnorable is Unicode's Case_Ignorable property: Mn, Me, Cf, Lm, Sk and
// the Word_Break classes MidLetter, MidNumLet and Single_Quote.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xB7, 0x387, 0x55F, 0x5F4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// unescapeHTML is Python's html.unescape: named references (HTML5 names, the
// legacy ones also without ';', longest prefix), decimal and hex numeric
// references with HTML5's replacements, and invalid code points dropped.
func unescapeHTML(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexByte(s, '&')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		n, rep, ok := charref(s)
		if !ok {
			b.WriteByte('&')
			s = s[1:]
			continue
		}
		b.WriteString(rep)
		s = s[n:]
	}
}

// charref matches Python's pattern &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)
// at the start of s and returns the match length and its replacement.
func charref(s string) (n int, rep string, ok bool) {
	if len(s) < 2 {
		return 0, "", false
	}
	if s[1] == '#' {
		hex := len(s) > 2 && (s[2] == 'x' || s[2] == 'X')
		start := 2
		if hex {
			start = 3
		}
		j := start
		for j < len(s) && (isDigit(s[j]) || (hex && isHexLetter(s[j]))) {
			j++
		}
		if j == start {
			return 0, "", false
		}
		digits := s[start:j]
		if j < len(s) && s[j] == ';' {
			j++
		}
		base := 10
		if hex {
			base = 16
		}
		return j, pyhtml.NumericRef(digits, base), true
	}
	// Named: up to 32 characters (not bytes) outside [\t\n\f <&#;], then ';'.
	j, count := 1, 0
	for j < len(s) && count < 32 {
		r, size := utf8.DecodeRuneInString(s[j:])
		if r == '\t' || r == '\n' || r == '\f' || r == ' ' || r == '<' || r == '&' || r == '#' || r == ';' {
			break
		}
		j += size
		count++
	}
	if count == 0 {
		return 0, "", false
	}
	if j < len(s) && s[j] == ';' {
		j++
	}
	// Go's html package holds the same HTML5 table (less two names) and the
	// same longest-prefix rule; fed one reference at a time it gives Python's
	// answer.
	switch s[1:j] {
	case "nGt;":
		return j, "\u226b\u20d2", true
	case "nLt;":
		return j, "\u226a\u20d2", true
	}
	return j, html.UnescapeString(s[:j]), true
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isHexLetter(c byte) bool { return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }
