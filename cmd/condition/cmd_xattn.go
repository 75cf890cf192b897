package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/xattn"
)

type xattnOptions struct {
	weights, prefix       string
	heads                 int
	scale                 float32
	query, kv, mask       string
	queryTensor, kvTensor string
	maskTensor            string
	out                   string
	perHead               bool
	threads               int
}

func (o *xattnOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.weights, "weights", "", "safetensors file with the layer's weights (diffusers names)")
	fs.StringVar(&o.prefix, "prefix", "", "name prefix of the layer's tensors, e.g. down_blocks.1.attentions.0.transformer_blocks.0.attn2.")
	fs.IntVar(&o.heads, "heads", 0, "number of heads (SD 1.5: 8)")
	fs.Float32Var(&o.scale, "scale", 0, "score scale (default head_dim^-1/2)")
	fs.StringVar(&o.query, "query", "", "queries [T_q, d_q] (.npy or .safetensors; a leading batch dim of 1 is accepted)")
	fs.StringVar(&o.kv, "kv", "", "source [T_k, d_kv] (.npy or .safetensors)")
	fs.StringVar(&o.mask, "mask", "", "optional key padding mask [T_k] (.npy or .safetensors; nonzero = attend)")
	fs.StringVar(&o.queryTensor, "query-tensor", "", "tensor name in a .safetensors --query (needed if it holds several)")
	fs.StringVar(&o.kvTensor, "kv-tensor", "", "tensor name in a .safetensors --kv")
	fs.StringVar(&o.maskTensor, "mask-tensor", "", "tensor name in a .safetensors --mask")
	fs.StringVar(&o.out, "out", "", "output .safetensors: output [T_q, d_out] and attention [T_q, T_k]")
	fs.BoolVar(&o.perHead, "per-head", false, "write attention per head [heads, T_q, T_k] instead of the head mean")
	fs.IntVar(&o.threads, "threads", 0, "worker goroutines (default: all cores)")
}

func runXattn(ctx context.Context, e *env, args []string) error {
	var o xattnOptions
	fs := newFlagSet(e, "xattn", "xattn --weights W.safetensors --prefix P --heads H --query Q.npy --kv KV.npy [--mask M.npy] --out O.safetensors [--per-head] [--threads N]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	for _, f := range []struct{ name, val string }{{"weights", o.weights}, {"query", o.query}, {"kv", o.kv}, {"out", o.out}} {
		if f.val == "" {
			return usagef("--%s is required", f.name)
		}
	}
	if o.heads <= 0 {
		return usagef("--heads must be positive, got %d", o.heads)
	}
	if o.threads < 0 {
		return usagef("--threads must be >= 0, got %d", o.threads)
	}
	if ext := strings.ToLower(filepath.Ext(o.out)); ext != ".safetensors" {
		return usagef("--out must name a .safetensors file, got %q", o.out)
	}
	// Only the layer's tensors, and the other attention tensors an error
	// may list as near misses: not the rest of a multi-gigabyte UNet.
	ts, _, err := tensorio.ReadSafetensorsFunc(o.weights, func(n string) bool { return strings.HasPrefix(n, o.prefix) || strings.Contains(n, "to_") })
	if err != nil {
		return fmt.Errorf("read weights %s: %w", o.weights, err)
	}
	l, err := xattn.FromDiffusers(ts, o.prefix, o.heads, o.scale)
	if err != nil {
		return fmt.Errorf("weights %s: %w", o.weights, err)
	}
	q, tq, err := loadFeatures(o.query, o.queryTensor, "--query", l.DQ())
	if err != nil {
		return err
	}
	kv, tk, err := loadFeatures(o.kv, o.kvTensor, "--kv", l.DKV())
	if err != nil {
		return err
	}
	var mask []bool
	if o.mask != "" {
		if mask, err = loadMask(o.mask, o.maskTensor, tk); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	mode := xattn.MeanAttention
	if o.perHead {
		mode = xattn.PerHeadAttention
	}
	res, err := l.Forward(q, tq, kv, tk, mask, mode, o.threads)
	if err != nil {
		return err
	}
	attnShape := []int{tq, tk}
	if o.perHead {
		attnShape = []int{l.Heads(), tq, tk}
	}
	out := map[string]tensorio.Tensor{
		"output":    tensorio.F32([]int{tq, l.DOut()}, res.Out),
		"attention": tensorio.F32(attnShape, res.Attn),
	}
	meta := map[string]string{
		"program":   "condition " + Version,
		"weights":   filepath.Base(o.weights),
		"prefix":    o.prefix,
		"heads":     strconv.Itoa(l.Heads()),
		"scale":     strconv.FormatFloat(float64(l.Scale()), 'g', -1, 32),
		"attention": map[bool]string{false: "head mean", true: "per head"}[o.perHead],
	}
	if err := tensorio.WriteSafetensors(o.out, out, meta); err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	e.Log.Info("xattn", "queries", tq, "keys", tk, "d_q", l.DQ(), "d_kv", l.DKV(), "inner", l.Inner(), "heads", l.Heads(), "d_out", l.DOut())
	fmt.Fprintf(e.Stdout, "wrote %s: output %v, attention %v\n", o.out, []int{tq, l.DOut()}, attnShape)
	return nil
}

// readTensor reads one tensor from a .npy file or, by name (or the only
// one), from a .safetensors file.
func readTensor(path, name, flag string) (tensorio.Tensor, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		if name != "" {
			return tensorio.Tensor{}, usagef("%s-tensor names a tensor in a .safetensors file, but %s is .npy", flag, path)
		}
		t, err := tensorio.ReadNPY(path)
		if err != nil {
			return t, fmt.Errorf("read %s %s: %w", flag, path, err)
		}
		return t, nil
	case ".safetensors":
		ts, _, err := tensorio.ReadSafetensors(path)
		if err != nil {
			return tensorio.Tensor{}, fmt.Errorf("read %s %s: %w", flag, path, err)
		}
		if name == "" {
			if len(ts) != 1 {
				names := make([]string, 0, len(ts))
				for k := range ts {
					names = append(names, k)
				}
				sort.Strings(names)
				return tensorio.Tensor{}, usagef("%s %s holds %d tensors (%s): choose one with %s-tensor", flag, path, len(ts), strings.Join(names, ", "), flag)
			}
			for _, t := range ts {
				return t, nil
			}
		}
		t, ok := ts[name]
		if !ok {
			return t, fmt.Errorf("%s %s has no tensor %q", flag, path, name)
		}
		return t, nil
	}
	return tensorio.Tensor{}, usagef("%s %s: want a .npy or .safetensors file", flag, path)
}

// loadFeatures reads a [T, width] float tensor (a leading dim of 1 is
// dropped).
func loadFeatures(path, name, flag string, width int) ([]float32, int, error) {
	t, err := readTensor(path, name, flag)
	if err != nil {
		return nil, 0, err
	}
	shape := t.Shape
	if len(shape) == 3 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 2 || shape[1] != width {
		return nil, 0, fmt.Errorf("%s %s: shape %v, want [T, %d] or [1, T, %d]", flag, path, t.Shape, width, width)
	}
	switch t.DType {
	case tensorio.DTypeF32, tensorio.DTypeF16, tensorio.DTypeBF16, tensorio.DTypeF64:
	default:
		return nil, 0, fmt.Errorf("%s %s: dtype %s, want a float type", flag, path, t.DType)
	}
	f, err := t.Float32()
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return f, shape[0], nil
}

// loadMask reads a key padding mask [tk] or [1, tk]: nonzero (true) =
// attend.
func loadMask(path, name string, tk int) ([]bool, error) {
	t, err := readTensor(path, name, "--mask")
	if err != nil {
		return nil, err
	}
	if !(len(t.Shape) == 1 && t.Shape[0] == tk) && !(len(t.Shape) == 2 && t.Shape[0] == 1 && t.Shape[1] == tk) {
		return nil, fmt.Errorf("--mask %s: shape %v, want [%d] or [1, %d] (one per key of --kv)", path, t.Shape, tk, tk)
	}
	mask := make([]bool, tk)
	switch t.DType {
	case tensorio.DTypeF32, tensorio.DTypeF16, tensorio.DTypeBF16, tensorio.DTypeF64:
		f, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("--mask %s: %w", path, err)
		}
		for i, v := range f {
			mask[i] = v != 0
		}
	default:
		v, err := t.Int64()
		if err != nil {
			return nil, fmt.Errorf("--mask %s: %w", path, err)
		}
		for i, x := range v {
			mask[i] = x != 0
		}
	}
	return mask, nil
}
