package clip

import (
	"fmt"

	"github.com/conditionhq/condition/models"
)

// pearlFamilies are the families ReadoutPEARL reads: those whose vision
// tower ends in CLIP's class-token block.
var pearlFamilies = []models.Family{models.CLIP, models.MetaCLIP2}

// CheckReadoutFamily refuses a readout that model m's family does not
// take: ReadoutPEARL for a family whose vision tower has no CLIP
// class-token last block (SigLIP, SigLIP 2, TIPSv2), naming the families
// that take it; any readout but raw for a PE-Core vision tower, whose
// blocks turn q and k with 2-D RoPE, which the readouts do not recompute.
func CheckReadoutFamily(m *models.Model, readout Readout) error {
	if pe := m.Config().VisionConfig.PECore; pe != nil && readout != "" && readout != ReadoutRaw {
		return fmt.Errorf("clip: readout %s: model %s has a PE-Core vision tower (%s), whose blocks turn q and k with 2-D RoPE, which the dense readouts do not recompute; it takes readout %s (its patch tokens through the attention pool's value path)",
			readout, m.Name(), pe.TimmModelName, ReadoutRaw)
	}
	if readout != ReadoutPEARL {
		return nil
	}
	f := m.Family()
	for _, ok := range pearlFamilies {
		if f == ok {
			return nil
		}
	}
	return fmt.Errorf("clip: readout %s: model %s is %s; PEARL recomputes CLIP's class-token last block, which %s and %s have",
		ReadoutPEARL, m.Name(), f, pearlFamilies[0], pearlFamilies[1])
}
