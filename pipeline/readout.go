package pipeline

import (
	"fmt"

	"github.com/conditionhq/condition/models/clip"
)

// Readouts of the patches' joint-space vectors (Options.Readout; see
// models/clip for what each computes).
const (
	ReadoutRaw       = clip.ReadoutRaw       // the last layer's patch tokens as they are
	ReadoutClearCLIP = clip.ReadoutClearCLIP // q–q attention of the last layer, no residual, no MLP
	ReadoutNACLIP    = clip.ReadoutNACLIP    // k–k attention plus a Gaussian neighbourhood, no residual, no MLP
	ReadoutMaskCLIP  = clip.ReadoutMaskCLIP  // the last layer's values, no attention, no residual, no MLP
)

// resolveReadout returns the readout opts asks for ("" when raw, as the
// vision encoder takes it) and its name.
func resolveReadout(opts Options) (vision, name string, err error) {
	r := opts.Readout
	if r == "" {
		r = ReadoutRaw
	}
	if err := clip.CheckReadout(r); err != nil {
		return "", "", fmt.Errorf("pipeline: %w", err)
	}
	if r == ReadoutRaw {
		return "", r, nil
	}
	if !opts.Layer.joint() {
		return "", "", fmt.Errorf("pipeline: readout %s reads the patches' vectors for CLIP's joint space; layer %s takes the patch states as they are (readout %s)", r, opts.Layer, ReadoutRaw)
	}
	return r, r, nil
}
