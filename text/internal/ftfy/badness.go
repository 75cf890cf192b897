package ftfy

import (
	"strings"
	"unicode"
)

// This file is ftfy's badness heuristic (is_bad): sequences of characters
// much more likely in mojibake than in intended text. Each alternative of
// ftfy's BADNESS_RE is a pattern here: a sequence of character sets, each
// the union of classes (charClass bits), literal characters and a predicate.

// elem is one character position of a pattern.
type elem struct {
	mask  uint32          // classes
	chars string          // literal characters
	pred  func(rune) bool // more characters
	not   bool            // the complement of the above
}

func (e *elem) match(r rune, cls uint32) bool {
	ok := cls&e.mask != 0 || (e.chars != "" && strings.ContainsRune(e.chars, r)) || (e.pred != nil && e.pred(r))
	return ok != e.not
}

// pattern is one alternative: its elements in order; anchored ones match
// only at the start of the text.
type pattern struct {
	elems    []elem
	anchored bool
}

func cls(mask uint32) elem           { return elem{mask: mask} }
func lit(chars string) elem          { return elem{chars: chars} }
func clsLit(m uint32, c string) elem { return elem{mask: m, chars: c} }
func seq(elems ...elem) pattern      { return pattern{elems: elems} }

func asciiLower(r rune) bool  { return r >= 'a' && r <= 'z' }
func asciiLetter(r rune) bool { return asciiLower(r) || (r >= 'A' && r <= 'Z') }

// isSpacePy is Python's \s in a str pattern (str.isspace).
func isSpacePy(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F) }

// isWordPy is Python's \w in a str pattern: letters, numbers and '_'.
func isWordPy(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }

// Class unions BADNESS_RE uses more than once.
const (
	accented = cUpperAccented | cLowerAccented
	punct    = cStartPunct | cEndPunct
)

var badness = func() []pattern {
	any := func(m uint32) elem { return cls(m) }
	p := []pattern{
		seq(any(cC1)),
		seq(any(cBad|accented|cBox|punct|cCurrency|cNumeric|cLaw), any(cBad)),
		seq(elem{pred: asciiLetter}, any(cLowerCommon|cUpperCommon), any(cBad)),
		seq(any(cBad), any(accented|cBox|punct|cCurrency|cNumeric|cLaw)),
		seq(any(cLowerAccented|cLowerCommon|cBox|cEndPunct|cCurrency|cNumeric), any(cUpperAccented)),
		seq(any(cBox|cEndPunct|cCurrency|cNumeric), any(cLowerAccented)),
		seq(any(cLowerAccented|cBox|cEndPunct), any(cCurrency)),
		seq(elem{pred: isSpacePy}, any(cUpperAccented), any(cCurrency)),
		seq(any(cUpperAccented|cBox), any(cNumeric|cLaw)),
		seq(any(accented|cBox|cCurrency|cEndPunct), any(cStartPunct), any(cNumeric)),
		seq(any(accented|cCurrency|cNumeric|cBox|cLaw), any(cEndPunct), any(cStartPunct)),
		seq(any(cCurrency|cNumeric|cBox), any(cStartPunct)),
		seq(elem{pred: asciiLower}, any(cUpperAccented), any(cStartPunct|cCurrency)),
		seq(any(cBox), any(cKaomoji)),
		seq(any(accented|cCurrency|cNumeric|punct|cLaw), any(cBox)),
		seq(any(cBox), any(cEndPunct)),
		seq(any(accented), any(punct), elem{pred: isWordPy}),
		seq(lit("Œœ"), elem{pred: asciiLetter, not: true}),
		seq(any(cUpperAccented), lit("°")),
		seq(lit("ÂÃÎÐ"), clsLit(punct, "€œŠš¢£Ÿž\u00a0\u00ad®©°·»–—´")),
		seq(lit("×"), lit("²³")),
		seq(lit("ØÙ"), clsLit(cCommon|cCurrency|cBad|cNumeric|cStartPunct, "ŸŠ®°µ»"),
			lit("ØÙ"), clsLit(cCommon|cCurrency|cBad|cNumeric|cStartPunct, "ŸŠ®°µ»")),
		seq(lit("à"), lit("²µ¹¼½¾")),
		seq(lit("√"), lit("±∂†≠®™´≤≥¥µø")),
		seq(lit("≈"), lit("°¢")),
		seq(lit("‚"), lit("Ä"), lit("ìîïòôúùû†°¢π")),
		seq(lit("‚"), lit("âó"), lit("àä°ê")),
		seq(lit("в"), lit("Ђ")),
		seq(lit("ВГРС"), clsLit(cC1|cBad|punct|cCurrency, "°µ"), lit("ВГРС")),
		seq(lit("Г"), lit("ў"), lit("В"), lit("Ђ"), lit("В"), elem{chars: "\n", not: true},
			elem{pred: func(r rune) bool { return asciiLetter(r) || r == ' ' }}),
		seq(lit("Ã"), lit("\u00a0¡")),
		seq(elem{pred: asciiLower}, lit("ÃÂ"), lit(" ")),
		seq(elem{pred: asciiLower}, elem{pred: isSpacePy}, lit("ÃÂ"), lit(" ")),
		{elems: []elem{lit("ÃÂ"), lit(" ")}, anchored: true},
		seq(elem{pred: func(r rune) bool { return asciiLower(r) || strings.ContainsRune(".,?!", r) }, mask: cEndPunct},
			lit("Â"), clsLit(punct, " ")),
		seq(lit("β"), lit("€"), lit("™\u00a0Ά\u00ad®°")),
		seq(lit("ΒΓΞΟ"), clsLit(cC1|cBad|punct|cCurrency, "°"), lit("ΒΓΞΟ")),
		seq(lit("ā"), lit("€")),
	}
	return p
}()

// isBad is ftfy's is_bad: whether any badness pattern matches in s.
func isBad(s string) bool {
	var buf [64]rune
	var cbuf [64]uint32
	rs, cs := buf[:0], cbuf[:0]
	for _, r := range s {
		rs = append(rs, r)
		cs = append(cs, classOf(r))
	}
	for i := range rs {
		for pi := range badness {
			p := &badness[pi]
			if p.anchored && i > 0 {
				continue
			}
			if matchRunes(p.elems, rs[i:], cs[i:]) {
				return true
			}
		}
	}
	return false
}

// matchRunes reports whether elems match the start of rs (classes cs).
func matchRunes(elems []elem, rs []rune, cs []uint32) bool {
	if len(elems) > len(rs) {
		return false
	}
	for k := range elems {
		if !elems[k].match(rs[k], cs[k]) {
			return false
		}
	}
	return true
}

// classOf returns the charClass bits of r.
func classOf(r rune) uint32 {
	if r < 0x80 {
		return asciiClass[r]
	}
	return charClass[r]
}

// asciiClass is charClass below 0x80.
var asciiClass = func() (t [0x80]uint32) {
	for r, c := range charClass {
		if r < 0x80 {
			t[r] = c
		}
	}
	return t
}()
