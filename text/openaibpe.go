package text

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"strings"
)

// openAIMerges is the head of openai's bpe_simple_vocab_16e6.txt.gz that
// its SimpleTokenizer reads: the header line and the first 48,894 merges,
// gzip-compressed (openaibpe/README.md).
//
//go:embed openaibpe/bpe_simple_vocab_16e6_48894.txt.gz
var openAIMerges []byte

// openAIMergesName names the built-in merges in errors.
const openAIMergesName = "the built-in bpe_simple_vocab_16e6"

// OpenAIBPE returns CLIP's BPE as openai's simple_tokenizer.py and
// OpenCLIP's SimpleTokenizer build it from bpe_simple_vocab_16e6.txt.gz,
// whose merges are compiled into the program: the same 49,408 ids as
// LoadOpenAIBPE of that file, padded with id 0, context length 77. It is
// the tokenizer of OpenCLIP checkpoints whose config names no Hugging Face
// tokenizer; clean text as they do with Options.OpenAIClean. Each call
// builds a new Tokenizer.
func OpenAIBPE() (*Tokenizer, error) {
	return readOpenAIBPE(bytes.NewReader(openAIMerges), openAIMergesName)
}

// readOpenAIBPE reads a gzip-compressed merges list of openai's layout (a
// header line, then "a b" a line) from r, named name in errors, and builds
// the vocabulary as openai's SimpleTokenizer does.
func readOpenAIBPE(r io.Reader, name string) (*Tokenizer, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("text: %s: %w", name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("text: %s: %w", name, err)
	}
	lines := strings.Split(string(b), "\n")
	// openai keeps merges[1 : 49152-256-2+1]: the header line is dropped and
	// the vocabulary is cut at 49,408 entries.
	const nMerges = 49152 - 256 - 2
	if len(lines) < nMerges+1 {
		return nil, fmt.Errorf("text: %s: %d lines, want at least %d merges after a header", name, len(lines), nMerges)
	}
	// openai's vocabulary starts with bytes_to_unicode().values() in the
	// dict's order: ascending rune order ("!" is 0), then the same with "</w>".
	var tokens []string
	for r := range rune(len(runeBytes)) {
		if runeBytes[r] >= 0 {
			tokens = append(tokens, string(r))
		}
	}
	for i := range 256 {
		tokens = append(tokens, tokens[i]+wordSuffix)
	}
	pairs := make([][2]string, 0, nMerges)
	for i, line := range lines[1 : nMerges+1] {
		a, b, ok := strings.Cut(line, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return nil, fmt.Errorf("text: %s: line %d: %q is not a merge %q", name, i+2, line, "a b")
		}
		pairs = append(pairs, [2]string{a, b})
		tokens = append(tokens, a+b)
	}
	tokens = append(tokens, startOfText, endOfText)
	vocab := make(map[string]int, len(tokens))
	for id, tok := range tokens {
		vocab[tok] = id
	}
	t, err := build(vocab, pairs, buildConfig{
		suffix: wordSuffix, unk: "", nfc: true, lower: true,
		bos: startOfText, eos: endOfText, pad: tokens[0], context: DefaultContextLength,
		added: defaultAdded(vocab),
	})
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, name)
	}
	return t.WithOptions(Options{})
}
