package clip_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
)

// pearlJointTol bounds |ort − torch| for PEARL's joint-space patch vectors
// (unit length): ONNX Runtime's float32 against the float64 transcription.
const pearlJointTol = 5e-5

// TestPEARLMatchesTorch: the PEARL readout of the tiny CLIP equals the
// torch float64 transcription of the paper's equations
// (scripts/pyclip/pearl_reference.py) on the graphs built from its
// safetensors and on its export, with the three images encoded together
// and each alone: the recomputed hidden states within 1e-5, the
// joint-space patch vectors within 5e-5 and to a cosine of 0.99999; no
// other output changes.
func TestPEARLMatchesTorch(t *testing.T) {
	orttest.Load(t)
	exported, err := models.Open(tinyclip, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	px := readGolden(t, "vision_pixel_values")
	pixels, err := px.Float32()
	if err != nil {
		t.Fatal(err)
	}
	n, h, w := px.Shape[0], px.Shape[2], px.Shape[3]
	wantH, _ := goldenF64(t, "readout_pearl_hidden")
	wantE, shape := goldenF64(t, "readout_pearl_patch_embeds")
	per := len(pixels) / n
	for name, m := range map[string]*models.Model{"built": builtTiny(t), "exported": exported} {
		for _, batch := range []int{n, 1} {
			t.Run(name+"/batch"+string(rune('0'+batch)), func(t *testing.T) {
				for first := 0; first < n; first += batch {
					px := pixels[first*per : (first+batch)*per]
					base, _ := encodeRaw(t, m, px, batch, h, w)
					s, d := base[0].Tokens, base[0].Width
					hidden := readoutRows(t, m, clip.ReadoutPEARL, px, h, w, base)
					wh := make([]float32, batch*s*d)
					for i := range wh {
						wh[i] = float32(wantH[first*s*d+i])
					}
					closeWithin(t, "pearl hidden", hidden, wh, 1e-5)
					rows := shape[1] * shape[2]
					want := wantE[first*rows : (first+batch)*rows]
					got := jointPatches(t, m, hidden, batch, s, d)
					worst := 0.0
					for i := range want {
						worst = max(worst, math.Abs(got[i]-want[i]))
					}
					c := minCosine(got, want, shape[2])
					t.Logf("images %d..%d: max |diff| %.2e, min cosine %.9f", first, first+batch-1, worst, c)
					if worst > pearlJointTol || c < 0.99999 {
						t.Errorf("images %d..%d: joint-space patches max |diff| %.2e (want ≤ %g), min cosine %.7f (want ≥ 0.99999)", first, first+batch-1, worst, pearlJointTol, c)
					}
				}
			})
		}
	}
}

// TestPEARLFamilies: PEARL is refused for families without CLIP's
// class-token last block (SigLIP, SigLIP 2, TIPSv2), by an error naming
// the families that take it; MetaCLIP 2 opens with it.
func TestPEARLFamilies(t *testing.T) {
	orttest.Load(t)
	for _, dir := range []string{siglipGraphDir, tinyNaFlexDir, filepath.Join("..", "..", "testdata", "tinytips")} {
		m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = clip.OpenVision(m, clip.VisionOptions{Readout: clip.ReadoutPEARL})
		if err == nil || !strings.Contains(err.Error(), "readout pearl") || !strings.Contains(err.Error(), "CLIP and MetaCLIP 2") ||
			!strings.Contains(err.Error(), m.Family().String()) {
			t.Errorf("%s (%s) with readout pearl: %v", dir, m.Family(), err)
		}
	}
	m, err := models.Open(filepath.Join("..", "..", "testdata", "tinymetaclip2"), models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := clip.OpenVision(m, clip.VisionOptions{Readout: clip.ReadoutPEARL})
	if err != nil {
		t.Fatalf("MetaCLIP 2 with readout pearl: %v", err)
	}
	enc.Close()
}
