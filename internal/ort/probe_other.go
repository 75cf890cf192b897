//go:build !linux && !darwin

package ort

import (
	"errors"
	"runtime"
)

// Probe is not implemented on this system.
func Probe(path string) (string, error) {
	return "", errors.New("ort: probing a library is not supported on " + runtime.GOOS)
}
