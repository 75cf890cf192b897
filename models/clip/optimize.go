package clip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
)

// Probes are the inputs a rewritten graph is checked on against its
// original: preprocessed images and tokenized prompts (real ones, so that
// the activations the int8 scales meet are the ones of real use).
type Probes struct {
	// Pixels holds N images [N, 3, H, W] as the vision graph takes them;
	// for SigLIP 2 NaFlex, [N, Patches, C·p²] with each image's grid in
	// Grids (see VisionEncoder.EncodePatches).
	Pixels        []float32
	N, Height, Wd int
	Patches       int
	Grids         [][2]int
	// IDs and Masks are prompts' token ids and attention masks [B][T],
	// padded to one length.
	IDs, Masks [][]int64
}

// OptimizeOptions controls Optimize.
type OptimizeOptions struct {
	// Int8 quantizes the weight MatMuls after fusing (see onnxgraph.Quantize).
	Int8 bool
	// QKV is how self-attention's q, k, v projections are written:
	// "separate" (three MatMuls, then MultiHeadAttention), "split" (one
	// MatMul by the packed weights, split for MultiHeadAttention) or
	// "packed" (com.microsoft.Attention, float32 only); "": separate, split
	// with Int8.
	QKV string
	// Fusions are the fusions to apply, among "attention", "skip-layer-norm"
	// and "quick-gelu" (nil: attention and quick-gelu; "none": none).
	Fusions []string
	// Int8FullRange writes int8 weights over [-127, 127] (default 7 bits,
	// [-63, 63], exact on CPUs without VNNI).
	Int8FullRange bool
	// Int8Integer writes DynamicQuantizeLinear + MatMulInteger instead of
	// DynamicQuantizeMatMul (with Int8PerCall).
	Int8Integer bool
	// Int8PerCall makes the variant models.VariantOptimizedInt8PerCall:
	// activations quantized with one scale per call, as ONNX Runtime's
	// DynamicQuantizeMatMul does, instead of per row (the default,
	// models.VariantOptimizedInt8, see onnxgraph.QuantOptions.PerRow).
	Int8PerCall bool
	// Int8Static makes the variant models.VariantOptimizedInt8Static:
	// activations quantized with one constant scale and zero point per
	// MatMul input, over the range the fused float32 graph's activations
	// took on the calibration inputs (see onnxgraph.QuantOptions.Static):
	// each channel's smallest and largest value, no percentile, so that no
	// calibration value is clipped.
	Int8Static bool
	// Calibration holds the inputs the static scheme measures its ranges
	// on (nil: the probes the rewrites are checked on). Its images
	// calibrate the vision graph, its prompts the text graph.
	Calibration *Probes
	// OutlierRatio is the outlier rule of the per-row and static schemes (see
	// onnxgraph.QuantOptions.OutlierRatio): 0 means DefaultOutlierRatio,
	// a negative value turns the rule off.
	OutlierRatio float64
	// Threads is ONNX Runtime's intra-op thread count for the checks.
	Threads int
	// Tolerance is the largest difference allowed between a float32
	// rewrite's output and the original's, relative to the original's
	// largest magnitude (default 1e-4).
	Tolerance float64
	// MinCosine is the smallest cosine similarity allowed between a row
	// (one image's or prompt's embedding, or one token's state) of an int8
	// graph's output and the original's (default 0.99).
	MinCosine float64
	// Graphs are the graphs to rewrite, among models.TextModelFile and
	// models.VisionModelFile (nil: both).
	Graphs []string
	// TempDir is where the rewritten graphs are written while they are
	// checked, removed before Optimize returns ("": the folder of the
	// model's variants in this program's cache, see
	// models.Model.VariantPath, else os.TempDir()). It needs room for about
	// the size of the largest graph and its rewrite.
	TempDir string
}

// OutputCheck is how one output of a rewritten graph compares with the
// original's on the probes.
type OutputCheck struct {
	Output string `json:"output"`
	// RelDiff is max |new − original| / max |original|; MaxAbs is max |new − original|.
	RelDiff float64 `json:"rel_diff"`
	MaxAbs  float64 `json:"max_abs_diff"`
	// MinCosine and MeanCosine are over the rows (embeddings, or token
	// and patch states) of the output.
	MinCosine  float64 `json:"min_cosine"`
	MeanCosine float64 `json:"mean_cosine"`
}

// Optimized is what Optimize did to one graph.
type Optimized struct {
	Graph   string                 `json:"graph"`   // canonical name
	Variant string                 `json:"variant"` // models.VariantOptimized, models.VariantOptimizedInt8, models.VariantOptimizedInt8PerCall or models.VariantOptimizedInt8Static
	Written string                 `json:"written,omitempty"`
	Fuse    *onnxgraph.FuseReport  `json:"fuse,omitempty"`
	Quant   *onnxgraph.QuantReport `json:"quant,omitempty"`
	Checks  []OutputCheck          `json:"checks,omitempty"`
	Passed  bool                   `json:"passed"`
	Error   string                 `json:"error,omitempty"`
	Probes  string                 `json:"probes,omitempty"` // what the check ran on
	// Calibration is what the static scheme's ranges were measured on.
	Calibration string `json:"calibration,omitempty"`
	// Timing is the check's runs of the probes through each graph (the
	// faster of two, after one that warms the session), in ONNX Runtime on
	// this machine.
	Timing *Timing `json:"timing,omitempty"`
}

// Timing is how long a run of the check's probes took through the
// original graph and through its rewrite, with the same threads.
type Timing struct {
	OriginalMs  float64 `json:"original_ms"`
	RewrittenMs float64 `json:"rewritten_ms"`
}

// Speedup is the original's time over the rewrite's (0 when unmeasured).
func (t *Timing) Speedup() float64 {
	if t == nil || t.RewrittenMs <= 0 {
		return 0
	}
	return t.OriginalMs / t.RewrittenMs
}

// ErrMissingOutput is matched (errors.Is) by the error of opening a graph
// that lacks an output the engine reads: a pooled-only export, whose token
// or patch states are missing.
var ErrMissingOutput = errors.New("clip: the graph lacks an output the encoder reads")

// ErrCheckFailed is wrapped by Optimize's error for a rewrite whose
// outputs strayed past the tolerance: it was not saved.
var ErrCheckFailed = errors.New("clip: the rewritten graph's outputs differ from the original's past the tolerance")

// Optimize rewrites the text and vision graphs m serves (open it with
// models.VariantPlain to start from its own graphs): fused
// (onnxgraph.Fuse), then int8 when opts.Int8. Each rewrite is run next to
// its original in ONNX Runtime on the probes, and handed to save only when
// its outputs agree: float32 rewrites within opts.Tolerance, int8 ones
// with every row's cosine at least opts.MinCosine. save stores a graph
// (see models.Model.SaveVariant) and returns where. A graph that fails the
// check, or that cannot be rewritten, is reported in its Optimized and in
// the error, and not saved.
func Optimize(ctx context.Context, m *models.Model, p Probes, opts OptimizeOptions,
	save func(o *Optimized, write func(io.Writer) error) (string, error)) ([]Optimized, error) {
	if opts.Tolerance == 0 {
		opts.Tolerance = 1e-4
	}
	if opts.MinCosine == 0 {
		opts.MinCosine = 0.99
	}
	variant := models.VariantOptimized
	switch {
	case opts.Int8PerCall && opts.Int8Static:
		return nil, errors.New("clip: the per-call and static int8 schemes are two; choose one")
	case opts.Int8 && opts.Int8PerCall:
		variant = models.VariantOptimizedInt8PerCall
	case opts.Int8 && opts.Int8Static:
		variant = models.VariantOptimizedInt8Static
		if opts.Int8Integer {
			return nil, errors.New("clip: DynamicQuantizeLinear + MatMulInteger is a form of the per-call scheme; the static one writes MatMulIntegerToFloat")
		}
	case opts.Int8:
		variant = models.VariantOptimizedInt8
		if opts.Int8Integer {
			return nil, errors.New("clip: DynamicQuantizeLinear + MatMulInteger is a form of the per-call scheme; the per-row one writes MatMulIntegerToFloat")
		}
	}
	var out []Optimized
	var errs []error
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		o := Optimized{Graph: g, Variant: variant}
		if !m.Has(g) || (opts.Graphs != nil && !slices.Contains(opts.Graphs, g)) {
			continue
		}
		if err := optimizeGraph(ctx, m, g, p, opts, &o, save); err != nil {
			o.Error = err.Error()
			errs = append(errs, fmt.Errorf("clip: optimize %s: %w", m.Path(g), err))
		}
		out = append(out, o)
	}
	return out, errors.Join(errs...)
}

// DefaultOutlierRatio is the outlier rule's threshold: a layer norm whose
// largest |gain| is at least this many times its median |gain| has outlier
// channels. Measured: the layer norms of the ViT-B/32-size random-weight
// model reach 1.41, the built-in model's 1.60; its copy with three channels
// of the gains ×40 (make_clip.py --outliers 40) reaches 50.6.
const DefaultOutlierRatio = 8

// quantOptions are the int8 rewrite's options.
func (opts OptimizeOptions) quantOptions() onnxgraph.QuantOptions {
	if opts.Int8PerCall {
		return onnxgraph.QuantOptions{FullRange: opts.Int8FullRange, Integer: opts.Int8Integer}
	}
	ratio := opts.OutlierRatio
	if ratio == 0 {
		ratio = DefaultOutlierRatio
	}
	return onnxgraph.QuantOptions{FullRange: opts.Int8FullRange, PerRow: !opts.Int8Static, OutlierRatio: max(ratio, 0)}
}

// fuseOptions reads QKV and Fusions.
func (opts OptimizeOptions) fuseOptions() (onnxgraph.FuseOptions, error) {
	qkv := opts.QKV
	if qkv == "" {
		qkv = "separate"
		if opts.Int8 {
			qkv = "split"
		}
	}
	switch {
	case qkv == "packed" && opts.Int8:
		return onnxgraph.FuseOptions{}, errors.New("clip: packed q, k, v projections keep their weights in float32 inside Attention; with int8 use split")
	case qkv != "separate" && qkv != "split" && qkv != "packed":
		return onnxgraph.FuseOptions{}, fmt.Errorf("clip: q, k, v projections %q: want separate, split or packed", qkv)
	}
	fuse := onnxgraph.FuseOptions{PackedQKV: qkv == "packed", SplitQKV: qkv == "split",
		NoAttention: true, NoSkipLayerNorm: true, NoBiasGelu: true}
	fusions := opts.Fusions
	if fusions == nil {
		fusions = []string{"attention", "quick-gelu"}
	}
	for _, f := range fusions {
		switch f {
		case "attention":
			fuse.NoAttention = false
		case "skip-layer-norm":
			fuse.NoSkipLayerNorm = false
		case "quick-gelu":
			fuse.NoBiasGelu = false
		case "none", "":
		default:
			return fuse, fmt.Errorf("clip: unknown fusion %q (attention, skip-layer-norm, quick-gelu, none)", f)
		}
	}
	return fuse, nil
}

func optimizeGraph(ctx context.Context, m *models.Model, g string, p Probes, opts OptimizeOptions, o *Optimized,
	save func(o *Optimized, write func(io.Writer) error) (string, error)) error {
	fuse, err := opts.fuseOptions()
	if err != nil {
		return err
	}
	orig, err := ort.ModelGraph(m, g)
	if err != nil {
		return err
	}
	tmp := tempGraphs{dir: opts.TempDir, name: g}
	if tmp.dir == "" {
		tmp.dir = variantFolder(m, o.Variant, g)
	}
	defer tmp.removeAll()
	cal := p
	if opts.Calibration != nil {
		cal = *opts.Calibration
	}
	rewritten, err := rewriteGraph(ctx, m, g, orig, fuse, opts, cal, o, &tmp)
	if err != nil {
		return err
	}
	// The rewrite's garbage goes back to the system before ONNX Runtime
	// loads the graphs: its allocations do not reuse the Go heap's pages.
	debug.FreeOSMemory()
	var pos *naflexPositions
	if g == models.VisionModelFile && m.Config().NaFlex() {
		if pos, err = readNaFlexPositions(m); err != nil {
			return err
		}
	}
	if o.Checks, o.Probes, o.Timing, err = compareGraphs(ctx, g, orig, ort.GraphFile(rewritten), p, pos, opts.Threads); err != nil {
		return err
	}
	o.Passed = true
	for _, c := range o.Checks {
		if opts.Int8 {
			if !(c.MinCosine >= opts.MinCosine) {
				o.Passed = false
			}
		} else if !(c.RelDiff <= opts.Tolerance) {
			o.Passed = false
		}
	}
	if !o.Passed {
		if opts.Int8 {
			return fmt.Errorf("%w (smallest cosine allowed %.4g): %s", ErrCheckFailed, opts.MinCosine, describeChecks(o.Checks))
		}
		return fmt.Errorf("%w (%.3g of the largest magnitude): %s", ErrCheckFailed, opts.Tolerance, describeChecks(o.Checks))
	}
	o.Written, err = save(o, func(w io.Writer) error {
		f, err := os.Open(rewritten)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	return err
}

// rewriteGraph writes the rewrite of the graph g of m (orig: its file, or
// its bytes for a model in memory) to a temporary file of tmp and returns
// the file's path: fused, then quantized with opts.Int8 (with
// opts.Int8Static, over the ranges the fused graph's activations take on
// cal). Neither the graph nor its rewrites are held on the heap: the
// source and the fused graph are mapped from their files (see
// onnxgraph.ParseFile) and each rewrite is written to its file as it is
// made, so that what a rewrite holds in memory is the graph being read and
// the weights it makes (the packed q, k, v projections, the int8 weights).
func rewriteGraph(ctx context.Context, m *models.Model, g string, orig ort.Graph, fuse onnxgraph.FuseOptions, opts OptimizeOptions, cal Probes, o *Optimized, tmp *tempGraphs) (string, error) {
	var src *onnxgraph.Model
	var err error
	if file := orig.Path(); file != "" {
		src, err = onnxgraph.ParseFile(file)
	} else {
		var raw []byte
		if raw, err = m.ReadFile(g); err == nil {
			src, err = onnxgraph.Parse(raw)
		}
	}
	if err != nil {
		return "", err
	}
	defer src.Close()
	if ext := src.ExternalFiles(); len(ext) > 0 {
		return "", fmt.Errorf("the graph keeps its weights in external data (%v), which rewrites do not handle yet", ext)
	}
	fused, err := tmp.write(func(w io.Writer) (err error) {
		o.Fuse, err = onnxgraph.Fuse(src, fuse, w)
		return err
	})
	if err != nil {
		return "", err
	}
	src.Close()
	if !opts.Int8 {
		return fused, nil
	}
	quant := opts.quantOptions()
	if opts.Int8Static {
		if quant.Static, o.Calibration, err = calibrate(ctx, g, fused, cal, opts.Threads, tmp); err != nil {
			return "", err
		}
	}
	fm, err := onnxgraph.ParseFile(fused)
	if err != nil {
		return "", fmt.Errorf("the fused graph: %w", err)
	}
	defer fm.Close()
	q, err := tmp.write(func(w io.Writer) (err error) {
		o.Quant, err = onnxgraph.Quantize(fm, quant, w)
		return err
	})
	if err != nil {
		return "", err
	}
	fm.Close()
	tmp.remove(fused)
	return q, nil
}

// variantFolder returns the folder of this program's cache where the
// variant of m's graph g is kept, made if need be, or "" (os.TempDir())
// when there is none: a rewrite's temporary files go beside the variant,
// on a disk rather than in a temporary folder that may be held in memory.
func variantFolder(m *models.Model, variant, g string) string {
	p, err := m.VariantPath(variant, g)
	if err != nil {
		return ""
	}
	dir := filepath.Dir(p)
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	return dir
}

// tempGraphs are the temporary files a rewrite writes its graphs to.
type tempGraphs struct {
	dir   string // "": os.TempDir()
	name  string // the canonical name of the graph rewritten
	paths []string
}

// write creates a temporary file, has fill write the graph into it and
// returns its path.
func (t *tempGraphs) write(fill func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(t.dir, "."+path.Base(t.name)+".rewrite-*")
	if err != nil {
		return "", fmt.Errorf("a temporary file for the rewritten graph: %w", err)
	}
	t.paths = append(t.paths, f.Name())
	err = fill(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("the rewritten graph: %w", cerr)
	}
	if err != nil {
		return "", err
	}
	return f.Name(), nil
}

// remove deletes the temporary file path.
func (t *tempGraphs) remove(path string) {
	for i, p := range t.paths {
		if p == path {
			os.Remove(p)
			t.paths = slices.Delete(t.paths, i, i+1)
			return
		}
	}
}

// removeAll deletes the temporary files left.
func (t *tempGraphs) removeAll() {
	for _, p := range t.paths {
		os.Remove(p)
	}
	t.paths = nil
}

func describeChecks(cs []OutputCheck) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s: relative difference %.3g, max |Δ| %.3g, cosine min %.5f mean %.5f", c.Output, c.RelDiff, c.MaxAbs, c.MinCosine, c.MeanCosine)
	}
	return s
}

// compareGraphs runs both graphs of the canonical graph name on the probes
// and compares their outputs, and times each (see timeRuns); pos is a
// SigLIP 2 NaFlex model's position table (nil otherwise).
func compareGraphs(ctx context.Context, name string, orig, rewritten ort.Graph, p Probes, pos *naflexPositions, threads int) ([]OutputCheck, string, *Timing, error) {
	switch name {
	case models.TextModelFile:
		if len(p.IDs) == 0 {
			return nil, "", nil, errors.New("no prompts to check the text graph on")
		}
		var res [2][]TextEncoding
		var ms [2]float64
		for i, g := range []ort.Graph{orig, rewritten} {
			enc, err := openGraph(g, TextOptions{Threads: threads}, openText)
			if err != nil {
				return nil, "", nil, err
			}
			ms[i], err = timeRuns(func() (err error) { res[i], err = enc.Encode(ctx, p.IDs, p.Masks); return err })
			closeChecked(enc)
			if err != nil {
				return nil, "", nil, err
			}
		}
		var states, embeds [2][][]float32
		for i := range res {
			for _, r := range res[i] {
				for t := 0; t < r.T; t++ {
					if r.Mask == nil || r.Mask[t] != 0 {
						states[i] = append(states[i], r.States[t*r.Width:(t+1)*r.Width])
					}
				}
				if r.Embeds != nil {
					embeds[i] = append(embeds[i], r.Embeds)
				}
			}
		}
		checks := []OutputCheck{compareRows("last_hidden_state", states[0], states[1])}
		if len(embeds[0]) > 0 {
			checks = append(checks, compareRows("text_embeds", embeds[0], embeds[1]))
		}
		return checks, fmt.Sprintf("%d prompts", len(p.IDs)), &Timing{OriginalMs: ms[0], RewrittenMs: ms[1]}, nil
	case models.VisionModelFile:
		if p.N == 0 {
			return nil, "", nil, errors.New("no images to check the vision graph on")
		}
		var res [2][]VisionEncoding
		var ms [2]float64
		for i, g := range []ort.Graph{orig, rewritten} {
			enc, err := openGraph(g, VisionOptions{Threads: threads}, openVision)
			if err != nil {
				return nil, "", nil, err
			}
			encode := func() (err error) { res[i], err = enc.Encode(ctx, p.Pixels, p.N, p.Height, p.Wd); return err }
			if enc.naflex = pos; enc.NaFlex() {
				encode = func() (err error) { res[i], err = enc.EncodePatches(ctx, p.Pixels, p.Grids, p.Patches); return err }
			}
			ms[i], err = timeRuns(encode)
			closeChecked(enc)
			if err != nil {
				return nil, "", nil, err
			}
		}
		var states, embeds [2][][]float32
		for i := range res {
			for _, r := range res[i] {
				w := len(r.States) / max(r.Tokens, 1)
				for t := 0; t < r.Tokens; t++ {
					states[i] = append(states[i], r.States[t*w:(t+1)*w])
				}
				if r.Embeds != nil {
					embeds[i] = append(embeds[i], r.Embeds)
				}
			}
		}
		checks := []OutputCheck{compareRows("last_hidden_state", states[0], states[1])}
		if len(embeds[0]) > 0 {
			checks = append(checks, compareRows("image_embeds", embeds[0], embeds[1]))
		}
		return checks, fmt.Sprintf("%d images", p.N), &Timing{OriginalMs: ms[0], RewrittenMs: ms[1]}, nil
	}
	return nil, "", nil, fmt.Errorf("no check for the graph %s", name)
}

// closeChecked closes a check's encoder and hands what its session
// freed back to the system (ort.ReleaseFreed): a float32 session leaves
// about its graph's size in the C allocator's heap, which the next stage
// (a rewrite on the Go heap, or a session of another size) would not
// reuse.
func closeChecked(enc io.Closer) {
	enc.Close()
	ort.ReleaseFreed()
}

// timeRuns runs f three times, the first to warm the session (its
// allocations and pre-packed weights), and returns the faster of the other
// two runs in milliseconds: on a machine shared with other work the faster
// run is the closer to the graph's own cost.
func timeRuns(f func() error) (float64, error) {
	if err := f(); err != nil {
		return 0, err
	}
	best := math.Inf(1)
	for range 2 {
		start := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		best = min(best, float64(time.Since(start).Microseconds())/1000)
	}
	return best, nil
}

// compareRows compares two lists of rows of one output.
func compareRows(name string, a, b [][]float32) OutputCheck {
	c := OutputCheck{Output: name, MinCosine: 1}
	var big float64
	for i := range a {
		var dot, na, nb float64
		for j := range a[i] {
			x, y := float64(a[i][j]), float64(b[i][j])
			c.MaxAbs = math.Max(c.MaxAbs, math.Abs(x-y))
			big = math.Max(big, math.Abs(x))
			dot += x * y
			na += x * x
			nb += y * y
		}
		cos := dot / math.Sqrt(na*nb)
		if na == 0 && nb == 0 {
			cos = 1
		}
		c.MinCosine = math.Min(c.MinCosine, cos)
		c.MeanCosine += cos
	}
	if len(a) > 0 {
		c.MeanCosine /= float64(len(a))
	}
	if len(a) != len(b) {
		c.MinCosine, c.MeanCosine, c.RelDiff = math.NaN(), math.NaN(), math.NaN()
		return c
	}
	c.RelDiff = c.MaxAbs / math.Max(big, 1e-30)
	return c
}
