package pipeline

import (
	"fmt"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
)

// The readouts (clip.Readout, Options.Readout; clip.ParseReadout parses
// their names).
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
// ReadoutRaw for the built-in model, told by its files wherever they are
// (trained on its raw patch tokens: raw measures best on its scenes), for
// SigLIP (raw measures best on the SigLIP trained on the scenes; no
// published figure exists), for TIPSv2 (trained for dense alignment on its
// raw patch tokens; it also takes ReadoutMaskCLIP, in its authors' form)
// for PE-Core (no real checkpoint measured: its own pooling path on its
// patch tokens is the default) and for other layers.
func defaultReadout(m *models.Model, l Layer) clip.Readout {
	if m == nil || !l.joint() || m.Family().Sigmoid() || m.Family() == models.Tipsv2 || m.BuiltIn() || m.Config().VisionConfig.PECore != nil {
		return ReadoutRaw
	}
	return ReadoutClearCLIP
}

// resolveReadout returns the readout opts asks for ("" when raw, as the
// vision encoder takes it), its name, and whether it is the default. The
// vision encoder refuses a readout it does not know, or one the model's
// family does not take.
func resolveReadout(m *models.Model, opts Options) (vision, name clip.Readout, defaulted bool, err error) {
	r := opts.Readout
	if r == "" {
		r, defaulted = defaultReadout(m, opts.Layer), true
	}
	if r == ReadoutRaw {
		return "", r, defaulted, nil
	}
	if m != nil {
		if err := clip.CheckReadoutFamily(m, r); err != nil {
			return "", "", false, fmt.Errorf("pipeline: %w", err)
		}
	}
	if !opts.Layer.joint() {
		return "", "", false, fmt.Errorf("pipeline: readout %s reads the patches' vectors for CLIP's joint space; layer %s takes the patch states as they are (readout %s)", r, opts.Layer, ReadoutRaw)
	}
	return r, r, defaulted, nil
}
