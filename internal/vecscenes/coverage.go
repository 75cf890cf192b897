package vecscenes

import (
	"fmt"

	"github.com/conditionhq/condition/vision"
)

// fit is how a model's preprocessing puts a scene's W×H image into its
// square input, which the objects' coverage of the patches follows.
type fit int

const (
	// cropped: the shorter side resized to the crop's side and the centre
	// square kept (CLIPImageProcessor).
	cropped fit = iota
	// stretched: the whole image resized to the model's square input
	// (SiglipImageProcessor).
	stretched
)

// fitOf says how pre puts the images into the model's input, and the
// input's side in pixels, or why the coverage cannot follow it.
func fitOf(pre *vision.Preprocessor) (fit, int, error) {
	switch {
	case pre == nil:
		return 0, 0, fmt.Errorf("vecscenes: no preprocessor; the coverage needs the model's preprocessor_config.json")
	case !pre.DoResize:
		return 0, 0, fmt.Errorf("vecscenes: preprocessor_config.json has do_resize false; the coverage needs images resized to the model's input")
	case pre.DoCenterCrop:
		if pre.Size.ShortestEdge == 0 || pre.CropSize.Height != pre.Size.ShortestEdge || pre.CropSize.Width != pre.Size.ShortestEdge {
			return 0, 0, fmt.Errorf("vecscenes: preprocessor_config.json resizes to %s and crops %dx%d; the coverage needs the shortest edge resized to the crop's side and a square crop (CLIP's), or a fixed square resize without crop (SigLIP's)",
				sizeString(pre.Size), pre.CropSize.Height, pre.CropSize.Width)
		}
		return cropped, pre.CropSize.Height, nil
	case pre.Size.ShortestEdge != 0 || pre.Size.Height != pre.Size.Width || pre.Size.Height <= 0:
		return 0, 0, fmt.Errorf("vecscenes: preprocessor_config.json resizes to %s without a crop; the coverage needs a fixed square resize (SigLIP's), or the shortest edge resized to a square crop's side (CLIP's)", sizeString(pre.Size))
	default:
		return stretched, pre.Size.Height, nil
	}
}

func sizeString(s vision.Size) string {
	if s.ShortestEdge != 0 {
		return fmt.Sprintf("shortest edge %d", s.ShortestEdge)
	}
	return fmt.Sprintf("%dx%d", s.Height, s.Width)
}

// CheckPreprocessor returns nil when Coverage follows pre: CLIP's
// preprocessing (the shortest edge resized to a square crop's side, the
// centre square kept) or SigLIP's (the whole image resized to a fixed
// square, no crop). Otherwise it returns the error Coverage would, naming
// the preprocessor_config.json settings and what the coverage needs.
func CheckPreprocessor(pre *vision.Preprocessor) error {
	_, _, err := fitOf(pre)
	return err
}

// Coverage returns, for each object, the fraction of each cell of a
// grid×grid partition of the model's input (what pre makes of the image)
// that the object covers: [objects][grid*grid]. CLIP's preprocessing gives
// CropCoverage(crop side, grid), SigLIP's StretchCoverage(grid); any other
// an error (CheckPreprocessor's).
func (s Scene) Coverage(pre *vision.Preprocessor, grid int) ([][]float64, error) {
	f, side, err := fitOf(pre)
	if err != nil {
		return nil, err
	}
	if f == stretched {
		return s.StretchCoverage(grid), nil
	}
	return s.CropCoverage(side, grid), nil
}

// StretchCoverage is CropCoverage for a preprocessor that resizes the whole
// W×H image to a square (no crop, SigLIP's): for each object, the fraction
// of each cell of a grid×grid partition of the image that it covers,
// counting pixels by their centres: [objects][grid*grid].
func (s Scene) StretchCoverage(grid int) [][]float64 {
	return stretchCoverage(s.Labels(), s.W, s.H, len(s.Objects), grid)
}

// stretchCoverage is StretchCoverage of the labels lab [h*w] (0 background,
// k+1 object k) of objects objects.
func stretchCoverage(lab []uint8, w, h, objects, grid int) [][]float64 {
	return cellCoverage(lab, w, h, objects, grid,
		func(y int) int { return min(grid-1, int((float64(y)+0.5)*float64(grid)/float64(h))) },
		func(x int) int { return min(grid-1, int((float64(x)+0.5)*float64(grid)/float64(w))) })
}
