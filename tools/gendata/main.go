// Command gendata writes scenes of the generator in package scenes, for
// training the default model and for demo fixtures.
//
//	go run ./tools/gendata -seed 1 -n 60000 -size 64 -out /tmp/scenes-train
//
// writes, in -out:
//
//	images.npy   uint8 [N, size, size, 3]
//	labels.npy   uint8 [N, size, size]: 0 background, k+1 inside object k
//	scenes.jsonl one JSON object per scene (caption, words, refs, objects, background)
//
// With -variety the scenes vary how they are drawn (scenes.Generator's
// Variety: with plain scenes, the training data of the default model's last
// stage).
//
// With -png it writes instead images/scene_NNN.png (and masks/scene_NNN_mask.png, the
// label map with each object k as grey level 80·(k+1)), captions.txt (one
// "file<TAB>caption" line per scene) and scenes.jsonl.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/tensorio"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gendata:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gendata", flag.ContinueOnError)
	seed := fs.Uint64("seed", 1, "generator seed")
	start := fs.Int("start", 0, "index of the first scene")
	n := fs.Int("n", 1000, "number of scenes")
	size := fs.Int("size", 64, "image side in pixels")
	minObj := fs.Int("min-objects", 1, "fewest objects per scene (1-3)")
	maxObj := fs.Int("max-objects", 3, "most objects per scene (1-3)")
	distinct := fs.Bool("distinct", false, "give every object of a scene its own colour and shape")
	variety := fs.Bool("variety", false, "vary proportions, outlines, sizes, backgrounds and rendering (the training data)")
	out := fs.String("out", "", "output folder (required)")
	asPNG := fs.Bool("png", false, "write PNG files and captions.txt instead of .npy arrays")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *n <= 0 || *size <= 0 {
		return errors.New("need -out, -n > 0 and -size > 0")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	g := scenes.Generator{Seed: *seed, MinObjects: *minObj, MaxObjects: *maxObj, Distinct: *distinct, Variety: *variety}
	sc := make([]scenes.Scene, *n)
	for i := range sc {
		sc[i] = g.Scene(*start + i)
		if err := sc[i].Validate(); err != nil {
			return err
		}
	}
	if err := tensorio.WriteFileAtomic(filepath.Join(*out, "scenes.jsonl"), func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		for _, s := range sc {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return bw.Flush()
	}); err != nil {
		return err
	}
	if *asPNG {
		return writePNGs(*out, sc, *size)
	}
	S := *size
	pix := make([]uint8, *n*S*S*3)
	lab := make([]uint8, *n*S*S)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(sc); i += workers {
				img := sc[i].Render(S)
				for p := 0; p < S*S; p++ {
					copy(pix[(i*S*S+p)*3:(i*S*S+p)*3+3], img.Pix[p*4:p*4+3])
				}
				copy(lab[i*S*S:(i+1)*S*S], sc[i].Labels(S))
			}
		}(w)
	}
	wg.Wait()
	if err := tensorio.WriteNPY(filepath.Join(*out, "images.npy"), tensorio.Tensor{DType: tensorio.DTypeU8, Shape: []int{*n, S, S, 3}, Data: pix}); err != nil {
		return err
	}
	return tensorio.WriteNPY(filepath.Join(*out, "labels.npy"), tensorio.Tensor{DType: tensorio.DTypeU8, Shape: []int{*n, S, S}, Data: lab})
}

func writePNGs(dir string, sc []scenes.Scene, size int) error {
	for _, sub := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	var caps []string
	for _, s := range sc {
		name := fmt.Sprintf("scene_%03d.png", s.Index)
		if err := writePNG(filepath.Join(dir, "images", name), s.Render(size)); err != nil {
			return err
		}
		lab := s.Labels(size)
		m := image.NewGray(image.Rect(0, 0, size, size))
		for i, l := range lab {
			m.Pix[i] = 80 * l
		}
		if err := writePNG(filepath.Join(dir, "masks", fmt.Sprintf("scene_%03d_mask.png", s.Index)), m); err != nil {
			return err
		}
		caps = append(caps, name+"\t"+s.Caption)
	}
	return tensorio.WriteFileAtomic(filepath.Join(dir, "captions.txt"), func(w io.Writer) error {
		for _, c := range caps {
			if _, err := fmt.Fprintln(w, c); err != nil {
				return err
			}
		}
		return nil
	})
}

func writePNG(path string, img image.Image) error {
	return tensorio.WriteFileAtomic(path, func(w io.Writer) error { return png.Encode(w, img) })
}
