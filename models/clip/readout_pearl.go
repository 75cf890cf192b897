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
// that take it. A PE-Core vision tower (a CLIP-family model) takes them
// all, its q and k turned by its RoPE.
func CheckReadoutFamily(m *models.Model, readout Readout) error {
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
