package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/conditionhq/condition/xattn"
)

// Prompt is one prompt encoded once with its attention sides prepared: its
// tokens as keys and values (image → text) and as queries (text → image),
// projected by the engine's layers. A Prompt is immutable: share it between
// goroutines and reuse it for every image.
type Prompt struct {
	TextEncoding
	src *xattn.Source // the tokens as keys and values (image → text); nil when not computed
	q   *xattn.Query  // the tokens as queries (text → image); nil when not computed
	eng *Engine
}

// Prompts is a set of prepared prompts, in order. Slice it to attend with
// some of them.
type Prompts []*Prompt

// Prepare encodes the prompts in one batch and prepares their attention
// sides, once for every later Attend.
func (e *Engine) Prepare(ctx context.Context, prompts ...string) (Prompts, error) {
	encs, err := e.EncodeTexts(ctx, prompts)
	if err != nil {
		return nil, err
	}
	return e.prepare(encs)
}

// PrepareWith is Prepare with the truncation of opts.
func (e *Engine) PrepareWith(ctx context.Context, opts TextOptions, prompts ...string) (Prompts, error) {
	encs, err := e.encodeTextsWith(ctx, opts, prompts)
	if err != nil {
		return nil, err
	}
	return e.prepare(encs)
}

func (e *Engine) prepare(encs []TextEncoding) (_ Prompts, err error) {
	out := make(Prompts, len(encs))
	for i := range encs {
		e.warnUnknown(i, &encs[i])
		p := &Prompt{TextEncoding: encs[i], eng: e}
		t := p.T()
		states := p.States[:t*p.Width] // the token rows, [T, Width]
		if e.i2t != nil {
			if p.src, err = e.i2t.PrepareSource(states, t, nil); err != nil {
				return nil, &PromptError{Index: i, Text: p.Text, Err: fmt.Errorf("prepare image to text: %w", err)}
			}
		}
		if e.t2i != nil {
			if p.q, err = e.t2i.PrepareQuery(states, t); err != nil {
				return nil, &PromptError{Index: i, Text: p.Text, Err: fmt.Errorf("prepare text to image: %w", err)}
			}
		}
		out[i] = p
	}
	return out, nil
}

// warnUnknown warns, once per prompt, about words the vocabulary can only
// spell out letter by letter: the model never learned them, and their maps
// mean nothing.
func (e *Engine) warnUnknown(i int, enc *TextEncoding) {
	ids := make([]int, len(enc.IDs))
	for k, id := range enc.IDs {
		ids[k] = int(id)
	}
	words, err := e.tok.Unknown(ids)
	if err != nil || len(words) == 0 {
		return
	}
	names := make([]string, len(words))
	for k, w := range words {
		names[k] = fmt.Sprintf("%q (%s)", w.Text, strings.Join(enc.Tokens[w.Start:w.End], " "))
	}
	e.log.Warn("the model does not know these words, spelled out letter by letter: their maps mean nothing",
		"prompt", i, "text", quote(enc.Text), "words", strings.Join(names, ", "), "model", e.m.Name())
}
