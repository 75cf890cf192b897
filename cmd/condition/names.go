package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// shown returns a file name as printed to a terminal: as it is, or, when it
// holds a control character (an escape sequence, a newline) or is not
// UTF-8, quoted with Go's escapes ("bad\x1b[31m\n.png"), so that a name
// can neither restyle the terminal nor pass for two lines.
func shown(name string) string {
	if utf8.ValidString(name) && !strings.ContainsFunc(name, unicode.IsControl) {
		return name
	}
	return strconv.Quote(name)
}

// shownMessage returns an error message as printed: each of args (the
// command line, and the values of --flag=value) that holds a control
// character is replaced by its quoted form wherever it appears whole, and
// any control character left, other than a newline or a tab, by its \x
// escape (a name the program found itself, such as a file in a folder).
func shownMessage(msg string, args []string) string {
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if q := shown(a); q != a && a != "" {
			msg = strings.ReplaceAll(msg, a, q)
		}
	}
	var b strings.Builder
	for _, r := range msg {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
