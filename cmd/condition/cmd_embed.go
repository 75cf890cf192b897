package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video"
)

// embedOptions are the flags of `condition embed`.
type embedOptions struct {
	eng     engineFlags
	Prompts []string
	Out     string
	JSON    bool
	Batch   int
	Streams int
	fps     float64
	frames  string
}

func (o *embedOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&o.Prompts, "prompt", "p", nil, "prompt text; repeatable")
	fs.StringVarP(&o.Out, "out", "o", "", "write embeddings and states to this file: F.safetensors (with the model, prompts and settings in its metadata) or F.npz (numpy.load; no metadata)")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	fs.IntVar(&o.Batch, "batch", 16, "images per vision encoder call")
	fs.IntVar(&o.Streams, "streams", 0, "vision encoder batches run at once, as for run (0: with --threads 0, min(cores, 4) batches of cores/streams ONNX Runtime threads; with --threads N, one)")
	fs.Float64Var(&o.fps, "fps", video.DefaultFPS, "frames per second of a video embedded, the first frame at or after each k/FPS seconds (as run)")
	fs.StringVar(&o.frames, "frames", "fps", "which frames of a video are embedded: fps (see --fps), all, keyframes, or scene[:THRESHOLD] (as run)")
	o.eng.AddFlags(fs, withImages|withPrompts|withPrecision|withReadout|withStreams)
}

const embedUsage = `embed [--model REF] [--prompt TEXT]... [IMAGE|VIDEO|FOLDER...] [--out F.safetensors|F.npz] [--json]

Encodes the prompts with the model's text encoder and the images with its
vision encoder (a folder gives the images under it, walked as run walks
them: recursively, by extension, in name order), and prints the similarity
of every image to every prompt:
the cosine of their embeddings and the logit exp(logit_scale) x cosine
(Hugging Face's logits_per_image; SigLIP adds its logit_bias, and scores each
prompt on its own: probs_per_image = sigmoid(logits)). logit_scale comes
from model.safetensors, else from config.json.

A video (.mp4 .mkv .webm .mov .avi .m4v, decoded by FFmpeg) gives one
embedding per sampled frame (--fps, --frames, as run), named
VIDEO#t=SECONDS; in --json each such image also has its video and time.

Images go through the vision encoder as run's do: --streams batches of
--batch images at once, each stream decoding its next batch while the
others encode. The results are the same whatever the streams, threads and
batch, at --precision int8 too (its activations are quantized per row).

--out writes a safetensors file (loadable with safetensors.numpy.load_file;
F.npz: the same arrays for numpy.load, without the metadata)
holding, with Np prompts padded to T tokens and Ni images of 1+P tokens:
  text_embeds       float32 [Np, d_p]     text_projection of the EOS state
  token_states      float32 [Np, T, d_t]  text last_hidden_state (after final_layer_norm)
  attention_mask    int64   [Np, T]       1 for tokens, 0 for padding
  input_ids         int64   [Np, T]
  image_embeds      float32 [Ni, d_p]     visual_projection(post_layernorm(class token))
  patch_states      float32 [Ni, 1+P, d_v] vision last_hidden_state (before post_layernorm);
                                          row 0 is the class token, then the patch grid row by row
  patch_embeds      float32 [Ni, P, d_p]  the patches in the joint space, L2-normalised, as
                                          --readout reads them: what heatmaps and indexes use
  logits_per_image  float32 [Ni, Np]
  probs_per_image   float32 [Ni, Np]      SigLIP only: sigmoid(logits_per_image)
  cosine            float32 [Ni, Np]
and in __metadata__: model, family, scores ("softmax" or "sigmoid"), prompts
and images (JSON lists), grid ("HxW"), readout, logit_scale (and
logit_bias) and program. Tensors of a side with no inputs are left out. For SigLIP models
there is no class token (patch_states [Ni, P, d_v], every row a patch, after
post_layernorm) and the embeddings are the towers' pooler_output. For SigLIP 2 NaFlex each
image has its own grid: patch_states [Ni, M, d_v] and patch_embeds [Ni, M, d_p] hold each
image's patches first and zeros after them, up to M = max_num_patches, with
  patch_mask        int64   [Ni, M]       1 for the image's own patches
  spatial_shapes    int64   [Ni, 2]       its grid: patch rows, columns
and grids (a JSON list of rows, columns pairs) in place of grid. For TIPSv2 there are
no projection heads: text_embeds is the mean of token_states over the mask, patch_states
[Ni, 1+R+P, d] holds the class token, the R register tokens, then the patches (after the
final layernorm), image_embeds is its row 0, patch_embeds its patch rows L2-normalised
(readout raw only), and logit_scale is log(1/temperature): logits are cosine / temperature.`

// embedResult is the --json output.
type embedResult struct {
	Model          string        `json:"model"`
	Family         string        `json:"family"`
	Scores         string        `json:"scores"` // "softmax" (CLIP) or "sigmoid" (SigLIP: probs_per_image)
	LogitScale     float32       `json:"logit_scale"`
	LogitBias      *float32      `json:"logit_bias,omitempty"`
	ProbsPerImage  [][]float32   `json:"probs_per_image,omitempty"` // [image][prompt], sigmoid scores only
	Prompts        []embedPrompt `json:"prompts"`
	Images         []embedImage  `json:"images"`
	LogitsPerImage [][]float32   `json:"logits_per_image,omitempty"` // [image][prompt]
	Cosine         [][]float32   `json:"cosine,omitempty"`           // [image][prompt]
	Out            string        `json:"out,omitempty"`
}

type embedPrompt struct {
	Text       string    `json:"text"`
	Tokens     int       `json:"tokens"` // BOS through EOS
	TextEmbeds []float32 `json:"text_embeds"`
}

type embedImage struct {
	Path        string    `json:"path"`            // a video's frame: VIDEO#t=SECONDS
	Video       string    `json:"video,omitempty"` // a video's frame: the video
	Time        *float64  `json:"time,omitempty"`  // a video's frame: its presentation time in seconds
	Grid        [2]int    `json:"grid"`            // patch rows, columns
	ImageEmbeds []float32 `json:"image_embeds"`
}

func runEmbed(ctx context.Context, e *env, args []string) error {
	var o embedOptions
	fs := newFlagSet(e, "embed", embedUsage)
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(o.Prompts) == 0 && fs.NArg() == 0 {
		return usagef("nothing to embed: give at least one --prompt or image")
	}
	if o.Batch < 1 {
		return usagef("--batch must be at least 1, got %d", o.Batch)
	}
	if o.Streams < 0 {
		return usagef("--streams must be 0 or more, got %d", o.Streams)
	}
	format, err := outFormat("--out", o.Out, ".safetensors", ".npz")
	if err != nil {
		return err
	}
	if o.Out != "" {
		if err := checkWritableFile("--out", o.Out); err != nil {
			return err
		}
	}
	for i, p := range o.Prompts {
		if strings.TrimSpace(p) == "" {
			return usagef("--prompt %d is empty (prompts are numbered from 0)", i)
		}
	}
	if _, err := o.eng.options(pipeline.Options{}); err != nil {
		return err
	}
	ins, err := embedInputs(ctx, fs.Args())
	if err != nil {
		return err
	}
	vo, err := embedSampling(&o, fs, ins)
	if err != nil {
		return err
	}
	// Images go through the encoder as run's do; prompts alone, in one text
	// encoder call, take every thread.
	base := pipeline.Options{Batch: o.Batch}
	if len(ins) > 0 {
		base.Streams, base.NoSpinning = autoStreams(o.Streams), true
	}
	eng, err := o.eng.open(ctx, e, base)
	if err != nil {
		return err
	}
	m := eng.Model()
	defer eng.Close()
	res, meta, err := embedHeader(e, eng)
	if err != nil {
		return err
	}
	tensors := map[string]tensorio.Tensor{}

	var texts []pipeline.TextEncoding
	var images []pipeline.ImageEncoding
	var failed []error // images that could not be read or decoded
	if len(o.Prompts) > 0 {
		if texts, err = eng.EncodeTexts(ctx, o.Prompts); err != nil {
			return err
		}
		if res.Prompts, err = textTensors(eng, m, texts, o.Prompts, tensors); err != nil {
			return err
		}
		pj, _ := json.Marshal(o.Prompts)
		meta["prompts"] = string(pj)
	}
	if len(ins) > 0 {
		t := time.Now()
		d, err := embedAll(ctx, eng, ins, vo, pipeline.StreamOptions{Batch: o.Batch})
		if err != nil {
			return err
		}
		images, failed = d.encs, d.failed
		elapsed := time.Since(t)
		e.Log.Debug("embed: images encoded", "images", len(images), "streams", eng.Streams(), "threads", eng.Threads(), "batch", o.Batch,
			"elapsed", elapsed.Round(time.Millisecond), "images_per_s", math.Round(10*float64(len(images))/elapsed.Seconds())/10)
		if res.Images, err = imageTensors(eng, m, images, d.names, tensors, meta); err != nil {
			return err
		}
		for i := range res.Images {
			res.Images[i].Video, res.Images[i].Time = d.videos[i], d.times[i]
		}
	}
	if len(texts) > 0 && len(images) > 0 {
		if res.Cosine, res.LogitsPerImage, err = eng.Similarity(images, texts); err != nil {
			return fmt.Errorf("embed: %w", err)
		}
		tensors["cosine"] = tensorio.F32([]int{len(images), len(texts)}, flatten(res.Cosine))
		tensors["logits_per_image"] = tensorio.F32([]int{len(images), len(texts)}, flatten(res.LogitsPerImage))
		if eng.Scores() == pipeline.SigmoidScores {
			res.ProbsPerImage = eng.Probs(res.LogitsPerImage)
			tensors["probs_per_image"] = tensorio.F32([]int{len(images), len(texts)}, flatten(res.ProbsPerImage))
		}
	}
	if o.Out != "" {
		write := func() error { return tensorio.WriteSafetensors(o.Out, tensors, meta) }
		if format == ".npz" {
			write = func() error { return tensorio.WriteNPZ(o.Out, tensors) }
		}
		if err := write(); err != nil {
			return fmt.Errorf("embed: write %s: %w", o.Out, err)
		}
		res.Out = o.Out
		e.Log.Info("embed: wrote", "file", o.Out, "prompts", len(texts), "images", len(images))
	}
	if o.JSON {
		if err := writeJSONIndent(e.Stdout, res); err != nil {
			return err
		}
	} else {
		printEmbed(e, res)
	}
	return failedImages(e, failed, len(images)+len(failed))
}

// embedHeader returns the result's and the file's description of the
// model: its name, family, scores, logit_scale (and SigLIP's logit_bias),
// revision and this program's version.
func embedHeader(e *env, eng *pipeline.Engine) (embedResult, map[string]string, error) {
	m := eng.Model()
	scale, fromWeights, err := m.LogitScale()
	if err != nil {
		return embedResult{}, nil, err
	}
	e.Log.Debug("embed: logit_scale", "value", scale, "from_weights", fromWeights)

	res := embedResult{Model: m.Name(), Family: m.Family().String(), Scores: string(eng.Scores()), LogitScale: scale, Prompts: []embedPrompt{}, Images: []embedImage{}}
	meta := map[string]string{"model": m.Name(), "family": res.Family, "scores": res.Scores, "program": "condition " + Version, "logit_scale": strconv.FormatFloat(float64(scale), 'g', -1, 32)}
	if eng.Scores() == pipeline.SigmoidScores {
		bias, _, err := m.LogitBias()
		if err != nil {
			return embedResult{}, nil, err
		}
		res.LogitBias = &bias
		meta["logit_bias"] = strconv.FormatFloat(float64(bias), 'g', -1, 32)
	}
	if m.Revision() != "" {
		meta["revision"] = m.Revision()
	}
	return res, meta, nil
}

// textTensors adds the prompts' tensors to tensors, as --out writes them:
// text_embeds [Np, d_p], token_states [Np, T, d_t], input_ids and
// attention_mask [Np, T] (padded with the tokenizer's pad id); and returns
// each prompt's printed result.
func textTensors(eng *pipeline.Engine, m *models.Model, texts []pipeline.TextEncoding, prompts []string, tensors map[string]tensorio.Tensor) ([]embedPrompt, error) {
	var out []embedPrompt
	t, dt := texts[0].Padded, texts[0].Width
	states := make([]float32, 0, len(texts)*t*dt)
	flatIDs := make([]int64, 0, len(texts)*t)
	flatMask := make([]int64, 0, len(texts)*t)
	var textEmb []float32
	for i, enc := range texts {
		if enc.Embeds == nil {
			return nil, fmt.Errorf("embed: %s has no text_embeds output", m.Path(models.TextModelFile))
		}
		states = append(states, enc.States...)
		ids := make([]int64, t)
		for k := range ids {
			ids[k] = int64(eng.Tokenizer().Pad())
		}
		copy(ids, enc.IDs)
		flatIDs = append(flatIDs, ids...)
		flatMask = append(flatMask, enc.Mask...)
		textEmb = append(textEmb, enc.Embeds...)
		out = append(out, embedPrompt{Text: prompts[i], Tokens: enc.T(), TextEmbeds: enc.Embeds})
	}
	np := len(texts)
	tensors["text_embeds"] = tensorio.F32([]int{np, len(texts[0].Embeds)}, textEmb)
	tensors["token_states"] = tensorio.F32([]int{np, t, dt}, states)
	tensors["input_ids"] = tensorio.I64([]int{np, t}, flatIDs)
	tensors["attention_mask"] = tensorio.I64([]int{np, t}, flatMask)
	return out, nil
}

// imageTensors adds the images' tensors to tensors and their metadata to
// meta, as --out writes them: image_embeds [Ni, d_p], patch_states [Ni, T,
// d_v] (each image's rows padded with zeros to the most any has; NaFlex:
// patch_mask and spatial_shapes), patch_embeds [Ni, P, d_p] in the joint
// space; and returns each image's printed result.
func imageTensors(eng *pipeline.Engine, m *models.Model, images []pipeline.ImageEncoding, paths []string,
	tensors map[string]tensorio.Tensor, meta map[string]string) ([]embedImage, error) {
	var out []embedImage
	// Every image's rows, padded with zeros to the most any image has
	// (SigLIP 2 NaFlex: the patch budget, each image on its own grid).
	dv := images[0].Width
	tok := len(images[0].States) / dv
	naflex := eng.Preprocessor().NaFlex
	if naflex != nil {
		tok = naflex.MaxNumPatches
	}
	ni := len(images)
	states := make([]float32, ni*tok*dv)
	var imageEmb []float32
	mask, shapes := make([]int64, ni*tok), make([]int64, 0, 2*ni)
	for i, enc := range images {
		if enc.Embeds == nil {
			return nil, fmt.Errorf("embed: %s has no image_embeds output", m.Path(models.VisionModelFile))
		}
		copy(states[i*tok*dv:(i+1)*tok*dv], enc.States)
		for j := range len(enc.States) / dv {
			mask[i*tok+j] = 1
		}
		shapes = append(shapes, int64(enc.Grid.H), int64(enc.Grid.W))
		imageEmb = append(imageEmb, enc.Embeds...)
		out = append(out, embedImage{Path: paths[i], Grid: [2]int{enc.Grid.H, enc.Grid.W}, ImageEmbeds: enc.Embeds})
	}
	tensors["image_embeds"] = tensorio.F32([]int{ni, len(images[0].Embeds)}, imageEmb)
	tensors["patch_states"] = tensorio.F32([]int{ni, tok, dv}, states)
	if naflex != nil {
		tensors["patch_mask"] = tensorio.I64([]int{ni, tok}, mask)
		tensors["spatial_shapes"] = tensorio.I64([]int{ni, 2}, shapes)
	}
	if dp := eng.JointDim(); dp > 0 {
		p := tok - (len(images[0].States)/dv - images[0].P()) // less the class token, if any
		joint := make([]float32, ni*p*dp)
		for i := range images {
			rows, err := eng.JointPatches(&images[i])
			if err != nil {
				return nil, fmt.Errorf("embed: %s: %w", shown(paths[i]), err)
			}
			copy(joint[i*p*dp:(i+1)*p*dp], rows)
		}
		tensors["patch_embeds"] = tensorio.F32([]int{ni, p, dp}, joint)
		meta["readout"] = string(eng.Options().Readout)
	}
	ij, _ := json.Marshal(paths)
	meta["images"] = string(ij)
	if naflex != nil {
		gj, _ := json.Marshal(shapes)
		meta["grids"] = string(gj)
	} else {
		meta["grid"] = images[0].Grid.String()
	}
	return out, nil
}

// failedImages logs each image that failed and returns the error that
// makes embed exit 1 when any did (nil otherwise).
func failedImages(e *env, failed []error, total int) error {
	for _, err := range failed {
		e.Log.Warn("image failed", "err", err)
	}
	if len(failed) == 0 {
		return nil
	}
	return exitError{code: exitFailed, msg: fmt.Sprintf("%d of %d images failed (the others were embedded): %v", len(failed), total, failed[0])}
}

// embedInputs turns the image and video arguments into inputs, before
// any work: a file is taken as it is (a video by its extension), a folder
// gives the images and videos under it as run walks them (batch.List). A
// missing path, or a folder without any, is a usage error naming it.
func embedInputs(ctx context.Context, args []string) ([]embedInput, error) {
	var ins []embedInput
	for _, a := range args {
		st, err := os.Stat(a)
		if errors.Is(err, iofs.ErrNotExist) {
			return nil, usagef("no image, video or folder %s", shown(a))
		}
		if err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		n := len(ins)
		if err := batch.List(ctx, []string{a}, func(it batch.Item) error {
			ins = append(ins, embedInput{path: it.Path, video: video.IsName(it.Path)})
			return nil
		}, nil); err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		if st.IsDir() && len(ins) == n {
			return nil, usagef("folder %s holds no images (files named %s, any case) or videos (%s)", shown(a), strings.Join(imageExtensions(), ", "), strings.Join(video.Exts(), ", "))
		}
	}
	return ins, nil
}

// embedSampling parses --fps and --frames, which are for videos only.
func embedSampling(o *embedOptions, fs *pflag.FlagSet, ins []embedInput) (video.Options, error) {
	vo, err := videoSampling(o.frames, o.fps, o.eng.maxPixels)
	if err != nil {
		return vo, err
	}
	for _, in := range ins {
		if in.video {
			return vo, nil
		}
	}
	if fs.Changed("fps") || fs.Changed("frames") {
		return vo, usagef("--fps and --frames are for videos (%s); no input is one", strings.Join(video.Exts(), " "))
	}
	return vo, nil
}

// imageExtensions lists the extensions a folder walk takes.
func imageExtensions() []string {
	var out []string
	for _, x := range []string{".jpg", ".jpeg", ".jpe", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp"} {
		if vision.IsImageName("x" + x) {
			out = append(out, x)
		}
	}
	return out
}

// embedImages decodes and encodes the images, in order, on the encoder
// streams of opts, and returns the encodings and paths of those that
// worked and an error naming each that failed (to read or decode).
func embedImages(ctx context.Context, eng *pipeline.Engine, paths []string, opts pipeline.StreamOptions) (encs []pipeline.ImageEncoding, done []string, failed []error, err error) {
	encs = make([]pipeline.ImageEncoding, 0, len(paths))
	err = eng.EncodeImageStream(ctx, len(paths), func(i int) ([]byte, error) { return os.ReadFile(paths[i]) }, opts, func(r pipeline.ImageResult) error {
		var pe *iofs.PathError
		switch {
		case errors.As(r.Err, &pe):
			failed = append(failed, r.Err) // it names the file
		case r.Err != nil:
			failed = append(failed, fmt.Errorf("%s: %w", shown(paths[r.Index]), r.Err))
		default:
			encs, done = append(encs, r.Encoding), append(done, paths[r.Index])
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return encs, done, failed, nil
}

func flatten(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func printEmbed(e *env, r embedResult) {
	w := e.Stdout
	if r.LogitBias != nil {
		fmt.Fprintf(w, "model %s (%s), logit_scale %.4f (x%.2f), logit_bias %.4f, sigmoid scores\n", r.Model, r.Family, r.LogitScale, math.Exp(float64(r.LogitScale)), *r.LogitBias)
	} else if r.Family == models.Tipsv2.String() {
		fmt.Fprintf(w, "model %s (%s), temperature %.4g (x%.2f)\n", r.Model, r.Family, math.Exp(-float64(r.LogitScale)), math.Exp(float64(r.LogitScale)))
	} else {
		fmt.Fprintf(w, "model %s, logit_scale %.4f (x%.2f)\n", r.Model, r.LogitScale, math.Exp(float64(r.LogitScale)))
	}
	for i, p := range r.Prompts {
		fmt.Fprintf(w, "prompt %d: %q, %d tokens, text_embeds [%d]\n", i, p.Text, p.Tokens, len(p.TextEmbeds))
	}
	for i, im := range r.Images {
		fmt.Fprintf(w, "image %d: %s, grid %dx%d, image_embeds [%d]\n", i, shown(im.Path), im.Grid[0], im.Grid[1], len(im.ImageEmbeds))
	}
	if len(r.Cosine) > 0 {
		if r.ProbsPerImage != nil {
			fmt.Fprintf(w, "\nlogits_per_image (cosine) [sigmoid]:\n")
		} else {
			fmt.Fprintf(w, "\nlogits_per_image (cosine):\n")
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "image")
		for _, p := range r.Prompts {
			fmt.Fprintf(tw, "\t%s", shorten(p.Text, 28))
		}
		fmt.Fprintln(tw)
		for i, im := range r.Images {
			fmt.Fprint(tw, shorten(shown(filepath.Base(im.Path)), 28))
			for j := range r.Prompts {
				fmt.Fprintf(tw, "\t%.3f (%.4f)", r.LogitsPerImage[i][j], r.Cosine[i][j])
				if r.ProbsPerImage != nil {
					fmt.Fprintf(tw, " [%.3f]", r.ProbsPerImage[i][j])
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if r.Out != "" {
		fmt.Fprintf(w, "\nwrote %s\n", shown(r.Out))
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
