package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
	"github.com/spf13/pflag"
)

func init() {
	register(command{
		name:    "embed",
		summary: "CLIP embeddings, token and patch states, image–prompt similarity",
		run:     runEmbed,
	})
}

// embedOptions are the flags of `condition embed`.
type embedOptions struct {
	variant  string
	ort      ortOptions
	Model    string
	Prompts  []string
	Truncate bool
	Out      string
	JSON     bool
	Batch    int
}

func (o *embedOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Model, "model", models.DefaultRef, "model: a directory, org/name[@revision], or default")
	fs.StringVar(&o.variant, "variant", "", "graph variant by suffix: fp16, quantized, ... (onnx/text_model_<variant>.onnx)")
	fs.StringArrayVarP(&o.Prompts, "prompt", "p", nil, "a prompt (repeat for more)")
	fs.BoolVar(&o.Truncate, "truncate", false, "cut prompts longer than the model's context (as Hugging Face's truncation=True) instead of failing")
	fs.StringVarP(&o.Out, "out", "o", "", "write embeddings and states to this .safetensors file")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	fs.IntVar(&o.Batch, "batch", 16, "images per vision-encoder run")
	o.ort.AddFlags(fs)
}

const embedUsage = `embed [--model REF] [--prompt TEXT]... [IMAGE...] [--out F.safetensors] [--json]

Encodes the prompts with the model's text encoder and the images with its
vision encoder, and prints the similarity of every image to every prompt:
the cosine of their CLIP embeddings and the logit exp(logit_scale) x cosine
(Hugging Face's logits_per_image). logit_scale comes from model.safetensors,
else from config.json.

--out writes a safetensors file (loadable with safetensors.numpy.load_file)
holding, with Np prompts padded to T tokens and Ni images of 1+P tokens:
  text_embeds       float32 [Np, d_p]     text_projection of the EOS state
  token_states      float32 [Np, T, d_t]  text last_hidden_state (after final_layer_norm)
  attention_mask    int64   [Np, T]       1 for tokens, 0 for padding
  input_ids         int64   [Np, T]
  image_embeds      float32 [Ni, d_p]     visual_projection(post_layernorm(class token))
  patch_states      float32 [Ni, 1+P, d_v] vision last_hidden_state (before post_layernorm);
                                          row 0 is the class token, then the patch grid row by row
  logits_per_image  float32 [Ni, Np]
  cosine            float32 [Ni, Np]
and in __metadata__: model, prompts and images (JSON lists), grid ("HxW"),
logit_scale and program. Tensors of a side with no inputs are left out.`

// embedResult is the --json output.
type embedResult struct {
	Model          string        `json:"model"`
	LogitScale     float32       `json:"logit_scale"`
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
	Path        string    `json:"path"`
	Grid        [2]int    `json:"grid"` // patch rows, columns
	ImageEmbeds []float32 `json:"image_embeds"`
}

func runEmbed(ctx context.Context, e *env, args []string) error {
	var o embedOptions
	fs := newFlagSet(e, "embed", embedUsage)
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	images := fs.Args()
	if len(o.Prompts) == 0 && len(images) == 0 {
		return usagef("nothing to embed: give at least one --prompt or image")
	}
	if o.Batch < 1 {
		return usagef("--batch must be at least 1, got %d", o.Batch)
	}
	if err := o.ort.validate(); err != nil {
		return err
	}
	m, err := openModel(ctx, e, o.Model, o.variant)
	if err != nil {
		return err
	}
	if _, err := o.ort.load(e); err != nil {
		return err
	}
	scale, fromWeights, err := m.LogitScale()
	if err != nil {
		return err
	}
	e.Log.Debug("embed: logit_scale", "value", scale, "from_weights", fromWeights)

	res := embedResult{Model: m.Name(), LogitScale: scale, Prompts: []embedPrompt{}, Images: []embedImage{}}
	tensors := map[string]tensorio.Tensor{}
	meta := map[string]string{"model": m.Name(), "program": "condition " + Version, "logit_scale": strconv.FormatFloat(float64(scale), 'g', -1, 32)}
	if m.Revision() != "" {
		meta["revision"] = m.Revision()
	}

	var textEmb, imageEmb [][]float32
	if len(o.Prompts) > 0 {
		encs, ids, masks, err := embedPrompts(ctx, m, o)
		if err != nil {
			return err
		}
		t, dt := encs[0].T, encs[0].Width
		states := make([]float32, 0, len(encs)*t*dt)
		flatIDs := make([]int64, 0, len(encs)*t)
		flatMask := make([]int64, 0, len(encs)*t)
		for i, enc := range encs {
			if enc.Embeds == nil {
				return fmt.Errorf("embed: %s has no text_embeds output", m.Path(models.TextModelFile))
			}
			states = append(states, enc.States...)
			flatIDs = append(flatIDs, ids[i]...)
			flatMask = append(flatMask, masks[i]...)
			textEmb = append(textEmb, enc.Embeds)
			n := 0
			for _, v := range masks[i] {
				n += int(v)
			}
			res.Prompts = append(res.Prompts, embedPrompt{Text: o.Prompts[i], Tokens: n, TextEmbeds: enc.Embeds})
		}
		np := len(encs)
		tensors["text_embeds"] = tensorio.F32([]int{np, len(textEmb[0])}, flatten(textEmb))
		tensors["token_states"] = tensorio.F32([]int{np, t, dt}, states)
		tensors["input_ids"] = tensorio.I64([]int{np, t}, flatIDs)
		tensors["attention_mask"] = tensorio.I64([]int{np, t}, flatMask)
		pj, _ := json.Marshal(o.Prompts)
		meta["prompts"] = string(pj)
	}
	if len(images) > 0 {
		encs, err := embedImages(ctx, m, o, images)
		if err != nil {
			return err
		}
		tok, dv := encs[0].Tokens, encs[0].Width
		states := make([]float32, 0, len(encs)*tok*dv)
		for i, enc := range encs {
			if enc.Embeds == nil {
				return fmt.Errorf("embed: %s has no image_embeds output", m.Path(models.VisionModelFile))
			}
			states = append(states, enc.States...)
			imageEmb = append(imageEmb, enc.Embeds)
			res.Images = append(res.Images, embedImage{Path: images[i], Grid: [2]int{enc.Grid.H, enc.Grid.W}, ImageEmbeds: enc.Embeds})
		}
		ni := len(encs)
		tensors["image_embeds"] = tensorio.F32([]int{ni, len(imageEmb[0])}, flatten(imageEmb))
		tensors["patch_states"] = tensorio.F32([]int{ni, tok, dv}, states)
		ij, _ := json.Marshal(images)
		meta["images"] = string(ij)
		meta["grid"] = encs[0].Grid.String()
	}
	if len(textEmb) > 0 && len(imageEmb) > 0 {
		if len(textEmb[0]) != len(imageEmb[0]) {
			return fmt.Errorf("embed: text_embeds have %d dimensions, image_embeds %d: not one joint space", len(textEmb[0]), len(imageEmb[0]))
		}
		res.Cosine, res.LogitsPerImage = similarity(imageEmb, textEmb, scale)
		tensors["cosine"] = tensorio.F32([]int{len(imageEmb), len(textEmb)}, flatten(res.Cosine))
		tensors["logits_per_image"] = tensorio.F32([]int{len(imageEmb), len(textEmb)}, flatten(res.LogitsPerImage))
	}
	if o.Out != "" {
		if err := tensorio.WriteSafetensors(o.Out, tensors, meta); err != nil {
			return fmt.Errorf("embed: write %s: %w", o.Out, err)
		}
		res.Out = o.Out
		e.Log.Info("embed: wrote", "file", o.Out, "prompts", len(textEmb), "images", len(imageEmb))
	}
	if o.JSON {
		return writeJSONIndent(e.Stdout, res)
	}
	printEmbed(e, res)
	return nil
}

// embedPrompts tokenizes and encodes the prompts in one batch.
func embedPrompts(ctx context.Context, m *models.Model, o embedOptions) ([]text.Encoding, [][]int64, [][]int64, error) {
	tok, err := text.LoadTokenizer(m.FS())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("embed: model %s: %w", m.Name(), err)
	}
	n := tok.ForModel(m.Config().TextConfig.MaxPositionEmbeddings).ContextLength()
	for i, p := range o.Prompts {
		if strings.TrimSpace(p) == "" {
			return nil, nil, nil, usagef("--prompt %d is empty", i+1)
		}
	}
	if tok, err = tok.WithOptions(text.Options{ContextLength: n, ErrorOnOverflow: !o.Truncate}); err != nil {
		return nil, nil, nil, fmt.Errorf("embed: %w", err)
	}
	flatIDs, flatMask, err := tok.EncodeBatch(o.Prompts, n)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("embed: %w", err)
	}
	ids := make([][]int64, len(o.Prompts))
	masks := make([][]int64, len(o.Prompts))
	for i := range ids {
		ids[i] = flatIDs[i*n : (i+1)*n]
		masks[i] = flatMask[i*n : (i+1)*n]
	}
	enc, err := text.OpenEncoder(m, text.EncoderOptions{Threads: o.ort.threads()})
	if err != nil {
		return nil, nil, nil, err
	}
	defer enc.Close()
	encs, err := enc.Encode(ctx, ids, masks)
	if err != nil {
		return nil, nil, nil, err
	}
	return encs, ids, masks, nil
}

// embedImages decodes, preprocesses and encodes the images, o.Batch at a time.
func embedImages(ctx context.Context, m *models.Model, o embedOptions, paths []string) ([]vision.Encoding, error) {
	pre, err := vision.LoadPreprocessor(m.FS())
	if err != nil {
		return nil, fmt.Errorf("embed: model %s: %w", m.Name(), err)
	}
	enc, err := vision.OpenEncoder(m, vision.EncoderOptions{Threads: o.ort.threads()})
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	var out []vision.Encoding
	for start := 0; start < len(paths); start += o.Batch {
		end := min(start+o.Batch, len(paths))
		var batch []float32
		h, w := 0, 0
		for _, p := range paths[start:end] {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			img, err := vision.DecodeFile(p, vision.DecodeOptions{})
			if err != nil {
				return nil, err
			}
			px, ph, pw, err := pre.Apply(img)
			if err != nil {
				return nil, fmt.Errorf("embed: %s: %w", p, err)
			}
			if h == 0 {
				h, w = ph, pw
			} else if ph != h || pw != w {
				return nil, fmt.Errorf("embed: %s preprocesses to %dx%d, the images before it to %dx%d (the model's preprocessor does not crop to one size)", p, ph, pw, h, w)
			}
			batch = append(batch, px...)
		}
		encs, err := enc.Encode(ctx, batch, end-start, h, w)
		if err != nil {
			return nil, err
		}
		out = append(out, encs...)
	}
	return out, nil
}

// similarity returns cos(image_i, text_j) and exp(scale)·cos, [image][text].
func similarity(images, texts [][]float32, scale float32) (cos, logits [][]float32) {
	norm := func(v []float32) float64 {
		s := 0.0
		for _, x := range v {
			s += float64(x) * float64(x)
		}
		return math.Sqrt(s)
	}
	tn := make([]float64, len(texts))
	for j, t := range texts {
		tn[j] = norm(t)
	}
	k := math.Exp(float64(scale))
	cos = make([][]float32, len(images))
	logits = make([][]float32, len(images))
	for i, im := range images {
		in := norm(im)
		cos[i] = make([]float32, len(texts))
		logits[i] = make([]float32, len(texts))
		for j, t := range texts {
			d := 0.0
			for c := range t {
				d += float64(im[c]) * float64(t[c])
			}
			c := 0.0
			if in > 0 && tn[j] > 0 {
				c = d / (in * tn[j])
			}
			cos[i][j], logits[i][j] = float32(c), float32(k*c)
		}
	}
	return cos, logits
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
	fmt.Fprintf(w, "model %s, logit_scale %.4f (x%.2f)\n", r.Model, r.LogitScale, math.Exp(float64(r.LogitScale)))
	for i, p := range r.Prompts {
		fmt.Fprintf(w, "prompt %d: %q, %d tokens, text_embeds [%d]\n", i, p.Text, p.Tokens, len(p.TextEmbeds))
	}
	for i, im := range r.Images {
		fmt.Fprintf(w, "image %d: %s, grid %dx%d, image_embeds [%d]\n", i, im.Path, im.Grid[0], im.Grid[1], len(im.ImageEmbeds))
	}
	if len(r.Cosine) > 0 {
		fmt.Fprintf(w, "\nlogits_per_image (cosine):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "image")
		for _, p := range r.Prompts {
			fmt.Fprintf(tw, "\t%s", shorten(p.Text, 28))
		}
		fmt.Fprintln(tw)
		for i, im := range r.Images {
			fmt.Fprint(tw, shorten(filepath.Base(im.Path), 28))
			for j := range r.Prompts {
				fmt.Fprintf(tw, "\t%.3f (%.4f)", r.LogitsPerImage[i][j], r.Cosine[i][j])
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if r.Out != "" {
		fmt.Fprintf(w, "\nwrote %s\n", r.Out)
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
