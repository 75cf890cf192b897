package pipeline

import (
	"context"
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// siglipDir is the tiny SigLIP test model (testdata/tinysiglip), whose
// golden outputs come from the torch transcription of the towers
// (scripts/pysiglip) and SiglipTokenizer's steps over sentencepiece.
var siglipDir = filepath.Join("..", "testdata", "tinysiglip")

func siglipGolden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	g, err := tensorio.ReadNPY(filepath.Join(siglipDir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func goldenF32(t *testing.T, name string) []float32 {
	t.Helper()
	v, err := siglipGolden(t, name).Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// relErr is max|got - want| / max|want|.
func relErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i])-float64(want[i])))
		m = max(m, math.Abs(float64(want[i])))
	}
	return d / m
}

// TestSiglip runs the whole engine on the tiny SigLIP: family, tokenizer
// ids, both towers' outputs, sigmoid scores and the joint-space patches
// through the pooling head, each against torch.
func TestSiglip(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(siglipDir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Family() != models.SigLIP {
		t.Fatalf("family %s, want SigLIP", m.Family())
	}
	eng := tinyEngine(t, m, Options{Truncate: true})
	if eng.Scores() != SigmoidScores {
		t.Errorf("scores %s, want sigmoid", eng.Scores())
	}
	ctx := context.Background()

	var golden struct {
		Prompts []string `json:"prompts"`
		PadID   int      `json:"pad_id"`
	}
	b, err := os.ReadFile(filepath.Join(siglipDir, "golden", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	ids := siglipGolden(t, "text_input_ids")
	wantIDs := ids.Data.([]int64)
	n := ids.Shape[1]
	hidden, pooled := goldenF32(t, "text_last_hidden_state"), goldenF32(t, "text_pooler_output")
	var prompts []string
	var rows []int // golden row of each prompt given to the engine
	for i, p := range golden.Prompts {
		if p != "" { // the engine refuses empty prompts
			prompts, rows = append(prompts, p), append(rows, i)
		}
	}
	ps, err := eng.Prepare(ctx, prompts...)
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range ps {
		r := rows[k]
		want := wantIDs[r*n : (r+1)*n]
		for j, id := range want {
			got := int64(golden.PadID)
			if j < len(p.IDs) {
				got = p.IDs[j]
			}
			if got != id {
				t.Fatalf("prompt %q: ids %v, want %v", p.Text, p.IDs, want)
			}
		}
		if p.Padded != n {
			t.Errorf("prompt %q padded to %d, want %d", p.Text, p.Padded, n)
		}
		w := p.Width
		if e := relErr(p.States, hidden[r*n*w:(r+1)*n*w]); e > 1e-4 {
			t.Errorf("prompt %q: last_hidden_state relative error %.2g", p.Text, e)
		}
		d := len(p.Embeds)
		if e := relErr(p.Embeds, pooled[r*d:(r+1)*d]); e > 1e-4 {
			t.Errorf("prompt %q: pooler_output relative error %.2g", p.Text, e)
		}
	}

	// The golden images, preprocessed as SiglipImageProcessor does.
	wantPix := goldenF32(t, "embed_pixel_values")
	var encs []ImageEncoding
	for i, name := range []string{"square.png", "wide.png"} {
		img, err := vision.DecodeFile(filepath.Join(siglipDir, "golden", "images", name), vision.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h, w := eng.InputSize()
		pix := make([]float32, 3*h*w)
		if err := eng.Preprocess(pix, img); err != nil {
			t.Fatal(err)
		}
		if e := relErr(pix, wantPix[i*3*h*w:(i+1)*3*h*w]); e > 1e-6 {
			t.Errorf("%s: pixel values differ from SiglipImageProcessor's (relative %.2g)", name, e)
		}
		enc, err := eng.EncodePixels(ctx, pix, 1)
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, enc[0])
	}
	lhs, pool, patch := goldenF32(t, "embed_last_hidden_state"), goldenF32(t, "embed_pooler_output"), goldenF32(t, "embed_patch_embeds")
	logits, probs := goldenF32(t, "embed_logits_per_image"), goldenF32(t, "embed_probs_per_image")
	np := len(golden.Prompts)
	for i, enc := range encs {
		p, dv := enc.P(), enc.Width
		if enc.Grid != (vision.Grid{H: 4, W: 4}) || len(enc.States) != p*dv {
			t.Fatalf("image %d: grid %s, %d state values (want 4x4, no class token: %d)", i, enc.Grid, len(enc.States), 16*dv)
		}
		if e := relErr(enc.States, lhs[i*p*dv:(i+1)*p*dv]); e > 1e-4 {
			t.Errorf("image %d: last_hidden_state relative error %.2g", i, e)
		}
		d := len(enc.Embeds)
		if e := relErr(enc.Embeds, pool[i*d:(i+1)*d]); e > 1e-4 {
			t.Errorf("image %d: pooler_output relative error %.2g", i, e)
		}
		// The joint space's patches: the pooling head on each patch alone,
		// L2-normalised.
		jp, err := eng.JointPatches(&enc)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]float32(nil), patch[i*p*d:(i+1)*p*d]...)
		for r := range p {
			l2(want[r*d : (r+1)*d])
		}
		if e := relErr(jp, want); e > 1e-4 {
			t.Errorf("image %d: joint-space patches relative error %.2g against the head applied in torch", i, e)
		}
		atts, err := eng.Attend(ctx, &encs[i], ps, AttendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, a := range atts {
			r := rows[k]
			if !a.HasScore || math.Abs(a.Score-float64(logits[i*np+r])) > 1e-4*max(1, math.Abs(float64(logits[i*np+r]))) {
				t.Errorf("image %d, prompt %q: score %v (%v), torch's logit %v", i, ps[k].Text, a.Score, a.HasScore, logits[i*np+r])
			}
			if a.Similarity == nil || a.TextToImage == nil || a.ImageToText == nil {
				t.Errorf("image %d, prompt %d: the joint space both ways gave no similarity or maps", i, k)
			}
		}
		// The head ran once for this encoding: with its patch states
		// cleared, the joint-space patches are still the ones above.
		saved := slices.Clone(encs[i].States)
		clear(encs[i].States)
		again, err := eng.JointPatches(&encs[i])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again, jp) {
			t.Errorf("image %d: the pooling head ran again on the same encoding", i)
		}
		copy(encs[i].States, saved)
		labels, err := eng.Classify(ctx, &encs[i], prompts, ClassifyOptions{Truncate: true})
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for _, l := range labels {
			want := probs[i*np+rows[l.Index]]
			if math.Abs(float64(l.Prob-want)) > 1e-5 {
				t.Errorf("image %d, label %q: probability %v, torch's sigmoid %v", i, l.Text, l.Prob, want)
			}
			sum += float64(l.Prob)
		}
		if math.Abs(sum-1) < 1e-3 {
			t.Errorf("image %d: probabilities sum to %v: a softmax, not SigLIP's sigmoid", i, sum)
		}
	}
}

// TestSiglipLayers: the identity layer is refused for widths that differ
// (the tiny model's text is 32 wide, its patches 24), and a one-way joint
// space still attends.
func TestSiglipLayers(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(siglipDir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), m, Options{Layer: Layer{Weights: "identity"}}); err == nil {
		t.Error("identity layer on widths 32 and 24: no error")
	}
	eng := tinyEngine(t, m, Options{Direction: xattn.TextToImage})
	ps, err := eng.Prepare(context.Background(), "a red car")
	if err != nil {
		t.Fatal(err)
	}
	img, err := vision.DecodeFile(filepath.Join(siglipDir, "golden", "images", "square.png"), vision.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	atts, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, AttendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := atts[0][0]
	if a.TextToImage == nil || a.ImageToText != nil {
		t.Errorf("text to image only: maps %v / %v", a.TextToImage != nil, a.ImageToText != nil)
	}
	sum := 0.0
	for _, v := range a.TextToImage[:a.Grid.Patches()] {
		sum += float64(v)
	}
	if math.Abs(sum-1) > 1e-4 {
		t.Errorf("a token's map over the patches sums to %v, want 1", sum)
	}
}

func l2(x []float32) {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(s)
	for i := range x {
		x[i] = float32(float64(x[i]) * inv)
	}
}
