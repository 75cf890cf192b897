// Command evaldata writes the held-out scenes of package vecscenes as a
// model's evaluation (internal/eval) sees them, for scripts/train_default/train.py
// to measure the model in torch on exactly the tensors the Go evaluation
// encodes:
//
//	go run ./tools/evaldata -seed 2001 -objects 1 -n 1000 -out /tmp/vec-single
//
// writes, in -out:
//
//	pixels.npy   float32 [N, 3, side, side]: pixel_values as package vision
//	             preprocesses each image with -preprocessor's settings
//	scenes.jsonl one JSON object per scene (size, caption, words, refs,
//	             objects) with "coverage" [objects][grid*grid] (grid =
//	             side/-patch), the share of each patch of the model's input
//	             that each object covers: vecscenes.Scene.Coverage, as the
//	             Go evaluation computes it (of the centre crop for CLIP's
//	             preprocessing, of the whole image for SigLIP's square
//	             resize; any other preprocessing is refused)
//
// With -png DIR it also writes the images as DIR/scene_NNN.png.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"

	"github.com/conditionhq/condition/internal/vecscenes"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "evaldata:", err)
		os.Exit(1)
	}
}

type record struct {
	vecscenes.Scene
	Coverage [][]float64 `json:"coverage"`
}

func run(args []string) error {
	fs := flag.NewFlagSet("evaldata", flag.ContinueOnError)
	seed := fs.Uint64("seed", 2001, "generator seed")
	objects := fs.Int("objects", 1, "objects per scene (1 or 2)")
	n := fs.Int("n", 1000, "number of scenes")
	pre := fs.String("preprocessor", "models/embedded/model/preprocessor_config.json", "the model's preprocessor_config.json")
	patch := fs.Int("patch", 8, "the model's patch size in pixels")
	out := fs.String("out", "", "output folder (required)")
	pngDir := fs.String("png", "", "also write the images here as PNG")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *n <= 0 {
		return errors.New("need -out and -n > 0")
	}
	p, err := vision.LoadPreprocessorFile(*pre)
	if err != nil {
		return err
	}
	if err := vecscenes.CheckPreprocessor(p); err != nil {
		return fmt.Errorf("%s: %w", *pre, err)
	}
	if *patch <= 0 {
		return fmt.Errorf("-patch %d: need a patch size > 0", *patch)
	}
	for _, d := range []string{*out, *pngDir} {
		if d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
	}
	g := vecscenes.Generator{Seed: *seed, Objects: *objects}
	var recs []record
	var pix []float32
	side := 0
	for i := 0; i < *n; i++ {
		s := g.Scene(i)
		img := s.Render()
		v, h, w, err := p.Apply(img)
		if err != nil {
			return err
		}
		if h != w || (side != 0 && h != side) || h%*patch != 0 {
			return fmt.Errorf("pixel_values %dx%d: need one square size divisible by the patch", h, w)
		}
		side = h
		pix = append(pix, v...)
		cov, err := s.Coverage(p, side / *patch)
		if err != nil {
			return fmt.Errorf("%s: %w", *pre, err)
		}
		recs = append(recs, record{Scene: s, Coverage: cov})
		if *pngDir != "" {
			f, err := os.Create(filepath.Join(*pngDir, fmt.Sprintf("scene_%03d.png", i)))
			if err != nil {
				return err
			}
			err = png.Encode(f, img)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	if err := tensorio.WriteFileAtomic(filepath.Join(*out, "scenes.jsonl"), func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return bw.Flush()
	}); err != nil {
		return err
	}
	return tensorio.WriteNPY(filepath.Join(*out, "pixels.npy"), tensorio.Tensor{DType: tensorio.DTypeF32, Shape: []int{*n, 3, side, side}, Data: pix})
}
