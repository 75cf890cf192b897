package ftfy

import "unicode/utf8"

// codec is a single-byte encoding as ftfy uses it: bytes below 0x80 are
// ASCII (but 0x1A is U+FFFD in a sloppy codec), high holds 0x80..0xFF.
type codec struct {
	name   string
	sloppy bool
	high   [128]rune
	enc    map[rune]byte // the inverse of high (and U+FFFD → 0x1A when sloppy)
}

// latin1, sloppy1252 and macroman index codecs.
const (
	latin1     = 0
	sloppy1252 = 1
)

func init() {
	for i := range codecs {
		c := &codecs[i]
		c.enc = make(map[rune]byte, 129)
		for b, r := range c.high {
			c.enc[r] = byte(0x80 + b)
		}
		if c.sloppy {
			c.enc[0xFFFD] = 0x1A
		}
	}
}

// encode returns s in c (Python's str.encode), or false when a character of
// s has no byte in c.
func (c *codec) encode(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < utf8.RuneSelf && !(c.sloppy && r == 0x1A) {
			out = append(out, byte(r))
			continue
		}
		b, ok := c.enc[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// canEncode reports whether encode(s) would succeed (ftfy's
// possible_encoding).
func (c *codec) canEncode(s string) bool {
	for _, r := range s {
		if r < utf8.RuneSelf && !(c.sloppy && r == 0x1A) {
			continue
		}
		if _, ok := c.enc[r]; !ok {
			return false
		}
	}
	return true
}

// decodeUTF8Variants decodes b as ftfy's "utf-8-variants" codec does, or
// returns false where it raises an error: strict UTF-8, except that C0 80 is
// U+0000 and a CESU-8 surrogate pair (ED A0..AF 80..BF ED B0..BF 80..BF) is
// the supplementary character it encodes. As Python's regex '$' also matches
// before a final newline, C0 and a surrogate pair may end with that newline,
// which they then consume.
func decodeUTF8Variants(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), true
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
			continue
		case c == 0xC0:
			if i+1 < len(b) && (b[i+1] == 0x80 || (b[i+1] == '\n' && i+2 == len(b))) {
				out = append(out, 0)
				i += 2
				continue
			}
			return "", false
		case c == 0xED && i+6 <= len(b) && cesu8(b[i:i+6], i+6 == len(b)):
			cp := rune(b[i+1]&0x0F)<<16 | rune(b[i+2]&0x3F)<<10 | rune(b[i+4]&0x0F)<<6 | rune(b[i+5]&0x3F)
			out = utf8.AppendRune(out, cp+0x10000)
			i += 6
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return "", false
		}
		out = append(out, b[i:i+n]...)
		i += n
	}
	return string(out), true
}

// cesu8 reports whether the six bytes p are a CESU-8 surrogate pair as ftfy
// matches one; final says they end the input (where the last may be '\n').
func cesu8(p []byte, final bool) bool {
	in := func(c, lo, hi byte) bool { return c >= lo && c <= hi }
	return p[0] == 0xED && in(p[1], 0xA0, 0xAF) && in(p[2], 0x80, 0xBF) && p[3] == 0xED &&
		in(p[4], 0xB0, 0xBF) && (in(p[5], 0x80, 0xBF) || (final && p[5] == '\n'))
}
