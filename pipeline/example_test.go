package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"log"
	"os"
	"path/filepath"

	_ "github.com/conditionhq/condition/models/embedded" // the built-in model, "default"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/xattn"
)

// scene draws a blue square in the top left quarter of a grey 128×128
// picture, the kind of image the built-in model was trained on.
func scene() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 128, 128))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{128, 128, 128, 255}}, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(12, 12, 52, 52), &image.Uniform{color.RGBA{30, 60, 220, 255}}, image.Point{}, draw.Src)
	return img
}

// Three tasks on one image: embed it, ask where each word of a prompt
// peaks, and classify it against three labels (zero-shot).
func Example_tasks() {
	ctx := context.Background()
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	imgs, err := eng.EncodeImageData(ctx, [][]byte{scenePNG()})
	if err != nil {
		log.Fatal(err)
	}
	prompts, err := eng.Prepare(ctx, "a blue square")
	if err != nil {
		log.Fatal(err)
	}
	atts, err := eng.Attend(ctx, &imgs[0], prompts, pipeline.AttendOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, ov := range atts[0].Overlays() {
		row, col := ov.PeakCell()
		fmt.Printf("%s peaks in the top left quarter: %v\n", ov.Label, row < 4 && col < 4)
	}
	labels, err := eng.Classify(ctx, &imgs[0], []string{"circle", "square", "star"}, pipeline.ClassifyOptions{Template: "a blue {}"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("best label:", labels[0].Text)
	// Output:
	// blue peaks in the top left quarter: true
	// square peaks in the top left quarter: true
	// best label: square
}

// scenePNG is scene() as a PNG file.
func scenePNG() []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, scene()); err != nil {
		log.Fatal(err)
	}
	return buf.Bytes()
}

// Embed an image and a prompt, and compare them.
func Example() {
	ctx := context.Background()
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	imgs, err := eng.EncodeImages(ctx, []image.Image{scene()})
	if err != nil {
		log.Fatal(err)
	}
	texts, err := eng.EncodeTexts(ctx, []string{"a blue square", "a red circle"})
	if err != nil {
		log.Fatal(err)
	}
	match, other := pipeline.Cosine(imgs[0].Embeds, texts[0].Embeds), pipeline.Cosine(imgs[0].Embeds, texts[1].Embeds)
	fmt.Printf("image_embeds [%d], patches %s of width %d; a blue square is closer: %v\n", len(imgs[0].Embeds), imgs[0].Grid, imgs[0].Width, match > other)
	// Output: image_embeds [64], patches 8x8 of width 64; a blue square is closer: true
}

// Rank prompts for an image by CLIP's similarity.
func ExampleEngine_Similarity() {
	ctx := context.Background()
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	prompts := []string{"a red circle", "a blue square", "a yellow star", "a blue circle"}
	texts, err := eng.EncodeTexts(ctx, prompts)
	if err != nil {
		log.Fatal(err)
	}
	imgs, err := eng.EncodeImages(ctx, []image.Image{scene()})
	if err != nil {
		log.Fatal(err)
	}
	_, logits, err := eng.Similarity(imgs, texts)
	if err != nil {
		log.Fatal(err)
	}
	best := 0
	for j, l := range logits[0] {
		if l > logits[0][best] {
			best = j
		}
	}
	fmt.Println("best:", prompts[best])
	// Output: best: a blue square
}

// Ask where in an image a word is: the patch each word's text → image map
// peaks at. Prepared prompts are encoded once and reused for every image.
func ExampleEngine_Attend() {
	ctx := context.Background()
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	prompts, err := eng.Prepare(ctx, "a blue square")
	if err != nil {
		log.Fatal(err)
	}
	imgs, err := eng.EncodeImages(ctx, []image.Image{scene()})
	if err != nil {
		log.Fatal(err)
	}
	atts, err := eng.Attend(ctx, &imgs[0], prompts, pipeline.AttendOptions{})
	if err != nil {
		log.Fatal(err)
	}
	a := atts[0]
	fmt.Println("grid", a.Grid, "tokens", a.Prompt.Tokens)
	for _, ov := range a.Overlays() {
		// The square covers rows and columns 0 to 3 of the 8×8 grid.
		row, col := ov.PeakCell()
		fmt.Printf("%s peaks in the square: %v\n", ov.Label, row < 4 && col < 4)
	}
	// Output:
	// grid 8x8 tokens [<|startoftext|> a</w> blue</w> square</w> <|endoftext|>]
	// blue peaks in the square: true
	// square peaks in the square: true
}

// Condition image patches on a prompt with a learned cross-attention layer
// in diffusers' naming (as a Stable Diffusion UNet's attn2): patches are the
// queries, the prompt's tokens the keys and values.
func ExampleLayer() {
	ctx := context.Background()
	// A layer of 2 heads, inner width 32, taking the built-in model's
	// 64-wide patches and tokens (a real one comes from a checkpoint).
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "attn2.safetensors")
	w := func(rows, cols int) tensorio.Tensor {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32((i*7)%13-6) / 40
		}
		return tensorio.F32([]int{rows, cols}, v)
	}
	err = tensorio.WriteSafetensors(path, map[string]tensorio.Tensor{
		"attn2.to_q.weight": w(32, 64), "attn2.to_k.weight": w(32, 64), "attn2.to_v.weight": w(32, 64),
		"attn2.to_out.0.weight": w(64, 32), "attn2.to_out.0.bias": tensorio.F32([]int{64}, make([]float32, 64)),
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	layer := pipeline.Layer{Weights: path, Prefix: "attn2.", Heads: 2}
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{Layer: layer, Direction: xattn.ImageToText})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	prompts, err := eng.Prepare(ctx, "a blue square")
	if err != nil {
		log.Fatal(err)
	}
	imgs, err := eng.EncodeImages(ctx, []image.Image{scene()})
	if err != nil {
		log.Fatal(err)
	}
	atts, err := eng.Attend(ctx, &imgs[0], prompts, pipeline.AttendOptions{Conditioned: true, PerHead: true})
	if err != nil {
		log.Fatal(err)
	}
	a := atts[0]
	p, t := a.Grid.Patches(), a.Prompt.T()
	fmt.Printf("conditioned patches [%d, %d], image_to_text [%d, %d], %d heads\n", p, len(a.ConditionedPatches)/p, p, len(a.ImageToText)/p, a.Heads)
	fmt.Println("per head:", len(a.ImageToTextHeads) == a.Heads*p*t, "text → image:", a.TextToImage != nil)
	// Output:
	// conditioned patches [64, 64], image_to_text [64, 5], 2 heads
	// per head: true text → image: false
}
