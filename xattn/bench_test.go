package xattn

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

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

// countTask counts the runs of each item and checks the worker ids.
type countTask struct {
	t       *testing.T
	threads int
	hits    []atomic.Int32
}

func (c *countTask) run(i, w int) {
	if w < 0 || w >= c.threads {
		c.t.Errorf("item %d ran on worker %d of %d", i, w, c.threads)
	}
	c.hits[i].Add(1)
}

// TestPoolPhases runs many phases of varied sizes back to back and with
// pauses longer than spinFor (so that workers park and are woken), and
// checks that every item of every phase runs exactly once.
func TestPoolPhases(t *testing.T) {
	for threads := 1; threads <= 4; threads++ {
		p := newPool(threads)
		for round := range 60 {
			n := []int{0, 1, 2, 3, 5, 17, 64}[round%7]
			c := &countTask{t: t, threads: threads, hits: make([]atomic.Int32, n)}
			p.do(n, c)
			for i := range c.hits {
				if h := c.hits[i].Load(); h != 1 {
					t.Fatalf("threads %d round %d: item %d of %d ran %d times, want 1", threads, round, i, n, h)
				}
			}
			if round%5 == 4 {
				time.Sleep(2 * spinFor)
			}
		}
		p.close()
		p.close()
	}
}

// TestPoolLateWake delays do between publishing a phase and waking the
// parked workers, long enough for them to see the phase by polling, run
// all of it and park again: the late wake-up must not make them run it a
// second time (it did, and the WaitGroup went negative).
func TestPoolLateWake(t *testing.T) {
	afterPublish = func() { time.Sleep(3 * spinFor) }
	defer func() { afterPublish = nil }()
	for threads := 2; threads <= 3; threads++ {
		p := newPool(threads)
		for round := range 20 {
			n := 1 + round%4*threads
			c := &countTask{t: t, threads: threads, hits: make([]atomic.Int32, n)}
			p.do(n, c)
			for i := range c.hits {
				if h := c.hits[i].Load(); h != 1 {
					t.Fatalf("threads %d round %d: item %d of %d ran %d times, want 1", threads, round, i, n, h)
				}
			}
		}
		p.close()
	}
}

// TestSplit checks that the pieces of split cover the rows in order, at
// multiples of align, with sizes differing by at most align.
func TestSplit(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		w := &Workspace{threads: threads}
		for _, rows := range []int{0, 1, 5, 6, 7, 77, 197, 4096} {
			for _, align := range []int{1, 6, 16} {
				s := w.split(rows, align, 24)
				if rows > 0 && (s.n < 1 || s.n > threads*4 && s.n > 1) {
					t.Fatalf("threads %d rows %d align %d: %d pieces", threads, rows, align, s.n)
				}
				next, lo, hi := 0, rows, 0
				for i := range s.n {
					r0, r1 := s.bounds(i)
					if r0 != next || r1 < r0 || r0%align != 0 {
						t.Fatalf("threads %d rows %d align %d: piece %d is [%d, %d) after %d", threads, rows, align, i, r0, r1, next)
					}
					next = r1
					if r1 < rows {
						lo, hi = min(lo, r1-r0), max(hi, r1-r0)
					}
				}
				if next != rows {
					t.Fatalf("threads %d rows %d align %d: pieces end at %d", threads, rows, align, next)
				}
				if hi-lo > align {
					t.Errorf("threads %d rows %d align %d: piece sizes %d..%d differ by more than align", threads, rows, align, lo, hi)
				}
			}
		}
	}
}
