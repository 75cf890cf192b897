package main

import "testing"

// TestParseSize: sizes with and without units, decimal and binary, and
// what is refused.
func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1234", 1234}, {"2GiB", 2 << 30}, {"2 gib", 2 << 30}, {"500MB", 500_000_000}, {"1.5G", 3 << 29},
		{"64k", 65536}, {"7B", 7}, {"1TB", 1_000_000_000_000},
	} {
		if got, err := parseSize(c.in); err != nil || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "-1", "GiB", "2PB", "1e3", "2 GiB x", "1..2M", "99999999999TiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d; want an error", in, got)
		}
	}
}
