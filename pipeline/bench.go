package pipeline

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/conditionhq/condition/vision"
)

// WriteSyntheticImages writes n JPEGs (quality 90, as photo folders hold)
// of size×size pixels (coloured shapes on noisy backgrounds, deterministic
// from seed) into dir, spread over sub-folders of 100, for benchmarks and
// scale tests.
func WriteSyntheticImages(dir string, n, size int, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	for i := range n {
		bg := color.RGBA{uint8(rng.Intn(256)), uint8(rng.Intn(256)), uint8(rng.Intn(256)), 255}
		fg := color.RGBA{255 - bg.R, 255 - bg.G, 255 - bg.B, 255}
		cx, cy, r := rng.Intn(size), rng.Intn(size), size/8+rng.Intn(size/4+1)
		for y := range size {
			for x := range size {
				c := bg
				if (x-cx)*(x-cx)+(y-cy)*(y-cy) < r*r {
					c = fg
				}
				d := uint8(rng.Intn(16))
				c.R, c.G, c.B = c.R^d, c.G^d, c.B^d
				img.SetRGBA(x, y, c)
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("%03d", i/100), fmt.Sprintf("%06d.jpg", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		err = jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
	}
	return nil
}

// EncoderRate measures the vision encoder alone on the job's model and batch
// size: the images under inputs are decoded and preprocessed first (not
// timed), then encoded in batches of cfg.Batch, rounds times over. It
// returns images per second.
func EncoderRate(ctx context.Context, cfg Config, rounds int) (float64, int, error) {
	e, err := newEngine(cfg)
	if err != nil {
		return 0, 0, err
	}
	defer e.close()
	batch := cfg.Batch
	if batch <= 0 {
		batch = 8
	}
	per := 3 * e.inH * e.inW
	var pixels []float32
	n := 0
	err = Walk(ctx, cfg.Inputs, func(it Item) error {
		img, err := vision.DecodeFile(it.Path, vision.DecodeOptions{MaxPixels: cfg.MaxPixels})
		if err != nil {
			return nil
		}
		px, _, _, err := e.pre.Apply(img)
		if err != nil {
			return nil
		}
		pixels = append(pixels, px...)
		n++
		return nil
	}, nil)
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("pipeline: no images to encode under %v", cfg.Inputs)
	}
	// One warm-up batch, then the timed rounds.
	if _, err := e.venc.Encode(ctx, pixels[:min(batch, n)*per], min(batch, n), e.inH, e.inW); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	done := 0
	for range max(rounds, 1) {
		for i := 0; i < n; i += batch {
			k := min(batch, n-i)
			if _, err := e.venc.Encode(ctx, pixels[i*per:(i+k)*per], k, e.inH, e.inW); err != nil {
				return 0, 0, err
			}
			done += k
		}
	}
	return float64(done) / time.Since(start).Seconds(), n, nil
}
