package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the units parseSize takes, by lower-case name.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseSize parses a size in bytes: a whole or decimal number, then
// optionally a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB,
// GiB, TiB (powers of 1024; K, M, G, T alone too), in any case, with or
// without a space ("2GiB", "500 MB", "1.5G", "0").
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mul, ok := sizeUnits[unit]
	v, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || !ok {
		return 0, errors.New("want a size in bytes: a number, optionally with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), such as 2GiB or 500MB")
	}
	b := v * mul
	if b >= math.MaxInt64 {
		return 0, errors.New("too large")
	}
	return int64(math.Round(b)), nil
}
