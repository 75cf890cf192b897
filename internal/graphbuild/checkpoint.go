package graphbuild

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/conditionhq/condition/tensorio"
)

// Checkpoint file names in a Hugging Face model folder.
const (
	SafetensorsFile = "model.safetensors"
	IndexFile       = "model.safetensors.index.json"
)

// Checkpoint is a model's safetensors weights, one file or shards listed
// by model.safetensors.index.json. Only the headers are read when it is
// opened; a tensor's bytes are read when asked for, by the offsets its
// header gives. Close releases the files.
type Checkpoint struct {
	files   []*os.File
	headers []*tensorio.Header
	paths   []string
	where   map[string]int // tensor name → file
	size    int64          // bytes of tensor data, all files
	// views, when not nil, are the tensors served under Hugging Face's
	// names made from OpenCLIP's (OpenOpenCLIPCheckpoint).
	views map[string]view
}

// OpenCheckpoint opens the safetensors weights of the model folder dir:
// model.safetensors, else the shards model.safetensors.index.json names.
// Every header is read and checked (offsets inside the file, sizes matching
// shapes and dtypes, no overlaps); a tensor found in two shards, or listed
// by the index in a shard that lacks it, is an error.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	c := &Checkpoint{where: map[string]int{}}
	single := filepath.Join(dir, SafetensorsFile)
	if _, err := os.Stat(single); err == nil {
		if err := c.add(single); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	idx := filepath.Join(dir, IndexFile)
	b, err := os.ReadFile(idx)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("graphbuild: %s has neither %s nor %s", dir, SafetensorsFile, IndexFile)
	}
	if err != nil {
		return nil, fmt.Errorf("graphbuild: %w", err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, fmt.Errorf("graphbuild: %s: %w", idx, err)
	}
	if len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("graphbuild: %s: weight_map is empty", idx)
	}
	var shards []string
	seen := map[string]bool{}
	for name, f := range index.WeightMap {
		if !fs.ValidPath(f) || f == "." || strings.Contains(f, `\`) {
			return nil, fmt.Errorf("graphbuild: %s: tensor %q is in %q, expected a file name inside the model's folder", idx, name, f)
		}
		if !seen[f] {
			seen[f] = true
			shards = append(shards, f)
		}
	}
	sort.Strings(shards)
	for _, f := range shards {
		if err := c.add(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
			c.Close()
			return nil, err
		}
	}
	for name, f := range index.WeightMap {
		i, ok := c.where[name]
		if !ok || filepath.Base(c.paths[i]) != filepath.Base(f) {
			c.Close()
			return nil, fmt.Errorf("graphbuild: %s lists tensor %q in %s, which does not hold it", idx, name, f)
		}
	}
	return c, nil
}

func (c *Checkpoint) add(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("graphbuild: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("graphbuild: %w", err)
	}
	h, err := tensorio.ReadSafetensorsHeader(f, st.Size())
	if err != nil {
		f.Close()
		return fmt.Errorf("graphbuild: %s: %w", path, err)
	}
	i := len(c.files)
	for name, info := range h.Tensors {
		if j, dup := c.where[name]; dup {
			f.Close()
			return fmt.Errorf("graphbuild: tensor %q is in both %s and %s", name, c.paths[j], path)
		}
		c.where[name] = i
		c.size += info.End - info.Begin
	}
	c.files, c.headers, c.paths = append(c.files, f), append(c.headers, h), append(c.paths, path)
	return nil
}

// Close closes the checkpoint's files.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	c.files = nil
	return errors.Join(errs...)
}

// Size returns the bytes of tensor data in the checkpoint.
func (c *Checkpoint) Size() int64 { return c.size }

// Files returns the checkpoint's files.
func (c *Checkpoint) Files() []string { return append([]string(nil), c.paths...) }

// Info returns a tensor's dtype and shape.
func (c *Checkpoint) Info(name string) (tensorio.TensorInfo, bool) {
	if info, ok := c.viewInfo(name); ok {
		return info, true
	}
	i, ok := c.where[name]
	if !ok {
		return tensorio.TensorInfo{}, false
	}
	return c.headers[i].Tensors[name], true
}

// Has reports whether the checkpoint holds the tensor name.
func (c *Checkpoint) Has(name string) bool {
	_, ok := c.Info(name)
	return ok
}

// Float32 reads a floating-point tensor (F32, F16, BF16 or F64) as float32.
// A checkpoint in OpenCLIP's layout serves its tensors under Hugging
// Face's names (OpenOpenCLIPCheckpoint).
func (c *Checkpoint) Float32(name string) ([]float32, error) {
	if v, ok := c.views[name]; ok {
		return c.viewFloat32(v)
	}
	return c.fileFloat32(name)
}

// fileFloat32 reads the tensor name as the file holds it.
func (c *Checkpoint) fileFloat32(name string) ([]float32, error) {
	i, ok := c.where[name]
	if !ok {
		return nil, fmt.Errorf("graphbuild: no tensor %q in the checkpoint", name)
	}
	h := c.headers[i]
	info := h.Tensors[name]
	if info.DType == tensorio.DTypeF32 && nativeLE {
		// Straight into the float32 slice: one read, no copy.
		v := make([]float32, (info.End-info.Begin)/4)
		if n, err := c.files[i].ReadAt(floatView(v), h.DataOffset+info.Begin); n < 4*len(v) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("graphbuild: %s: read tensor %q: %w", c.paths[i], name, err)
		}
		return v, nil
	}
	t, err := h.ReadTensor(c.files[i], name)
	if err != nil {
		return nil, fmt.Errorf("graphbuild: %s: %w", c.paths[i], err)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("graphbuild: %s: tensor %q: %w", c.paths[i], name, err)
	}
	return v, nil
}

// isFloat reports whether a checkpoint dtype converts to float32.
func isFloat(d tensorio.DType) bool {
	return d == tensorio.DTypeF32 || d == tensorio.DTypeF16 || d == tensorio.DTypeBF16 || d == tensorio.DTypeF64
}
