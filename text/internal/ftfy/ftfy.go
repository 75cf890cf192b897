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
// or other control character) is returned as is, without a copy.
func FixText(s string) string {
	if plainASCII(s) {
		return s
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
// until a round changes nothing.
func fixSegment(s string, unescape bool) string {
	for {
		orig := s
		if unescape {
			s = unescapeHTML(s)
		}
		s = fixEncoding(s)
		s = fixC1Controls(s)
		s = translate(s, ligatures)
		s = translate(s, widthMap)
		s = uncurlQuotes(s)
		s = fixLineBreaks(s)
		s = removeTerminalEscapes(s)
		s = removeControlChars(s)
		s = norm.NFC.String(s)
		if s == orig {
			return s
		}
	}
}
