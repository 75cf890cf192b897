package eval_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/cmd/internal/eval"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
)

// pythonEval is what scripts/train_default/train.py measured on the same
// held-out scenes with torch (written when it exported the model), per
// renderer.
type pythonEval struct {
	ZeroShot       float64 `json:"zero_shot_top1"`
	ZeroShotN      int     `json:"zero_shot_n"`
	ShapeConfusion [][]int `json:"shape_confusion"`
	Peak           float64 `json:"text_to_image_peak_inside"`
	PeakWords      int     `json:"text_to_image_words"`
	OwnWord        float64 `json:"image_to_text_own_word"`
	OwnPatches     int     `json:"image_to_text_patches"`
}

// TestEvalDefault measures the embedded default model on held-out scenes of
// the generator it was trained on and of the independent renderer, checks
// the quality targets of the issue that asked for them, and checks that the
// Go pipeline (tokenizer, preprocessing, ONNX Runtime, joint-space heads)
// gives the figures torch gave.
func TestEvalDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 4000 scenes; skipped with -short")
	}
	m, err := models.FromFS(embedded.FS(), models.DefaultRef)
	if err != nil {
		t.Fatal(err)
	}
	checkEval(t, m, filepath.Join("..", "..", "..", "scripts", "train_default", "eval.json"),
		[2]figures{floorTraining, floorIndependent}, [2]figures{targetTraining, targetIndependent})
}

// TestEvalSiglipScenes measures the tiny SigLIP trained on the scenes
// (testdata/siglip-scenes, scripts/pysiglip/train_tiny.py) as TestEvalDefault
// measures the default model: its figures against torch's on the same
// scenes, floors and targets.
func TestEvalSiglipScenes(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 4000 scenes; skipped with -short")
	}
	dir := filepath.Join("..", "..", "..", "testdata", "siglip-scenes")
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Family() != models.SigLIP {
		t.Fatalf("%s: family %s, want SigLIP", dir, m.Family())
	}
	checkEval(t, m, filepath.Join(dir, "eval.json"),
		[2]figures{floorSiglipTraining, floorSiglipIndependent}, [2]figures{targetSiglipTraining, targetSiglipIndependent})
}

// checkEval runs eval.Run on m through the engine `condition models eval`
// and `run` use (tokenizer, preprocessing, both ONNX Runtime encoders and
// the joint-space layers) and checks its figures on both renderers against
// floors, logs them against targets, and compares them with torch's in
// pyPath (what the training script measured on the same scenes).
func checkEval(t *testing.T, m *models.Model, pyPath string, floors, targets [2]figures) {
	t.Helper()
	orttest.Load(t)
	eng, err := pipeline.New(context.Background(), m, pipeline.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	res, err := eval.Run(context.Background(), eng, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	t.Logf("eval: %s", b)

	raw, err := os.ReadFile(pyPath)
	if err != nil {
		t.Fatalf("the committed Python figures are missing: %v", err)
	}
	var py struct {
		Training    pythonEval `json:"training_renderer"`
		Independent pythonEval `json:"independent_renderer"`
	}
	if err := json.Unmarshal(raw, &py); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		got           eval.Figures
		py            pythonEval
		floor, target figures
	}{
		{res.Training, py.Training, floors[0], targets[0]},
		{res.Independent, py.Independent, floors[1], targets[1]},
	} {
		name := r.got.Renderer
		shapes := r.got.ShapeAccuracy()
		for _, c := range []struct {
			name               string
			got, floor, target float64
		}{
			{"zero-shot top-1 (single objects, 40 prompts)", r.got.ZeroShotTop1, r.floor.zeroShot, r.target.zeroShot},
			{"shape named right, least of the five", slices.Min(shapes), r.floor.shape, r.target.shape},
			{"text→image peak inside the named object", r.got.PeakInside, r.floor.peak, r.target.peak},
			{"image→text: patches attending most to their object's words", r.got.OwnWord, r.floor.own, r.target.own},
		} {
			if c.got < c.floor {
				t.Errorf("%s: %s: %.3f, below the committed model's floor %.3f (per shape %.3f, confusion %v)", name, c.name, c.got, c.floor, shapes, r.got.ShapeConfusion)
			}
			met := "met"
			if c.got < c.target {
				met = "NOT met"
			}
			t.Logf("%s: %s: %.3f; target ≥ %.2f %s", name, c.name, c.got, c.target, met)
		}
		// ONNX Runtime and torch differ in the last bits, which can move
		// an argmax between near-equal scores: allow a few decisions in a
		// thousand.
		for _, c := range []struct {
			name    string
			got, py float64
		}{
			{"zero-shot", r.got.ZeroShotTop1, r.py.ZeroShot},
			{"text→image peak", r.got.PeakInside, r.py.Peak},
			{"image→text", r.got.OwnWord, r.py.OwnWord},
		} {
			if math.Abs(c.got-c.py) > 0.005 {
				t.Errorf("%s: %s: Go %.4f, torch %.4f", name, c.name, c.got, c.py)
			}
		}
		if r.got.ZeroShotN != r.py.ZeroShotN || r.got.PeakWords != r.py.PeakWords || r.got.OwnPatches != r.py.OwnPatches {
			t.Errorf("%s: counts differ from Python: %d scenes, %d words, %d patches; torch %d, %d, %d", name,
				r.got.ZeroShotN, r.got.PeakWords, r.got.OwnPatches, r.py.ZeroShotN, r.py.PeakWords, r.py.OwnPatches)
		}
		moved := 0
		for i := range r.got.ShapeConfusion {
			for j := range r.got.ShapeConfusion[i] {
				if i < len(r.py.ShapeConfusion) && j < len(r.py.ShapeConfusion[i]) {
					moved += max(0, r.got.ShapeConfusion[i][j]-r.py.ShapeConfusion[i][j])
				} else {
					t.Fatalf("%s: torch's confusion matrix is %v", name, r.py.ShapeConfusion)
				}
			}
		}
		if moved > 5 {
			t.Errorf("%s: confusion differs from torch's in %d scenes: Go %v, torch %v", name, moved, r.got.ShapeConfusion, r.py.ShapeConfusion)
		}
	}
}

// figures are the quality figures TestEvalDefault checks, per renderer.
type figures struct{ zeroShot, shape, peak, own float64 }

// The targets of the default model: zero-shot top-1 over the 40 prompts,
// the least per-shape accuracy (the shape of the top-1 prompt), the text →
// image peak inside the named object and image → text own-word figures.
var (
	targetTraining    = figures{zeroShot: 0.92, shape: 0.85, peak: 0.95, own: 0.90}
	targetIndependent = figures{zeroShot: 0.90, shape: 0.85, peak: 0.95, own: 0.90}
)

// The floors are what the committed model measured (eval.json), rounded
// down to the percent: a new model must not fall below them. Where a floor
// is under its target the committed model misses that target; the test
// logs which.
var (
	floorTraining    = figures{zeroShot: 0.97, shape: 0.91, peak: 0.99, own: 0.99}
	floorIndependent = figures{zeroShot: 0.90, shape: 0.87, peak: 0.99, own: 0.99}
)

// The targets of the tiny SigLIP: the default model's, but zero-shot
// top-1 on the independent renderer of 85%.
var (
	targetSiglipTraining    = targetTraining
	targetSiglipIndependent = figures{zeroShot: 0.85, shape: targetIndependent.shape, peak: targetIndependent.peak, own: targetIndependent.own}
)

// The floors of the tiny SigLIP: what the committed model measured
// (testdata/siglip-scenes/eval.json), rounded down to the percent (its
// perfect figures to 0.99: ONNX Runtime may move an argmax).
var (
	floorSiglipTraining    = figures{zeroShot: 0.99, shape: 0.98, peak: 0.99, own: 0.99}
	floorSiglipIndependent = figures{zeroShot: 0.89, shape: 0.84, peak: 0.99, own: 0.99}
)

// TestEvalWideWindows: maps over the whole image (windows) on wide scenes
// whose object lies outside the centre square: the built-in model's shape
// word peaks inside the object in at least 90% of them, at an mIoU by
// DAAM's protocol of at least 60 (the targets of maps over the whole
// image).
func TestEvalWideWindows(t *testing.T) {
	orttest.Load(t)
	m, err := models.FromFS(embedded.FS(), models.DefaultRef)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pipeline.New(context.Background(), m, pipeline.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	res, err := eval.Run(context.Background(), eng, eval.Options{Scenes: 50, Windows: true})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Wide
	if w == nil || w.Scenes != 50 {
		t.Fatalf("wide figures %+v", w)
	}
	t.Logf("wide scenes, windows: shape peak inside %.1f%%, mIoU %.1f (%d scenes)", 100*w.PeakInside, 100*w.MapIoU, w.Scenes)
	if w.PeakInside < 0.9 || w.MapIoU < 0.6 {
		t.Errorf("wide scenes, windows: peak inside %.1f%% (target ≥ 90%%), mIoU %.1f (target ≥ 60)", 100*w.PeakInside, 100*w.MapIoU)
	}
}

// TestEvalWideNaFlex: the trained tiny SigLIP's weights as SigLIP 2 NaFlex
// (testdata/naflex-scenes, scripts/pysiglip/naflex_from_siglip.py) see a
// 3:1 scene whole on their own 8×24 grid, no windows: the shape word's map
// peaks inside the object, wholly outside the centre square, in ≥ 90% of
// the scenes at a DAAM mIoU ≥ 60; the square scenes are refused without
// WideOnly, saying why.
func TestEvalWideNaFlex(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(filepath.Join("..", "..", "..", "testdata", "naflex-scenes"), models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pipeline.New(context.Background(), m, pipeline.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eval.Run(context.Background(), eng, eval.Options{Scenes: 10}); err == nil || !strings.Contains(err.Error(), "wide scenes only") {
		t.Errorf("square scenes on NaFlex: %v", err)
	}
	res, err := eval.Run(context.Background(), eng, eval.Options{Scenes: 100, WideOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Wide
	if w == nil || w.Scenes != 100 {
		t.Fatalf("wide figures %+v", w)
	}
	t.Logf("wide scenes, NaFlex: shape peak inside %.1f%%, mIoU %.1f (%d scenes)", 100*w.PeakInside, 100*w.MapIoU, w.Scenes)
	if w.PeakInside < 0.9 || w.MapIoU < 0.6 {
		t.Errorf("wide scenes, NaFlex: peak inside %.1f%% (target ≥ 90%%), mIoU %.1f (target ≥ 60)", 100*w.PeakInside, 100*w.MapIoU)
	}
}
