package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/text"
)

const tokenizeUsage = `tokenize [--model REF] [--json] [--openai] [--context-length N] [--pad] [--error-on-overflow] [TEXT...]

Prints the token ids, tokens and words of each TEXT as the model's tokenizer
makes them: BOS, the tokens, EOS, truncated to the context length (keeping
EOS last) unless --error-on-overflow. With --pad, the ids are padded to the
context length and the attention mask is printed too.

Without TEXT, reads prompts from stdin: with --json one JSON string per line,
else one prompt per line. With --json, writes one JSON object per prompt and
line: {"text", "ids", "tokens", "words", "truncated"[, "mask"]}.

--model is a model directory (tokenizer.json, or vocab.json and merges.txt,
and tokenizer_config.json; a folder in OpenCLIP's layout without them uses
OpenCLIP's built-in CLIP BPE), a hub id org/name[@revision], default, or
openai's bpe_simple_vocab_16e6.txt.gz.`

// tokenizeOptions are the flags of `condition tokenize`.
type tokenizeOptions struct {
	Model           string
	JSON            bool
	OpenAI          bool
	ContextLength   int
	Pad             bool
	ErrorOnOverflow bool
}

func (o *tokenizeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Model, "model", models.DefaultRef, "model directory, hub id org/name[@revision], default, or a bpe_simple_vocab_16e6.txt.gz")
	fs.BoolVar(&o.JSON, "json", false, "JSON output, one object per line; reads JSON strings from stdin when no TEXT is given")
	fs.BoolVar(&o.OpenAI, "openai", false, "openai's and OpenCLIP's cleaning (ftfy's fix_text, HTML unescape, Python lower()) instead of the tokenizer.json normalizer")
	fs.IntVar(&o.ContextLength, "context-length", 0, "context length to truncate (and pad) to (0: the model's, 77 for CLIP)")
	fs.BoolVar(&o.Pad, "pad", false, "pad to the context length and print the attention mask")
	fs.BoolVar(&o.ErrorOnOverflow, "error-on-overflow", false, "fail on a prompt longer than the context length instead of truncating it")
}

// loadTokenizer opens the tokenizer a --model value names and returns the
// model's position table size (0 when the --model value is tokenizer files
// only, with no config.json), and whether the model is in OpenCLIP's
// layout (its text cleaned as OpenCLIP's tokenizer cleans it).
func loadTokenizer(ctx context.Context, e *env, ref string) (*text.Tokenizer, int, bool, error) {
	if st, err := os.Stat(ref); err == nil {
		if st.IsDir() && isOpenCLIPDir(ref) {
			// OpenCLIP's layout: its context from open_clip_config.json,
			// its tokenizer files or OpenCLIP's built-in CLIP BPE.
			m, err := models.Open(ref, models.Options{NoBuild: true})
			if err != nil {
				return nil, 0, false, err
			}
			t, err := modelTokenizer(m)
			return t, m.Config().TextConfig.MaxPositionEmbeddings, true, err
		}
		if st.IsDir() {
			// A plain directory needs no config.json: tokenizer files are
			// enough. With one, its position table bounds the context.
			t, err := text.LoadTokenizerDir(ref)
			if err != nil {
				return nil, 0, false, err
			}
			b, err := os.ReadFile(filepath.Join(ref, models.ConfigFile))
			if errors.Is(err, fs.ErrNotExist) {
				return t, 0, false, nil
			} else if err != nil {
				return nil, 0, false, err
			}
			c, err := models.ParseConfig(b)
			if err != nil {
				return nil, 0, false, fmt.Errorf("%s: %w", filepath.Join(ref, models.ConfigFile), err)
			}
			return t, c.TextConfig.MaxPositionEmbeddings, false, nil
		}
		if strings.HasSuffix(ref, ".gz") {
			t, err := text.LoadOpenAIBPE(ref)
			return t, 0, false, err
		}
	}
	m, err := openModel(ctx, e, ref, "")
	if err != nil {
		return nil, 0, false, err
	}
	t, err := modelTokenizer(m)
	if err != nil {
		return nil, 0, false, err
	}
	return t, m.Config().TextConfig.MaxPositionEmbeddings, m.OpenCLIP(), nil
}

// modelTokenizer loads m's tokenizer as the engine does: its tokenizer
// files, or OpenCLIP's built-in CLIP BPE for a model in OpenCLIP's layout
// without them (models.Model.OpenAIBPE).
func modelTokenizer(m *models.Model) (*text.Tokenizer, error) {
	builtin, err := m.OpenAIBPE()
	if err != nil {
		return nil, err
	}
	if builtin {
		return text.OpenAIBPE()
	}
	return text.LoadTokenizer(m.FS())
}

// isOpenCLIPDir reports whether the folder dir is in OpenCLIP's layout
// (open_clip_config.json, no config.json), whose text OpenCLIP's tokenizer
// cleans as openai's does.
func isOpenCLIPDir(dir string) bool {
	_, errC := os.Stat(filepath.Join(dir, models.ConfigFile))
	_, errO := os.Stat(filepath.Join(dir, models.OpenCLIPConfigFile))
	return errors.Is(errC, fs.ErrNotExist) && errO == nil
}

// tokenizeResult is one prompt's output.
type tokenizeResult struct {
	Text      string      `json:"text"`
	IDs       []int       `json:"ids"`
	Tokens    []string    `json:"tokens"`
	Words     []text.Word `json:"words"`
	Mask      []int64     `json:"mask,omitempty"`
	Truncated bool        `json:"truncated"`
}

func runTokenize(ctx context.Context, e *env, args []string) error {
	var o tokenizeOptions
	fs := newFlagSet(e, "tokenize", tokenizeUsage)
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.ContextLength < 0 || o.ContextLength == 1 {
		return usagef("--context-length must be 0 (the model's) or at least 2, got %d", o.ContextLength)
	}
	tok, maxPositions, openCLIP, err := loadTokenizer(ctx, e, o.Model)
	if err != nil {
		return err
	}
	// A model in OpenCLIP's layout cleans as OpenCLIP's tokenizer does.
	clean := o.OpenAI || openCLIP
	tok, err = tok.WithOptions(text.Options{ContextLength: o.ContextLength, OpenAIClean: clean, ErrorOnOverflow: o.ErrorOnOverflow})
	if err != nil {
		return usagef("%v", err)
	}
	if o.ContextLength == 0 {
		// The model's context: no longer than its position table.
		tok = tok.ForModel(maxPositions)
	}
	w := bufio.NewWriter(e.Stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	n := 0
	one := func(s string) error {
		n++
		r, tokens, err := tokenizeOne(tok, s, o.Pad)
		if err != nil {
			return fmt.Errorf("prompt %d: %w", n, err)
		}
		if r.Truncated {
			e.Log.Warn("prompt truncated", "prompt", n, "tokens", tokens, "context_length", tok.ContextLength())
		}
		if o.JSON {
			return enc.Encode(r)
		}
		return printTokenize(w, r)
	}
	if fs.NArg() > 0 {
		for _, s := range fs.Args() {
			if err := one(s); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	sc := bufio.NewScanner(e.Stdin)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := sc.Text()
		if o.JSON {
			if strings.TrimSpace(s) == "" {
				continue
			}
			var v string
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				return fmt.Errorf("stdin line %d: want a JSON string per line: %w", line, err)
			}
			s = v
		}
		if err := one(s); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	return w.Flush()
}

// tokenizeOne encodes s as the text model gets it: truncated to the context
// length (or an error), padded when pad is set; it also returns the number
// of tokens before truncation.
func tokenizeOne(tok *text.Tokenizer, s string, pad bool) (tokenizeResult, int, error) {
	full, err := tok.Encode(s)
	if err != nil {
		return tokenizeResult{}, 0, err
	}
	ids64, mask, truncated, err := tok.Fit(full, 0)
	if err != nil {
		return tokenizeResult{}, 0, err
	}
	r := tokenizeResult{Text: s, Truncated: truncated}
	for i, id := range ids64 {
		if !pad && mask[i] == 0 {
			break
		}
		r.IDs = append(r.IDs, int(id))
	}
	if pad {
		r.Mask = mask
	}
	if r.Tokens, err = tok.Tokens(r.IDs); err != nil {
		return tokenizeResult{}, 0, err
	}
	n := len(r.IDs)
	if pad {
		n = 0
		for _, m := range mask {
			n += int(m)
		}
	}
	if r.Words, err = tok.Words(r.IDs[:n]); err != nil {
		return tokenizeResult{}, 0, err
	}
	return r, len(full), nil
}

func printTokenize(w io.Writer, r tokenizeResult) error {
	ids := make([]string, len(r.IDs))
	for i, id := range r.IDs {
		ids[i] = fmt.Sprint(id)
	}
	words := make([]string, len(r.Words))
	for i, wd := range r.Words {
		words[i] = wd.Text
	}
	note := ""
	if r.Truncated {
		note = ", truncated"
	}
	fmt.Fprintf(w, "%q (%d tokens%s)\n  ids     %s\n  tokens  %s\n  words   %s\n",
		r.Text, len(r.IDs), note, strings.Join(ids, " "), strings.Join(r.Tokens, " "), strings.Join(words, " | "))
	if r.Mask != nil {
		m := make([]string, len(r.Mask))
		for i, v := range r.Mask {
			m[i] = fmt.Sprint(v)
		}
		_, err := fmt.Fprintf(w, "  mask    %s\n", strings.Join(m, " "))
		return err
	}
	return nil
}
