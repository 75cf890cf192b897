package ftfy

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxDecodeLength is ftfy's max_decode_length: the most characters fixed as
// one segment.
const maxDecodeLength = 1_000_000

// FixText returns s repaired as ftfy.fix_text(s) repairs it with its default
// configuration. Plain ASCII with nothing ftfy changes (no '&', '\r', escape
// or other control character) is returned as is, without a copy. Text that is
// not valid UTF-8 is read with each run of invalid bytes as one U+FFFD.
func FixText(s string) string {
	if plainASCII(s) {
		return s
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\ufffd")
	}
	if i := strings.IndexByte(s, '\n'); (i < 0 || i == len(s)-1) && len(s) <= maxDecodeLength {
		return fixSegment(s, strings.IndexByte(s, '<') < 0) // one segment
	}
	var b strings.Builder
	b.Grow(len(s))
	unescape := true
	for pos := 0; pos < len(s); {
		end := len(s)
		if i := strings.IndexByte(s[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		end = pos + limitRunes(s[pos:end], maxDecodeLength)
		seg := s[pos:end]
		// As ftfy: once a segment holds '<', the text is taken to be HTML
		// and no later segment is unescaped either.
		if unescape && strings.IndexByte(seg, '<') >= 0 {
			unescape = false
		}
		b.WriteString(fixSegment(seg, unescape))
		pos = end
	}
	return b.String()
}

// plainASCII reports whether s is ASCII that FixText leaves as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c == '&' || c == '\r' || asciiControl[c] {
			return false
		}
	}
	return true
}

// limitRunes returns the byte length of the first n characters of s (all of
// s when it has fewer).
func limitRunes(s string, n int) int {
	if len(s) <= n {
		return len(s)
	}
	count := 0
	for i := range s {
		if count == n {
			return i
		}
		count++
	}
	return len(s)
}

// fixSegment is ftfy's fix_and_explain on one segment: every fixer in turn,
// until a round changes nothing. A scan of the text says which fixers have
// anything to do; it is made again after each fixer that changed the text.
func fixSegment(s string, unescape bool) string {
	for {
		orig := s
		need := scan(s)
		step := func(bit uint16, fix func(string) string) {
			if need&bit != 0 {
				if fixed := fix(s); fixed != s {
					s = fixed
					need = scan(s)
				}
			}
		}
		if unescape {
			step(needAmp, unescapeHTML)
		}
		step(needNonASCII, fixEncoding)
		step(needC1, fixC1Controls)
		step(needLigature, func(s string) string { return translate(s, ligatures) })
		step(needWide, func(s string) string { return translate(s, widthMap) })
		step(needQuote, uncurlQuotes)
		step(needBreak, fixLineBreaks)
		step(needControl, removeTerminalEscapes) // an escape starts with ESC, a control
		step(needControl, removeControlChars)
		step(needNonASCII, norm.NFC.String)
		if s == orig {
			return s
		}
	}
}

// What scan finds in a text: which fixers may change it.
const (
	needAmp uint16 = 1 << iota
	needNonASCII
	needC1
	needLigature
	needWide
	needQuote
	needBreak
	needControl
)

// scan returns the need* bits of s.
func scan(s string) uint16 {
	var need uint16
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '&':
				need |= needAmp
			case c == '\r':
				need |= needBreak
			case asciiControl[c]:
				need |= needControl
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		need |= needNonASCII | runeNeeds[r]
		i += n
	}
	return need
}

// runeNeeds holds the need* bits of the non-ASCII characters a fixer changes.
var runeNeeds = func() map[rune]uint16 {
	m := map[rune]uint16{0x2028: needBreak, 0x2029: needBreak, 0x02BC: needQuote}
	for r := rune(0x80); r <= 0x9F; r++ {
		m[r] |= needC1
	}
	m[0x85] |= needBreak
	for r := range ligatures {
		m[r] |= needLigature
	}
	for r := range widthMap {
		m[r] |= needWide
	}
	for r := rune(0x2018); r <= 0x201F; r++ {
		m[r] |= needQuote
	}
	for r := range controlSet {
		m[r] |= needControl
	}
	return m
}()
