package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/tensorio"
)

func init() {
	addSubcommand(subcommand{name: "graphs", summary: "ONNX graphs of one encoder (say the original and its optimized variants) on the same inputs, in alternated rounds: medians and ratios", run: runBenchGraphs})
}

// graphsBenchOptions are the flags of `condition-bench graphs`.
type graphsBenchOptions struct {
	ort        ortFlags
	batch      int
	tokens     int
	patches    int
	rounds     int
	calls      int
	noSpinning bool
	json       bool
	profile    string
}

func (o *graphsBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.batch, "batch", 8, "images (or prompts) per call")
	fs.IntVar(&o.tokens, "tokens", 77, "tokens per prompt, for text graphs")
	fs.IntVar(&o.patches, "patches", 256, "patches per image, for SigLIP 2 NaFlex vision graphs (pixel_values [batch, patches, C·p²]); every patch is the image's")
	fs.IntVar(&o.rounds, "rounds", 7, "rounds; each round runs every graph --calls times, in an order that turns each round")
	fs.IntVar(&o.calls, "calls", 3, "timed calls per graph and round")
	fs.BoolVar(&o.noSpinning, "no-spinning", false, "stop ONNX Runtime's intra-op threads from spinning between calls")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.StringVar(&o.profile, "profile", "", "write ONNX Runtime's per-node profile of each graph to files named PREFIX-<n>_<time>.json")
	o.ort.AddFlags(fs)
}

// graphsBenchRow is one graph's result.
type graphsBenchRow struct {
	Graph    string    `json:"graph"`
	MedianMS float64   `json:"median_ms_per_call"`
	PerSec   float64   `json:"items_per_sec"`
	Ratio    float64   `json:"speedup_vs_first"`
	RoundsMS []float64 `json:"round_ms_per_call"`
	// CPUMedianMS is the process's CPU time per call (every thread), the
	// median over rounds, and CPURatio the first graph's over this one's:
	// less disturbed than wall time when other programs share the cores
	// (with --no-spinning, spinning threads do not count either).
	CPUMedianMS float64   `json:"cpu_median_ms_per_call,omitempty"`
	CPURatio    float64   `json:"cpu_speedup_vs_first,omitempty"`
	RoundsCPUMS []float64 `json:"round_cpu_ms_per_call,omitempty"`
	MaxRelDif   float64   `json:"max_rel_diff_vs_first"`
}

func runBenchGraphs(ctx context.Context, e *env, args []string) error {
	var o graphsBenchOptions
	fs := newFlagSet(e, "graphs", "graphs GRAPH.onnx GRAPH.onnx... [--batch N] [--rounds N] [--calls N] [--threads N] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	paths := fs.Args()
	if len(paths) < 1 {
		return usagef("graphs needs one or more ONNX graph files")
	}
	if o.batch < 1 || o.rounds < 1 || o.calls < 1 || o.tokens < 2 || o.patches < 1 {
		return usagef("--batch, --rounds, --calls and --patches must be at least 1, --tokens at least 2")
	}
	if err := o.ort.load(e); err != nil {
		return err
	}
	type graph struct {
		path  string
		sess  *ort.Session
		names []string
		outs  []string
	}
	var gs []graph
	defer func() {
		for _, g := range gs {
			g.sess.Close()
		}
	}()
	var inputs []tensorio.Tensor
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		ins, outs, err := onnxgraph.GraphIO(f, st.Size())
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		var names, outNames []string
		for _, in := range ins {
			names = append(names, in.Name)
		}
		for _, out := range outs {
			outNames = append(outNames, out.Name)
		}
		if i == 0 {
			if inputs, err = probeTensors(ins, o.batch, o.tokens, o.patches); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		} else if strings.Join(names, ",") != strings.Join(gs[0].names, ",") || strings.Join(outNames, ",") != strings.Join(gs[0].outs, ",") {
			return fmt.Errorf("%s: inputs %v and outputs %v differ from %s's (%v, %v)", p, names, outNames, paths[0], gs[0].names, gs[0].outs)
		}
		so := ort.SessionOptions{Threads: o.ort.threads(), NoSpinning: o.noSpinning}
		if o.profile != "" {
			so.ProfilePrefix = fmt.Sprintf("%s-%d", o.profile, i)
		}
		s, err := ort.GraphFile(p).NewSession(names, outNames, so)
		if err != nil {
			return err
		}
		gs = append(gs, graph{path: p, sess: s, names: names, outs: outNames})
	}
	rows := make([]graphsBenchRow, len(gs))
	ref := make([][]float32, 0)
	for i, g := range gs {
		rows[i].Graph = g.path
		out, err := g.sess.Run(ctx, inputs) // warm-up, and the outputs compared
		if err != nil {
			return err
		}
		for k, t := range out {
			v, err := t.Float32()
			if err != nil {
				continue
			}
			if i == 0 {
				ref = append(ref, v)
			} else if k < len(ref) && len(ref[k]) == len(v) {
				rows[i].MaxRelDif = math.Max(rows[i].MaxRelDif, relativeDiff(ref[k], v))
			}
		}
	}
	for r := 0; r < o.rounds; r++ {
		for j := range gs {
			i := (j + r) % len(gs) // each round starts with the next graph
			start := time.Now()
			cpu0, cpuOK := cputime.Process()
			for c := 0; c < o.calls; c++ {
				if _, err := gs[i].sess.Run(ctx, inputs); err != nil {
					return err
				}
			}
			rows[i].RoundsMS = append(rows[i].RoundsMS, float64(time.Since(start).Microseconds())/1e3/float64(o.calls))
			if cpu1, ok := cputime.Process(); ok && cpuOK {
				rows[i].RoundsCPUMS = append(rows[i].RoundsCPUMS, float64((cpu1-cpu0).Microseconds())/1e3/float64(o.calls))
			}
		}
		e.Log.Info("graphs", "round", r+1, "of", o.rounds)
	}
	for i := range rows {
		rows[i].MedianMS = median(rows[i].RoundsMS)
		rows[i].PerSec = float64(o.batch) / (rows[i].MedianMS / 1e3)
		rows[i].Ratio = rows[0].MedianMS / rows[i].MedianMS
		if len(rows[i].RoundsCPUMS) > 0 {
			rows[i].CPUMedianMS = median(rows[i].RoundsCPUMS)
			rows[i].CPURatio = rows[0].CPUMedianMS / rows[i].CPUMedianMS
		}
	}
	if o.json {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"batch": o.batch, "threads": o.ort.threads(), "rounds": o.rounds, "calls": o.calls, "graphs": rows})
	}
	tw := tabwriter.NewWriter(e.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "graph\tms/call (median)\titems/s\tvs first\tCPU ms/call\tvs first\tmax rel diff\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.3f×\t%.1f\t%.3f×\t%.2g\n", filepath.Base(filepath.Dir(filepath.Dir(r.Graph)))+"/"+filepath.Base(r.Graph),
			r.MedianMS, r.PerSec, r.Ratio, r.CPUMedianMS, r.CPURatio, r.MaxRelDif)
	}
	fmt.Fprintf(tw, "batch %d, %d threads, %d rounds of %d calls each, order turned every round\n", o.batch, o.ort.threads(), o.rounds, o.calls)
	return tw.Flush()
}

// probeTensors makes inputs for a CLIP encoder graph from a fixed seed:
// pixel_values [batch, 3, S, S] (S from the graph, else 224) drawn from a
// normal distribution, or input_ids [batch, tokens] of prompts of several
// lengths with their attention_mask. A SigLIP 2 NaFlex vision graph gets
// pixel_values [batch, patches, C·p²] (C·p² from the graph), a
// pixel_attention_mask of ones and position_embeddings [batch, patches, d]
// (d from the graph) of a trained table's scale.
func probeTensors(ins []onnxgraph.ValueInfo, batch, tokens, patches int) ([]tensorio.Tensor, error) {
	rng := rand.New(rand.NewPCG(7, 11))
	var ts []tensorio.Tensor
	normal := func(scale float64, shape ...int) tensorio.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
		return tensorio.F32(shape, v)
	}
	for _, in := range ins {
		switch in.Name {
		case "pixel_values", "position_embeddings":
			if len(in.Shape) != 3 {
				break
			}
			if in.Shape[2].Value <= 0 {
				return nil, fmt.Errorf("%s %v: the last dimension is not fixed", in.Name, in.Shape)
			}
			scale := 1.0
			if in.Name == "position_embeddings" {
				scale = 0.02
			}
			ts = append(ts, normal(scale, batch, patches, int(in.Shape[2].Value)))
			continue
		case "pixel_attention_mask":
			mask := make([]int64, batch*patches)
			for i := range mask {
				mask[i] = 1
			}
			ts = append(ts, tensorio.I64([]int{batch, patches}, mask))
			continue
		}
		switch in.Name {
		case "pixel_values":
			size := 224
			if len(in.Shape) == 4 && in.Shape[2].Value > 0 {
				size = int(in.Shape[2].Value)
			}
			v := make([]float32, batch*3*size*size)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			ts = append(ts, tensorio.F32([]int{batch, 3, size, size}, v))
		case "input_ids", "attention_mask":
			ids := make([]int64, batch*tokens)
			mask := make([]int64, batch*tokens)
			for b := 0; b < batch; b++ {
				n := 2 + (b*7)%(tokens-1)
				for i := 0; i < n; i++ {
					ids[b*tokens+i] = int64(1 + rng.IntN(400))
					mask[b*tokens+i] = 1
				}
				ids[b*tokens] = 49406
				ids[b*tokens+n-1] = 49407
			}
			if in.Name == "input_ids" {
				if in.ElemType == onnxgraph.Int32 {
					v := make([]int32, len(ids))
					for i, x := range ids {
						v[i] = int32(x)
					}
					ts = append(ts, tensorio.Tensor{DType: tensorio.DTypeI32, Shape: []int{batch, tokens}, Data: v})
				} else {
					ts = append(ts, tensorio.I64([]int{batch, tokens}, ids))
				}
			} else {
				ts = append(ts, tensorio.I64([]int{batch, tokens}, mask))
			}
		default:
			return nil, fmt.Errorf("no probe for the input %s (expected pixel_values, input_ids, attention_mask, pixel_attention_mask or position_embeddings)", in.Name)
		}
	}
	return ts, nil
}

// relativeDiff returns max |a-b| / max |a|.
func relativeDiff(a, b []float32) float64 {
	var d, m float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = math.Max(m, math.Abs(float64(a[i])))
	}
	return d / math.Max(m, 1e-30)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
