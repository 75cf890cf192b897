package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/conditionhq/condition/pipeline/internal/encstream"
	"github.com/conditionhq/condition/vision"
)

// StreamOptions controls EncodeImageStream.
type StreamOptions struct {
	// Batch is the most images per vision encoder call (0: the engine's
	// Options.Batch).
	Batch int
	// Streams is the number of vision encoder calls in flight at once
	// (0: the engine's, Options.Streams).
	Streams int
}

// ImageResult is one image through EncodeImageStream: its encoding, or
// the error that stopped it.
type ImageResult struct {
	Index    int           // the image's place in the input, from 0
	Encoding ImageEncoding // when Err is nil
	// Width and Height are the image's full size, upright (0 when it could
	// not be decoded), also when Options.Decode decoded it scaled.
	Width, Height int
	Err           error // reading, decoding, preprocessing or encoding failed
}

// EncodeImageStream decodes, preprocesses and encodes n images as Run does:
// Streams vision encoder calls in flight at once, each stream decoding its
// next batch while the others encode. read(i) returns image i's file; it is
// called in input order from one goroutine, ahead of the encoder, and never
// after EncodeImageStream returns. Batches are consecutive images, at most
// StreamOptions.Batch, of even sizes in a number the streams share evenly
// (see spreadBatches): ten images on two streams are two batches of five,
// not one of eight (or sixteen) with one stream idle.
//
// yield is called with every image's result in input order, from the
// calling goroutine, errors included: an image that cannot be read, decoded
// or encoded fails alone (an encoder error fails its batch), and the others
// go on. When yield returns an error, EncodeImageStream stops and returns
// it. When ctx is cancelled it stops taking images, drops the results not
// yet yielded and returns ctx's error.
func (e *Engine) EncodeImageStream(ctx context.Context, n int, read func(i int) ([]byte, error), opts StreamOptions, yield func(ImageResult) error) error {
	if n < 0 {
		return fmt.Errorf("pipeline: encode image stream: %d images", n)
	}
	if opts.Batch < 0 || opts.Streams < 0 {
		return fmt.Errorf("pipeline: encode image stream: batch %d, streams %d: want 0 or more", opts.Batch, opts.Streams)
	}
	if err := ctx.Err(); err != nil || n == 0 {
		return err
	}
	batch := opts.Batch
	if batch == 0 {
		batch = e.opts.Batch
	}
	streams := opts.Streams
	if streams == 0 {
		streams = e.streams
	}
	batch, chunks := spreadBatches(n, batch, streams)
	streams = min(streams, chunks)

	// A chunk is one batch of consecutive images on its way through.
	type item struct {
		res  ImageResult
		data []byte
	}
	type chunk struct {
		seq   int
		items []*item
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Chunks read and not yet yielded, at most: the streams' batches, as
	// many read ahead, and one finished out of turn for each stream.
	tokens := make(chan struct{}, 3*streams)
	todo := make(chan *chunk, streams)
	done := make(chan *chunk, streams)

	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer close(todo)
		for seq := range chunks {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			c := &chunk{seq: seq}
			for i := seq * batch; i < min((seq+1)*batch, n); i++ {
				if ctx.Err() != nil {
					return
				}
				it := &item{res: ImageResult{Index: i}}
				if it.data, it.res.Err = read(i); it.res.Err == nil && len(it.data) == 0 {
					it.res.Err = errors.New("empty file")
				}
				c.items = append(c.items, it)
			}
			select {
			case todo <- c:
			case <-ctx.Done():
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cur *chunk
			encstream.Run(e.streamEncoder(), batch, encstream.Hooks[*item, ImageEncoding]{
				Next: func(dst []*item) ([]*item, bool) {
					if ctx.Err() != nil {
						return nil, false
					}
					select {
					case cur = <-todo:
					case <-ctx.Done():
						return nil, false
					}
					if cur == nil {
						return nil, false
					}
					return append(dst, cur.items...), true
				},
				Decode: func(it *item, dst []float32) error {
					if it.res.Err != nil {
						return it.res.Err
					}
					data := it.data
					it.data = nil
					img, info, err := e.DecodeImageInfo(data)
					if err != nil {
						return err
					}
					it.res.Width, it.res.Height = info.Width, info.Height
					defer vision.Release(img) // nothing keeps the decoded image
					return e.Preprocess(dst, img)
				},
				Decoded: func(it *item, err error) { it.res.Err = err },
				Encoded: func(its []*item, encs []ImageEncoding, _ time.Duration, err error) {
					for i, it := range its {
						if err != nil {
							it.res.Err = err
						} else {
							it.res.Encoding = encs[i]
						}
					}
				},
				Finished: func([]*item) {
					select {
					case done <- cur:
					case <-ctx.Done():
					}
				},
				Ctx: ctx,
			})
		}()
	}
	go func() { wg.Wait(); close(done) }()
	defer func() {
		// Never return (or unwind from a panicking yield) while read may
		// still be called or a stream still runs.
		cancel()
		for range done {
		}
		<-fed
	}()

	// Yield in input order: chunks finish out of turn across streams.
	waiting := map[int]*chunk{}
	next := 0
	for c := range done {
		waiting[c.seq] = c
		for c := waiting[next]; c != nil; c = waiting[next] {
			delete(waiting, next)
			next++
			for _, it := range c.items {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := yield(it.res); err != nil {
					return err
				}
			}
			<-tokens
		}
	}
	if next < chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("pipeline: encode image stream: %d of %d batches yielded", next, chunks)
	}
	return nil
}

// spreadBatches cuts n images into batches of at most batch consecutive
// images for streams streams: the fewest batches in a multiple of streams
// (so that no stream waits idle for the last ones), of even sizes. It
// returns their size (the last may be smaller) and their number.
func spreadBatches(n, batch, streams int) (size, count int) {
	if n <= 0 {
		return max(batch, 1), 0
	}
	count = (n + batch - 1) / batch
	count = min((count+streams-1)/streams*streams, n)
	size = (n + count - 1) / count
	return size, (n + size - 1) / size
}

// streamEncoder is what an encoder stream of this engine encodes with.
func (e *Engine) streamEncoder() encstream.Encoder[ImageEncoding] {
	return encstream.Encoder[ImageEncoding]{Encode: e.EncodePixels, PerImage: e.per, Threads: e.Threads()}
}
