package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// ClassifyOptions controls Classify.
type ClassifyOptions struct {
	// Template makes each label's prompt: "{}" is replaced by the label
	// ("a photo of a {}"); "" or a template without "{}": the label alone.
	Template string
	// Truncate cuts prompts longer than the model's context instead of
	// refusing them.
	Truncate bool
}

// Label is one label of a zero-shot classification.
type Label struct {
	Text   string // the label as given
	Prompt string // the prompt it became (ClassifyOptions.Template)
	Index  int    // its place among the labels given, from 0
	// Prob is the label's probability: the softmax of the logits over the
	// labels (CLIP: they sum to 1), or the sigmoid of its own logit
	// (SigLIP: each label on its own); Engine.Scores says which.
	Prob  float32
	Logit float32 // exp(logit_scale)·cosine (+ logit_bias for SigLIP)
}

// ScoreKind is how a model turns logits into probabilities.
type ScoreKind string

// The kinds of scores.
const (
	// SoftmaxScores: CLIP's, a softmax over the labels (they sum to 1).
	SoftmaxScores ScoreKind = "softmax"
	// SigmoidScores: SigLIP's, sigmoid(logit) for each label on its own.
	SigmoidScores ScoreKind = "sigmoid"
)

// Scores says how the engine's model turns logits into probabilities.
func (e *Engine) Scores() ScoreKind {
	if e.family.Sigmoid() {
		return SigmoidScores
	}
	return SoftmaxScores
}

// Probs returns the probabilities of Similarity's logits [images][texts]
// as the engine's model makes them (Scores): for SigmoidScores the sigmoid
// of each logit, each text on its own; for SoftmaxScores the softmax of
// each image's logits over the texts.
func (e *Engine) Probs(logits [][]float32) [][]float32 {
	out := make([][]float32, len(logits))
	for i, row := range logits {
		out[i] = e.probs(row)
	}
	return out
}

// probs returns the probabilities of one image's logits (see Probs).
func (e *Engine) probs(logits []float32) []float32 {
	out := make([]float32, len(logits))
	if e.family.Sigmoid() {
		for i, l := range logits {
			out[i] = float32(sigmoid(float64(l)))
		}
		return out
	}
	top := math.Inf(-1)
	for _, l := range logits {
		top = max(top, float64(l))
	}
	sum := 0.0
	for _, l := range logits {
		sum += math.Exp(float64(l) - top)
	}
	for i, l := range logits {
		out[i] = float32(math.Exp(float64(l)-top) / sum)
	}
	return out
}

// scoreProb is Attention.Prob of a score: its sigmoid for SigmoidScores,
// 0 for SoftmaxScores.
func (e *Engine) scoreProb(score float64) float64 {
	if !e.family.Sigmoid() {
		return 0
	}
	return sigmoid(score)
}

// sigmoid is 1/(1+e^-x), SigLIP's probability of a logit.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	z := math.Exp(x)
	return z / (1 + z)
}

// Classify scores an encoded image against labels (zero-shot, as CLIP does):
// each label becomes a prompt (opts.Template), every prompt is encoded in
// one text encoder call, and the image's logit with each is turned into a
// probability: over the labels (CLIP's softmax) or for each label on its
// own (SigLIP's sigmoid; see Engine.Scores). It returns one Label per
// label, best first (equal logits keep the order given).
func (e *Engine) Classify(ctx context.Context, img *ImageEncoding, labels []string, opts ClassifyOptions) ([]Label, error) {
	if img == nil {
		return nil, errors.New("pipeline: classify: no image encoding")
	}
	if len(labels) == 0 {
		return nil, errors.New("pipeline: classify: no labels")
	}
	out := make([]Label, len(labels))
	texts := make([]string, len(labels))
	for i, l := range labels {
		texts[i] = l
		if strings.Contains(opts.Template, "{}") {
			texts[i] = strings.ReplaceAll(opts.Template, "{}", l)
		}
		out[i] = Label{Text: l, Prompt: texts[i], Index: i}
	}
	encs, err := e.labelEncodings(ctx, opts.Truncate, texts)
	if err != nil {
		return nil, err
	}
	_, logits, err := e.Similarity([]ImageEncoding{*img}, encs)
	if err != nil {
		return nil, err
	}
	if len(logits) != 1 || len(logits[0]) != len(labels) {
		return nil, fmt.Errorf("pipeline: classify: %d scores for %d labels", len(logits[0]), len(labels))
	}
	probs := e.probs(logits[0])
	for i, l := range logits[0] {
		out[i].Logit, out[i].Prob = l, probs[i]
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Logit > out[j].Logit })
	return out, nil
}

// maxLabels bounds the engine's cache of label prompts' encodings.
const maxLabels = 4096

// labelKey is a label prompt as Classify encodes it.
type labelKey struct {
	text     string
	truncate bool
}

// labelEncodings returns the encodings of label prompts, from the engine's
// cache where Classify encoded them before (the same labels are asked of
// every image), encoding the others in one call.
func (e *Engine) labelEncodings(ctx context.Context, truncate bool, texts []string) ([]TextEncoding, error) {
	out := make([]TextEncoding, len(texts))
	var missing []string
	var at []int
	e.labelMu.Lock()
	for i, t := range texts {
		if enc, ok := e.labels[labelKey{t, truncate}]; ok {
			out[i] = enc
		} else {
			missing = append(missing, t)
			at = append(at, i)
		}
	}
	e.labelMu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	encs, err := e.encodeTextsWith(ctx, TextOptions{Truncate: truncate}, missing)
	if err != nil {
		return nil, err
	}
	e.labelMu.Lock()
	defer e.labelMu.Unlock()
	if e.labels == nil || len(e.labels)+len(encs) > maxLabels {
		e.labels = make(map[labelKey]TextEncoding)
	}
	for k, i := range at {
		out[i] = encs[k]
		e.labels[labelKey{missing[k], truncate}] = encs[k]
	}
	return out, nil
}
