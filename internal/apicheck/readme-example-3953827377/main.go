package main

import (
	"context"
	"fmt"
	"log"
	"os"

	_ "github.com/conditionhq/condition/models/embedded" // the built-in model, "default"
	"github.com/conditionhq/condition/pipeline"
)

func main() {
	ctx := context.Background()
	eng := must(pipeline.Open(ctx, "default", pipeline.Options{})) // or a model folder, or org/name[@revision]
	defer eng.Close()
	data := must(os.ReadFile("testdata/scenes/images/scene_004.png"))
	imgs := must(eng.EncodeImageData(ctx, [][]byte{data}))
	prompts := must(eng.Prepare(ctx, "a yellow circle and a red star")) // encoded once, for any number of images
	atts := must(eng.Attend(ctx, &imgs[0], prompts, pipeline.AttendOptions{}))
	for _, ov := range atts[0].Overlays() { // one per content word: where it peaks on the patch grid
		r, c := ov.PeakCell()
		fmt.Println(ov.Label, r, c, ov.Peak)
	}
	labels := must(eng.Classify(ctx, &imgs[0], []string{"circle", "square", "star"}, pipeline.ClassifyOptions{Template: "a photo of a {}"}))
	fmt.Println(labels[0].Text, labels[0].Prob)                 // best first
	sheet := must(atts[0].Heatmap(must(eng.DecodeImage(data)))) // *image.RGBA: the image and one panel per word
	if err := os.WriteFile("where.png", must(pipeline.EncodePNG(sheet)), 0o644); err != nil {
		log.Fatal(err)
	}
}

func must[T any](v T, err error) T { // a real program returns its errors
	if err != nil {
		log.Fatal(err)
	}
	return v
}
