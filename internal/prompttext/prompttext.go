// Package prompttext holds what the engine and its commands say about a
// prompt's text: how a message quotes it and which of its words are too
// common to deserve their own heatmap.
package prompttext

import (
	"fmt"
	"strings"

	"github.com/conditionhq/condition/text"
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

// IsContentWord reports whether a prompt's word gets a map of its own:
// neither a special token nor a stop word.
func IsContentWord(w text.Word) bool { return !w.Special && !IsStopWord(w.Text) }

// ContentWords returns the texts of words that get a map of their own
// (IsContentWord). A prompt without any has nothing to map.
func ContentWords(words []text.Word) []string {
	var out []string
	for _, w := range words {
		if IsContentWord(w) {
			out = append(out, w.Text)
		}
	}
	return out
}
