// Package encstream runs vision encoder streams: batches of images decoded
// and preprocessed into one input buffer, encoded in one call, and handed
// on. The engine's EncodeImageStream and the batch job both run on it.
package encstream

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conditionhq/condition/internal/cputime"
)

// Encoder is what a stream encodes with: Encode takes n preprocessed
// images, pixels [n, 3, H, W], and returns their encodings; PerImage is
// 3·H·W, and Threads the goroutines decoding a batch.
type Encoder[E any] struct {
	Encode   func(ctx context.Context, pixels []float32, n int) ([]E, error)
	PerImage int
	Threads  int
}

// Hooks are what Run does with the images, of type W, of an encoder
// stream's batches, encoded as E.
type Hooks[W, E any] struct {
	// Next appends the stream's next batch (at most the batch size) to dst
	// and returns it; false ends the stream.
	Next func(dst []W) ([]W, bool)
	// Decode decodes and preprocesses w into dst, [3, H, W].
	Decode func(w W, dst []float32) error
	// Decoded is called for every image of a batch, in order, once the
	// batch is decoded, with decode's error.
	Decoded func(w W, err error)
	// Encoded is called with the images that decoded (none are left out of
	// a failed call), their encodings or the encoder's error, and the time
	// the call took. It is not called when no image decoded.
	Encoded func(ws []W, encs []E, took time.Duration, err error)
	// Finished, when set, is called with the whole batch once it is done.
	Finished func(ws []W)
	Ctx      context.Context  // the encoder calls' (nil: never cancelled)
	CPU      *cputime.Counter // when set, adds up the CPU time of the encoder calls
}

// Run is one vision encoder stream, the unit of the batch job and of
// pipeline.Engine.EncodeImageStream: on its own OS thread, it takes a batch
// of images, decodes and preprocesses them into its input buffer (on up to
// enc.Threads goroutines), encodes them in one call, hands them on, and
// takes the next batch. Several streams keep every core busy: while
// one decodes, the others encode.
func Run[W, E any](enc Encoder[E], batch int, h Hooks[W, E]) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := h.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	per := enc.PerImage
	buf := make([]float32, batch*per)
	errs := make([]error, batch)
	taken := make([]W, 0, batch)
	kept := make([]W, 0, batch)
	for {
		var ok bool
		if taken, ok = h.Next(taken[:0]); !ok {
			return
		}
		if len(taken) > batch {
			panic("encstream: a stream's batch over its size")
		}
		decodeInto(enc.Threads, h.Decode, taken, buf, per, errs)
		kept = kept[:0]
		for i, w := range taken {
			h.Decoded(w, errs[i])
			if errs[i] != nil {
				continue
			}
			if k := len(kept); k != i {
				copy(buf[k*per:(k+1)*per], buf[i*per:(i+1)*per])
			}
			kept = append(kept, w)
		}
		if len(kept) > 0 {
			t := time.Now()
			var encs []E
			call := func() (err error) {
				encs, err = enc.Encode(ctx, buf[:len(kept)*per], len(kept))
				return err
			}
			var err error
			if h.CPU != nil {
				err = h.CPU.Run(call)
			} else {
				err = call()
			}
			h.Encoded(kept, encs, time.Since(t), err)
		}
		if h.Finished != nil {
			h.Finished(taken)
		}
	}
}

// decodeInto decodes the images ws into buf, image i at [i·per, (i+1)·per),
// on up to threads goroutines, with image i's error in errs[i].
func decodeInto[W any](threads int, decode func(W, []float32) error, ws []W, buf []float32, per int, errs []error) {
	par := min(max(threads, 1), len(ws))
	if par == 1 {
		for i, w := range ws {
			errs[i] = decode(w, buf[i*per:(i+1)*per])
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(ws); i = int(next.Add(1)) - 1 {
				errs[i] = decode(ws[i], buf[i*per:(i+1)*per])
			}
		}()
	}
	wg.Wait()
}
