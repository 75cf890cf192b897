package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conditionhq/condition/cmd/condition-bench/internal/pipebench"
	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/internal/graphbuild"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
)

// readoutAlone is a readout's graph on its own (--readout-alone): the
// graph models/clip builds over the model's last vision layer for a
// non-raw readout (readout_input → readout_hidden_state), in a session of
// its own with the engine's thread settings, run on random inputs of the
// engine's batch shape. Its time per image is the readout's cost without
// the vision graph's extra output and the copies between the two ONNX Runtime sessions.
type readoutAlone struct {
	kind    string
	sess    *ort.Session
	streams int
	tokens  int
	width   int
	x       []float32 // one batch of readout_input
	batch   int
}

// openReadoutAlone builds kind's readout graph for m as models/clip's
// openReadout does, and opens it with eng's threads per stream.
func openReadoutAlone(m *models.Model, eng *pipeline.Engine, kind string, batch int, o pipeBenchOptions) (*readoutAlone, error) {
	v := m.Config().VisionConfig
	h, w := eng.InputSize()
	if v.PatchSize <= 0 || v.NumHiddenLayers <= 0 || h < v.PatchSize || w < v.PatchSize {
		return nil, fmt.Errorf("--readout-alone: the model's config gives patch %d, %d layers, for %dx%d images", v.PatchSize, v.NumHiddenLayers, h, w)
	}
	cls := 0
	if m.Family().ClassToken() {
		cls = 1
	}
	c := graphbuild.ReadoutConfig{
		Kind: kind, Width: v.HiddenSize, Heads: v.NumAttentionHeads, Eps: v.LayerNormEps,
		Class: cls, GridH: h / v.PatchSize, GridW: w / v.PatchSize,
		Prefix: fmt.Sprintf("vision_model.encoder.layers.%d.", v.NumHiddenLayers-1),
	}
	var names []string
	for n := range c.ReadoutTensors() {
		names = append(names, n)
	}
	ts, err := m.ReadWeights(names...)
	if err != nil {
		return nil, fmt.Errorf("--readout-alone %s: %w", kind, err)
	}
	graph, err := graphbuild.ReadoutGraph(c, func(name string) ([]float32, error) { return ts[name].Float32() })
	if err != nil {
		return nil, fmt.Errorf("--readout-alone: %w", err)
	}
	so := ort.SessionOptions{Threads: eng.Threads(), NoSpinning: true, NoArena: o.noArena, PinThreads: o.pin}
	if o.readoutProfile != "" {
		so.ProfilePrefix = o.readoutProfile + "-" + kind
	}
	sess, err := ort.GraphBytes(graph, "readout "+kind).NewSession([]string{graphbuild.ReadoutInput}, []string{graphbuild.ReadoutOutput}, so)
	if err != nil {
		return nil, fmt.Errorf("--readout-alone %s: %w", kind, err)
	}
	r := &readoutAlone{kind: kind, sess: sess, streams: eng.Streams(), tokens: cls + c.GridH*c.GridW, width: v.HiddenSize, batch: batch}
	// Values of the scale of a residual stream; the time does not depend on them.
	rng := rand.New(rand.NewPCG(3, 5))
	r.x = make([]float32, batch*r.tokens*r.width)
	for i := range r.x {
		r.x[i] = float32(rng.NormFloat64())
	}
	return r, nil
}

func (r *readoutAlone) close() {
	if r != nil && r.sess != nil {
		r.sess.Close()
	}
}

// rate runs the readout graph on batches batches of r.batch images, by
// r.streams streams at once (one warm-up batch each first), and measures it
// as pipebench.EncoderRate measures the encoder.
func (r *readoutAlone) rate(ctx context.Context, batches int) (pipebench.Rate, error) {
	in := []tensorio.Tensor{tensorio.F32([]int{r.batch, r.tokens, r.width}, r.x)}
	var calls cputime.Counter
	run := func() error {
		return calls.Run(func() error {
			_, err := r.sess.Run(ctx, in)
			return err
		})
	}
	errs := make([]error, r.streams)
	var wg sync.WaitGroup
	for s := range r.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[s] = run()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return pipebench.Rate{}, err
	}
	calls.Reset()
	var next atomic.Int64
	wall := time.Now()
	cpu0, ok0 := cputime.Process()
	for s := range r.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for int(next.Add(1)) <= batches {
				if err := run(); err != nil {
					errs[s] = err
					next.Store(int64(batches))
					return
				}
			}
		}()
	}
	wg.Wait()
	rt := pipebench.Rate{Images: batches * r.batch, Wall: time.Since(wall), EncoderCPU: calls.Total()}
	if cpu1, ok1 := cputime.Process(); ok0 && ok1 {
		rt.CPU = cpu1 - cpu0
	}
	return rt, errors.Join(errs...)
}
