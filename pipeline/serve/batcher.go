package serve

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// batcher gathers concurrent requests' items into batches: up to maxBatch
// items, waiting at most maxWait after the first for more, and runs each
// batch with run on one of its workers. Its queue is bounded: submit fails
// with errBusy when it is full, so memory stays bounded whatever the load.
type batcher[In, Out any] struct {
	queue    chan *item[In, Out]
	maxBatch int
	maxWait  time.Duration
	run      func(ins []In) ([]Out, error)
	// coming, when set, reports whether more items are on their way (being
	// decoded by their requests): a batch waits for more only then, so a
	// lone request does not wait maxWait for others that never come.
	coming func() bool
	done   chan struct{}
	wg     sync.WaitGroup
	sizes  prometheus.Observer
	depth  prometheus.Gauge
}

// item is one request's part of a batch.
type item[In, Out any] struct {
	ctx context.Context
	in  In
	out chan result[Out]
}

type result[Out any] struct {
	v   Out
	err error
}

func newBatcher[In, Out any](workers, queue, maxBatch int, maxWait time.Duration, run func([]In) ([]Out, error), sizes prometheus.Observer, depth prometheus.Gauge) *batcher[In, Out] {
	b := &batcher[In, Out]{
		queue: make(chan *item[In, Out], max(queue, 1)), maxBatch: max(maxBatch, 1), maxWait: maxWait,
		run: run, done: make(chan struct{}), sizes: sizes, depth: depth,
	}
	for range max(workers, 1) {
		b.wg.Add(1)
		go b.work()
	}
	return b
}

// submit queues in and waits for its result. A full queue is errBusy at
// once; a cancelled ctx returns ctx's error at once, and the item is dropped
// from its batch if the batch has not started.
func (b *batcher[In, Out]) submit(ctx context.Context, in In) (Out, error) {
	it := &item[In, Out]{ctx: ctx, in: in, out: make(chan result[Out], 1)}
	var zero Out
	select {
	case <-b.done:
		return zero, errClosing
	default:
	}
	select {
	case b.queue <- it:
		b.depth.Inc()
	default:
		return zero, errBusy
	}
	select {
	case r := <-it.out:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// close stops the workers once the queued items are answered, and waits
// for them.
func (b *batcher[In, Out]) close() {
	close(b.done)
	b.wg.Wait()
}

func (b *batcher[In, Out]) work() {
	defer b.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]*item[In, Out], 0, b.maxBatch)
	for {
		var first *item[In, Out]
		select {
		case first = <-b.queue:
		case <-b.done:
			// Answer what is still queued, then stop.
			for {
				select {
				case it := <-b.queue:
					b.depth.Dec()
					it.out <- result[Out]{err: errClosing}
				default:
					return
				}
			}
		}
		b.depth.Dec()
		batch = append(batch[:0], first)
		if b.maxWait > 0 {
			timer.Reset(b.maxWait)
		gather:
			for len(batch) < b.maxBatch {
				select {
				case it := <-b.queue:
					b.depth.Dec()
					batch = append(batch, it)
					continue
				default:
				}
				if b.coming != nil && !b.coming() {
					break // nothing queued and nothing on its way
				}
				select {
				case it := <-b.queue:
					b.depth.Dec()
					batch = append(batch, it)
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		} else {
		drain:
			for len(batch) < b.maxBatch {
				select {
				case it := <-b.queue:
					b.depth.Dec()
					batch = append(batch, it)
				default:
					break drain
				}
			}
		}
		b.runBatch(batch)
	}
}

// runBatch runs the items whose requests are still waiting and answers
// each.
func (b *batcher[In, Out]) runBatch(batch []*item[In, Out]) {
	live := batch[:0]
	for _, it := range batch {
		if err := it.ctx.Err(); err != nil {
			it.out <- result[Out]{err: err} // the client left: not run
			continue
		}
		live = append(live, it)
	}
	if len(live) == 0 {
		return
	}
	ins := make([]In, len(live))
	for i, it := range live {
		ins[i] = it.in
	}
	b.sizes.Observe(float64(len(ins)))
	outs, err := b.run(ins)
	for i, it := range live {
		if err != nil {
			it.out <- result[Out]{err: err}
		} else {
			it.out <- result[Out]{v: outs[i]}
		}
	}
}
