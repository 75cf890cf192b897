// Package pipebench measures the job against its vision encoder: the rate
// of each, the encoder's share of the process's CPU, and the synthetic
// images they run on (condition-bench pipeline).
package pipebench

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
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
			return fmt.Errorf("pipebench: %w", err)
		}
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("pipebench: %w", err)
		}
		err = jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pipebench: %w", err)
		}
	}
	return nil
}

// Rate is a throughput measurement: images processed, the wall time they
// took and the CPU time the whole process used meanwhile (every thread,
// ONNX Runtime's included; zero where the system does not report it).
//
// EncoderCPU is the part of CPU spent in the vision encoder's calls, read
// from the threads that made them: all of the encoder's work when each
// encoder stream runs on one thread (ONNX Runtime then computes on the
// calling thread), only part of it otherwise; zero where thread CPU time
// cannot be read.
type Rate struct {
	Images     int
	Wall       time.Duration
	CPU        time.Duration
	EncoderCPU time.Duration
}

// EncoderShare is EncoderCPU / CPU: the encoder's share of the CPU the
// process used (0 when either is unknown). For a job it is the rate the job
// reaches relative to the encoder alone when the encoder keeps every core
// busy and runs as fast inside the job as on its own; both parts are read
// over the same seconds, so a machine's changing load moves it far less
// than a ratio of two rates measured one after the other.
func (r Rate) EncoderShare() float64 {
	if r.CPU <= 0 || r.EncoderCPU <= 0 {
		return 0
	}
	return r.EncoderCPU.Seconds() / r.CPU.Seconds()
}

// PerSec is the rate in images per second of wall time.
func (r Rate) PerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Images) / r.Wall.Seconds()
}

// CPUPerImage is the process's CPU time per image (0 when unknown). On a
// machine shared with other work it moves less than PerSec: the ratio of a
// job's CPU per image to the encoder's bounds the job's rate relative to the
// encoder's when the encoder keeps every core busy.
func (r Rate) CPUPerImage() time.Duration {
	if r.Images <= 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Images)
}

// stopwatch measures wall and process CPU time from its start.
type stopwatch struct {
	wall time.Time
	cpu  time.Duration
	ok   bool
}

func startStopwatch() stopwatch {
	cpu, ok := cputime.Process()
	return stopwatch{wall: time.Now(), cpu: cpu, ok: ok}
}

func (s stopwatch) rate(images int) Rate {
	r := Rate{Images: images, Wall: time.Since(s.wall)}
	if cpu, ok := cputime.Process(); ok && s.ok {
		r.CPU = cpu - s.cpu
	}
	return r
}

// EncoderRate measures the vision encoder of eng alone on the job's batch
// size (cfg.Batch; a job's default when zero) and the engine's streams:
// the images under cfg.Inputs are decoded and preprocessed first (not
// timed), then encoded in batches, rounds times over, by the streams at once
// after one warm-up batch each. Rate.Images counts every image encoded
// (rounds × the images found); distinct is the number of images found.
func EncoderRate(ctx context.Context, eng *pipeline.Engine, cfg batch.Config, rounds int) (r Rate, distinct int, err error) {
	size := cfg.Batch
	if size <= 0 {
		size = 8
	}
	streams := eng.Streams()
	h, w := eng.InputSize()
	per := 3 * h * w
	var pixels []float32
	n := 0
	err = batch.Walk(ctx, cfg.Inputs, func(it batch.Item) error {
		data, err := os.ReadFile(it.Path)
		if err != nil {
			return nil
		}
		img, err := eng.DecodeImage(data)
		if err != nil {
			return nil
		}
		pixels = append(pixels, make([]float32, per)...)
		if eng.Preprocess(pixels[n*per:], img) != nil {
			pixels = pixels[:n*per]
			return nil
		}
		n++
		return nil
	}, nil)
	if err != nil {
		return Rate{}, 0, err
	}
	if n == 0 {
		return Rate{}, 0, fmt.Errorf("pipebench: no images to encode under %v", cfg.Inputs)
	}
	// The batches of all rounds, taken in turn by the streams.
	var starts []int
	for range max(rounds, 1) {
		for i := 0; i < n; i += size {
			starts = append(starts, i)
		}
	}
	var encCPU cputime.Counter
	encode := func(i int) error {
		k := min(size, n-i)
		return encCPU.Run(func() error {
			_, err := eng.EncodePixels(ctx, pixels[i*per:(i+k)*per], k)
			return err
		})
	}
	var next atomic.Int64
	errs := make([]error, streams)
	var wg sync.WaitGroup
	stream := func(s int) {
		defer wg.Done()
		runtime.LockOSThread() // for encCPU
		defer runtime.UnlockOSThread()
		for {
			b := int(next.Add(1)) - 1
			if b >= len(starts) {
				return
			}
			if err := encode(starts[b]); err != nil {
				errs[s] = err
				next.Store(int64(len(starts)))
				return
			}
		}
	}
	// One warm-up batch per stream, at once, then the timed rounds.
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[s] = encode(0)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Rate{}, 0, err
	}
	encCPU.Reset() // the warm-up batches do not count
	sw := startStopwatch()
	for s := range streams {
		wg.Add(1)
		go stream(s)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Rate{}, 0, err
	}
	r = sw.rate(max(rounds, 1) * n)
	r.EncoderCPU = encCPU.Total()
	return r, n, nil
}

// JobRate runs the job cfg describes (batch.Run) and measures it: the
// rate counts the images done, over the job's own elapsed time (from the
// start of the walk to the last manifest line; preparing the prompts comes
// before it and is not counted). cfg.Started, when set, is called once the
// job is set up, just before it starts (to begin a profile of the job alone,
// say). The job adds its encoder calls' CPU time to a Counter of its own
// that it finds in its context (cputime.WithCounter).
func JobRate(ctx context.Context, cfg batch.Config) (*batch.Summary, Rate, error) {
	var sw stopwatch
	started := cfg.Started
	cfg.Started = func() {
		if started != nil {
			started()
		}
		sw = startStopwatch()
	}
	var enc cputime.Counter
	sum, err := batch.Run(cputime.WithCounter(ctx, &enc), cfg)
	r := sw.rate(0)
	if sum != nil {
		r.Images, r.Wall, r.EncoderCPU = sum.Done, sum.Elapsed, enc.Total()
	}
	return sum, r, err
}

// StageMedians returns, for each stage in the timings_ms of the entries with
// status ok, the median time in milliseconds over those entries. The
// "encode" stage of a job is the wall time of the whole batch an image was
// encoded in.
func StageMedians(entries []batch.Entry) map[string]float64 {
	vals := map[string][]float64{}
	for _, e := range entries {
		if e.Status != batch.StatusOK {
			continue
		}
		for k, v := range e.Timings {
			vals[k] = append(vals[k], v)
		}
	}
	out := make(map[string]float64, len(vals))
	for k, v := range vals {
		out[k] = Median(v)
	}
	return out
}

// Median returns the median of v (the mean of the middle two for an even
// count; 0 for none), sorting v in place. gonum's stat.Quantile has no
// estimator that averages the middle two (its Empirical and LinInterp give
// the lower one), which is the median benchmarks have always reported here.
func Median(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return 0
	}
	slices.Sort(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
