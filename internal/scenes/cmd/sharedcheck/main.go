// Command sharedcheck measures how the built-in model's text → image maps
// handle two objects that share a word ("an orange star below an orange
// cross", "a purple circle and a yellow circle"): on two-object scenes of
// the generator (seed 1003, its one drawing) where the objects share their
// colour or their shape, for each colour and shape word of the caption,
// whether its map peaks at a patch its own object covers at least a quarter
// of, for the shared words (first and second mention) and for the others.
//
//	go run ./internal/scenes/cmd/sharedcheck
package main

import (
	"context"
	"fmt"
	"image"
	"log"

	"github.com/conditionhq/condition/internal/eval"

	"github.com/conditionhq/condition/internal/scenes"
	_ "github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
)

func main() {
	ctx := context.Background()
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{Threads: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	g := scenes.Generator{Seed: 1003, MinObjects: 2, MaxObjects: 2}
	var ok, n, okFirst, nFirst, okSecond, nSecond, okOther, nOther int
	for i := 0; i < 1500; i++ {
		s := g.Scene(i)
		a, b := s.Objects[0], s.Objects[1]
		if a.Colour != b.Colour && a.Shape != b.Shape {
			continue
		}
		ims, err := eng.EncodeImages(ctx, []image.Image{s.Render(64)})
		if err != nil {
			log.Fatal(err)
		}
		ps, err := eng.Prepare(ctx, s.Caption)
		if err != nil {
			log.Fatal(err)
		}
		atts, err := eng.Attend(ctx, &ims[0], ps, pipeline.AttendOptions{})
		if err != nil {
			log.Fatal(err)
		}
		p := ims[0].P()
		cov := s.Coverage(64, 8)
		for r, ref := range s.Refs {
			shared := (ref.Kind == "colour" && a.Colour == b.Colour) || (ref.Kind == "shape" && a.Shape == b.Shape)
			row := atts[0].TextToImage[(ref.Word+1)*p : (ref.Word+2)*p]
			at := 0
			for j := range row {
				if row[j] > row[at] {
					at = j
				}
			}
			in := cov[ref.Object][at] >= eval.Inside
			if !shared {
				nOther++
				if in {
					okOther++
				}
				continue
			}
			n++
			if in {
				ok++
			}
			if r < 2 {
				nFirst++
				if in {
					okFirst++
				}
			} else {
				nSecond++
				if in {
					okSecond++
				}
			}
		}
	}
	fmt.Printf("two-object scenes sharing a colour or shape word (seed 1003): text→image peak inside the named object\n")
	fmt.Printf("  shared words: %.1f%% of %d (first mention %.1f%% of %d, second mention %.1f%% of %d)\n", 100*float64(ok)/float64(n), n, 100*float64(okFirst)/float64(nFirst), nFirst, 100*float64(okSecond)/float64(nSecond), nSecond)
	fmt.Printf("  other words:  %.1f%% of %d\n", 100*float64(okOther)/float64(nOther), nOther)
}
