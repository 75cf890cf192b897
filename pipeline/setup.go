package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// promptSide is one prompt, encoded once per job, with its keys and values
// (image → text) and its queries (text → image) prepared once.
type promptSide struct {
	text   string
	ids    []int64 // BOS … EOS, no padding
	t      int     // len(ids)
	words  []text.Word
	states []float32 // [t, d_t]
	embeds []float32 // [d_p], nil when the graph has none
	src    *xattn.Source
	q      *xattn.Query
}

// engine is the model side of a job: tokenizer, encoders, preprocessing,
// attention layers and the prompts, encoded and prepared once.
type engine struct {
	cfg      Config
	log      *slog.Logger
	tok      *text.Tokenizer
	tenc     *text.Encoder
	venc     *vision.Encoder
	pre      *vision.Preprocessor
	inH, inW int
	i2t, t2i *xattn.Layer
	// jointPatches: i2t projects patches as queries exactly as t2i
	// projects them as keys (and values), so one projection serves both.
	jointPatches bool
	logitScale   float64
	prompts      []*promptSide
}

func (e *engine) close() {
	if e.tenc != nil {
		e.tenc.Close()
	}
	if e.venc != nil {
		e.venc.Close()
	}
}

type job struct {
	*engine
	out          *OutDir
	man          *Manifest
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
	if j.out != nil {
		j.out.Close()
	}
	if j.engine != nil {
		j.engine.close()
	}
}

func newJob(cfg Config) (_ *job, err error) {
	if len(cfg.Inputs) == 0 {
		return nil, errors.New("pipeline: no images given")
	}
	if cfg.Out == "" {
		return nil, errors.New("pipeline: no output folder given")
	}
	j := &job{}
	switch cfg.Format {
	case "", "safetensors":
		j.format = "safetensors"
	case "npz":
		j.format = "npz"
	default:
		return nil, fmt.Errorf("pipeline: format %q: want safetensors or npz", cfg.Format)
	}
	cfg.Threads, cfg.Streams = EncoderPlan(cfg)
	if j.engine, err = newEngine(cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			j.close()
		}
	}()
	cfg = j.cfg
	m := cfg.Model

	// Settings: what must match for --resume to skip an image.
	preJSON, _ := json.Marshal(j.pre)
	settings := map[string]any{
		"model": m.Name(), "revision": m.Revision(), "prompts": cfg.Prompts, "direction": cfg.Direction.String(),
		"xattn": xattnName(cfg), "xattn_prefix": cfg.XAttnPrefix, "heads": cfg.Heads, "per_head": cfg.PerHead,
		"heatmaps": cfg.Heatmaps, "format": j.format, "preprocessing": json.RawMessage(preJSON),
		"jpeg_decoder": vision.JPEGDecoder(), // its JPEG pixels differ by a few levels from the other's
	}
	sb, _ := json.Marshal(settings)
	h := sha256.Sum256(sb)
	j.settings = hex.EncodeToString(h[:8])
	promptsJSON, _ := json.Marshal(cfg.Prompts)
	tokens := make([][]string, len(j.prompts))
	for k, ps := range j.prompts {
		ids := make([]int, ps.t)
		for i := range ids {
			ids[i] = int(ps.ids[i])
		}
		tokens[k], _ = j.tok.Tokens(ids)
	}
	tokJSON, _ := json.Marshal(tokens)
	j.baseMeta = map[string]string{
		"format": "condition/v1", "model": m.Name(), "revision": m.Revision(), "prompts": string(promptsJSON),
		"tokens": string(tokJSON), "preprocessing": string(preJSON), "direction": cfg.Direction.String(),
		"xattn": xattnName(cfg), "program_version": cfg.Version, "settings": j.settings,
		"jpeg_decoder": vision.JPEGDecoder(),
	}

	// Outputs.
	if j.out, err = OpenOutDir(cfg.Out); err != nil {
		return nil, err
	}
	if cfg.Resume {
		if err := j.out.CleanTemps(); err != nil {
			j.log.Warn("could not remove temporary files", "err", err)
		}
	}
	name := cfg.Shard.ManifestName()
	j.manifestPath = filepath.Join(cfg.Out, name)
	var prior []Entry
	if j.man, prior, err = OpenManifest(j.out, name, cfg.Resume); err != nil {
		return nil, err
	}
	j.prior = map[string]Entry{}
	for _, e := range prior {
		j.prior[e.Path] = e
	}
	return j, nil
}

// newEngine loads the model side of cfg and encodes and prepares the prompts.
func newEngine(cfg Config) (_ *engine, err error) {
	j := &engine{cfg: cfg, log: cfg.Log}
	defer func() {
		if err != nil {
			j.close()
		}
	}()
	if j.log == nil {
		j.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Model == nil {
		return nil, errors.New("pipeline: no model")
	}
	if len(cfg.Prompts) == 0 {
		return nil, errors.New("pipeline: no prompts given")
	}
	if cfg.Direction == 0 {
		cfg.Direction = Both
		j.cfg.Direction = Both
	}
	m := cfg.Model
	if j.tok, err = text.LoadTokenizer(m.FS()); err != nil {
		return nil, fmt.Errorf("pipeline: model %s: %w", m.Name(), err)
	}
	if j.pre, err = vision.LoadPreprocessor(m.FS()); err != nil {
		return nil, fmt.Errorf("pipeline: model %s: %w", m.Name(), err)
	}
	j.tenc, j.venc, err = openEncoders(m, text.EncoderOptions{Threads: cfg.Threads, NoSpinning: true},
		vision.EncoderOptions{Threads: cfg.Threads, NoSpinning: true})
	if err != nil {
		return nil, err
	}
	if _, j.inH, j.inW = j.venc.InputSize(); j.inH <= 0 || j.inW <= 0 {
		// A graph with dynamic spatial size takes what the preprocessor makes.
		j.inH, j.inW = j.pre.OutputSize(m.Config().VisionConfig.ImageSize, m.Config().VisionConfig.ImageSize)
	}

	// The prompt side: encoded once for the whole job.
	ctxLen := j.tok.ForModel(m.Config().TextConfig.MaxPositionEmbeddings).ContextLength()
	strict, err := j.tok.WithOptions(text.Options{ContextLength: ctxLen, ErrorOnOverflow: true})
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	var idsB, maskB [][]int64
	for i, p := range cfg.Prompts {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("pipeline: prompt %d is empty", i+1)
		}
		ids, mask, err := strict.EncodePadded(p, ctxLen)
		if err != nil {
			return nil, fmt.Errorf("pipeline: prompt %d (%q): %w", i+1, p, err)
		}
		idsB, maskB = append(idsB, ids), append(maskB, mask)
	}
	encs, err := j.tenc.Encode(context.Background(), idsB, maskB)
	if err != nil {
		return nil, err
	}
	for i, e := range encs {
		t := 0
		for _, v := range maskB[i] {
			if v != 0 {
				t++
			}
		}
		ids := make([]int, t)
		for k := range ids {
			ids[k] = int(idsB[i][k])
		}
		words, err := j.tok.Words(ids)
		if err != nil {
			return nil, fmt.Errorf("pipeline: prompt %d: %w", i+1, err)
		}
		j.prompts = append(j.prompts, &promptSide{
			text: cfg.Prompts[i], ids: idsB[i][:t], t: t, words: words,
			states: e.States[:t*e.Width], embeds: e.Embeds,
		})
	}
	dt := encs[0].Width
	dv := m.Config().VisionConfig.HiddenSize

	// The attention layers and the prepared prompt side.
	if err := j.buildLayers(dt, dv); err != nil {
		return nil, err
	}
	for _, ps := range j.prompts {
		if j.i2t != nil {
			if ps.src, err = j.i2t.PrepareSource(ps.states, ps.t, nil); err != nil {
				return nil, fmt.Errorf("pipeline: prepare prompt %q: %w", ps.text, err)
			}
		}
		if j.t2i != nil {
			if ps.q, err = j.t2i.PrepareQuery(ps.states, ps.t); err != nil {
				return nil, fmt.Errorf("pipeline: prepare prompt %q: %w", ps.text, err)
			}
		}
	}

	return j, nil
}

// openEncoders opens m's text and vision encoders side by side: ONNX
// Runtime spends seconds creating a real-size model's sessions, most of it
// on one thread copying weights. On error it closes what it opened.
func openEncoders(m *models.Model, topts text.EncoderOptions, vopts vision.EncoderOptions) (*text.Encoder, *vision.Encoder, error) {
	var ve *vision.Encoder
	var verr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ve, verr = vision.OpenEncoder(m, vopts)
	}()
	te, err := text.OpenEncoder(m, topts)
	<-done
	if err = errors.Join(err, verr); err != nil {
		te.Close()
		ve.Close()
		return nil, nil, err
	}
	return te, ve, nil
}

// EncoderPlan returns the intra-op threads of each vision encoder run and
// the number of runs in flight that a job of cfg uses on this machine (see
// Config).
func EncoderPlan(cfg Config) (threads, streams int) {
	return encoderPlan(cfg.Threads, cfg.Streams, runtime.GOMAXPROCS(0))
}

// encoderPlan resolves a job's Threads and Streams (see Config) on a
// machine of cores cores: it returns the intra-op threads of each vision
// encoder run and the number of runs in flight.
func encoderPlan(threads, streams, cores int) (int, int) {
	cores = max(cores, 1)
	switch {
	case threads > 0 && streams > 0:
		return threads, streams
	case threads > 0:
		return threads, 1
	case streams > 0:
		return max(1, cores/streams), streams
	}
	streams = min(cores, 4)
	return max(1, cores/streams), streams
}

func xattnName(cfg Config) string {
	if cfg.XAttn == "" {
		return "joint"
	}
	return cfg.XAttn
}

// buildLayers makes the image → text and text → image layers the job asks
// for. dt and dv are the widths of token and patch states.
func (j *engine) buildLayers(dt, dv int) error {
	cfg := j.cfg
	switch name := xattnName(cfg); name {
	case "joint":
		if !cfg.Model.Has(models.WeightsFile) {
			return fmt.Errorf("pipeline: --xattn joint needs the projection heads in %s of model %s; use --xattn identity or a learned layer", models.WeightsFile, cfg.Model.Name())
		}
		ts, err := cfg.Model.ReadWeights("text_projection.weight", "visual_projection.weight",
			"vision_model.post_layernorm.weight", "vision_model.post_layernorm.bias", "logit_scale")
		if err != nil {
			return fmt.Errorf("pipeline: joint space: %w", err)
		}
		if v, err := ts["logit_scale"].Float32(); err == nil && len(v) == 1 {
			j.logitScale = math.Exp(float64(v[0]))
		}
		eps := float32(cfg.Model.Config().VisionConfig.LayerNormEps)
		if cfg.Direction&ImageToText != 0 {
			if j.i2t, err = xattn.Joint(ts, xattn.ImageToText, eps); err != nil {
				return fmt.Errorf("pipeline: joint space of %s: %w", cfg.Model.Name(), err)
			}
		}
		if cfg.Direction&TextToImage != 0 {
			if j.t2i, err = xattn.Joint(ts, xattn.TextToImage, eps); err != nil {
				return fmt.Errorf("pipeline: joint space of %s: %w", cfg.Model.Name(), err)
			}
		}
		j.jointPatches = j.i2t != nil && j.t2i != nil
	case "identity":
		if dt != dv {
			return fmt.Errorf("pipeline: --xattn identity needs token and patch states of one width; model %s has %d and %d (use --xattn joint)", cfg.Model.Name(), dt, dv)
		}
		heads := cfg.Heads
		if heads <= 0 {
			heads = 1
		}
		l, err := xattn.Identity(dt, heads, 0)
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		if cfg.Direction&ImageToText != 0 {
			j.i2t = l
		}
		if cfg.Direction&TextToImage != 0 {
			j.t2i = l
		}
	default:
		// The layer's tensors (and the attention tensors an error may
		// list as near misses), not the rest of a large checkpoint.
		ts, _, err := tensorio.ReadSafetensorsFunc(name, func(n string) bool {
			return strings.HasPrefix(n, cfg.XAttnPrefix) || strings.Contains(n, "to_")
		})
		if err != nil {
			return fmt.Errorf("pipeline: --xattn: %w", err)
		}
		heads := cfg.Heads
		if heads <= 0 {
			heads = 8
		}
		l, err := xattn.FromDiffusers(ts, cfg.XAttnPrefix, heads, 0)
		if err != nil {
			return fmt.Errorf("pipeline: --xattn %s: %w", name, err)
		}
		if cfg.Direction&ImageToText != 0 {
			if l.DQ() != dv || l.DKV() != dt {
				return fmt.Errorf("pipeline: learned layer %s takes queries of width %d and a source of width %d; image to text needs %d (patches) and %d (tokens)", name, l.DQ(), l.DKV(), dv, dt)
			}
			j.i2t = l
		}
		if cfg.Direction&TextToImage != 0 {
			if l.DQ() == dt && l.DKV() == dv {
				j.t2i = l
			} else if cfg.Direction == TextToImage {
				return fmt.Errorf("pipeline: learned layer %s takes queries of width %d and a source of width %d; text to image needs %d (tokens) and %d (patches)", name, l.DQ(), l.DKV(), dt, dv)
			} else {
				j.log.Info("learned layer does not fit text to image; computing image to text only", "layer", name)
			}
		}
	}
	return nil
}

// EncodePNG encodes a heatmap sheet as PNG (fast compression).
func EncodePNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("pipeline: heatmap png: %w", err)
	}
	return buf.Bytes(), nil
}
