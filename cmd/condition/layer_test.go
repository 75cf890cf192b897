package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline"
)

// TestHeadsNeedsALayerWithHeads: --heads with --xattn joint is a usage
// error, not ignored; with identity it applies, and the layer is named as
// the engine names it (the resume settings' "xattn").
func TestHeadsNeedsALayerWithHeads(t *testing.T) {
	for _, x := range []string{"joint", ""} {
		f := engineFlags{xattn: x, heads: 4, direction: "both", has: withLayer}
		var ue usageError
		_, err := f.options(pipeline.Options{})
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--heads applies to --xattn identity or a learned layer") {
			t.Errorf("--xattn %q --heads 4: %v, want a usage error", x, err)
		}
	}
	for _, tc := range []struct {
		f    engineFlags
		name string
	}{
		{engineFlags{xattn: "joint", direction: "both"}, "joint"},
		{engineFlags{xattn: "identity", heads: 4, direction: "both"}, "identity/4"},
		{engineFlags{xattn: "w.safetensors", prefix: "attn2.", direction: "image-to-text"}, "w.safetensors#attn2./8"},
	} {
		tc.f.has = withLayer
		o, err := tc.f.options(pipeline.Options{})
		if err != nil {
			t.Errorf("%+v: %v", tc.f, err)
		} else if o.Layer.String() != tc.name {
			t.Errorf("%+v: layer %q, want %q", tc.f, o.Layer, tc.name)
		}
	}
}
