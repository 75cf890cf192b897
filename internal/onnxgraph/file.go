package onnxgraph

import (
	"fmt"
	"os"
)

// ParseFile parses the ONNX model in the file path without copying it onto
// the heap: the file is mapped into memory (read into it where mapping is
// not available), so that its weights are read from the page cache as a
// rewrite writes them out and the kernel may drop them again. Close the
// model when done with it: neither the model nor any slice it handed out
// (Tensor.Raw, ...) may be used after.
func ParseFile(path string) (*Model, error) {
	b, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("onnxgraph: %w", err)
	}
	m, err := Parse(b)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("onnxgraph: %s: %w", path, err)
	}
	m.unmap = unmap
	return m, nil
}

// Close releases the file mapping of a model made by ParseFile. It does
// nothing for a model made by Parse, and is safe to call more than once.
func (m *Model) Close() error {
	if m == nil || m.unmap == nil {
		return nil
	}
	err := m.unmap()
	m.unmap, m.raw, m.Graph, m.graphField = nil, nil, nil, field{}
	if err != nil {
		return fmt.Errorf("onnxgraph: unmap: %w", err)
	}
	return nil
}

// readFile is mapFile where files are not mapped.
func readFile(path string) ([]byte, func() error, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
