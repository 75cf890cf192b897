//go:build !unix

package onnxgraph

// mapFile reads the file path: files are not mapped on this system.
func mapFile(path string) ([]byte, func() error, error) { return readFile(path) }
