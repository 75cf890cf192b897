package batch

import (
	"sync/atomic"
	"testing"
)

// TestTailShare follows two streams of batch 32 through the end of a job of
// 200 images: full batches while the walk runs, then shares of what is
// left, so that the last batches are of about the same size on both streams
// (not one of 32 on one stream and one of 8 on the other), down to the floor
// of 4; every image is taken once.
func TestTailShare(t *testing.T) {
	var walked atomic.Bool
	var seen atomic.Int64
	tail := &tailShare{walked: &walked, seen: &seen, streams: 2}
	take := func() int {
		tail.taken.Add(1)
		n := tail.limit(32)
		left := int(seen.Load() - tail.taken.Load() + 1)
		n = min(n, left)
		tail.taken.Add(int64(n - 1))
		return n
	}
	seen.Store(140) // the walk is still going: the total is not known
	var got []int
	for range 4 {
		got = append(got, take())
	}
	walked.Store(true)
	seen.Store(200)
	for tail.taken.Load() < 200 {
		got = append(got, take())
	}
	want := []int{32, 32, 32, 32, 32, 20, 10, 5, 4, 1}
	if len(got) != len(want) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batches %v, want %v", got, want)
		}
	}
	// An image that went to the manifest before any stream (done before,
	// unreadable) leaves the streams' share.
	tail.taken.Store(190)
	if n := tail.limit(8); n != 6 {
		t.Errorf("11 left of batch 8 on 2 streams: limit %d, want 6 (ceil(11/2), under the batch)", n)
	}
	if n := tail.limit(64); n != 8 {
		t.Errorf("11 left of batch 64: limit %d, want the floor 8", n)
	}
}
