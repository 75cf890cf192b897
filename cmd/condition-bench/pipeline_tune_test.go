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

// TestPickTuned: a setting that changes fewer defaults wins when the
// rounds cannot tell it from the fastest, and not when they can.
func TestPickTuned(t *testing.T) {
	s := func(median float64, rates []float64, spin, noArena, pin bool) tuneSetting {
		return tuneSetting{Median: median, Rates: rates, Spinning: spin, NoArena: noArena, Pinned: pin}
	}
	for _, tc := range []struct {
		name string
		in   []tuneSetting
		want int
	}{
		{"the fastest changes nothing", []tuneSetting{s(13, []float64{12, 14}, false, false, false), s(12, []float64{11, 13}, true, false, false)}, 0},
		{"overlapping rounds, fewer changes", []tuneSetting{
			s(13.5, []float64{12.5, 14.5}, true, true, true), s(13, []float64{12, 14}, true, false, false),
			s(12.4, []float64{11.8, 13}, false, false, false), s(12.3, []float64{12.2, 12.4}, false, true, false)}, 2},
		{"clearly faster", []tuneSetting{s(20, []float64{19.5, 20.5}, false, true, false), s(12, []float64{11, 13}, false, false, false)}, 0},
		{"the fastest of the fewest changes", []tuneSetting{
			s(14, []float64{13, 15}, true, true, false), s(13.8, []float64{13.5, 14}, false, true, false), s(13.6, []float64{13.4, 13.8}, true, false, false)}, 1},
	} {
		if got := pickTuned(tc.in); got != tc.want {
			t.Errorf("%s: picked %d, want %d", tc.name, got, tc.want)
		}
	}
}
