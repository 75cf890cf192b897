package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/conditionhq/condition/internal/graphbuild"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/tensorio"
)

// VariantBuilt names graphs this program built from a model's
// model.safetensors (see Model.Build), in stamps and reports.
const VariantBuilt = "built"

// BuildOptions controls Model.Build.
type BuildOptions struct {
	// Out is the folder the graphs go to (Out/onnx/text_model.onnx and
	// Out/onnx/vision_model.onnx). Empty: this program's derived cache,
	// beside the model's optimized variants, where opening the model
	// finds them while model.safetensors stays as it was.
	Out string
	// QKV is the form of self-attention: "separate" (three MatMuls, then
	// com.microsoft.MultiHeadAttention; the default), "split" (one MatMul
	// by the packed weights, split for MultiHeadAttention) or "packed"
	// (com.microsoft.Attention; refused for PE-Core, whose RoPE turns q
	// and k between their projections and the attention).
	QKV string
	// Threads is ONNX Runtime's intra-op thread count for the checks.
	Threads int
	// ExternalAbove: weights over this many bytes go to external data
	// beside the graph (0: over 1.9 GiB, as protobuf requires; < 0: always).
	ExternalAbove int64
}

// BuiltGraph is one graph Build wrote.
type BuiltGraph struct {
	Graph       string  `json:"graph"` // TextModelFile or VisionModelFile
	Path        string  `json:"path"`
	Bytes       int64   `json:"bytes"`
	External    string  `json:"external,omitempty"` // its external data file
	WeightBytes int64   `json:"weight_bytes"`
	Nodes       int     `json:"nodes"`
	Check       string  `json:"check"` // what the graph was checked on, and the output shapes
	Seconds     float64 `json:"seconds"`
}

// BuildReport says what Build did.
type BuildReport struct {
	Checkpoint      []string     `json:"checkpoint"` // the safetensors files read
	CheckpointBytes int64        `json:"checkpoint_bytes"`
	QKV             string       `json:"qkv"`
	Graphs          []BuiltGraph `json:"graphs"`
	BuildSeconds    float64      `json:"build_seconds"` // writing the graphs
	CheckSeconds    float64      `json:"check_seconds"` // running them on the probes
}

// ErrBuildCheck is wrapped by Build's error when a built graph fails its
// check (an output of the wrong shape, or not finite): nothing was written.
var ErrBuildCheck = errors.New("models: the built graph failed its check")

// DefaultMaxBuildDownload is the most bytes of safetensors Open downloads
// from the hub, unless told otherwise (Options.MaxBuildDownload), to build
// the graphs of a model that has none: 2 GiB, enough for the ViT-B and
// ViT-L checkpoints (605 MB for ViT-B/32, 1.71 GB for ViT-L/14).
const DefaultMaxBuildDownload = 2 << 30

// ErrBuildDownload is matched (errors.Is) by Open's error when the
// checkpoint a hub model's graphs would be built from is larger than
// Options.MaxBuildDownload allows; nothing was downloaded.
var ErrBuildDownload = errors.New("models: the checkpoint to build the graphs from is over the download limit")

// CanBuild reports whether Build can write the model's graphs, from its
// config.json alone, before any checkpoint is read or downloaded: nil when
// it can, else why not (a model type, size or activation the graph builder
// does not write).
func (m *Model) CanBuild() error {
	switch m.family {
	case CLIP, MetaCLIP2:
		return graphbuild.CheckConfig(m.config.graphConfig())
	case SigLIP, SigLIP2:
		return graphbuild.CheckSiglipConfig(m.config.siglipGraphConfig())
	case Tipsv2:
		return graphbuild.CheckTipsConfig(m.tipsGraphConfig())
	}
	return fmt.Errorf("graphs of the %s family are not built: %w", m.family, ErrUnsupportedFamily)
}

// BuildsFamily reports whether Build writes the graphs of the family's
// checkpoints: whether CanBuild accepts the family's default config
// (DefaultConfig, DefaultSiglipConfig, DefaultTipsConfig).
func BuildsFamily(f Family) bool {
	c := DefaultConfig()
	switch {
	case f.Sigmoid():
		c = DefaultSiglipConfig()
		c.Family = f
	case f == Tipsv2:
		c = DefaultTipsConfig()
	}
	m := &Model{config: c, family: f}
	return m.CanBuild() == nil
}

// Built reports whether the graphs the model serves are ones this program
// built from its safetensors (Build), kept in the derived cache.
func (m *Model) Built() bool { return m.built }

// graphConfig translates the config for the graph builder.
func (c Config) graphConfig() graphbuild.CLIPConfig {
	t, v := c.TextConfig, c.VisionConfig
	return graphbuild.CLIPConfig{
		ModelType: c.ModelType, ProjectionDim: c.ProjectionDim,
		Text: graphTextConfig(t), Vision: graphVisionConfig(v),
	}
}

// siglipGraphConfig translates a SigLIP config for the graph builder.
func (c Config) siglipGraphConfig() graphbuild.SiglipConfig {
	return graphbuild.SiglipConfig{ModelType: c.ModelType, ProjectionSize: c.TextConfig.ProjectionSize,
		Text: graphTextConfig(c.TextConfig), Vision: graphVisionConfig(c.VisionConfig)}
}

// tipsGraphConfig translates a TIPSv2 model's config for the graph
// builder: the vision graph at the pixel size its preprocessing gives
// (tipsPixelSize).
func (m *Model) tipsGraphConfig() graphbuild.TipsConfig {
	c := m.config
	v := c.VisionConfig
	h, w := m.tipsPixelSize()
	return graphbuild.TipsConfig{Height: h, Width: w, ModelType: c.ModelType, Text: graphTextConfig(c.TextConfig),
		ScaleSqrtDepth: c.TextConfig.ScaleSqrtDepth, PoolingEpsilon: c.TextConfig.PoolingEpsilon,
		Vision: graphbuild.TipsVisionConfig{HiddenSize: v.HiddenSize, Layers: v.NumHiddenLayers, Heads: v.NumAttentionHeads,
			MLPRatio: v.MLPRatio, Channels: v.NumChannels, ImageSize: v.ImageSize, PatchSize: v.PatchSize,
			HiddenAct: v.HiddenAct, LayerNormEps: v.LayerNormEps, Registers: v.NumRegisterTokens,
			QKVBias: v.QKVBias, UseSwiGLU: v.UseSwiGLUFFN, InterpolateAntialias: v.InterpolateAntialias,
			InterpolateOffset: v.InterpolateOffset},
		Temperature: c.Temperature}
}

func graphTextConfig(t TextConfig) graphbuild.TextConfig {
	return graphbuild.TextConfig{VocabSize: t.VocabSize, HiddenSize: t.HiddenSize, IntermediateSize: t.IntermediateSize,
		Layers: t.NumHiddenLayers, Heads: t.NumAttentionHeads, MaxPositions: t.MaxPositionEmbeddings,
		HiddenAct: t.HiddenAct, LayerNormEps: t.LayerNormEps, EosTokenID: t.EosTokenID}
}

func graphVisionConfig(v VisionConfig) graphbuild.VisionConfig {
	g := graphbuild.VisionConfig{HiddenSize: v.HiddenSize, IntermediateSize: v.IntermediateSize,
		Layers: v.NumHiddenLayers, Heads: v.NumAttentionHeads, Channels: v.NumChannels,
		ImageSize: v.ImageSize, PatchSize: v.PatchSize, HiddenAct: v.HiddenAct, LayerNormEps: v.LayerNormEps,
		NumPatches: v.NumPatches}
	if pe := v.PECore; pe != nil {
		g.PE = &graphbuild.PEVision{ClassToken: pe.ClassToken, RefGrid: pe.RopeRefGrid, GridOffset: pe.RopeGridOffset,
			PoolHeads: pe.PoolHeads, PoolIntermediate: pe.PoolIntermediateSize}
	}
	return g
}

// graphBuilder returns the family's check and build functions.
func (m *Model) graphBuilder() (check func(*graphbuild.Checkpoint, graphbuild.Options) error,
	build func(*graphbuild.Checkpoint, string, graphbuild.Options) ([]graphbuild.Written, error), err error) {
	switch m.family {
	case CLIP, MetaCLIP2:
		cfg := m.config.graphConfig()
		return func(ck *graphbuild.Checkpoint, o graphbuild.Options) error { return graphbuild.CheckCLIP(ck, cfg, o) },
			func(ck *graphbuild.Checkpoint, out string, o graphbuild.Options) ([]graphbuild.Written, error) {
				return graphbuild.BuildCLIP(ck, cfg, out, o)
			}, nil
	case SigLIP, SigLIP2:
		cfg := m.config.siglipGraphConfig()
		return func(ck *graphbuild.Checkpoint, o graphbuild.Options) error { return graphbuild.CheckSiglip(ck, cfg, o) },
			func(ck *graphbuild.Checkpoint, out string, o graphbuild.Options) ([]graphbuild.Written, error) {
				return graphbuild.BuildSiglip(ck, cfg, out, o)
			}, nil
	case Tipsv2:
		cfg := m.tipsGraphConfig()
		return func(ck *graphbuild.Checkpoint, o graphbuild.Options) error { return graphbuild.CheckTips(ck, cfg, o) },
			func(ck *graphbuild.Checkpoint, out string, o graphbuild.Options) ([]graphbuild.Written, error) {
				return graphbuild.BuildTips(ck, cfg, out, o)
			}, nil
	}
	return nil, nil, fmt.Errorf("graphs of the %s family are not built: %w", m.family, ErrUnsupportedFamily)
}

// Build writes the model's text and vision graphs, built from its
// config.json and model.safetensors (or the shards of
// model.safetensors.index.json), as the family's exports have them. CLIP:
// text input_ids, attention_mask int64 [batch, sequence] →
// last_hidden_state [batch, sequence, d_t], text_embeds [batch, d_p];
// vision pixel_values float32 [batch, 3, S, S] → last_hidden_state [batch,
// 1+P, d_v], image_embeds [batch, d_p]. SigLIP and SigLIP 2 (fixed
// resolution): text input_ids int64 [batch, 64] (max_position_embeddings;
// no attention_mask) → last_hidden_state [batch, 64, d_t], pooler_output
// [batch, d_v]; vision pixel_values → last_hidden_state [batch, P, d_v]
// (after post_layernorm, no class token), pooler_output [batch, d_v] (the
// attention-pooling head's).
//
// The graphs are written into a temporary folder beside their destination,
// each run in ONNX Runtime (which must be loaded) on probe inputs (two
// prompts padded to different lengths, two images of random pixels), and
// moved into place only when every output has the expected shape and is
// finite. A config that disagrees with the checkpoint (a tensor missing,
// of another shape or not floating point; an unknown model_type or
// hidden_act), a truncated file or a header whose offsets lie is an error
// before anything is written. Written to the derived cache (opts.Out
// empty), the graphs are stamped with the checkpoint they came from and
// the model serves them from then on (when its folder has no graphs).
//
// A hub model's checkpoint is downloaded into its snapshot first when the
// cache does not hold it (whatever its size: Options.MaxBuildDownload
// bounds only the builds Open makes), and its graphs are stamped with the
// commit. A checkpoint split into shards has its projection heads copied
// beside the graphs (HeadsFile), where the model finds them.
func (m *Model) Build(ctx context.Context, opts BuildOptions) (*BuildReport, error) {
	if m.dir == "" {
		return nil, fmt.Errorf("models: build %s: the built-in model has its graphs", m.ref)
	}
	if err := m.CanBuild(); err != nil {
		return nil, fmt.Errorf("models: build %s: %w", m.where(), err)
	}
	if m.isHub() {
		if _, err := m.fetchCheckpoint(ctx, -1); err != nil {
			return nil, err
		}
	}
	ck, err := m.openCheckpoint()
	if err != nil {
		return nil, fmt.Errorf("models: build %s: %w", m.where(), err)
	}
	defer ck.Close()
	rep := &BuildReport{Checkpoint: ck.Files(), CheckpointBytes: ck.Size(), QKV: opts.QKV}
	if rep.QKV == "" {
		rep.QKV = graphbuild.QKVSeparate
	}
	check, build, err := m.graphBuilder()
	if err != nil {
		return nil, fmt.Errorf("models: build %s: %w", m.where(), err)
	}
	bopts := graphbuild.Options{QKV: opts.QKV, ExternalAbove: opts.ExternalAbove}
	if err := check(ck, bopts); err != nil {
		return nil, fmt.Errorf("models: build %s: %w", m.where(), err)
	}
	dest := opts.Out
	if dest == "" {
		if dest, err = m.variantDir(); err != nil {
			return nil, fmt.Errorf("models: build %s: %w", m.where(), err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dest, "onnx"), 0o755); err != nil {
		return nil, fmt.Errorf("models: build: %w", err)
	}
	tmp, err := os.MkdirTemp(dest, ".build-*")
	if err != nil {
		return nil, fmt.Errorf("models: build: %w", err)
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	ws, err := build(ck, tmp, bopts)
	if err != nil {
		return nil, fmt.Errorf("models: build %s: %w", m.where(), err)
	}
	rep.BuildSeconds = time.Since(start).Seconds()
	start = time.Now()
	for _, w := range ws {
		t0 := time.Now()
		check, err := checkBuilt(ctx, w.Path, w.Graph, m.config, m.family, m.builtPixels(), opts.Threads)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBuildCheck, w.Graph, err)
		}
		rep.Graphs = append(rep.Graphs, BuiltGraph{Graph: w.Graph, Bytes: w.Bytes, External: w.External,
			WeightBytes: w.Weights, Nodes: w.Nodes, Check: check, Seconds: time.Since(t0).Seconds()})
	}
	rep.CheckSeconds = time.Since(start).Seconds()

	st, err := checkpointStamp(ck.Files())
	if err != nil {
		return nil, fmt.Errorf("models: build: %w", err)
	}
	// The heads of a checkpoint in shards, in place before the graphs are:
	// a model that finds the graphs finds them.
	heads := ""
	if opts.Out == "" && !fsHas(m.base, WeightsFile) {
		if heads, err = m.headsFromShards(ck, dest); err != nil {
			return nil, fmt.Errorf("models: build %s: %w", m.where(), err)
		}
	}
	for i, w := range ws {
		final := filepath.Join(dest, filepath.FromSlash(w.Graph))
		if w.External != "" {
			ext := filepath.Join(filepath.Dir(final), filepath.Base(w.External))
			if err := os.Rename(w.External, ext); err != nil {
				return nil, fmt.Errorf("models: build: %w", err)
			}
			rep.Graphs[i].External = ext
		}
		if err := os.Rename(w.Path, final); err != nil {
			return nil, fmt.Errorf("models: build: %w", err)
		}
		rep.Graphs[i].Path = final
		if opts.Out != "" {
			continue
		}
		s := st
		s.Variant, s.Graph, s.Written = VariantBuilt, w.Graph, time.Now().UTC().Format(time.RFC3339)
		s.Pixels = m.builtPixels()
		if m.isHub() {
			s.Commit = m.revision
		}
		if s.Report, err = json.Marshal(rep.Graphs[i]); err != nil {
			return nil, fmt.Errorf("models: build: %w", err)
		}
		if err := writeStamp(final+".json", s); err != nil {
			return nil, err
		}
		m.extra[w.Graph] = final
	}
	if heads != "" {
		m.extra[WeightsFile] = heads
	}
	if opts.Out == "" {
		m.built, m.noGraphs = true, nil
	}
	return rep, nil
}

// headsFromShards copies the projection heads of a checkpoint split into
// shards (which has no model.safetensors to read them from) into
// dest/HeadsFile, as float32; "" when the checkpoint holds none of them.
func (m *Model) headsFromShards(ck *graphbuild.Checkpoint, dest string) (string, error) {
	heads := map[string]tensorio.Tensor{}
	for _, n := range HeadNamesFor(m.family) {
		info, ok := ck.Info(n)
		if !ok {
			continue
		}
		v, err := ck.Float32(n)
		if err != nil {
			return "", err
		}
		heads[n] = tensorio.F32(slices.Clone(info.Shape), v)
	}
	if len(heads) == 0 {
		return "", nil
	}
	note := map[string]string{"format": "pt", "source": strings.Join(ck.Files(), ", "),
		"note": "projection heads copied by condition out of the checkpoint's shards"}
	p := filepath.Join(dest, HeadsFile)
	err := tensorio.WriteFileAtomic(p, func(w io.Writer) error {
		b, err := tensorio.EncodeSafetensors(heads, note)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	return p, err
}

// UseGraphsFrom makes the model serve the graphs in dir/onnx/ (as Build
// writes them with BuildOptions.Out) under the canonical names, for
// optimizing or checking built graphs kept outside the model's folder.
func (m *Model) UseGraphsFrom(dir string) error {
	for _, g := range []string{TextModelFile, VisionModelFile} {
		p := filepath.Join(dir, filepath.FromSlash(g))
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("models: %s has no graph %s", dir, g)
		}
		m.extra[g] = p
		delete(m.alias, g)
	}
	return nil
}

// localCheckpoint returns the safetensors files of a model folder:
// model.safetensors, else the shards model.safetensors.index.json names
// (nil when it has neither, or the index does not parse).
func (m *Model) localCheckpoint() []string {
	if m.openCLIP {
		if fsHas(m.base, OpenCLIPWeightsFile) {
			return []string{filepath.Join(m.dir, OpenCLIPWeightsFile)}
		}
		return nil
	}
	if fsHas(m.base, graphbuild.SafetensorsFile) {
		return []string{filepath.Join(m.dir, graphbuild.SafetensorsFile)}
	}
	b, err := os.ReadFile(filepath.Join(m.dir, graphbuild.IndexFile))
	if err != nil {
		return nil
	}
	shards, err := indexShards(b)
	if err != nil {
		return nil
	}
	files := make([]string, len(shards))
	for i, f := range shards {
		files[i] = filepath.Join(m.dir, filepath.FromSlash(f))
	}
	return files
}

// openCheckpoint opens the model's safetensors for building its graphs:
// OpenCLIP's, under Hugging Face's names, for a model in OpenCLIP's
// layout.
func (m *Model) openCheckpoint() (*graphbuild.Checkpoint, error) {
	if m.openCLIP {
		return graphbuild.OpenOpenCLIPCheckpoint(m.dir, m.config.graphConfig())
	}
	return graphbuild.OpenCheckpoint(m.dir)
}

// indexShards returns the files model.safetensors.index.json's weight_map
// names, sorted, each checked to be a path inside the model.
func indexShards(b []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", graphbuild.IndexFile, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is empty", graphbuild.IndexFile)
	}
	seen := map[string]bool{}
	var files []string
	for name, f := range idx.WeightMap {
		if !fs.ValidPath(f) || f == "." || strings.Contains(f, `\`) {
			return nil, fmt.Errorf("%s: tensor %q is in %q, expected a file name inside the model", graphbuild.IndexFile, name, f)
		}
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files, nil
}

// BuiltGraphs describes the pair of graphs Build wrote into the derived
// cache from a model's checkpoint, as a model without ONNX graphs of its
// own serves them.
type BuiltGraphs struct {
	Text    string `json:"text"`             // the text graph (TextModelFile in the model's derived cache folder)
	Vision  string `json:"vision"`           // the vision graph (VisionModelFile)
	Commit  string `json:"commit,omitempty"` // the hub commit whose checkpoint they were built from
	Source  string `json:"source"`           // the checkpoint's files they were built from, as they were then
	Written string `json:"written"`          // when the later of the two was written (RFC 3339)
}

// HubBuiltGraphs returns the graphs Build wrote into the derived cache
// (opts.DerivedCache, else DefaultDerivedDir) from the checkpoint of the
// hub repository repo (org/name) at commit: those Open serves for that
// commit when its snapshot has no ONNX graphs of its own, whether or not
// the checkpoint is still in the Hugging Face cache. ok is false when the
// cache does not hold both graphs stamped as built from that commit.
func HubBuiltGraphs(repo, commit string, opts Options) (b BuiltGraphs, ok bool) {
	dir, err := newDerivedCache(opts).dir(repo, commit)
	if err != nil {
		return BuiltGraphs{}, false
	}
	return builtGraphsIn(dir, func(s VariantStamp) bool { return s.Commit == commit })
}

// builtGraphsIn returns the graphs Build wrote into the derived cache
// folder dir: both canonical graphs present as regular files, each with a
// stamp saying VariantBuilt that match accepts.
func builtGraphsIn(dir string, match func(VariantStamp) bool) (BuiltGraphs, bool) {
	var b BuiltGraphs
	for _, g := range []string{TextModelFile, VisionModelFile} {
		p := filepath.Join(dir, filepath.FromSlash(g))
		raw, err := os.ReadFile(p + ".json")
		if err != nil {
			return BuiltGraphs{}, false
		}
		var saved VariantStamp
		if json.Unmarshal(raw, &saved) != nil || saved.Variant != VariantBuilt || saved.Graph != g || !match(saved) {
			return BuiltGraphs{}, false
		}
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return BuiltGraphs{}, false
		}
		if g == TextModelFile {
			b.Text = p
		} else {
			b.Vision = p
		}
		b.Commit, b.Source = saved.Commit, saved.Source
		b.Written = max(b.Written, saved.Written)
	}
	return b, true
}

// useBuiltGraphs points the canonical graphs of a model that has none of
// its own at those Build wrote into the derived cache: for a folder, from
// the checkpoint it holds now (the files' size and modification time); for
// a hub model, from its commit (the checkpoint need not be in the cache any
// more). It reports whether it found them.
func (m *Model) useBuiltGraphs() bool {
	if m.dir == "" || m.Has(TextModelFile) || m.Has(VisionModelFile) {
		return false
	}
	dir, err := m.variantDir()
	if err != nil {
		return false
	}
	var now VariantStamp
	if !m.isHub() {
		files := m.localCheckpoint()
		if len(files) == 0 {
			return false
		}
		if now, err = checkpointStamp(files); err != nil {
			return false
		}
	}
	pixels := m.builtPixels()
	built, ok := builtGraphsIn(dir, func(saved VariantStamp) bool {
		if saved.Pixels != pixels {
			return false
		}
		if m.isHub() {
			return saved.Commit == m.revision
		}
		return sameSource(saved, now)
	})
	if !ok {
		return false
	}
	paths := map[string]string{TextModelFile: built.Text, VisionModelFile: built.Vision}
	for g, p := range paths {
		m.extra[g] = p
	}
	if !fsHas(m.base, WeightsFile) {
		if p := filepath.Join(dir, HeadsFile); fsHas(os.DirFS(dir), HeadsFile) {
			m.extra[WeightsFile] = p
		}
	}
	m.built = true
	if m.log != nil {
		m.log.Info("using the graphs built from the model's safetensors (derived cache)", "model", m.ref,
			"text", paths[TextModelFile], "vision", paths[VisionModelFile])
	}
	return true
}

// buildOnOpen gives a folder or hub model that has no ONNX graphs those
// built from its safetensors: built before and kept in the derived cache,
// else built now (downloading the checkpoint of a hub model, up to
// opts.MaxBuildDownload), unless opts.NoBuild. When the model gets no
// graphs, m.noGraphs says why, for the error of whoever asks for one.
func (m *Model) buildOnOpen(ctx context.Context, opts Options) error {
	if m.dir == "" || m.variant != "" || m.Has(TextModelFile) || m.Has(VisionModelFile) {
		return nil
	}
	if m.useBuiltGraphs() {
		return nil
	}
	if err := m.CanBuild(); err != nil {
		m.noGraphs = fmt.Errorf("it has no ONNX graphs, and they cannot be built from its safetensors: %w", err)
		return nil
	}
	var files []string
	if m.isHub() {
		if opts.NoBuild {
			m.noGraphs = errors.New("it has no ONNX graphs, and building them from its safetensors was turned off (Options.NoBuild)")
			return nil
		}
		limit := opts.MaxBuildDownload
		if limit == 0 {
			limit = DefaultMaxBuildDownload
		}
		var err error
		if files, err = m.fetchCheckpoint(ctx, limit); err != nil {
			if errors.Is(err, hub.ErrOffline) {
				m.noGraphs = err
				return nil
			}
			return err
		}
	} else {
		files = m.localCheckpoint()
		if len(files) > 0 && opts.NoBuild {
			m.noGraphs = errors.New("it has no ONNX graphs, and building them from its safetensors was turned off (Options.NoBuild)")
			return nil
		}
	}
	if len(files) == 0 && m.openCLIP {
		m.noGraphs = fmt.Errorf("it has no ONNX graphs, and no %s to build them from", OpenCLIPWeightsFile)
		return nil
	}
	if len(files) == 0 {
		m.noGraphs = fmt.Errorf("it has no ONNX graphs, and no %s (nor %s) to build them from", graphbuild.SafetensorsFile, graphbuild.IndexFile)
		return nil
	}
	// One process builds; the others wait for it, then use its graphs.
	dir, err := m.variantDir()
	if err != nil {
		return fmt.Errorf("models: %s has no ONNX graphs; building them from its safetensors: %w", m.where(), err)
	}
	unlock, err := hub.LockFile(ctx, filepath.Join(dir, ".build.lock"))
	if err != nil {
		return fmt.Errorf("models: %s has no ONNX graphs; building them from its safetensors: %w", m.where(), err)
	}
	defer unlock()
	if m.useBuiltGraphs() {
		return nil
	}
	if m.log != nil {
		m.log.Info("building the model's ONNX graphs from its safetensors (once; kept in this program's cache)", "model", m.ref, "checkpoint", strings.Join(files, ", "))
	}
	rep, err := m.Build(ctx, BuildOptions{})
	if err != nil {
		return fmt.Errorf("models: %s has no ONNX graphs; building them from its safetensors: %w", m.where(), err)
	}
	if m.log != nil {
		args := []any{"model", m.ref, "build_seconds", rep.BuildSeconds, "check_seconds", rep.CheckSeconds}
		for _, g := range rep.Graphs {
			args = append(args, strings.TrimSuffix(strings.TrimPrefix(g.Graph, "onnx/"), "_model.onnx"), g.Path)
		}
		m.log.Info("built the model's ONNX graphs (once; kept in this program's cache)", args...)
	}
	return nil
}

// checkpointStamp describes the checkpoint's files: their total size and
// latest modification time.
func checkpointStamp(files []string) (VariantStamp, error) {
	var st VariantStamp
	sorted := append([]string(nil), files...)
	sortStrings(sorted)
	st.Source = strings.Join(sorted, ", ")
	for _, f := range sorted {
		fi, err := os.Stat(f)
		if err != nil {
			return st, err
		}
		st.Size += fi.Size()
		st.ModTimeNanos = max(st.ModTimeNanos, fi.ModTime().UnixNano())
	}
	return st, nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func writeStamp(path string, s VariantStamp) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	if err := tensorio.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("models: %w", err)
	}
	return nil
}

// checkBuilt runs a built graph on probe inputs and checks its outputs'
// shapes and that they are finite; it returns what it ran. CLIP's text
// graph takes input_ids and attention_mask [2, 8]; SigLIP's input_ids [2,
// max_position_embeddings] alone (prompts padded to the whole sequence, as
// the model was trained), and its outputs are pooler_output. TIPSv2's
// vision graph gives last_hidden_state [2, 1+R+P, d], image_embeds [2, d]
// and patch_embeds [2, P, d].
func checkBuilt(ctx context.Context, path, name string, c Config, f Family, pixels string, threads int) (string, error) {
	var ins, outs []string
	var in []tensorio.Tensor
	var want [][]int
	siglip := f.Sigmoid()
	switch name {
	case TextModelFile:
		ins, in, outs, want = textProbe(c.TextConfig, c.ProjectionDim, siglip)
	case VisionModelFile:
		v := c.VisionConfig
		if c.NaFlex() {
			// Two images of 8 patches, the second padded after 5; random
			// pixels and positions.
			const m = 8
			per := v.NumChannels * v.PatchSize * v.PatchSize
			px, pos := probeFloats(2*m*per), probeFloats(2*m*v.HiddenSize)
			mask := make([]int64, 2*m)
			for i := range mask {
				if i < m+5 {
					mask[i] = 1
				}
			}
			ins = []string{"pixel_values", "pixel_attention_mask", "position_embeddings"}
			in = []tensorio.Tensor{tensorio.F32([]int{2, m, per}, px), tensorio.I64([]int{2, m}, mask), tensorio.F32([]int{2, m, v.HiddenSize}, pos)}
			outs = []string{"last_hidden_state", "pooler_output"}
			want = [][]int{{2, m, v.HiddenSize}, {2, v.HiddenSize}}
			break
		}
		sh, sw := v.ImageSize, v.ImageSize
		if pixels != "" {
			if _, err := fmt.Sscanf(pixels, "%dx%d", &sh, &sw); err != nil {
				return "", fmt.Errorf("pixel size %q: %w", pixels, err)
			}
		}
		px := probeFloats(2 * v.NumChannels * sh * sw)
		p := (sh / v.PatchSize) * (sw / v.PatchSize)
		ins = []string{"pixel_values"}
		in = []tensorio.Tensor{tensorio.F32([]int{2, v.NumChannels, sh, sw}, px)}
		if siglip {
			outs = []string{"last_hidden_state", "pooler_output"}
			want = [][]int{{2, p, v.HiddenSize}, {2, v.HiddenSize}}
			break
		}
		outs = []string{"last_hidden_state", "image_embeds"}
		want = [][]int{{2, 1 + p, v.HiddenSize}, {2, c.ProjectionDim}}
		if v.PECore != nil && !v.PECore.ClassToken {
			want[0][1] = p
		}
		if f == Tipsv2 {
			r := v.NumRegisterTokens
			outs = append(outs, "patch_embeds")
			want = [][]int{{2, 1 + r + p, v.HiddenSize}, {2, v.HiddenSize}, {2, p, v.HiddenSize}}
		}
	default:
		return "", fmt.Errorf("no check for %s", name)
	}
	s, err := ort.GraphFile(path).NewSession(ins, outs, ort.SessionOptions{Threads: threads})
	if err != nil {
		return "", err
	}
	defer s.Close()
	res, err := s.Run(ctx, in)
	if err != nil {
		return "", err
	}
	desc := fmt.Sprintf("probe inputs %v:", in[0].Shape)
	for i, r := range res {
		if fmt.Sprint(r.Shape) != fmt.Sprint(want[i]) {
			return "", fmt.Errorf("output %s has shape %v, expected %v", outs[i], r.Shape, want[i])
		}
		v, err := r.Float32()
		if err != nil {
			return "", err
		}
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return "", fmt.Errorf("output %s holds %v at element %d", outs[i], x, j)
			}
		}
		desc += fmt.Sprintf(" %s %v finite", outs[i], r.Shape)
	}
	return desc, nil
}

// textProbe returns checkBuilt's text probe: the input names and tensors,
// the outputs and their expected shapes.
func textProbe(tc TextConfig, proj int, siglip bool) (ins []string, in []tensorio.Tensor, outs []string, want [][]int) {
	// Two prompts: BOS (CLIP), a few ids, EOS, then padding, of lengths
	// 5 and the whole sequence.
	t := min(8, tc.MaxPositionEmbeddings)
	if siglip {
		t = tc.MaxPositionEmbeddings
	}
	ids := make([]int64, 2*t)
	mask := make([]int64, 2*t)
	for b, n := range []int{min(5, t), t} {
		for i := 0; i < t; i++ {
			id := int64(tc.PadTokenID)
			switch {
			case i == 0 && !siglip:
				id = int64(tc.BosTokenID)
			case i < n-1:
				id = int64((i*7 + b*3) % tc.VocabSize)
			case i == n-1:
				id = int64(tc.EosTokenID)
			}
			if id < 0 || id >= int64(tc.VocabSize) {
				id = int64(i % tc.VocabSize)
			}
			ids[b*t+i] = id
			if i < n {
				mask[b*t+i] = 1
			}
		}
	}
	if siglip {
		ins = []string{"input_ids"}
		in = []tensorio.Tensor{tensorio.I64([]int{2, t}, ids)}
		outs = []string{"last_hidden_state", "pooler_output"}
		want = [][]int{{2, t, tc.HiddenSize}, {2, tc.ProjectionSize}}
		return ins, in, outs, want
	}
	ins = []string{"input_ids", "attention_mask"}
	in = []tensorio.Tensor{tensorio.I64([]int{2, t}, ids), tensorio.I64([]int{2, t}, mask)}
	outs = []string{"last_hidden_state", "text_embeds"}
	want = [][]int{{2, t, tc.HiddenSize}, {2, proj}}
	return ins, in, outs, want
}

// probeFloats returns n values in [-2, 2) from a fixed linear congruential
// sequence: the probes' pixels.
func probeFloats(n int) []float32 {
	v := make([]float32, n)
	x := uint32(1)
	for i := range v {
		x = x*1664525 + 1013904223
		v[i] = float32(x>>8)/float32(1<<24)*4 - 2
	}
	return v
}
