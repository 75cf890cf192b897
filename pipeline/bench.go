package pipeline

import (
	"bytes"
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
	"strconv"
	"sync"
	"sync/atomic"
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
	cpu, ok := processCPU()
	return stopwatch{wall: time.Now(), cpu: cpu, ok: ok}
}

func (s stopwatch) rate(images int) Rate {
	r := Rate{Images: images, Wall: time.Since(s.wall)}
	if cpu, ok := processCPU(); ok && s.ok {
		r.CPU = cpu - s.cpu
	}
	return r
}

// processCPU returns the user plus system CPU time of this process, all its
// threads, from /proc/self/stat (Linux; false elsewhere). The kernel reports
// it in USER_HZ ticks, 100 a second on every Linux ABI, so it is exact to
// 10 ms: measure seconds, not single images.
func processCPU() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may
// hold spaces and parentheses itself, so fields are counted from the last ')'.
func parseStatCPU(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || u < 0 || s < 0 {
		return 0, false
	}
	const tick = time.Second / 100 // USER_HZ
	return time.Duration(u+s) * tick, true
}

// EncoderRate measures the vision encoder alone on the job's model, batch
// size and encoder plan (the streams and threads a job of cfg runs, see
// Config): the images under cfg.Inputs are decoded and preprocessed first
// (not timed), then encoded in batches of cfg.Batch, rounds times over, by
// the streams at once after one warm-up batch each. Rate.Images counts every
// image encoded (rounds × the images found); distinct is the number of
// images found.
func EncoderRate(ctx context.Context, cfg Config, rounds int) (r Rate, distinct int, err error) {
	cfg.Threads, cfg.Streams = EncoderPlan(cfg)
	e, err := newEngine(cfg)
	if err != nil {
		return Rate{}, 0, err
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
		return Rate{}, 0, err
	}
	if n == 0 {
		return Rate{}, 0, fmt.Errorf("pipeline: no images to encode under %v", cfg.Inputs)
	}
	// The batches of all rounds, taken in turn by the streams.
	var starts []int
	for range max(rounds, 1) {
		for i := 0; i < n; i += batch {
			starts = append(starts, i)
		}
	}
	var encCPU encoderCPU
	encode := func(i int) error {
		k := min(batch, n-i)
		return encCPU.encode(func() error {
			_, err := e.venc.Encode(ctx, pixels[i*per:(i+k)*per], k, e.inH, e.inW)
			return err
		})
	}
	var next atomic.Int64
	errs := make([]error, cfg.Streams)
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
	for s := range cfg.Streams {
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
	encCPU.reset() // the warm-up batches do not count
	sw := startStopwatch()
	for s := range cfg.Streams {
		wg.Add(1)
		go stream(s)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Rate{}, 0, err
	}
	r = sw.rate(max(rounds, 1) * n)
	r.EncoderCPU = encCPU.total()
	return r, n, nil
}

// JobRate runs the job cfg describes (as Run does) and measures it: the
// rate counts the images done, over the job's own elapsed time (from the
// start of the walk to the last manifest line; loading the model and
// encoding the prompts come before it and are not counted). started, when
// not nil, is called once the job is set up, just before it starts (to
// begin a profile of the job alone, say).
func JobRate(ctx context.Context, cfg Config, started func()) (*Summary, Rate, error) {
	j, err := newJob(cfg)
	if err != nil {
		return nil, Rate{}, err
	}
	defer j.close()
	if started != nil {
		started()
	}
	sw := startStopwatch()
	sum, err := j.run(ctx)
	r := sw.rate(0)
	if sum != nil {
		r.Images, r.Wall, r.EncoderCPU = sum.Done, sum.Elapsed, sum.EncoderCPU
	}
	return sum, r, err
}

// encoderCPU adds up the CPU time of encoder calls, each read on its
// calling thread; the callers lock their goroutines to their threads.
type encoderCPU struct {
	ns     atomic.Int64
	failed atomic.Bool // a thread's CPU time could not be read
}

// encode runs fn and adds the CPU time its thread spent in it.
func (c *encoderCPU) encode(fn func() error) error {
	t0, ok0 := threadCPU()
	err := fn()
	t1, ok1 := threadCPU()
	if ok0 && ok1 {
		c.ns.Add(int64(t1 - t0))
	} else {
		c.failed.Store(true)
	}
	return err
}

func (c *encoderCPU) reset() { c.ns.Store(0); c.failed.Store(false) }

// total is the CPU time added up, 0 when any reading failed.
func (c *encoderCPU) total() time.Duration {
	if c.failed.Load() {
		return 0
	}
	return time.Duration(c.ns.Load())
}

// StageMedians returns, for each stage in the timings_ms of the entries with
// status ok, the median time in milliseconds over those entries. The
// "encode" stage of a job is the wall time of the whole batch an image was
// encoded in.
func StageMedians(entries []Entry) map[string]float64 {
	vals := map[string][]float64{}
	for _, e := range entries {
		if e.Status != StatusOK {
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
// count; 0 for none), sorting v in place.
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
