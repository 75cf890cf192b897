package pipeline

import (
	"fmt"
	"strings"

	"github.com/conditionhq/condition/text"
)

// quote quotes a prompt for a message: the whole of a short one, the start
// of a long one.
func quote(s string) string {
	const most = 60
	if r := []rune(s); len(r) > most {
		return fmt.Sprintf("%q… (%d characters)", string(r[:most]), len(r))
	}
	return fmt.Sprintf("%q", s)
}

// stopWords are the words too common to deserve a heatmap of their own.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "on": true, "in": true, "and": true, "with": true,
	"at": true, "to": true, "is": true, "are": true, ",": true, ".": true, "'s": true,
}

// isStopWord reports whether a word is too common to deserve its own heatmap.
func isStopWord(w string) bool { return stopWords[strings.ToLower(strings.TrimSpace(w))] }

// isContentWord reports whether a prompt's word gets a map of its own:
// neither a special token nor a stop word.
func isContentWord(w text.Word) bool { return !w.Special && !isStopWord(w.Text) }

// contentWords returns the texts of words that carry content, in order
// (TextEncoding.Content).
func contentWords(words []text.Word) []string {
	var out []string
	for _, w := range words {
		if isContentWord(w) {
			out = append(out, w.Text)
		}
	}
	return out
}
