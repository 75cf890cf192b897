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
	"slices"
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
	doneShards   sync.Map     // shard index → finished by an earlier run (bool)
	eng          *pipeline.Engine
	log          *slog.Logger
	prompts      pipeline.Prompts
	inH          int
	inW          int
	out          *outFolder
	stores       *objstore.Stores // object-store inputs (and outputs)
	remote       *remoteOut       // an object-store output; nil for a local folder
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
	if j.remote != nil {
		os.RemoveAll(j.remote.stage)
	}
	if j.out != nil {
		j.out.Close()
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
	switch cfg.Layout {
	case "", "files":
	case "shards":
		if cfg.CaptionPrompt {
			return nil, errors.New("batch: the shards layout stacks every image's prompts; captions (one more prompt per image) need the files layout")
		}
		if cfg.ShardSize <= 0 {
			cfg.ShardSize = 10000
			j.cfg.ShardSize = cfg.ShardSize
		}
	default:
		return nil, fmt.Errorf("batch: layout %q: want files or shards", cfg.Layout)
	}
	switch cfg.Format {
	case "", "safetensors":
		j.format = "safetensors"
	case "npz":
		j.format = "npz"
	default:
		return nil, fmt.Errorf("batch: format %q: want safetensors or npz", cfg.Format)
	}
	indexDType := ""
	if cfg.Index {
		if indexDType, err = checkIndexOutDType(cfg.IndexDType); err != nil {
			return nil, err
		}
		if eng.JointDim() <= 0 {
			return nil, errors.New("batch: the collection index needs the engine in CLIP's joint space both ways (the default layer, both directions)")
		}
		if cfg.ShardSize <= 0 {
			cfg.ShardSize = 10000 // one index part every ShardSize images, in the files layout too
			j.cfg.ShardSize = cfg.ShardSize
		}
	}
	defer func() {
		if err != nil {
			j.close()
		}
	}()
	if j.inputs, err = expandInputs(cfg.Inputs); err != nil {
		return nil, &InputError{Path: strings.Join(cfg.Inputs, ", "), Err: err}
	}
	if err := checkInputs(ctx, j.stores, j.inputs, cfg.Lists, cfg.Out); err != nil {
		return nil, err
	}
	// The prompt side: encoded and prepared once for the whole job.
	if j.prompts, err = eng.Prepare(ctx, cfg.Prompts...); err != nil {
		return nil, err
	}
	m, opts := eng.Model(), eng.Options()

	// Settings: what must match for --resume to skip an image.
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
	if cfg.Index {
		settings["index"], settings["index_dtype"] = true, indexDType // only when set, as jpeg_draft
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

	// Outputs: never over an earlier job's without Resume or Overwrite.
	name := cfg.Shard.ManifestName()
	if objstore.IsURL(cfg.Out) {
		if err := j.openRemote(ctx, name); err != nil {
			return nil, err
		}
	} else {
		if !cfg.Resume && !cfg.Overwrite {
			if err := checkOutputFree(cfg.Out, name, cfg.Shard.Active()); err != nil {
				return nil, err
			}
		}
		if j.out, err = openOutFolder(cfg.Out); err != nil {
			return nil, err
		}
		if cfg.Overwrite && !cfg.Resume {
			if err := j.clearEarlier(name); err != nil {
				return nil, err
			}
		}
		if cfg.Resume {
			if err := j.out.CleanTemps(); err != nil {
				j.log.Warn("could not remove temporary files", "err", err)
			}
		}
		j.manifestPath = filepath.Join(cfg.Out, name)
	}
	if cfg.Layout == "shards" {
		j.shards = newShardSet(j.out, cfg.ShardSize, cfg.Shard, j.settings)
		j.shards.remote, j.shards.ctx = j.remote, ctx
		j.shards.embDim = m.Config().ProjectionDim
		j.shards.index = indexDType
	}
	if cfg.Index {
		if j.index, err = newIndexOutSet(j.out, eng, cfg.ShardSize, cfg.Shard, j.settings, indexDType); err != nil {
			return nil, err
		}
		j.index.remote, j.index.ctx = j.remote, ctx
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

// openRemote opens an object-store output (the shards layout only) with
// its staging folder, after the same checks as a local folder's.
func (j *job) openRemote(ctx context.Context, name string) error {
	cfg := j.cfg
	if cfg.Layout != "shards" {
		return errors.New("batch: an object-store output takes the shards layout (one object per image is what that layout avoids)")
	}
	var err error
	if j.remote, err = newRemoteOut(j.stores, cfg.Out); err != nil {
		return err
	}
	if j.out, err = openOutFolder(j.remote.stage); err != nil {
		return err
	}
	if !cfg.Resume && !cfg.Overwrite {
		if err := j.remote.checkFree(ctx, name, cfg.Shard.Active()); err != nil {
			return err
		}
	}
	if cfg.Overwrite && !cfg.Resume {
		if err := j.remote.clear(ctx, cfg.Shard, name); err != nil {
			return err
		}
	}
	if cfg.Resume {
		if err := j.remote.fetchManifest(ctx, j.out, name); err != nil {
			return err
		}
	}
	j.manifestPath = j.remote.at(name).String()
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
func checkInputs(ctx context.Context, stores *objstore.Stores, inputs, lists []string, out string) error {
	for _, in := range append(slices.Clone(inputs), lists...) {
		if objstore.IsURL(in) {
			continue // the walk below opens it
		}
		if _, err := os.Stat(in); err != nil {
			return &InputError{Path: in, Err: err}
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
	return &InputError{Path: strings.Join(append(slices.Clone(inputs), lists...), ", "), Err: fmt.Errorf("no images found (folders are searched for %s, case-insensitive)", strings.Join(exts, " "))}
}

// OutputExistsError is an output folder that holds an earlier job's
// results, which a job neither resumes nor overwrites.
type OutputExistsError struct {
	Dir      string
	Manifest string // the earlier job's manifest, "" when the folder holds other files
}

func (e *OutputExistsError) Error() string {
	if e.Manifest != "" {
		return fmt.Sprintf("batch: output folder %s holds an earlier job's results (%s): resume that job, or overwrite what it wrote", e.Dir, e.Manifest)
	}
	return fmt.Sprintf("batch: output folder %s is not empty: give an empty or new folder, or overwrite", e.Dir)
}

// checkOutputFree refuses an output folder where a job would mix its files
// with an earlier job's: one that holds the manifest name, or (unless the
// job is one shard of several, whose siblings share the folder) anything.
func checkOutputFree(dir, manifest string, sharded bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("batch: output folder: %w", err)
	}
	for _, e := range ents {
		if e.Name() == manifest {
			return &OutputExistsError{Dir: dir, Manifest: manifest}
		}
	}
	if len(ents) > 0 && !sharded {
		return &OutputExistsError{Dir: dir}
	}
	return nil
}

// clearEarlier removes what the earlier job of this manifest wrote: the
// files its manifest lists, then the manifest. Other files are left alone.
func (j *job) clearEarlier(manifest string) error {
	b, err := j.out.ReadFile(manifest)
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
			if err := j.out.Remove(o); err != nil {
				return err
			}
		}
	}
	if err := j.out.CleanTemps(); err != nil {
		return err
	}
	return j.out.Remove(manifest)
}
