package xattn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

// benchImpls runs b once per kernel implementation.
func benchImpls(b *testing.B, f func(b *testing.B)) {
	for _, impl := range cpuid.Available() {
		b.Run(impl.String(), func(b *testing.B) {
			defer cpuid.Set(impl)()
			f(b)
		})
	}
}

// BenchmarkCore times the attention core alone (Q Kᵀ, softmax, P V) on one
// goroutine: head_dim 64, T_k 77, 12 heads, prepared queries and source.
// FLOPs = 2·2·heads·T_q·T_k·head_dim.
func BenchmarkCore(b *testing.B) {
	for _, tq := range []int{77, 197, 1024} {
		b.Run(fmt.Sprintf("tq=%d", tq), func(b *testing.B) {
			benchImpls(b, func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 1))
				l, _ := Identity(768, 12, 0)
				q, kv := randVec(r, tq*768, 1), randVec(r, 77*768, 1)
				pq, _ := l.PrepareQuery(q, tq)
				src, _ := l.PrepareSource(kv, 77, nil)
				ws := l.NewWorkspace(1)
				defer ws.Close()
				res := new(Result)
				_ = ws.ForwardPrepared(res, pq, src, NoAttention)
				_, core := l.FLOPs(tq, 77)
				b.ResetTimer()
				for range b.N {
					_ = ws.ForwardPrepared(res, pq, src, NoAttention)
				}
				b.ReportMetric(core*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		})
	}
}

// BenchmarkBlock times a whole layer (Q, K, V, O projections and the core)
// at T_q=197, T_k=77, d=768, 12 heads (ViT-B/16 patches to a prompt) and at
// SD 1.5's largest attn2 (T_q=4096, d_q=320, T_k=77, d_kv=768, 8 heads), on
// one and two goroutines. FLOPs = Layer.FLOPs (2·m·n·k per matrix product).
func BenchmarkBlock(b *testing.B) {
	for _, s := range []struct {
		name                   string
		tq, tk, dq, dkv, heads int
	}{{"vit-b16", 197, 77, 768, 768, 12}, {"sd15-64x64", 4096, 77, 320, 768, 8}} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", s.name, threads), func(b *testing.B) {
				benchImpls(b, func(b *testing.B) {
					r := rand.New(rand.NewPCG(2, 2))
					w := randWeights(r, s.dq, s.dkv, s.dq, s.dq, s.heads, true)
					l, _ := New(w)
					q, kv := randVec(r, s.tq*s.dq, 1), randVec(r, s.tk*s.dkv, 1)
					ws := l.NewWorkspace(threads)
					defer ws.Close()
					res := new(Result)
					_ = ws.Forward(res, q, s.tq, kv, s.tk, nil, MeanAttention)
					proj, core := l.FLOPs(s.tq, s.tk)
					b.ResetTimer()
					for range b.N {
						_ = ws.Forward(res, q, s.tq, kv, s.tk, nil, MeanAttention)
					}
					b.ReportMetric((proj+core)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
				})
			})
		}
	}
}
