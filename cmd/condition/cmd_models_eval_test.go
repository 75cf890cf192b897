package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/conditionhq/condition/cmd/internal/eval"
	"github.com/conditionhq/condition/internal/orttest"
)

func TestModelsEvalDefault(t *testing.T) {
	orttest.Load(t)
	var out, errb bytes.Buffer
	if code := mainContext(context.Background(), []string{"models", "eval", "--scenes", "40", "--json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res eval.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// Forty scenes of each kind and renderer: the counts say the evaluation
	// ran on them; the quality figures themselves are checked on 1000
	// scenes in pipeline's TestEvalDefault.
	for _, f := range []eval.Figures{res.Training, res.Independent} {
		rows := 0
		for _, row := range f.ShapeConfusion {
			for _, c := range row {
				rows += c
			}
		}
		if f.ZeroShotN != 40 || rows != 40 || f.PeakWords == 0 || f.OwnPatches == 0 {
			t.Fatalf("eval on 40 scenes: %+v", f)
		}
		if f.PeakInside < 0.5 || f.OwnWord < 0.5 {
			t.Fatalf("the built-in model does not localise words: %+v", f)
		}
	}
	if res.Training.Renderer != eval.RendererTraining || res.Independent.Renderer != eval.RendererIndependent {
		t.Fatalf("renderers %q and %q", res.Training.Renderer, res.Independent.Renderer)
	}
	out.Reset()
	if code := mainContext(context.Background(), []string{"models", "eval", "--scenes", "10", "--verbose"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"independent renderer", "confusion (rows: true shape", "triangle"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("--verbose output lacks %q:\n%s", want, out.String())
		}
	}
	if code := mainContext(context.Background(), []string{"models", "eval", "--scenes", "0"}, nil, &out, &errb); code != exitUsage {
		t.Fatalf("--scenes 0: exit %d", code)
	}
}
