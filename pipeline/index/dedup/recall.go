package dedup

import (
	"sync"
	"time"

	"github.com/conditionhq/condition/internal/halfdot"
)

// Recall is how many of the exact pairs of a sample of images the
// approximate search found (Options.CheckRecall).
type Recall struct {
	Sampled int     `json:"sampled"` // images drawn (a fixed seed)
	Exact   int     `json:"exact"`   // their pairs at the threshold, each image against every other
	Found   int     `json:"found"`   // of them, in Result.Pairs
	Ratio   float64 `json:"recall"`  // Found / Exact (1 when Exact is 0)
	Seconds float64 `json:"seconds"` // the check's wall time, within Run's
}

// checkRecall compares n images drawn with a fixed seed with every other
// image, exactly, and counts their pairs at t among pairs (in (A, B)
// order).
func (a *approx) checkRecall(v *vectors, n int, t float32, pairs []Pair) *Recall {
	t0 := time.Now()
	sample := drawRows(v, n, 0x7ec)
	n = len(sample)
	found := make(map[[2]int]bool)
	in := make(map[int]bool, n)
	for _, r := range sample {
		in[r] = true
	}
	for _, p := range pairs {
		if in[p.A] || in[p.B] {
			found[[2]int{p.A, p.B}] = true
		}
	}
	rc := &Recall{Sampled: n}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range a.workers {
		wg.Go(func() {
			exact, got := 0, 0
			buf := make([]float32, 4*v.d) // four drawn images, float32 normalised
			var c4 [4]float32
			for i0 := 4 * w; i0 < n; i0 += 4 * a.workers {
				k := min(4, n-i0)
				for i := range 4 {
					a.m.unit(v, sample[i0+min(i, k-1)], buf[i*v.d:(i+1)*v.d])
				}
				for r := range v.n {
					if !v.ok[r] {
						continue
					}
					if a.m.f16 != nil {
						halfdot.Dot4(a.m.f16[r*v.d:(r+1)*v.d], buf, v.d, &c4)
					} else {
						for i := range k {
							c4[i] = halfdot.DotFloat32(a.m.f32[r*v.d:(r+1)*v.d], buf[i*v.d:(i+1)*v.d])
						}
					}
					for i, c := range c4[:k] {
						if s := sample[i0+i]; r != s && c*v.inv[r] >= t {
							exact++
							if found[[2]int{min(r, s), max(r, s)}] {
								got++
							}
						}
					}
				}
			}
			mu.Lock()
			rc.Exact += exact
			rc.Found += got
			mu.Unlock()
		})
	}
	wg.Wait()
	rc.Ratio, rc.Seconds = 1, time.Since(t0).Seconds()
	if rc.Exact > 0 {
		rc.Ratio = float64(rc.Found) / float64(rc.Exact)
	}
	return rc
}
