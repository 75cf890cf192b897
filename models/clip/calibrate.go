package clip

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// calibrationBatch is how many images a calibration run takes at once.
const calibrationBatch = 8

// calibrate measures the ranges the static int8 scheme quantizes with:
// it writes the float32 graph in the file fused with the input of every
// MatMul by constant weights exposed (onnxgraph.Calibration), runs it in
// ONNX Runtime over the calibration inputs p (the images for the vision
// graph, the prompts for the text graph) and returns, per activation, the
// smallest and largest value each channel took over all of them, and what
// they were.
func calibrate(ctx context.Context, name, fused string, p Probes, threads int, tmp *tempGraphs) (map[string]onnxgraph.ChannelRange, string, error) {
	fm, err := onnxgraph.ParseFile(fused)
	if err != nil {
		return nil, "", fmt.Errorf("the fused graph: %w", err)
	}
	var pts []onnxgraph.CalibrationPoint
	path, err := tmp.write(func(w io.Writer) (err error) {
		pts, err = onnxgraph.Calibration(fm, w)
		return err
	})
	fm.Close()
	if err != nil {
		return nil, "", err
	}
	defer tmp.remove(path)
	g := ort.GraphFile(path)
	ins, _, err := g.Inspect()
	if err != nil {
		return nil, "", err
	}
	feeds, what, err := calibrationFeeds(name, ins, p)
	if err != nil {
		return nil, "", err
	}
	var inNames, outNames []string
	for _, in := range ins {
		inNames = append(inNames, in.Name)
	}
	for _, pt := range pts {
		outNames = append(outNames, pt.Lo, pt.Hi)
	}
	sess, err := g.NewSession(inNames, outNames, ort.SessionOptions{Threads: threads})
	if err != nil {
		return nil, "", err
	}
	defer closeChecked(sess)
	ranges := make(map[string]onnxgraph.ChannelRange, len(pts))
	for _, in := range feeds {
		res, err := sess.Run(ctx, in)
		if err != nil {
			return nil, "", fmt.Errorf("calibration: %w", err)
		}
		for i, pt := range pts {
			lo, _ := res[2*i].Data.([]float32)
			hi, _ := res[2*i+1].Data.([]float32)
			r := ranges[pt.Value]
			if err := r.Merge(lo, hi); err != nil {
				return nil, "", fmt.Errorf("calibration of %s: %w", pt.Value, err)
			}
			ranges[pt.Value] = r
		}
	}
	return ranges, what, nil
}

// calibrationFeeds returns the runs of the calibration graph of the
// canonical graph name, each its input tensors in the order of ins: the
// probes' images [n, 3, H, W] in batches of calibrationBatch, or its
// prompts, all at once.
func calibrationFeeds(name string, ins []ort.IOInfo, p Probes) ([][]tensorio.Tensor, string, error) {
	switch name {
	case models.VisionModelFile:
		if len(ins) != 1 || len(p.Grids) > 0 {
			return nil, "", errors.New("the static int8 scheme calibrates vision graphs with one input, pixel_values [batch, 3, H, W] (not SigLIP 2 NaFlex graphs)")
		}
		if p.N == 0 {
			return nil, "", errors.New("no images to calibrate the vision graph on")
		}
		size := 3 * p.Height * p.Wd
		var feeds [][]tensorio.Tensor
		for i := 0; i < p.N; i += calibrationBatch {
			n := min(calibrationBatch, p.N-i)
			feeds = append(feeds, []tensorio.Tensor{tensorio.F32([]int{n, 3, p.Height, p.Wd}, p.Pixels[i*size:(i+n)*size])})
		}
		return feeds, fmt.Sprintf("%d images", p.N), nil
	case models.TextModelFile:
		if len(p.IDs) == 0 {
			return nil, "", errors.New("no prompts to calibrate the text graph on")
		}
		b, t := len(p.IDs), len(p.IDs[0])
		var ids, mask []int64
		for i := range p.IDs {
			ids = append(ids, p.IDs[i]...)
			if i < len(p.Masks) {
				mask = append(mask, p.Masks[i]...)
			} else {
				for range t {
					mask = append(mask, 1)
				}
			}
		}
		var feed []tensorio.Tensor
		for _, in := range ins {
			switch in.Name {
			case inputIDsName:
				feed = append(feed, idsTensor(in.Type, []int{b, t}, ids))
			case attentionMaskName:
				feed = append(feed, idsTensor(in.Type, []int{b, t}, mask))
			default:
				return nil, "", fmt.Errorf("the static int8 scheme calibrates text graphs with the inputs input_ids and attention_mask, not %s", in.Name)
			}
		}
		return [][]tensorio.Tensor{feed}, fmt.Sprintf("%d prompts", b), nil
	}
	return nil, "", fmt.Errorf("no calibration for the graph %s", name)
}
