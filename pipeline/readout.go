package pipeline

import (
	"fmt"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
)

// Readouts of the patches' joint-space vectors (Options.Readout; see
// models/clip for what each computes).
const (
	ReadoutRaw       = clip.ReadoutRaw       // the last layer's patch tokens as they are
	ReadoutClearCLIP = clip.ReadoutClearCLIP // q–q attention of the last layer, no residual, no MLP
	ReadoutNACLIP    = clip.ReadoutNACLIP    // k–k attention plus a Gaussian neighbourhood, no residual, no MLP
	ReadoutMaskCLIP  = clip.ReadoutMaskCLIP  // the last layer's values, no attention, no residual, no MLP
	ReadoutPEARL     = clip.ReadoutPEARL     // query-key attention with keys rotated onto the queries (Procrustes), no residual, no MLP
)

// defaultReadout returns the readout an engine of model m with layer l
// takes when Options.Readout is "": ReadoutClearCLIP for CLIP-family
// checkpoints in the joint space (raw patch tokens of real CLIP checkpoints
// localise poorly; ClearCLIP lifts them most, see docs/models.md), and
// ReadoutRaw for the built-in model (trained on its raw patch tokens: raw
// measures best on its scenes), for SigLIP (raw measures best on the
// SigLIP trained on the scenes; no published figure exists), for TIPSv2
// (trained for dense alignment on its raw patch tokens; it also takes
// ReadoutMaskCLIP, in its authors' form) and for other layers.
func defaultReadout(m *models.Model, l Layer) string {
	if m == nil || !l.joint() || m.Family().Sigmoid() || m.Family() == models.Tipsv2 || m.Name() == models.DefaultRef {
		return ReadoutRaw
	}
	return ReadoutClearCLIP
}

// resolveReadout returns the readout opts asks for ("" when raw, as the
// vision encoder takes it), its name, and whether it is the default.
func resolveReadout(m *models.Model, opts Options) (vision, name string, defaulted bool, err error) {
	r := opts.Readout
	if r == "" {
		r, defaulted = defaultReadout(m, opts.Layer), true
	}
	if err := clip.CheckReadout(r); err != nil {
		return "", "", false, fmt.Errorf("pipeline: %w", err)
	}
	if r == ReadoutRaw {
		return "", r, defaulted, nil
	}
	if m != nil {
		if err := clip.CheckReadoutFamily(m, r); err != nil {
			return "", "", false, fmt.Errorf("pipeline: %w", err)
		}
	}
	if m != nil && m.Family() == models.Tipsv2 && r != ReadoutMaskCLIP {
		return "", "", false, fmt.Errorf("pipeline: readout %s: model %s is TIPSv2, which takes readout %s (its raw patch tokens, trained for dense patch–text alignment; the default) or %s (the value attention its authors evaluate zero-shot segmentation with)",
			r, m.Name(), ReadoutRaw, ReadoutMaskCLIP)
	}
	if !opts.Layer.joint() {
		return "", "", false, fmt.Errorf("pipeline: readout %s reads the patches' vectors for CLIP's joint space; layer %s takes the patch states as they are (readout %s)", r, opts.Layer, ReadoutRaw)
	}
	return r, r, defaulted, nil
}
