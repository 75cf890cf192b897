//go:build !unix

package text

import "time"

// processCPU is not measured here; benchmarks then skip the per-CPU metric.
func processCPU() time.Duration { return 0 }
