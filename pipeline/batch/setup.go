package batch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision"
)

// job is a batch job over one engine and its prepared prompts.
type job struct {
	cfg          Config
	inputs       []string     // cfg.Inputs with brace patterns expanded
	shards       *shardSet    // the shards layout's writer; nil for the files layout
	index        *indexOutSet // the collection index's writer; nil without Config.Index
	sinks        []sink       // the outputs each image goes to, in the order its entry lists their files
	doneShards   sync.Map     // shard index → finished by an earlier run (bool)
	eng          *pipeline.Engine
	log          *slog.Logger
	prompts      pipeline.Prompts
	inH          int
	inW          int
	sources      []source         // j.inputs resolved
	dst          output           // cfg.Out resolved
	out          *outFolder       // where the job writes: dst's folder, or its staging folder
	stores       *objstore.Stores // object-store inputs (and outputs)
	ctx          context.Context  // the job's, for reads from stores
	man          *manifestFile
	manifestPath string
	prior        map[string]Entry
	settings     string
	baseMeta     map[string]string
	format       string
}

func (j *job) close() {
	if j.man != nil {
		j.man.Close()
	}
	if j.stores != nil {
		j.stores.Close()
	}
	if j.out != nil {
		j.out.Close()
	}
	if j.dst != nil {
		j.dst.close()
	}
}

func newJob(ctx context.Context, cfg Config) (_ *job, err error) {
	if cfg.Engine == nil {
		return nil, errors.New("batch: no engine")
	}
	if len(cfg.Inputs) == 0 && len(cfg.Lists) == 0 {
		return nil, errors.New("batch: no images given")
	}
	if cfg.Out == "" {
		return nil, errors.New("batch: no output folder given")
	}
	if len(cfg.Prompts) == 0 {
		return nil, errors.New("batch: no prompts given")
	}
	eng := cfg.Engine
	j := &job{cfg: cfg, eng: eng, log: cfg.Log, stores: &objstore.Stores{}, ctx: ctx}
	if j.log == nil {
		j.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	j.inH, j.inW = eng.InputSize()
	indexDType, err := j.checkLayout()
	if err != nil {
		return nil, err
	}
	cfg = j.cfg
	defer func() {
		if err != nil {
			j.close()
		}
	}()
	if j.inputs, err = expandInputs(cfg.Inputs); err != nil {
		return nil, &InputError{Path: strings.Join(cfg.Inputs, ", "), Err: err}
	}
	if j.sources, err = resolveInputs(j.inputs); err != nil {
		return nil, err
	}
	if err := checkInputs(ctx, j.stores, j.sources, cfg.Lists, cfg.Out); err != nil {
		return nil, err
	}
	// The prompt side: encoded and prepared once for the whole job.
	if j.prompts, err = eng.Prepare(ctx, cfg.Prompts...); err != nil {
		return nil, err
	}
	j.settle(indexDType)

	// Outputs: never over an earlier job's without Resume or Overwrite.
	name := cfg.Shard.ManifestName()
	if err := j.openOutputs(ctx, name, indexDType); err != nil {
		return nil, err
	}
	var prior []Entry
	if j.man, prior, err = openManifest(j.out, name, cfg.Resume); err != nil {
		return nil, err
	}
	j.prior = map[string]Entry{}
	other := 0
	for _, e := range prior {
		j.prior[e.Path] = e
		if e.Settings != j.settings {
			other++
		}
	}
	if other > 0 {
		j.log.Warn("resuming a job whose settings differ (other prompts, model, layer or options): its images are done again, and its files of other prompt numbers stay",
			"entries", other, "manifest", j.manifestPath)
	}
	return j, nil
}

// checkLayout checks the job's layout, format and index against each
// other, setting their defaults; it returns the index's dtype ("" without
// one).
func (j *job) checkLayout() (indexDType string, err error) {
	cfg := &j.cfg
	switch cfg.Layout {
	case "", "files":
	case "shards":
		if cfg.CaptionPrompt {
			return "", errors.New("batch: the shards layout stacks every image's prompts; captions (one more prompt per image) need the files layout")
		}
		if cfg.ShardSize <= 0 {
			cfg.ShardSize = 10000
		}
	default:
		return "", fmt.Errorf("batch: layout %q: want files or shards", cfg.Layout)
	}
	switch cfg.Format {
	case "", "safetensors":
		j.format = "safetensors"
	case "npz":
		j.format = "npz"
	default:
		return "", fmt.Errorf("batch: format %q: want safetensors or npz", cfg.Format)
	}
	if cfg.Windows && (cfg.Layout == "shards" || cfg.Index || cfg.Collection != nil) {
		return "", errors.New("batch: windows give each image a grid of its own aspect: they take the files layout, without the index")
	}
	if cfg.Index && cfg.Collection != nil {
		return "", errors.New("batch: the index goes either into index parts (Index) or into a collection (Collection), not both")
	}
	if cfg.Index {
		if indexDType, err = checkIndexOutDType(cfg.IndexDType); err != nil {
			return "", err
		}
		if j.eng.JointDim() <= 0 {
			return "", errors.New("batch: the collection index needs the engine in CLIP's joint space both ways (the default layer, both directions)")
		}
		if cfg.ShardSize <= 0 {
			cfg.ShardSize = 10000 // one index part every ShardSize images, in the files layout too
		}
	}
	return indexDType, nil
}

// settle sets the job's settings hash (what must match for --resume to
// skip an image) and the metadata every file of it carries.
func (j *job) settle(indexDType string) {
	cfg, eng := j.cfg, j.eng
	m, opts := eng.Model(), eng.Options()
	preJSON, _ := json.Marshal(eng.Preprocessor())
	dir := eng.Direction().String()
	settings := map[string]any{
		"model": m.Name(), "revision": m.Revision(), "prompts": cfg.Prompts, "direction": dir,
		"xattn": opts.Layer.String(), "per_head": cfg.PerHead, "truncate": opts.Truncate, "caption_prompt": cfg.CaptionPrompt,
		"layout": cfg.Layout, "shard_size": cfg.ShardSize,
		"heatmaps": cfg.Heatmaps, "format": j.format, "preprocessing": json.RawMessage(preJSON),
		"jpeg_decoder": vision.JPEGDecoder(), // its JPEG pixels differ by a few levels from the other's
	}
	if d := eng.JPEGDraft(); d > 0 {
		settings["jpeg_draft"] = d // only when set: the hashes of exact jobs stay as they were
	}
	if opts.Precision == pipeline.PrecisionInt8 {
		settings["precision"] = string(opts.Precision) // likewise: fp32 jobs keep their hashes
	}
	if opts.Readout != pipeline.ReadoutRaw {
		settings["readout"] = opts.Readout // likewise: raw jobs keep their hashes
	}
	if cfg.Windows {
		settings["windows"] = true // likewise
	}
	if cfg.Index {
		settings["index"], settings["index_dtype"] = true, indexDType // only when set, as jpeg_draft
	}
	if cfg.Collection != nil {
		settings["collection"] = cfg.Collection.URL // likewise; another collection does every image again
	}
	sb, _ := json.Marshal(settings)
	h := sha256.Sum256(sb)
	j.settings = hex.EncodeToString(h[:8])
	promptsJSON, _ := json.Marshal(cfg.Prompts)
	tokens := make([][]string, len(j.prompts))
	for k, ps := range j.prompts {
		tokens[k] = ps.Tokens
	}
	tokJSON, _ := json.Marshal(tokens)
	j.baseMeta = map[string]string{
		"format": "condition/v1", "model": m.Name(), "revision": m.Revision(), "prompts": string(promptsJSON),
		"tokens": string(tokJSON), "preprocessing": string(preJSON), "direction": dir,
		"xattn": opts.Layer.String(), "program_version": cfg.Version, "settings": j.settings,
		"jpeg_decoder": vision.JPEGDecoder(),
	}
	if d := eng.JPEGDraft(); d > 0 {
		j.baseMeta["jpeg_draft"] = strconv.Itoa(d)
	}
	if opts.Readout != pipeline.ReadoutRaw {
		j.baseMeta["readout"] = string(opts.Readout)
	}
	if cfg.Windows {
		j.baseMeta["windows"] = "true"
	}
}

// openOutputs opens the output folder and the job's sinks: the shards or
// the per-image files, the index parts, the collection.
func (j *job) openOutputs(ctx context.Context, name, indexDType string) (err error) {
	cfg, eng := j.cfg, j.eng
	m := eng.Model()
	if j.dst, err = resolveOutput(j.stores, cfg.Out); err != nil {
		return err
	}
	if j.out, err = j.dst.start(ctx, cfg, name, j.log); err != nil {
		return err
	}
	j.manifestPath = j.dst.path(name)
	if cfg.Layout == "shards" {
		j.shards = newShardSet(j.out, cfg.ShardSize, cfg.Shard, j.settings)
		j.shards.dst, j.shards.ctx = j.dst, ctx
		j.shards.embDim = m.Config().ProjectionDim
		j.shards.index = indexDType
	}
	if cfg.Index {
		if j.index, err = newIndexOutSet(j.out, eng, cfg.ShardSize, cfg.Shard, j.settings, indexDType); err != nil {
			return err
		}
		j.index.dst, j.index.ctx = j.dst, ctx
	}
	var coll *collSink
	if cfg.Collection != nil {
		if coll, err = openCollection(ctx, cfg.Collection, eng, cfg.Version); err != nil {
			return err
		}
		coll.log = j.log
	}
	// The sinks in the order an entry lists their files: the arrays (in
	// a shard, else in the image's file), the heatmaps, the index; the
	// collection's object last, once the files are written.
	if j.shards != nil {
		j.sinks = append(j.sinks, shardsSink{set: j.shards})
	}
	j.sinks = append(j.sinks, &filesSink{out: j.out, arrays: j.shards == nil, format: j.format})
	if j.index != nil {
		j.sinks = append(j.sinks, indexSink{set: j.index, eng: eng})
	}
	if coll != nil {
		j.sinks = append(j.sinks, collectionSink{coll: coll, eng: eng})
	}
	return nil
}

// InputError is an input the job cannot take: a path that does not exist,
// or inputs that hold no image.
type InputError struct {
	Path string
	Err  error
}

func (e *InputError) Error() string { return fmt.Sprintf("batch: input %s: %v", e.Path, e.Err) }

func (e *InputError) Unwrap() error { return e.Err }

// errFound stops a walk at its first image.
var errFound = errors.New("found")

// checkInputs makes sure, before any work, that every input exists and that
// they hold at least one image (out, a job's output folder, left out).
func checkInputs(ctx context.Context, stores *objstore.Stores, inputs []source, lists []string, out string) error {
	for _, in := range inputs {
		if err := in.check(); err != nil {
			return err
		}
	}
	for _, l := range lists {
		if _, err := os.Stat(l); err != nil {
			return &InputError{Path: l, Err: err}
		}
	}
	err := walk(ctx, inputs, lists, walkOptions{skip: []string{out}, listOnly: true, stores: stores}, func(Item) error { return errFound }, func(string, error) error { return nil })
	switch {
	case errors.Is(err, errFound):
		return nil
	case err != nil:
		return err
	}
	exts := vision.ImageExts()
	names := make([]string, 0, len(inputs)+len(lists))
	for _, in := range inputs {
		names = append(names, in.String())
		if inside(in.String(), out) {
			return &InputError{Path: in.String(), Err: fmt.Errorf("no images found outside the job's output folder %s, which the job leaves out of its inputs: write the output elsewhere", out)}
		}
	}
	return &InputError{Path: strings.Join(append(names, lists...), ", "), Err: fmt.Errorf("no images found (folders are searched for %s, case-insensitive)", strings.Join(exts, " "))}
}

// clearEarlier removes what the earlier job of this manifest wrote: the
// files its manifest lists, then the manifest. Other files are left alone.
func clearEarlier(out *outFolder, manifest string) error {
	b, err := out.ReadFile(manifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("batch: read manifest %q: %w", manifest, err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1] // a killed job's partial last line
	}
	entries, err := ParseManifest(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("batch: manifest %q: %w", manifest, err)
	}
	for _, e := range entries {
		for _, o := range e.Outputs {
			if err := out.Remove(o); err != nil {
				return err
			}
		}
	}
	if err := out.CleanTemps(); err != nil {
		return err
	}
	return out.Remove(manifest)
}

// inside reports whether the local folder in is out or inside it.
func inside(in, out string) bool {
	if out == "" || strings.Contains(in, "://") || strings.Contains(out, "://") {
		return false
	}
	a, err1 := filepath.Abs(in)
	b, err2 := filepath.Abs(out)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(b, a)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
