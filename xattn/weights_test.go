package xattn

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

const testPrefix = "down_blocks.0.attentions.0.transformer_blocks.0.attn2."

func readNPY(t *testing.T, name string) ([]float32, []int) {
	t.Helper()
	x, err := tensorio.ReadNPY("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return f, x.Shape
}

func readST(t *testing.T, name string) map[string]tensorio.Tensor {
	t.Helper()
	ts, _, err := tensorio.ReadSafetensors("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// Tolerances against torch's float32 goldens (testdata/generate.py).
const goldAbs, goldRel = 1e-6, 1e-5

// TestDiffusersGolden checks a diffusers-named layer against torch.
func TestDiffusersGolden(t *testing.T) {
	ts := readST(t, "attn2.safetensors")
	l, err := FromDiffusers(ts, strings.TrimSuffix(testPrefix, "."), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.DQ() != 40 || l.DKV() != 24 || l.Inner() != 32 || l.DOut() != 40 || l.HeadDim() != 16 {
		t.Fatalf("layer dims %d %d %d %d %d", l.DQ(), l.DKV(), l.Inner(), l.DOut(), l.HeadDim())
	}
	q, _ := readNPY(t, "query.npy")
	kv, _ := readNPY(t, "kv.npy")
	m, _ := readNPY(t, "mask.npy")
	mask := make([]bool, len(m))
	for i, v := range m {
		mask[i] = v != 0
	}
	out, _ := readNPY(t, "output.npy")
	mean, _ := readNPY(t, "attention.npy")
	heads, _ := readNPY(t, "attention_heads.npy")
	forEachImpl(t, func(t *testing.T) {
		res, err := l.Forward(q, 13, kv, 9, mask, PerHeadAttention, 2)
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, "output", res.Out, f64(out), goldAbs, goldRel)
		checkClose(t, "attention_heads", res.Attn, f64(heads), goldAbs, goldRel)
		res, err = l.Forward(q, 13, kv, 9, mask, MeanAttention, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, "attention", res.Attn, f64(mean), goldAbs, goldRel)
	})
}

// TestJointGolden checks CLIP's joint space both ways against torch.
func TestJointGolden(t *testing.T) {
	ts := readST(t, "joint.safetensors")
	patches, _ := readNPY(t, "joint_patches.npy")
	tokens, _ := readNPY(t, "joint_tokens.npy")
	forEachImpl(t, func(t *testing.T) {
		for _, c := range []struct {
			dir       Direction
			q, kv     []float32
			tq, tk    int
			out, attn string
		}{
			{ImageToText, patches, tokens, 5, 4, "joint_i2t_output.npy", "joint_i2t_attention.npy"},
			{TextToImage, tokens, patches, 4, 5, "joint_t2i_output.npy", "joint_t2i_attention.npy"},
		} {
			l, err := Joint(ts, c.dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			if l.Heads() != 1 || l.DOut() != 8 {
				t.Fatalf("%v: heads %d, d_out %d", c.dir, l.Heads(), l.DOut())
			}
			res, err := l.Forward(c.q, c.tq, c.kv, c.tk, nil, MeanAttention, 1)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := readNPY(t, c.out)
			attn, _ := readNPY(t, c.attn)
			checkClose(t, c.dir.String()+"/output", res.Out, f64(out), goldAbs, goldRel)
			checkClose(t, c.dir.String()+"/attention", res.Attn, f64(attn), goldAbs, goldRel)
		}
	})
}

func TestWeightErrors(t *testing.T) {
	base := readST(t, "attn2.safetensors")
	clone := func() map[string]tensorio.Tensor {
		m := make(map[string]tensorio.Tensor, len(base))
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name  string
		edit  func(m map[string]tensorio.Tensor)
		want  string
		shape bool
	}{
		{"missing to_k", func(m map[string]tensorio.Tensor) { delete(m, testPrefix+"to_k.weight") }, `"` + testPrefix + `to_k.weight" missing`, false},
		{"wrong to_v shape", func(m map[string]tensorio.Tensor) {
			m[testPrefix+"to_v.weight"] = tensorio.F32([]int{32, 23}, make([]float32, 32*23))
		}, `has shape [32 23], want [32, 24]`, true},
		{"wrong bias shape", func(m map[string]tensorio.Tensor) {
			m[testPrefix+"to_out.0.bias"] = tensorio.F32([]int{41}, make([]float32, 41))
		}, `to_out.0.bias" has shape [41], want [40]`, true},
		{"int weights", func(m map[string]tensorio.Tensor) {
			m[testPrefix+"to_q.weight"] = tensorio.I64([]int{32, 40}, make([]int64, 32*40))
		}, `has dtype I64`, false},
		{"3-d weight", func(m map[string]tensorio.Tensor) {
			m[testPrefix+"to_out.0.weight"] = tensorio.F32([]int{40, 32, 1}, make([]float32, 40*32))
		}, `want [?, 32]`, true},
	}
	for _, c := range cases {
		m := clone()
		c.edit(m)
		_, err := FromDiffusers(m, testPrefix, 2, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if c.shape && !errors.Is(err, ErrShape) {
			t.Errorf("%s: error %v does not wrap ErrShape", c.name, err)
		}
	}
	if _, err := FromDiffusers(base, testPrefix, 3, 0); err == nil || !strings.Contains(err.Error(), "3 heads") {
		t.Errorf("3 heads: %v", err)
	}
	if _, err := FromDiffusers(base, "up_blocks.", 2, 0); err == nil || !strings.Contains(err.Error(), testPrefix+"to_q.weight") {
		t.Errorf("wrong prefix: %v (want the tensors with that suffix listed)", err)
	}
	if _, err := Joint(base, ImageToText, 0); err == nil || !strings.Contains(err.Error(), "text_projection.weight") {
		t.Errorf("joint from diffusers weights: %v", err)
	}
}

// TestF16Weights checks that F16 and BF16 weights are converted.
func TestF16Weights(t *testing.T) {
	base := readST(t, "attn2.safetensors")
	m16 := map[string]tensorio.Tensor{}
	m32 := map[string]tensorio.Tensor{}
	for k, v := range base {
		f, _ := v.Float32()
		h := make([]uint16, len(f))
		r := make([]float32, len(f))
		for i, x := range f {
			if strings.Contains(k, "to_k") {
				h[i] = uint16(math.Float32bits(x) >> 16)
				r[i] = tensorio.BF16ToFloat32(h[i])
			} else {
				h[i] = tensorio.Float32ToF16(x)
				r[i] = tensorio.F16ToFloat32(h[i])
			}
		}
		dt := tensorio.DTypeF16
		if strings.Contains(k, "to_k") {
			dt = tensorio.DTypeBF16
		}
		m16[k] = tensorio.Tensor{DType: dt, Shape: v.Shape, Data: h}
		m32[k] = tensorio.F32(v.Shape, r)
	}
	a, err := FromDiffusers(m16, testPrefix, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FromDiffusers(m32, testPrefix, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := readNPY(t, "query.npy")
	kv, _ := readNPY(t, "kv.npy")
	ra, _ := a.Forward(q, 13, kv, 9, nil, NoAttention, 1)
	rb, _ := b.Forward(q, 13, kv, 9, nil, NoAttention, 1)
	checkClose(t, "f16", ra.Out, f64(rb.Out), 0, 0)
}
