package ort_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// hammerCancel runs the tiny graph onnx/bad/vision_float16.onnx (a cast and
// a flatten: microseconds a run) runs times from several goroutines at
// once, cancelling each run's context at a random moment: before the run,
// during it, as it ends, or after it. Every run must succeed or report the
// cancellation.
func hammerCancel(t *testing.T, runs int) {
	t.Helper()
	goroutines := runtime.NumGoroutine()
	g := ort.GraphFile(filepath.Join("..", "..", "testdata", "tinyclip", "onnx", "bad", "vision_float16.onnx"))
	s, err := g.NewSession([]string{"pixel_values"}, []string{"last_hidden_state"}, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	workers := 2 * runtime.GOMAXPROCS(0)
	var (
		next                atomic.Int64
		cancelled, finished atomic.Int64
		wg                  sync.WaitGroup
		failMu              sync.Mutex
		failure             error
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for next.Add(1) <= int64(runs) {
				b := 1 << rng.IntN(7) // 1 to 64 images: runs of a few to a few hundred microseconds
				in := []tensorio.Tensor{{DType: tensorio.DTypeF16, Shape: []int{b, 3, 32, 32}, Data: make([]uint16, b*3*32*32)}}
				ctx, cancel := context.WithCancel(context.Background())
				switch rng.IntN(4) {
				case 0: // before the run
					cancel()
				case 1: // a moment into it, on a timer
					time.AfterFunc(time.Duration(rng.IntN(100))*time.Microsecond, cancel)
				case 2: // a moment into it, from a goroutine that yields a few times
					n := rng.IntN(20)
					go func() {
						for i := 0; i < n; i++ {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				out, err := s.Run(ctx, in)
				cancel() // case 3: after it
				switch {
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				case err != nil:
					failMu.Lock()
					failure = errors.Join(failure, err)
					failMu.Unlock()
				case len(out) != 1 || out[0].NumElements() != b*3*32*32:
					failMu.Lock()
					failure = errors.Join(failure, errors.New("wrong output shape"))
					failMu.Unlock()
				default:
					finished.Add(1)
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	t.Logf("%d runs finished, %d cancelled", finished.Load(), cancelled.Load())
	// Nothing a run started outlives it (the cancelling timers and
	// goroutines above end within a millisecond).
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > goroutines; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left running, %d before", runtime.NumGoroutine(), goroutines)
		}
	}
	if cancelled.Load() == 0 || finished.Load() == 0 {
		t.Fatalf("%d runs finished and %d were cancelled; the test needs some of each", finished.Load(), cancelled.Load())
	}
}

// TestRunCancelOrder cancels thousands of runs at random moments and checks
// that a run's options are never destroyed while they are being terminated,
// nor terminated after they were destroyed (the C side would use freed
// memory). The terminating is slowed down at random to widen the window.
func TestRunCancelOrder(t *testing.T) {
	orttest.Load(t)
	type state struct {
		terminating bool
		destroyed   bool
	}
	var (
		mu         sync.Mutex
		states     = map[any]*state{}
		terminated atomic.Int64
		violations []string
	)
	get := func(key any) *state {
		st := states[key]
		if st == nil {
			st = &state{}
			states[key] = st
		}
		return st
	}
	// The lock is held across the real calls, so that a wrong order is
	// recorded rather than left to crash in ONNX Runtime.
	ort.WrapRunOptions(t,
		func(key any, call func() error) error {
			mu.Lock()
			st := get(key)
			if st.destroyed {
				violations = append(violations, "terminated after they were destroyed")
				mu.Unlock()
				return nil
			}
			st.terminating = true
			mu.Unlock()
			if d := rand.IntN(100); d < 50 {
				time.Sleep(time.Duration(d) * time.Microsecond)
			} else {
				runtime.Gosched()
			}
			mu.Lock()
			defer mu.Unlock()
			st.terminating = false
			if st.destroyed {
				violations = append(violations, "destroyed while being terminated")
				return nil
			}
			terminated.Add(1)
			return call()
		},
		func(key any, call func() error) error {
			mu.Lock()
			defer mu.Unlock()
			st := get(key)
			if st.terminating {
				violations = append(violations, "destroyed while being terminated")
			}
			st.destroyed = true
			return call()
		})
	hammerCancel(t, 3000)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d run options terminated", terminated.Load())
	if len(violations) > 0 {
		t.Fatalf("%d runs' options were used in the wrong order, the first %s", len(violations), violations[0])
	}
	for _, st := range states {
		if !st.destroyed {
			t.Fatal("a run's options were terminated and never destroyed")
		}
	}
}

// TestRunCancelRace cancels thousands of runs at random moments, with
// nothing in between Run and ONNX Runtime: under the race detector, a
// terminate that is not ordered before the destroy of the run's options is
// reported.
func TestRunCancelRace(t *testing.T) {
	orttest.Load(t)
	hammerCancel(t, 3000)
}
