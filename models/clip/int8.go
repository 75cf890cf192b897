package clip

import (
	"context"
	"errors"
	"io"

	"golang.org/x/sys/cpu"

	"github.com/conditionhq/condition/models"
)

// hasVNNI reports whether this CPU multiplies u8×s8 into 32-bit sums.
func hasVNNI() bool { return cpu.X86.HasAVX512VNNI || cpu.X86.HasAVXVNNI }

// Int8WeightBits is the width OptimizeInt8 gives the weights on this CPU:
// 8 bits where it has VNNI (AVX-512 VNNI or AVX-VNNI), whose u8×s8
// products add up in 32 bits, else 7, where ONNX Runtime's 8-bit products
// can saturate 16-bit sums. A graph that fails the check with 8 bits is
// made with 7.
func Int8WeightBits() int {
	if hasVNNI() {
		return 8
	}
	return 7
}

// OptimizeInt8 rewrites m's graphs to int8 (Optimize with opts.Int8
// set) at the weight width this CPU gets (Int8WeightBits): with VNNI 8
// bits first, then 7 for each graph that fails the check with 8 (per call,
// the built-in text graph did: last_hidden_state's smallest cosine 0.9876
// at 8 bits, 0.9949 at 7; per row it passes at 8, 0.9967); the others
// keep their 8 bits. opts.Int8FullRange and
// opts.Graphs are set here. It returns each graph's last result, the graphs
// made again with 7 bits, and the last try's error. save is Optimize's:
// it sees only graphs that passed their check.
func OptimizeInt8(ctx context.Context, m *models.Model, p Probes, opts OptimizeOptions,
	save func(*Optimized, func(io.Writer) error) (string, error)) (res []Optimized, again []string, err error) {
	opts.Int8, opts.Int8FullRange, opts.Graphs = true, hasVNNI(), nil
	res, err = Optimize(ctx, m, p, opts, save)
	if !opts.Int8FullRange || !errors.Is(err, ErrCheckFailed) {
		return res, nil, err
	}
	for _, r := range res {
		if r.Error != "" {
			again = append(again, r.Graph)
		}
	}
	opts.Int8FullRange, opts.Graphs = false, again
	redone, err := Optimize(ctx, m, p, opts, save)
	for _, r := range redone {
		for i := range res {
			if res[i].Graph == r.Graph {
				res[i] = r
			}
		}
	}
	return res, again, err
}
