// Package prompttext holds what the engine and its commands say about a
// prompt's text: how a message quotes it and which of its words are too
// common to deserve their own heatmap.
package prompttext

import (
	"fmt"
	"strings"
)

// Quote quotes a prompt for a message: the whole of a short one, the start
// of a long one.
func Quote(s string) string {
	const most = 60
	if r := []rune(s); len(r) > most {
		return fmt.Sprintf("%q… (%d characters)", string(r[:most]), len(r))
	}
	return fmt.Sprintf("%q", s)
}

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "on": true, "in": true, "and": true, "with": true,
	"at": true, "to": true, "is": true, "are": true, ",": true, ".": true, "'s": true,
}

// IsStopWord reports whether a word is too common to deserve its own heatmap.
func IsStopWord(w string) bool { return stopWords[strings.ToLower(strings.TrimSpace(w))] }
