package main

import (
	"fmt"
	"testing"
)

// TestTuneSettings: every split of the cores, every batch, the arena on and
// off everywhere, spinning and pinned pool threads only where a stream has
// more than one thread.
func TestTuneSettings(t *testing.T) {
	key := func(s tuneSetting) string {
		k := fmt.Sprintf("%dx%db%d", s.Streams, s.Threads, s.Batch)
		if s.Spinning {
			k += "s"
		}
		if s.NoArena {
			k += "a"
		}
		if s.Pinned {
			k += "p"
		}
		return k
	}
	multi := func(prefix string) []string { // a stream of several threads
		return []string{prefix, prefix + "p", prefix + "a", prefix + "ap", prefix + "s", prefix + "sp", prefix + "sa", prefix + "sap"}
	}
	cat := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	for _, c := range []struct {
		cores int
		want  []string
	}{
		{1, []string{"1x1b8", "1x1b8a", "1x1b32", "1x1b32a"}},
		{2, cat(multi("1x2b8"), multi("1x2b32"), []string{"2x1b8", "2x1b8a", "2x1b32", "2x1b32a"})},
		{4, cat(multi("1x4b8"), multi("1x4b32"), multi("2x2b8"), multi("2x2b32"), []string{"4x1b8", "4x1b8a", "4x1b32", "4x1b32a"})},
	} {
		var got []string
		for _, s := range tuneSettings(c.cores, []int{8, 32}) {
			got = append(got, key(s))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%d cores:\n got %v\nwant %v", c.cores, got, c.want)
		}
	}
}
