package s3test

import "testing"

// TestFreePortsDistinct: the four ports and their gRPC ports (+10000) are
// eight different numbers, every time (two services once got the same
// port when each was chosen and released alone).
func TestFreePortsDistinct(t *testing.T) {
	for range 200 {
		ports, err := freePorts()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			for _, q := range []int{p, p + 10000} {
				if seen[q] || q <= 0 || q > 65535 {
					t.Fatalf("ports %v: %d repeated or out of range", ports, q)
				}
				seen[q] = true
			}
		}
	}
}
