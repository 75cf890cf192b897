package pipebench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/vision"
)

// Distance is how far an engine's decoding (pipeline.Options.Decode) takes
// the encoder's input and output from the exact decode's, over Images
// images.
type Distance struct {
	Images int `json:"images"`
	// MaxLevels and MeanLevels: |pixel_values − exact pixel_values| in
	// 8-bit levels (one level is rescale_factor / std of its channel), the
	// largest and the mean over every value of every image.
	MaxLevels  float64 `json:"max_levels"`
	MeanLevels float64 `json:"mean_levels"`
	// MinCosine and MeanCosine: cosine of image_embeds [d_p] with the
	// exact decode's, the smallest and the mean over the images.
	MinCosine  float64 `json:"min_cosine"`
	MeanCosine float64 `json:"mean_cosine"`
}

// DecodeDistance decodes up to n images under inputs twice, with eng's
// decoding and whole (vision.Decode without a draft), preprocesses and
// encodes both, and measures the difference (see Distance). Files that fail
// to decode are passed over.
func DecodeDistance(ctx context.Context, eng *pipeline.Engine, inputs []string, n int) (Distance, error) {
	pre := eng.Preprocessor()
	var level [3]float64
	for c := range level {
		level[c] = 1
		if pre.DoRescale {
			level[c] = pre.RescaleFactor
		}
		if pre.DoNormalize {
			level[c] /= float64(pre.Std[c])
		}
	}
	h, w := eng.InputSize()
	per := 3 * h * w
	d := Distance{MinCosine: math.Inf(1)}
	var sumLevels, sumCos float64
	done := errors.New("enough images")
	err := batch.Walk(ctx, inputs, func(it batch.Item) error {
		if d.Images >= n {
			return done
		}
		data, err := os.ReadFile(it.Path)
		if err != nil {
			return nil
		}
		fast, err := eng.DecodeImage(data)
		if err != nil {
			return nil
		}
		exact, err := vision.Decode(data, vision.DecodeOptions{MaxPixels: -1})
		if err != nil {
			return nil
		}
		px := make([]float32, 2*per)
		if err := eng.Preprocess(px[:per], fast); err != nil {
			return nil
		}
		if err := eng.Preprocess(px[per:], exact); err != nil {
			return nil
		}
		for i := range per {
			l := math.Abs(float64(px[i])-float64(px[per+i])) / level[i/(h*w)]
			d.MaxLevels = max(d.MaxLevels, l)
			sumLevels += l
		}
		encs, err := eng.EncodePixels(ctx, px, 2)
		if err != nil {
			return err
		}
		if encs[0].Embeds == nil {
			return fmt.Errorf("pipebench: the vision graph gives no image_embeds to compare")
		}
		cos := pipeline.Cosine(encs[0].Embeds, encs[1].Embeds)
		d.MinCosine = min(d.MinCosine, cos)
		sumCos += cos
		d.Images++
		return nil
	}, nil)
	if err != nil && !errors.Is(err, done) {
		return Distance{}, err
	}
	if d.Images == 0 {
		return Distance{}, fmt.Errorf("pipebench: no images to compare under %v", inputs)
	}
	d.MeanLevels = sumLevels / float64(d.Images*per)
	d.MeanCosine = sumCos / float64(d.Images)
	return d, nil
}
