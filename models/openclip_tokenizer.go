package models

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// openAIBPEVocab is the size of CLIP's BPE vocabulary: 256 byte symbols,
// the same with </w>, 48,894 merges, <|startoftext|> and <|endoftext|>.
const openAIBPEVocab = 49408

// OpenAIBPE reports whether the model's tokenizer is OpenCLIP's built-in
// CLIP BPE (openai's bpe_simple_vocab_16e6.txt.gz, which this program
// carries: text.OpenAIBPE): the model is in OpenCLIP's layout, its folder
// or repository has no tokenizer files (tokenizer.json, vocab.json and
// merges.txt, a SentencePiece model), and its config names no Hugging
// Face tokenizer (model_cfg.text_cfg.hf_tokenizer_name), as OpenCLIP
// itself reads it. A model with tokenizer files is read from them. The
// error says why such a model has no tokenizer at all: its config names a
// Hugging Face tokenizer whose files are not there, asks the built-in one
// for other than its default cleaning (text_cfg.tokenizer_kwargs), or its
// vocab_size is smaller than CLIP's 49,408 ids.
func (m *Model) OpenAIBPE() (bool, error) { return m.openAIBPE, m.noTokenizer }

// openCLIPTokenizer sets m.openAIBPE and m.noTokenizer for the model in
// OpenCLIP's layout whose open_clip_config.json is b (see OpenAIBPE).
func (m *Model) openCLIPTokenizer(b []byte) error {
	for _, f := range tokenizerFiles {
		if fsHas(m.base, f) {
			return nil
		}
	}
	var f struct {
		ModelCfg struct {
			Text struct {
				VocabSize   *int                       `json:"vocab_size"`
				HFTokenizer json.RawMessage            `json:"hf_tokenizer_name"`
				Kwargs      map[string]json.RawMessage `json:"tokenizer_kwargs"`
			} `json:"text_cfg"`
		} `json:"model_cfg"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("models: %s: %w", m.where(), err)
	}
	where := OpenCLIPConfigFile + ": model_cfg.text_cfg"
	files := strings.Join(tokenizerFiles[:3], ", ")
	t := f.ModelCfg.Text
	switch name := strings.TrimSpace(string(t.HFTokenizer)); {
	case name != "" && name != "null" && name != `""`:
		m.noTokenizer = fmt.Errorf("models: model %s: %s.hf_tokenizer_name is %s, a Hugging Face tokenizer OpenCLIP reads in place of its built-in CLIP BPE, and the model has none of its files (%s); put them beside %s",
			m.where(), where, name, files, OpenCLIPWeightsFile)
	case t.VocabSize != nil && *t.VocabSize < openAIBPEVocab:
		m.noTokenizer = fmt.Errorf("models: model %s has no tokenizer files (%s), and its %s.vocab_size %d is smaller than the %d ids of OpenCLIP's built-in CLIP BPE; put the tokenizer files it was trained with beside %s",
			m.where(), files, where, *t.VocabSize, openAIBPEVocab, OpenCLIPWeightsFile)
	default:
		if k, v := simpleTokenizerKwarg(t.Kwargs); k != "" {
			m.noTokenizer = fmt.Errorf("models: model %s has no tokenizer files (%s), and its %s.tokenizer_kwargs.%s is %s: OpenCLIP's built-in CLIP BPE is read here with its default cleaning only (clean \"lower\", no reduction_mask)",
				m.where(), files, where, k, v)
			break
		}
		m.openAIBPE = true
	}
	return nil
}

// simpleTokenizerKwarg returns the first (by name) of text_cfg's
// tokenizer_kwargs kw that asks OpenCLIP's SimpleTokenizer for other than
// its defaults (clean "lower", reduction_mask ""), and its value; "" when
// none does.
func simpleTokenizerKwarg(kw map[string]json.RawMessage) (string, string) {
	keys := make([]string, 0, len(kw))
	for k := range kw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(string(kw[k]))
		switch {
		case k == "clean" && v == `"lower"`:
		case k == "reduction_mask" && (v == `""` || v == "null"):
		default:
			return k, v
		}
	}
	return "", ""
}
