package ftfy

import (
	"math/bits"
	"strings"
	"unicode"
)

// This file is ftfy's badness heuristic (is_bad): sequences of characters
// much more likely in mojibake than in intended text. Each alternative of
// ftfy's BADNESS_RE is a pattern here: a sequence of character sets, each
// the union of classes (charClass bits), literal characters and a predicate.

// elem is one character position of a pattern as written: the union of
// classes, literal characters and a predicate (or its complement).
type elem struct {
	mask  uint32 // classes
	chars string // literal characters
	pred  int    // one of the predicates below, or 0
	not   bool   // the complement of the above
}

// Predicates on a character, beside its classes and literal characters.
const (
	predNone            = iota
	predLetter          // [a-zA-Z]
	predLower           // [a-z]
	predSpace           // Python's \s
	predWord            // Python's \w
	predLetterOrSpace   // [A-Za-z ]
	predLowerOrSentence // [a-z.,?!]
	numPreds
)

// pattern is one alternative: its elements in order; anchored ones match
// only at the start of the text.
type pattern struct {
	elems    []elem
	anchored bool
}

func cls(mask uint32) elem           { return elem{mask: mask} }
func lit(chars string) elem          { return elem{chars: chars} }
func clsLit(m uint32, c string) elem { return elem{mask: m, chars: c} }
func pred(p int) elem                { return elem{pred: p} }
func seq(elems ...elem) pattern      { return pattern{elems: elems} }

// isSpacePy is Python's \s in a str pattern (str.isspace).
func isSpacePy(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F) }

// isWordPy is Python's \w in a str pattern: letters, numbers and '_'.
func isWordPy(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }

func predHolds(p int, r rune) bool {
	letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	switch p {
	case predLetter:
		return letter
	case predLower:
		return r >= 'a' && r <= 'z'
	case predSpace:
		return isSpacePy(r)
	case predWord:
		return isWordPy(r)
	case predLetterOrSpace:
		return letter || r == ' '
	case predLowerOrSentence:
		return r >= 'a' && r <= 'z' || strings.ContainsRune(".,?!", r)
	}
	return false
}

// Class unions BADNESS_RE uses more than once.
const (
	accented = cUpperAccented | cLowerAccented
	punct    = cStartPunct | cEndPunct
)

// badnessPatterns are BADNESS_RE's alternatives, in its order.
var badnessPatterns = func() []pattern {
	any := func(m uint32) elem { return cls(m) }
	p := []pattern{
		seq(any(cC1)),
		seq(any(cBad|accented|cBox|punct|cCurrency|cNumeric|cLaw), any(cBad)),
		seq(pred(predLetter), any(cLowerCommon|cUpperCommon), any(cBad)),
		seq(any(cBad), any(accented|cBox|punct|cCurrency|cNumeric|cLaw)),
		seq(any(cLowerAccented|cLowerCommon|cBox|cEndPunct|cCurrency|cNumeric), any(cUpperAccented)),
		seq(any(cBox|cEndPunct|cCurrency|cNumeric), any(cLowerAccented)),
		seq(any(cLowerAccented|cBox|cEndPunct), any(cCurrency)),
		seq(pred(predSpace), any(cUpperAccented), any(cCurrency)),
		seq(any(cUpperAccented|cBox), any(cNumeric|cLaw)),
		seq(any(accented|cBox|cCurrency|cEndPunct), any(cStartPunct), any(cNumeric)),
		seq(any(accented|cCurrency|cNumeric|cBox|cLaw), any(cEndPunct), any(cStartPunct)),
		seq(any(cCurrency|cNumeric|cBox), any(cStartPunct)),
		seq(pred(predLower), any(cUpperAccented), any(cStartPunct|cCurrency)),
		seq(any(cBox), any(cKaomoji)),
		seq(any(accented|cCurrency|cNumeric|punct|cLaw), any(cBox)),
		seq(any(cBox), any(cEndPunct)),
		seq(any(accented), any(punct), pred(predWord)),
		seq(lit("Œœ"), elem{pred: predLetter, not: true}),
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
		seq(lit("Г"), lit("ў"), lit("В"), lit("Ђ"), lit("В"), elem{chars: "\n", not: true}, pred(predLetterOrSpace)),
		seq(lit("Ã"), lit("\u00a0¡")),
		seq(pred(predLower), lit("ÃÂ"), lit(" ")),
		seq(pred(predLower), pred(predSpace), lit("ÃÂ"), lit(" ")),
		{elems: []elem{lit("ÃÂ"), lit(" ")}, anchored: true},
		seq(elem{pred: predLowerOrSentence, mask: cEndPunct}, lit("Â"), clsLit(punct, " ")),
		seq(lit("β"), lit("€"), lit("™\u00a0Ά\u00ad®°")),
		seq(lit("ΒΓΞΟ"), clsLit(cC1|cBad|punct|cCurrency, "°"), lit("ΒΓΞΟ")),
		seq(lit("ā"), lit("€")),
	}
	return p
}()

// The patterns run compiled: every character gets a feature word, one bit
// per class, per distinct literal set and per predicate, and each element
// of a pattern is a mask of those bits.

// cElem is a compiled elem: it matches a character whose features meet mask
// (or, with not, miss it).
type cElem struct {
	mask uint64
	not  bool
}

type cPattern struct {
	elems    []cElem
	anchored bool
}

// badFeatures are the feature bits of the classes of the badness
// heuristic and of non-ASCII literal characters: every pattern needs a
// character with one of them.
var (
	compiled    []cPattern
	litFeat     map[rune]uint64 // literal-set bits of each literal character
	predBit     [numPreds]uint64
	asciiFeat   [0x80]uint64
	tableFeat   map[rune]uint64 // the features of every non-ASCII character in a class or literal set
	badFeatures uint64
	// startsWith holds, for each feature bit, the patterns (a bit each)
	// whose first element that bit meets.
	startsWith [64]uint64
)

func init() {
	const classBits = 19
	next := uint(classBits)
	sets := map[string]uint64{}
	litFeat = map[rune]uint64{}
	badFeatures = uint64(cBox<<1 - 1) // the badness categories, cCommon..cBox
	for p := predLetter; p < numPreds; p++ {
		predBit[p] = 1 << next
		next++
	}
	for _, p := range badnessPatterns {
		cp := cPattern{anchored: p.anchored}
		for _, e := range p.elems {
			m := uint64(e.mask) | predBit[e.pred]
			if e.chars != "" {
				bit, ok := sets[e.chars]
				if !ok {
					bit = 1 << next
					next++
					sets[e.chars] = bit
					for _, r := range e.chars {
						litFeat[r] |= bit
						if r >= 0x80 {
							badFeatures |= bit
						}
					}
				}
				m |= bit
			}
			cp.elems = append(cp.elems, cElem{mask: m, not: e.not})
		}
		compiled = append(compiled, cp)
	}
	if next > 64 || len(compiled) > 64 {
		panic("ftfy: more than 64 feature bits or patterns")
	}
	for i, p := range compiled {
		for b := range 64 {
			if p.elems[0].not || p.elems[0].mask&(1<<b) != 0 {
				startsWith[b] |= 1 << i
			}
		}
	}
	for r := range rune(0x80) {
		asciiFeat[r] = features(r)
	}
	tableFeat = map[rune]uint64{}
	for r := range charClass {
		tableFeat[r] = features(r)
	}
	for r := range litFeat {
		tableFeat[r] = features(r)
	}
}

// featuresOf returns the feature word of r from the tables.
func featuresOf(r rune) uint64 {
	if r < 0x80 {
		return asciiFeat[r]
	}
	if f, ok := tableFeat[r]; ok {
		return f
	}
	var f uint64
	if isSpacePy(r) {
		f |= predBit[predSpace]
	}
	if isWordPy(r) {
		f |= predBit[predWord]
	}
	return f
}

// features computes the feature word of r.
func features(r rune) uint64 {
	f := uint64(classOf(r)) | litFeat[r]
	for p := predLetter; p < numPreds; p++ {
		if predHolds(p, r) {
			f |= predBit[p]
		}
	}
	return f
}

// isBad is ftfy's is_bad: whether any badness pattern matches in s.
func isBad(s string) bool {
	var buf [128]uint64
	fs := buf[:0]
	any := false
	for _, r := range s {
		f := featuresOf(r)
		any = any || f&badFeatures != 0
		fs = append(fs, f)
	}
	if !any {
		return false
	}
	// A match must hold a character with a badFeatures bit: start only
	// where one lies within the longest pattern's reach.
	const reach = 7
	lastBad := len(fs) + reach
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i]&badFeatures != 0 {
			lastBad = i
		}
		if lastBad-i >= reach {
			continue
		}
		var cand uint64
		for f := fs[i]; f != 0; f &= f - 1 {
			cand |= startsWith[bits.TrailingZeros64(f)]
		}
		for ; cand != 0; cand &= cand - 1 {
			p := &compiled[bits.TrailingZeros64(cand)]
			if (p.anchored && i > 0) || len(p.elems) > len(fs)-i {
				continue
			}
			if matchFeatures(p.elems, fs[i:]) {
				return true
			}
		}
	}
	return false
}

// matchFeatures reports whether elems match the start of fs.
func matchFeatures(elems []cElem, fs []uint64) bool {
	for k := range elems {
		if (fs[k]&elems[k].mask != 0) == elems[k].not {
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
