package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

const preprocessUsage = `preprocess [--model REF | --preprocessor FILE] --out F.npy|F.safetensors [--max-pixels N] [--no-exif-orientation] [--decode fast] [--json] IMAGE

Decodes IMAGE (JPEG, PNG, GIF, BMP, TIFF or WebP), puts it upright from its
EXIF orientation, and writes the pixel_values tensor [1, 3, H, W] float32
that the model's CLIPImageProcessor makes of it to F.npy, as
numpy.load(F.npy) would compare with
CLIPImageProcessor.from_pretrained(...)(ImageOps.exif_transpose(Image.open(IMAGE)))["pixel_values"].
--out F.safetensors writes it as the tensor pixel_values of a safetensors file
(safetensors.numpy.load_file) instead.
With --decode fast (or fastest), a JPEG is first opened as Pillow's
im.draft("RGB", (2s, 2s)) (or (s, s)) opens it, s the side the processor
resizes to, as run --decode fast does.

--model is a model directory (its preprocessor_config.json), a hub id
org/name[@revision], or default; --preprocessor is a preprocessor_config.json
file. Prints one line about what was written (with --json, a JSON object).

SigLIP 2's NaFlex processor (Siglip2ImageProcessor) keeps the image's aspect
within its max_num_patches: F.npy gets its pixel_values [1, M, 3·p²] float32
(the image's patches row-major, each patch's pixels channel-last, zero rows
after them, M = max_num_patches, p the patch), and beside it, named after
the processor's outputs, F.pixel_attention_mask.npy int32 [1, M] (1 for the
image's patches) and F.spatial_shapes.npy int64 [1, 2] (its patch rows and
columns), as Siglip2ImageProcessor(...)(image) returns them.`

// preprocessOptions are the flags of `condition preprocess`.
type preprocessOptions struct {
	Model         string
	Preprocessor  string
	Out           string
	MaxPixels     int64
	NoOrientation bool
	JSON          bool
	Decode        string
}

func (o *preprocessOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Model, "model", models.DefaultRef, "model directory, hub id org/name[@revision], or default: its preprocessor_config.json")
	fs.StringVar(&o.Preprocessor, "preprocessor", "", "a preprocessor_config.json file (instead of --model)")
	fs.StringVarP(&o.Out, "out", "o", "", "the file to write pixel_values [1, 3, H, W] float32 to (required): F.npy, or F.safetensors (with NaFlex's pixel_attention_mask and spatial_shapes in the same file)")
	fs.Int64Var(&o.MaxPixels, "max-pixels", 0, maxPixelsUsage)
	fs.BoolVar(&o.NoOrientation, "no-exif-orientation", false, "ignore the EXIF orientation tag (CLIPImageProcessor alone does not apply it)")
	fs.BoolVar(&o.JSON, "json", false, "print a JSON object instead of a line")
	fs.StringVar(&o.Decode, "decode", "exact", decodeUsage)
}

// loadPreprocessor reads the preprocessor config that --preprocessor or
// --model names. A plain directory needs only preprocessor_config.json.
func loadPreprocessor(ctx context.Context, e *env, o *preprocessOptions) (*vision.Preprocessor, string, error) {
	if o.Preprocessor != "" {
		p, err := vision.LoadPreprocessorFile(o.Preprocessor)
		return p, o.Preprocessor, err
	}
	// A folder is read as it is, but one in OpenCLIP's layout (no
	// preprocessor_config.json: its preprocessing is made from
	// open_clip_config.json), which opens as a model.
	if st, err := os.Stat(o.Model); err == nil && st.IsDir() && !openCLIPFolder(o.Model) {
		p, err := vision.LoadPreprocessor(os.DirFS(o.Model))
		if err != nil {
			return nil, "", fmt.Errorf("%w (model %s)", err, o.Model)
		}
		return p, filepath.Join(o.Model, vision.PreprocessorConfigFile), nil
	}
	m, err := openModel(ctx, e, o.Model, "")
	if err != nil {
		return nil, "", err
	}
	p, err := vision.LoadPreprocessor(m.FS())
	if err != nil {
		return nil, "", fmt.Errorf("%w (model %s)", err, m.Name())
	}
	return p, m.Name() + ":" + vision.PreprocessorConfigFile, nil
}

func runPreprocess(ctx context.Context, e *env, args []string) error {
	var o preprocessOptions
	fs := newFlagSet(e, "preprocess", preprocessUsage)
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one IMAGE, got %d arguments", fs.NArg())
	}
	if o.Out == "" {
		return usagef("--out F.npy is required")
	}
	if _, err := outFormat("--out", o.Out, ".npy", ".safetensors"); err != nil {
		return err
	}
	if err := checkWritableFile("--out", o.Out); err != nil {
		return err
	}
	if o.Preprocessor != "" && fs.Changed("model") {
		return usagef("give --model or --preprocessor, not both")
	}
	if err := checkMaxPixels(o.MaxPixels); err != nil {
		return err
	}
	mode, err := parseDecode(o.Decode)
	if err != nil {
		return err
	}
	p, from, err := loadPreprocessor(ctx, e, &o)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	path := fs.Arg(0)
	opt := vision.DecodeOptions{MaxPixels: o.MaxPixels, NoOrientation: o.NoOrientation, // 0: Pillow's limit, -1: none
		Draft: draftSide(mode, p)}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	img, info, err := vision.DecodeInfo(data, opt)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if p.NaFlex != nil {
		return preprocessNaFlex(e, &o, p, path, from, img, info)
	}
	pixels, h, w, err := p.Apply(img)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	shape := []int{1, 3, h, w}
	if err := writeArrays(o.Out, []namedArray{{"pixel_values", o.Out, tensorio.F32(shape, pixels)}}); err != nil {
		return err
	}
	e.Log.Debug("preprocessed", "image", path, "config", from, "upright", fmt.Sprintf("%dx%d", info.Width, info.Height), "scale", info.Scale)
	if o.JSON {
		return json.NewEncoder(e.Stdout).Encode(map[string]any{
			"image": path, "out": o.Out, "shape": shape, "dtype": "float32",
			"width": info.Width, "height": info.Height, "scale": info.Scale, "preprocessor": from,
		})
	}
	scaled := ""
	if info.Scale > 1 {
		b := img.Bounds()
		scaled = fmt.Sprintf(", decoded at 1/%d: %dx%d", info.Scale, b.Dx(), b.Dy())
	}
	_, err = fmt.Fprintf(e.Stdout, "%s: pixel_values [1, 3, %d, %d] float32 from %s (%dx%d upright%s) with %s\n",
		o.Out, h, w, path, info.Width, info.Height, scaled, from)
	return err
}

// draftSide is the vision.DecodeOptions.Draft that mode asks for images
// that pre resizes, as the engine decodes them: 2× (fast) or 1× (fastest)
// the larger of the sides it resizes to; 0 for exact decoding and for a
// preprocessor that keeps the image's size.
func draftSide(mode pipeline.DecodeMode, pre *vision.Preprocessor) int {
	if mode != pipeline.DecodeFast && mode != pipeline.DecodeFastest || !pre.DoResize {
		return 0
	}
	side := max(pre.Size.ShortestEdge, pre.Size.Height, pre.Size.Width)
	if mode == pipeline.DecodeFast {
		side *= 2
	}
	return side
}

// preprocessNaFlex writes a SigLIP 2 NaFlex image's pixel_values, mask and
// spatial shape (o.Out and two files beside it).
func preprocessNaFlex(e *env, o *preprocessOptions, p *vision.Preprocessor, path, from string, img image.Image, info vision.Info) error {
	nf := p.NaFlex
	m, dim := nf.MaxNumPatches, nf.PatchDim()
	pixels, mask, spatial := make([]float32, m*dim), make([]int32, m), make([]int64, 2)
	g, err := p.ApplyNaFlexInto(pixels, mask, spatial, img)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	stem := strings.TrimSuffix(o.Out, ".npy")
	maskOut, shapeOut := stem+".pixel_attention_mask.npy", stem+".spatial_shapes.npy"
	if strings.EqualFold(filepath.Ext(o.Out), ".safetensors") {
		maskOut, shapeOut = o.Out, o.Out
	}
	if err := writeArrays(o.Out, []namedArray{
		{"pixel_values", o.Out, tensorio.F32([]int{1, m, dim}, pixels)},
		{"pixel_attention_mask", maskOut, tensorio.Tensor{DType: tensorio.DTypeI32, Shape: []int{1, m}, Data: mask}},
		{"spatial_shapes", shapeOut, tensorio.I64([]int{1, 2}, spatial)},
	}); err != nil {
		return err
	}
	if o.JSON {
		return json.NewEncoder(e.Stdout).Encode(map[string]any{
			"image": path, "out": o.Out, "shape": []int{1, m, dim}, "dtype": "float32",
			"pixel_attention_mask": maskOut, "spatial_shapes": shapeOut, "grid": []int{g.H, g.W},
			"width": info.Width, "height": info.Height, "scale": info.Scale, "preprocessor": from,
		})
	}
	_, err = fmt.Fprintf(e.Stdout, "%s: pixel_values [1, %d, %d] float32 (a %dx%d patch grid of %d), %s and %s from %s (%dx%d upright) with %s\n",
		o.Out, m, dim, g.H, g.W, m, maskOut, shapeOut, path, info.Width, info.Height, from)
	return err
}

// namedArray is one array preprocess writes: its name (in a safetensors
// file), the .npy file it goes to otherwise, and its values.
type namedArray struct {
	name, npy string
	t         tensorio.Tensor
}

// writeArrays writes the arrays to out, one safetensors file holding them
// all by name when out ends in .safetensors, else each to its own .npy
// file.
func writeArrays(out string, arrays []namedArray) error {
	if strings.EqualFold(filepath.Ext(out), ".safetensors") {
		ts := map[string]tensorio.Tensor{}
		for _, a := range arrays {
			ts[a.name] = a.t
		}
		return tensorio.WriteSafetensors(out, ts, nil)
	}
	for _, a := range arrays {
		if err := tensorio.WriteNPY(a.npy, a.t); err != nil {
			return err
		}
	}
	return nil
}

// openCLIPFolder reports whether dir holds a model in OpenCLIP's layout:
// open_clip_config.json and no preprocessor_config.json.
func openCLIPFolder(dir string) bool {
	_, errPre := os.Stat(filepath.Join(dir, vision.PreprocessorConfigFile))
	_, errOC := os.Stat(filepath.Join(dir, models.OpenCLIPConfigFile))
	return errPre != nil && errOC == nil
}
