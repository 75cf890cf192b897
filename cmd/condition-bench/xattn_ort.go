package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"math"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/tensorio"
)

// The ONNX graphs of `condition-bench xattn --ort`, made by benchdata/generate_mha.py.
var (
	//go:embed benchdata/mha_block.onnx
	mhaBlockONNX []byte
	//go:embed benchdata/mha_core.onnx
	mhaCoreONNX []byte
	//go:embed benchdata/mha_proj.onnx
	mhaProjONNX []byte
)

// numHeadsAttr is MultiHeadAttention's num_heads attribute as the graphs
// hold it: the field name, then the varint field i (= 1) whose value byte
// withHeads replaces.
var numHeadsAttr = []byte("\x0a\x09num_heads\x18\x01")

// withHeads returns a copy of graph with MultiHeadAttention's num_heads set
// to heads (1 to 127, a one-byte varint like the 1 it replaces).
func withHeads(graph []byte, heads int) ([]byte, error) {
	if heads < 1 || heads > 127 {
		return nil, fmt.Errorf("the ONNX Runtime graphs take 1 to 127 heads, not %d", heads)
	}
	if n := bytes.Count(graph, numHeadsAttr); n != 1 {
		return nil, fmt.Errorf("embedded graph holds the num_heads attribute %d times, want once (regenerate it with benchdata/generate_mha.py)", n)
	}
	g := bytes.Clone(graph)
	i := bytes.Index(g, numHeadsAttr)
	g[i+len(numHeadsAttr)-1] = byte(heads)
	return g, nil
}

// ortBench runs ONNX Runtime's block and core, one pair of sessions per
// head count, and the projections alone.
type ortBench struct {
	version  string
	threads  int
	sessions map[int][2]*ort.Session // heads → block, core
	proj     *ort.Session
}

func newORTBench(e *env, o benchOptions) (*ortBench, error) {
	rt, err := ort.Load(ort.LoadOptions{LibPath: o.ortLib, Logger: e.Log})
	if err != nil {
		return nil, err
	}
	return &ortBench{version: rt.Version, threads: o.threads, sessions: map[int][2]*ort.Session{}}, nil
}

func (b *ortBench) close() {
	for _, s := range b.sessions {
		s[0].Close()
		s[1].Close()
	}
	if b.proj != nil {
		b.proj.Close()
	}
}

func (b *ortBench) get(heads int) ([2]*ort.Session, error) {
	if s, ok := b.sessions[heads]; ok {
		return s, nil
	}
	var s [2]*ort.Session
	for i, g := range []struct {
		name   string
		graph  []byte
		inputs []string
	}{
		{"mha_block.onnx", mhaBlockONNX, []string{"q", "kv", "wq", "wk", "wv", "wo", "bo"}},
		{"mha_core.onnx", mhaCoreONNX, []string{"q", "k", "v"}},
	} {
		graph, err := withHeads(g.graph, heads)
		if err != nil {
			return s, err
		}
		s[i], err = ort.NewSession(graph, g.name, g.inputs, []string{"out"}, ort.SessionOptions{Threads: b.threads})
		if err != nil {
			s[0].Close()
			return s, err
		}
	}
	b.sessions[heads] = s
	return s, nil
}

// transpose returns m [rows, cols] transposed to [cols, rows]: PyTorch's
// [out, in] weights as the [in, out] right operand of ONNX MatMul.
func transpose(m []float32, rows, cols int) []float32 {
	t := make([]float32, len(m))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			t[j*rows+i] = m[i*cols+j]
		}
	}
	return t
}

// run times ONNX Runtime's block and core on c's inputs and weights and
// checks that their outputs match ours.
func (b *ortBench) run(ctx context.Context, s benchShape, c benchCase, o benchOptions, r *benchResult) error {
	sess, err := b.get(s.Heads)
	if err != nil {
		return err
	}
	if b.proj == nil {
		if b.proj, err = ort.NewSession(mhaProjONNX, "mha_proj.onnx", []string{"q", "kv", "a", "wq", "wk", "wv", "wo", "bo"},
			[]string{"Q", "K", "V", "out"}, ort.SessionOptions{Threads: b.threads}); err != nil {
			return err
		}
	}
	r.ORTVersion = b.version
	w := c.w
	block := []tensorio.Tensor{
		tensorio.F32([]int{1, s.TQ, s.DQ}, c.q),
		tensorio.F32([]int{1, s.TK, s.DKV}, c.kv),
		tensorio.F32([]int{s.DQ, s.Inner}, transpose(w.Q, s.Inner, s.DQ)),
		tensorio.F32([]int{s.DKV, s.Inner}, transpose(w.K, s.Inner, s.DKV)),
		tensorio.F32([]int{s.DKV, s.Inner}, transpose(w.V, s.Inner, s.DKV)),
		tensorio.F32([]int{s.Inner, s.DQ}, transpose(w.O, s.DQ, s.Inner)),
		tensorio.F32([]int{s.DQ}, w.BO),
	}
	proj := []tensorio.Tensor{block[0], block[1], tensorio.F32([]int{1, s.TQ, s.Inner}, c.cq), block[2], block[3], block[4], block[5], block[6]}
	core := []tensorio.Tensor{
		tensorio.F32([]int{1, s.TQ, s.Inner}, c.cq),
		tensorio.F32([]int{1, s.TK, s.Inner}, c.ckv),
		tensorio.F32([]int{1, s.TK, s.Inner}, c.ckv),
	}
	for _, k := range []struct {
		name string
		sess *ort.Session
		in   []tensorio.Tensor
		ours []float32
		ms   *float64
		diff *float64
	}{
		{"block", sess[0], block, c.out, &r.ORTBlockMS, &r.ORTBlockDiff},
		{"core", sess[1], core, c.core, &r.ORTCoreMS, &r.ORTCoreDiff},
		{"projections", b.proj, proj, c.projQ, &r.ORTProjMS, &r.ORTProjDiff}, // compared on Q = q·W_Qᵀ
	} {
		var out []tensorio.Tensor
		t, _, err := timeIt(o, nil, func() error {
			var err error
			out, err = k.sess.Run(ctx, k.in)
			return err
		})
		if err != nil {
			return err
		}
		*k.ms = t * 1e3
		got, err := out[0].Float32()
		if err != nil {
			return fmt.Errorf("ONNX Runtime %s output: %w", k.name, err)
		}
		if len(got) != len(k.ours) {
			return fmt.Errorf("ONNX Runtime %s output has %d values, ours %d", k.name, len(got), len(k.ours))
		}
		var d, big float64
		for i, v := range k.ours {
			d = max(d, math.Abs(float64(got[i])-float64(v)))
			big = max(big, math.Abs(float64(v)))
		}
		*k.diff = d / max(big, 1e-30)
		// Both compute the same float32 arithmetic in different orders:
		// they agree to a few ulp of the largest output. A large
		// difference means the two sides are not timing the same thing.
		if !(*k.diff < 1e-3) {
			return fmt.Errorf("ONNX Runtime's %s output differs from ours by %.3g of the largest value (shape %s)", k.name, *k.diff, s.Name)
		}
	}
	return nil
}
