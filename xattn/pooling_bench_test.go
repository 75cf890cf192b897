package xattn

import (
	"math/rand/v2"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

// BenchmarkPoolingHead: SigLIP B/16's head (d 768, MLP 3072) on one
// image's 196 patches.
func BenchmarkPoolingHead(b *testing.B) {
	const d, h, n = 768, 3072, 196
	r := rand.New(rand.NewPCG(1, 2))
	mk := func(shape ...int) tensorio.Tensor {
		size := 1
		for _, s := range shape {
			size *= s
		}
		v := make([]float32, size)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 0.02)
		}
		return tensorio.F32(shape, v)
	}
	p := "vision_model.head."
	ts := map[string]tensorio.Tensor{
		p + "attention.in_proj_weight": mk(3*d, d), p + "attention.in_proj_bias": mk(3 * d),
		p + "attention.out_proj.weight": mk(d, d), p + "attention.out_proj.bias": mk(d),
		p + "layernorm.weight": mk(d), p + "layernorm.bias": mk(d),
		p + "mlp.fc1.weight": mk(h, d), p + "mlp.fc1.bias": mk(h),
		p + "mlp.fc2.weight": mk(d, h), p + "mlp.fc2.bias": mk(d),
	}
	head, err := NewPoolingHead(ts, p, 1e-6)
	if err != nil {
		b.Fatal(err)
	}
	x := mk(n, d).Data.([]float32)
	y := make([]float32, n*d)
	var s PoolingScratch
	b.ResetTimer()
	for range b.N {
		if err := head.Apply(y, x, n, &s); err != nil {
			b.Fatal(err)
		}
	}
}
