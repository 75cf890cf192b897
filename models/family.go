package models

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Family is a model family: what config.json's model_type and the tokenizer
// files say a model is. The engine, the job and the server work on each the
// same way; what differs is read from the family (class token, pooling,
// scores, the heads of the joint space).
type Family string

// The families this program runs.
const (
	// CLIP: OpenAI's architecture (also OpenCLIP/LAION checkpoints in the
	// Hugging Face layout): a class token, EOS pooling, text_projection and
	// visual_projection, softmax scores.
	CLIP Family = "clip"
	// SigLIP: model_type siglip with SiglipTokenizer (spiece.model, or a
	// Unigram tokenizer.json):
	// no class token, last-position text pooling over 64 padded positions,
	// an attention-pooling vision head, logit_scale and logit_bias, sigmoid
	// scores.
	SigLIP Family = "siglip"
	// SigLIP2: SigLIP 2, at a fixed resolution (model_type siglip with a
	// Gemma tokenizer.json: SigLIP's towers and scores) or NaFlex
	// (model_type siglip2: SigLIP's text tower and scores, a vision tower
	// over each image's own patch grid; Config.NaFlex).
	SigLIP2 Family = "siglip2"
	// MetaCLIP2: MetaCLIP 2 (model_type metaclip_2), worldwide multilingual
	// CLIP in CLIP's weight layout: CLIP's towers and softmax scores, the
	// text pooled at the first EOS (whatever its id), an XLM-V
	// (XLMRobertaTokenizer) or mT5 (T5Tokenizer) tokenizer.json.
	MetaCLIP2 Family = "metaclip_2"
	// Tipsv2: TIPSv2 (model_type tipsv2), an image–text model trained for
	// dense patch–text alignment: a DINOv2-style vision tower whose
	// last_hidden_state is [class, R registers, patches], a text tower
	// pooled by the mean over its attention mask, no projection heads (one
	// width for both towers), softmax scores of cosine / temperature, a
	// SentencePiece tokenizer (Tipsv2Tokenizer: lower-cased, no BOS or EOS,
	// padded with id 0).
	Tipsv2 Family = "tipsv2"
)

// String returns the family's name as people write it.
func (f Family) String() string {
	switch f {
	case CLIP:
		return "CLIP"
	case SigLIP:
		return "SigLIP"
	case SigLIP2:
		return "SigLIP 2"
	case MetaCLIP2:
		return "MetaCLIP 2"
	case Tipsv2:
		return "TIPSv2"
	}
	return string(f)
}

// Sigmoid reports whether the family scores each label on its own
// (sigmoid(logit), SigLIP's) rather than by a softmax over the labels.
func (f Family) Sigmoid() bool { return f == SigLIP || f == SigLIP2 }

// ClassToken reports whether the vision tower's last_hidden_state starts
// with a class token before the patches (CLIP's; TIPSv2's, followed by its
// register tokens: VisionConfig.NumRegisterTokens); SigLIP's rows are all
// patches.
func (f Family) ClassToken() bool { return f == CLIP || f == MetaCLIP2 || f == Tipsv2 }

// ErrUnsupportedFamily is matched (errors.Is) by the error of a config.json
// whose model_type this program does not run.
var ErrUnsupportedFamily = errors.New("model family not supported")

// familyOf maps config.json's model_type to a family (SigLIP 2 at fixed
// resolution says siglip, as SigLIP does; the tokenizer tells them apart;
// SigLIP 2 NaFlex says siglip2).
func familyOf(modelType string) (Family, error) {
	switch modelType {
	case "", "clip", "clip_text_model", "clip_vision_model":
		return CLIP, nil
	case "siglip", "siglip_text_model", "siglip_vision_model":
		return SigLIP, nil
	case "metaclip_2", "metaclip_2_text_model", "metaclip_2_vision_model":
		return MetaCLIP2, nil
	case "siglip2", "siglip2_text_model", "siglip2_vision_model":
		return SigLIP2, nil
	case "tipsv2", "tipsv2_text_model", "tipsv2_vision_model":
		return Tipsv2, nil
	}
	return "", fmt.Errorf("model_type %q: expected a CLIP (\"clip\"), MetaCLIP 2 (\"metaclip_2\"), SigLIP (\"siglip\", \"siglip2\") or TIPSv2 (\"tipsv2\") config: %w", modelType, ErrUnsupportedFamily)
}

// Family returns the model's family: config.json's model_type, with SigLIP
// and SigLIP 2 told apart by the tokenizer (SentencePiece's spiece.model, or
// Gemma's tokenizer).
func (m *Model) Family() Family { return m.family }

// setFamily reads the family from config.json and the tokenizer files, and
// refuses a config and a tokenizer that disagree.
func (m *Model) setFamily() error {
	f := m.config.Family
	class := m.tokenizerClass()
	disagree := func(want string) error {
		return fmt.Errorf("models: %s: %s says %s (model_type %q), but tokenizer_config.json's tokenizer_class is %q; expected %s",
			m.Name(), ConfigFile, f, m.config.ModelType, class, want)
	}
	switch f {
	case CLIP:
		switch class {
		case "", "CLIPTokenizer", "CLIPTokenizerFast":
		default:
			return disagree("CLIPTokenizer or CLIPTokenizerFast")
		}
	case MetaCLIP2:
		switch class {
		case "XLMRobertaTokenizer", "XLMRobertaTokenizerFast", "T5Tokenizer", "T5TokenizerFast":
		case "":
			if !m.Has("tokenizer.json") {
				return fmt.Errorf("models: %s: %s says MetaCLIP 2 (model_type %q), which needs its tokenizer.json (XLM-V or mT5), and the folder has none",
					m.Name(), ConfigFile, m.config.ModelType)
			}
		default:
			return disagree("XLMRobertaTokenizer(Fast) (XLM-V) or T5Tokenizer(Fast) (mT5)")
		}
	case Tipsv2:
		switch class {
		case "", "Tipsv2Tokenizer", "Tipsv2TokenizerFast":
		default:
			return disagree("Tipsv2Tokenizer (its tokenizer.json, or a SentencePiece tokenizer.model)")
		}
		if !m.Has("tokenizer.json") && !m.Has("tokenizer.model") {
			return fmt.Errorf("models: %s: %s says TIPSv2 (model_type %q), whose tokenizer is Tipsv2Tokenizer's tokenizer.json (or, from earlier transformers versions, its SentencePiece model tokenizer.model), and the folder has neither",
				m.Name(), ConfigFile, m.config.ModelType)
		}
	case SigLIP2: // NaFlex (model_type siglip2)
		switch class {
		case "", "GemmaTokenizer", "GemmaTokenizerFast", "Siglip2Tokenizer", "Siglip2TokenizerFast",
			"SiglipTokenizer": // SigLIP's towers and tokenizer moved to NaFlex's vision input
		default:
			return disagree("GemmaTokenizer(Fast) or Siglip2Tokenizer(Fast) (SigLIP 2), or SiglipTokenizer")
		}
	case SigLIP:
		switch class {
		case "SiglipTokenizer":
		case "GemmaTokenizer", "GemmaTokenizerFast":
			f = SigLIP2
		case "":
			if !m.Has("spiece.model") && m.Has("tokenizer.json") && !m.Has("tokenizer_config.json") {
				f = SigLIP2
			}
		default:
			return disagree("SiglipTokenizer (SigLIP) or GemmaTokenizer(Fast) (SigLIP 2)")
		}
	}
	m.family = f
	return nil
}

// tokenizerClass returns tokenizer_config.json's tokenizer_class ("" when
// the file or the field is absent, or it does not parse: the tokenizer's
// loader reports that).
func (m *Model) tokenizerClass() string {
	b, err := m.ReadFile("tokenizer_config.json")
	if err != nil {
		return ""
	}
	var c struct {
		Class string `json:"tokenizer_class"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Class
}
