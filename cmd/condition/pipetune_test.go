package main

import (
	"fmt"
	"testing"
)

// TestTuneSettings: every split of the cores, every batch, spinning only
// where a stream has more than one thread.
func TestTuneSettings(t *testing.T) {
	for _, c := range []struct {
		cores int
		want  []string
	}{
		{1, []string{"1x1b8", "1x1b32"}},
		{2, []string{"1x2b8", "1x2b8s", "1x2b32", "1x2b32s", "2x1b8", "2x1b32"}},
		{4, []string{"1x4b8", "1x4b8s", "1x4b32", "1x4b32s", "2x2b8", "2x2b8s", "2x2b32", "2x2b32s", "4x1b8", "4x1b32"}},
	} {
		var got []string
		for _, s := range tuneSettings(c.cores, []int{8, 32}) {
			k := fmt.Sprintf("%dx%db%d", s.Streams, s.Threads, s.Batch)
			if s.Spinning {
				k += "s"
			}
			got = append(got, k)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%d cores: %v, want %v", c.cores, got, c.want)
		}
	}
}
