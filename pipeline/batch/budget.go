package batch

import "sync"

// readAheadBytes bounds the files read ahead of the encoder streams.
const readAheadBytes = 256 << 20

// byteBudget bounds the bytes of files read ahead of the encoder streams:
// a count of files alone would let a folder of large photos hold hundreds
// of megabytes in the queue.
type byteBudget struct {
	mu   sync.Mutex
	cond sync.Cond
	used int64
	max  int64
}

func newByteBudget(max int64) *byteBudget {
	b := &byteBudget{max: max}
	b.cond.L = &b.mu
	return b
}

// take waits until n more bytes fit, then counts them. A file larger than
// the whole budget is let through when nothing else is held, so that it
// cannot wait forever.
func (b *byteBudget) take(n int64) {
	b.mu.Lock()
	for b.used > 0 && b.used+n > b.max {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
}

// give returns n bytes taken before.
func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}
