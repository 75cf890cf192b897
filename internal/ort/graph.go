package ort

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	onnx "github.com/yalue/onnxruntime_go"

	"github.com/conditionhq/condition/internal/onnxgraph"
)

// Graph is an ONNX graph to inspect or run: a file on disk, which ONNX
// Runtime opens by its path so that it finds initializers kept in side files
// beside it (external data, as exporters write for graphs over 2 GB), or
// bytes in memory (a model embedded in the binary), which must hold all
// their initializers.
type Graph struct {
	name string
	path string
	data []byte
}

// GraphFile returns the graph in the file path. Its external data, if any,
// is looked for in the file's folder.
func GraphFile(path string) Graph { return Graph{name: path, path: path} }

// GraphBytes returns a graph held in memory; name (a file path, or a path
// inside a model) is used in errors.
func GraphBytes(data []byte, name string) Graph { return Graph{name: name, data: data} }

// ModelFiles is the part of a models.Model that ModelGraph uses.
type ModelFiles interface {
	Dir() string
	Path(name string) string
	ReadFile(name string) ([]byte, error)
}

// ModelGraph returns one of a model's graphs (name is the canonical name,
// such as onnx/vision_model.onnx): the file on disk when the model is on disk,
// so that external data beside it is found, else the bytes the model serves.
func ModelGraph(m ModelFiles, name string) (Graph, error) {
	if m.Dir() != "" {
		p := m.Path(name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return GraphFile(p), nil
		}
	}
	b, err := m.ReadFile(name)
	if err != nil {
		return Graph{}, err
	}
	return GraphBytes(b, m.Path(name)), nil
}

// Name returns the file path or the name given to GraphBytes.
func (g Graph) Name() string { return g.name }

// Path returns the file the graph is read from, or "" for a graph in memory.
func (g Graph) Path() string { return g.path }

// Inspect returns the graph's inputs (those a caller feeds: not
// initializers) and outputs, with the types and shapes the graph declares.
// It reads the graph's framing and its inputs' and outputs' descriptions,
// not its weights: ONNX Runtime's own inspection loads and optimises the
// whole model, seconds for a real-size CLIP, and opening an encoder would
// pay that twice. ONNX Runtime is loaded with the default search if it is
// not loaded yet (a session follows).
func (g Graph) Inspect() (inputs, outputs []IOInfo, err error) {
	if err := ensureLoaded(); err != nil {
		return nil, nil, err
	}
	if err := g.checkInMemory(); err != nil {
		return nil, nil, err
	}
	r, size, done, err := g.reader()
	if err != nil {
		return nil, nil, fmt.Errorf("ort: %w", err)
	}
	defer done()
	in, out, err := onnxgraph.GraphIO(r, size)
	if err != nil {
		return nil, nil, fmt.Errorf("ort: %s: %w", g.name, err)
	}
	return valueInfos(in), valueInfos(out), nil
}

// InspectLoaded returns the graph's inputs and outputs as ONNX Runtime
// reports them after loading the graph, with the output sizes its shape
// inference fills in where the graph leaves them open. It loads the whole
// graph (seconds for a real-size model): use it when Inspect's declared
// shapes are not enough.
func (g Graph) InspectLoaded() (inputs, outputs []IOInfo, err error) {
	if err := ensureLoaded(); err != nil {
		return nil, nil, err
	}
	if err := g.checkInMemory(); err != nil {
		return nil, nil, err
	}
	var in, out []onnx.InputOutputInfo
	if g.path != "" {
		in, out, err = onnx.GetInputOutputInfo(g.path)
	} else {
		in, out, err = onnx.GetInputOutputInfoWithONNXData(g.data)
	}
	if err != nil {
		return nil, nil, g.loadError(err)
	}
	return ioInfos(in), ioInfos(out), nil
}

// UndeclaredSizeError wraps the error of a use of a graph's inputs and
// outputs that needed a size the graph leaves open (see WithIO).
type UndeclaredSizeError struct{ Err error }

func (e *UndeclaredSizeError) Error() string { return e.Err.Error() }

func (e *UndeclaredSizeError) Unwrap() error { return e.Err }

// InspectError is WithIO's error when the graph's inputs and outputs could
// not be read.
type InspectError struct{ Err error }

func (e *InspectError) Error() string { return e.Err.Error() }

func (e *InspectError) Unwrap() error { return e.Err }

// WithIO returns use(inputs, outputs) with the graph's declared inputs and
// outputs (Inspect, cheap). When use fails with an *UndeclaredSizeError, it
// calls use once more with ONNX Runtime's own (InspectLoaded, which loads
// the graph): its shape inference may fill in the size. A failure to
// inspect the graph is an *InspectError; use's errors are returned as they
// are.
func WithIO[T any](g Graph, use func(inputs, outputs []IOInfo) (T, error)) (T, error) {
	var zero T
	ins, outs, err := g.Inspect()
	if err != nil {
		return zero, &InspectError{err}
	}
	v, err := use(ins, outs)
	var open *UndeclaredSizeError
	if !errors.As(err, &open) {
		return v, err
	}
	if ins, outs, err = g.InspectLoaded(); err != nil {
		return zero, &InspectError{err}
	}
	return use(ins, outs)
}

// reader returns the graph's bytes for the onnxgraph skimmers, which read
// only its framing: the file, or the bytes in memory. done closes the file.
func (g Graph) reader() (r io.ReaderAt, size int64, done func(), err error) {
	if g.path == "" {
		return bytes.NewReader(g.data), int64(len(g.data)), func() {}, nil
	}
	f, err := os.Open(g.path)
	if err != nil {
		return nil, 0, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	return f, st.Size(), func() { f.Close() }, nil
}

// valueInfos converts declared value infos to IOInfos as ONNX Runtime
// reports them: -1 for a dimension without a fixed size.
func valueInfos(vs []onnxgraph.ValueInfo) []IOInfo {
	out := make([]IOInfo, len(vs))
	for i, v := range vs {
		info := IOInfo{Name: v.Name, Tensor: v.Tensor}
		if v.Tensor {
			info.Type = elementType(onnx.TensorElementDataType(v.ElemType))
			if v.HasShape {
				info.Shape = make([]int64, len(v.Shape))
				for k, d := range v.Shape {
					info.Shape[k] = -1
					if d.Param == "" && d.Value > 0 {
						info.Shape[k] = d.Value
					}
				}
			}
		}
		out[i] = info
	}
	return out
}

// checkInMemory refuses a graph in memory whose initializers live in external
// files: ONNX Runtime would look for them relative to the working folder.
func (g Graph) checkInMemory() error {
	if g.path != "" {
		return nil
	}
	ext, err := onnxgraph.ExternalDataFiles(bytes.NewReader(g.data), int64(len(g.data)))
	if err != nil {
		return nil // ONNX Runtime says what is wrong with it
	}
	if len(ext) > 0 {
		return fmt.Errorf("ort: %s keeps its initializers in external data (%s), which ONNX Runtime can only find beside the graph's file on disk; "+
			"this graph was given as bytes (open the model from a directory or the hub cache, not from memory)", g.name, strings.Join(ext, ", "))
	}
	return nil
}

// loadError explains a failure to load a graph from a file: when the graph
// names external data files that are not beside it, the error names them.
func (g Graph) loadError(err error) error {
	if g.path != "" {
		if missing := missingExternal(g.path); len(missing) > 0 {
			verb := "are"
			if len(missing) == 1 {
				verb = "is"
			}
			return fmt.Errorf("ort: %s keeps its initializers in external data, and %s %s missing (it must sit beside the graph: "+
				"fetch it with the graph, or use an export that keeps its weights inside): %w",
				g.name, strings.Join(missing, ", "), verb, fs.ErrNotExist)
		}
	}
	return fmt.Errorf("ort: %s: %w", g.name, err)
}

// missingExternal returns the external data files that the graph in path
// names and that are not in its folder, as paths. It reads only the graph's
// framing and initializer headers, not its weights.
func missingExternal(path string) []string {
	r, size, done, err := GraphFile(path).reader()
	if err != nil {
		return nil
	}
	defer done()
	locs, err := onnxgraph.ExternalDataFiles(r, size)
	if err != nil {
		return nil
	}
	var missing []string
	for _, loc := range locs {
		p := filepath.Join(filepath.Dir(path), filepath.FromSlash(loc))
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	return missing
}

// NewSession creates a session over the graph, feeding the named inputs and
// fetching the named outputs.
func (g Graph) NewSession(inputs, outputs []string, opts SessionOptions) (*Session, error) {
	if err := ensureLoaded(); err != nil {
		return nil, err
	}
	name := g.name
	if len(inputs) == 0 || len(outputs) == 0 {
		return nil, fmt.Errorf("ort: %s: a session needs at least one input and one output", name)
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("ort: %s: thread count %d is negative", name, opts.Threads)
	}
	if err := g.checkInMemory(); err != nil {
		return nil, err
	}
	so, err := onnx.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("ort: %s: session options: %w", name, err)
	}
	defer so.Destroy()
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, fmt.Errorf("ort: %s: set %d threads: %w", name, opts.Threads, err)
		}
	}
	if opts.NoSpinning {
		if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			return nil, fmt.Errorf("ort: %s: disable spinning: %w", name, err)
		}
	}
	if opts.NoArena {
		if err := so.SetCpuMemArena(false); err != nil {
			return nil, fmt.Errorf("ort: %s: memory arena off: %w", name, err)
		}
	}
	if opts.PinThreads && opts.Threads > 1 {
		if err := so.AddSessionConfigEntry("session.intra_op_thread_affinities", threadAffinities(opts.Threads)); err != nil {
			return nil, fmt.Errorf("ort: %s: thread affinities: %w", name, err)
		}
	}
	if opts.NoPrepack {
		if err := so.AddSessionConfigEntry("session.disable_prepacking", "1"); err != nil {
			return nil, fmt.Errorf("ort: %s: disable pre-packing: %w", name, err)
		}
	}
	if opts.ProfilePrefix != "" {
		if err := so.EnableProfiling(opts.ProfilePrefix); err != nil {
			return nil, fmt.Errorf("ort: %s: profiling: %w", name, err)
		}
	}
	var s *onnx.DynamicAdvancedSession
	if g.path != "" {
		s, err = onnx.NewDynamicAdvancedSession(g.path, inputs, outputs, so)
	} else {
		s, err = onnx.NewDynamicAdvancedSessionWithONNXData(g.data, inputs, outputs, so)
	}
	if err != nil {
		return nil, g.loadError(fmt.Errorf("create session: %w", err))
	}
	return &Session{name: name, inputs: append([]string(nil), inputs...), outputs: append([]string(nil), outputs...), s: s}, nil
}

// threadAffinities is ONNX Runtime's session.intra_op_thread_affinities for
// threads intra-op threads: one entry per pool thread (threads − 1; the
// calling thread is the first and is not pinned), ';'-separated, each a
// 1-based logical processor: "2;3;…", the pool threads beside the first
// processor, wrapping around the processors this process may use.
func threadAffinities(threads int) string {
	n := max(runtime.NumCPU(), 1)
	parts := make([]string, 0, threads-1)
	for i := 1; i < threads; i++ {
		parts = append(parts, strconv.Itoa(i%n+1))
	}
	return strings.Join(parts, ";")
}
