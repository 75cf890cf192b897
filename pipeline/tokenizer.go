package pipeline

import (
	"fmt"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/text"
)

// loadTokenizer loads the tokenizer of m: from its tokenizer files
// (text.LoadTokenizer), or, for a model in OpenCLIP's layout without them
// whose config names no Hugging Face tokenizer, OpenCLIP's built-in CLIP
// BPE (models.Model.OpenAIBPE, text.OpenAIBPE), as OpenCLIP reads it. The
// tokenizer is the files' own, not yet bound to the model's context
// (Tokenizer.ForModel) or cleaning (a model in OpenCLIP's layout cleans
// text as OpenCLIP does: text.Options.OpenAIClean, as the Engine does).
func loadTokenizer(m *models.Model) (*text.Tokenizer, error) {
	builtin, err := m.OpenAIBPE()
	if err != nil {
		return nil, err
	}
	var tok *text.Tokenizer
	if builtin {
		tok, err = text.OpenAIBPE()
	} else {
		tok, err = text.LoadTokenizer(m.FS())
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: model %s: %w", m.Name(), err)
	}
	return tok, nil
}
