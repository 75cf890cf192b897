package batch

import (
	"testing"
	"time"
)

func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	b.take(60)
	b.take(30) // 90 of 100
	got := make(chan struct{})
	go func() {
		b.take(20) // 110: waits
		close(got)
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("take(20) with 90 of 100 bytes held went through")
	default:
	}
	b.give(30) // 60 held: 20 more fit
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("take(20) still waiting after 30 of 90 bytes were given back")
	}
	b.give(60)
	b.give(20)
	// A file larger than the whole budget passes when nothing is held.
	done := make(chan struct{})
	go func() { b.take(1000); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("take(1000) of a 100-byte budget with nothing held never went through")
	}
	if b.used != 1000 {
		t.Errorf("used = %d, want 1000", b.used)
	}
}
