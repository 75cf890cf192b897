package ftfy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file holds ftfy's fixers that work character by character.

// translate replaces each character of s found in m (str.translate).
func translate(s string, m map[rune]string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r >= 0x80 {
			if _, ok := m[r]; ok {
				break
			}
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if rep, ok := m[r]; ok {
			b.WriteString(rep)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// uncurlQuotes is uncurl_quotes: U+02BC and U+2018..U+201B become ',
// U+201C..U+201F become ".
func uncurlQuotes(s string) string {
	if !strings.ContainsAny(s, "\u02bc\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == 0x02BC || (r >= 0x2018 && r <= 0x201B):
			return '\''
		case r >= 0x201C && r <= 0x201F:
			return '"'
		}
		return r
	}, s)
}

// fixLineBreaks is fix_line_breaks: CRLF, CR, U+2028, U+2029 and U+0085
// become LF.
func fixLineBreaks(s string) string {
	if !strings.ContainsAny(s, "\r\u2028\u2029\u0085") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.NewReplacer("\r", "\n", "\u2028", "\n", "\u2029", "\n", "\u0085", "\n").Replace(s)
}

// removeControlChars is remove_control_chars: it deletes the characters of
// controlChars.
func removeControlChars(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, s)
}

// asciiControl and controlSet hold controlChars, below 0x80 and above.
var asciiControl, controlSet = func() (a [utf8.RuneSelf]bool, m map[rune]bool) {
	m = make(map[rune]bool)
	for _, r := range controlChars {
		if r < utf8.RuneSelf {
			a[r] = true
		} else {
			m[r] = true
		}
	}
	return a, m
}()

// isControl reports whether remove_control_chars deletes r.
func isControl(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiControl[r]
	}
	return controlSet[r]
}

// removeTerminalEscapes is remove_terminal_escapes: it deletes every match of
// ESC '[' (decimal digit | ';')* letter.
func removeTerminalEscapes(s string) string {
	i := strings.Index(s, "\x1b[")
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		n := escapeLen(s[i:])
		if n == 0 {
			b.WriteString(s[:i+1])
			s = s[i+1:]
		} else {
			b.WriteString(s[:i])
			s = s[i+n:]
		}
		i = strings.Index(s, "\x1b[")
	}
	b.WriteString(s)
	return b.String()
}

// escapeLen returns the length of the terminal escape at the start of s
// ("\x1b[" first), or 0.
func escapeLen(s string) int {
	j := 2
	for j < len(s) {
		r, n := utf8.DecodeRuneInString(s[j:])
		if r != ';' && !unicode.IsDigit(r) {
			break
		}
		j += n
	}
	if j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
		return j + 1
	}
	return 0
}
