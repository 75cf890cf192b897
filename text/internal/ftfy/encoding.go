package ftfy

import (
	"strings"
	"unicode/utf8"
)

// fixEncoding is ftfy's fix_encoding: one step of repair at a time, until a
// step changes nothing.
func fixEncoding(s string) string {
	for {
		fixed := fixEncodingStep(s)
		if fixed == s {
			return s
		}
		s = fixed
	}
}

// fixEncodingStep is one step of fix_encoding. Text that is ASCII or does
// not look like mojibake is left alone. Otherwise the first single-byte codec
// that can encode it and whose bytes (with restore_byte_a0 and, for sloppy
// codecs, replace_lossy_sequences) decode as UTF-8 gives the fix; failing
// that, embedded mojibake is fixed piece by piece; failing that, C1 controls
// are read as windows-1252.
func fixEncodingStep(s string) string {
	if s == "" || isASCII(s) || !isBad(s) {
		return s
	}
	for i := range codecs {
		c := &codecs[i]
		b, ok := c.encode(s)
		if !ok {
			continue
		}
		if c.name != "macroman" && hasMatch(b, alteredUTF8) {
			b = restoreByteA0(b)
		}
		if c.sloppy {
			b = replaceLossy(b)
		}
		if fixed, ok := decodeUTF8Variants(b); ok {
			return fixed
		}
	}
	if hasUTF8Clue(s) {
		if fixed := decodeInconsistentUTF8(s); fixed != s {
			return fixed
		}
	}
	// ftfy asks whether "windows-1252" could encode the text, a name its
	// list of codecs does not hold: that test is always false, so text that
	// latin-1 encodes is read as strict windows-1252 where that decodes.
	if codecs[latin1].canEncode(s) {
		if fixed, ok := latin1AsWindows1252(s); ok && fixed != s {
			return fixed
		}
	}
	if hasC1(s) {
		return fixC1Controls(s)
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// latin1AsWindows1252 is s.encode("latin-1").decode("windows-1252") for s
// that latin-1 encodes, false where Python's strict codec fails.
func latin1AsWindows1252(s string) (string, bool) {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r >= 0x80 && r <= 0x9F {
			for _, u := range cp1252Undefined {
				if rune(u) == r {
					return "", false
				}
			}
			r = codecs[sloppy1252].high[r-0x80]
		}
		b.WriteRune(r)
	}
	return b.String(), true
}

// hasC1 reports whether s holds a C1 control character (U+0080..U+009F).
func hasC1(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 && r <= 0x9F }) >= 0
}

// fixC1Controls is fix_c1_controls: each C1 control character becomes the
// windows-1252 character of its byte (sloppily: the five bytes windows-1252
// leaves undefined stay as they are).
func fixC1Controls(s string) string {
	if !hasC1(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r >= 0x80 && r <= 0x9F {
			return codecs[sloppy1252].high[r-0x80]
		}
		return r
	}, s)
}
