package ftfy

import (
	"strings"

	"github.com/conditionhq/condition/text/internal/pyhtml"
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
	t := pyhtml.NumericRef(digits, base)
	if strings.IndexByte(t, ';') >= 0 {
		return e
	}
	return t
}
