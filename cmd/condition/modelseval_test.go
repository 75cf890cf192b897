package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/conditionhq/condition/models/ort/orttest"
	"github.com/conditionhq/condition/pipeline"
)

func TestModelsEvalDefault(t *testing.T) {
	orttest.Load(t)
	var out, errb bytes.Buffer
	if code := mainContext(context.Background(), []string{"models", "eval", "--scenes", "40", "--json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res pipeline.EvalResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// Forty scenes of each kind: the counts say the evaluation ran on them;
	// the quality figures themselves are checked on 1000 scenes in models.
	if res.ZeroShotN != 40 || res.PeakWords == 0 || res.OwnPatches == 0 {
		t.Fatalf("eval on 40 scenes: %+v", res)
	}
	if res.PeakInside < 0.5 || res.OwnWord < 0.5 {
		t.Fatalf("the built-in model does not localise words: %+v", res)
	}
	if code := mainContext(context.Background(), []string{"models", "eval", "--scenes", "0"}, nil, &out, &errb); code != exitUsage {
		t.Fatalf("--scenes 0: exit %d", code)
	}
}
