package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
)

// TestHeadsNeedsALayerWithHeads: --heads with --xattn joint is a usage
// error, not ignored; with identity it applies.
func TestHeadsNeedsALayerWithHeads(t *testing.T) {
	m, err := models.Open("default", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{"joint", ""} {
		lo := layerOptions{xattn: x, heads: 4, direction: "both"}
		var ue usageError
		err := lo.apply(m, &pipeline.Options{})
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--heads applies to --xattn identity or a learned layer") {
			t.Errorf("--xattn %q --heads 4: %v, want a usage error", x, err)
		}
	}
	lo := layerOptions{xattn: "joint", direction: "both"}
	if err := lo.apply(m, &pipeline.Options{}); err != nil {
		t.Errorf("--xattn joint without --heads: %v", err)
	}
}
