package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/conditionhq/condition/pipeline/internal/enginetest"
)

// streamImages returns n PNG files of varied sizes and colours; every
// fifth is large, so that its batch takes longer to decode than the next
// and batches finish out of turn across streams.
func streamImages(t testing.TB, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range n {
		w, h := 20+i%17, 16+(i*7)%23
		if i%5 == 0 {
			w, h = 900, 700
		}
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.Set(x, y, color.RGBA{uint8(i * 37), uint8(x * 255 / w), uint8(y * 255 / h), 255})
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		out[i] = b.Bytes()
	}
	return out
}

// collectStream runs EncodeImageStream over files and returns the results
// yielded, checking that they come in input order.
func collectStream(t *testing.T, eng *Engine, files [][]byte, opts StreamOptions) []ImageResult {
	t.Helper()
	var got []ImageResult
	err := eng.EncodeImageStream(context.Background(), len(files), func(i int) ([]byte, error) {
		if files[i] == nil {
			return nil, fmt.Errorf("image %d cannot be read", i)
		}
		return files[i], nil
	}, opts, func(r ImageResult) error {
		if r.Index != len(got) {
			t.Fatalf("%+v: result of image %d yielded after %d results", opts, r.Index, len(got))
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("%+v: %v", opts, err)
	}
	if len(got) != len(files) {
		t.Fatalf("%+v: %d results for %d images", opts, len(got), len(files))
	}
	return got
}

// sameEncoding fails unless a and b are equal, value for value.
func sameEncoding(t *testing.T, what string, a, b ImageEncoding) {
	t.Helper()
	if a.Grid != b.Grid || a.Width != b.Width || len(a.States) != len(b.States) || len(a.Embeds) != len(b.Embeds) || len(a.States) == 0 {
		t.Fatalf("%s: grid %v width %d, %d states, %d embeds; want %v, %d, %d, %d", what,
			a.Grid, a.Width, len(a.States), len(a.Embeds), b.Grid, b.Width, len(b.States), len(b.Embeds))
	}
	for i := range a.States {
		if a.States[i] != b.States[i] {
			t.Fatalf("%s: states[%d] = %v, want %v", what, i, a.States[i], b.States[i])
		}
	}
	for i := range a.Embeds {
		if a.Embeds[i] != b.Embeds[i] {
			t.Fatalf("%s: embeds[%d] = %v, want %v", what, i, a.Embeds[i], b.Embeds[i])
		}
	}
}

// TestEncodeImageStreamEqualsEncodeImages: whatever the streams and the
// batch, every image comes back in input order with the encoding
// EncodeImages gives it.
func TestEncodeImageStreamEqualsEncodeImages(t *testing.T) {
	m := openTiny(t)
	files := streamImages(t, 13)
	ref := tinyEngine(t, m, Options{Threads: 1, Batch: 4})
	imgs := make([]image.Image, len(files))
	for i, f := range files {
		img, err := ref.DecodeImage(f)
		if err != nil {
			t.Fatal(err)
		}
		imgs[i] = img
	}
	want, err := ref.EncodeImages(context.Background(), imgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 2} {
		eng := tinyEngine(t, m, Options{Threads: threads, NoSpinning: true})
		for _, opts := range []StreamOptions{{Streams: 1, Batch: 4}, {Streams: 2, Batch: 1}, {Streams: 3, Batch: 2}, {Streams: 4, Batch: 3}, {Streams: 2, Batch: 100}, {}} {
			got := collectStream(t, eng, files, opts)
			for i, r := range got {
				what := fmt.Sprintf("threads %d, %+v, image %d", threads, opts, i)
				if r.Err != nil {
					t.Fatalf("%s: %v", what, r.Err)
				}
				if b := imgs[i].Bounds(); r.Width != b.Dx() || r.Height != b.Dy() {
					t.Errorf("%s: size %dx%d, want %dx%d", what, r.Width, r.Height, b.Dx(), b.Dy())
				}
				sameEncoding(t, what, r.Encoding, want[i])
			}
		}
	}
}

// TestEncodeImageStreamFailuresStayAlone: an image that cannot be read,
// decoded or preprocessed fails alone; the images beside it, in its batch
// and after, are encoded as without it.
func TestEncodeImageStreamFailuresStayAlone(t *testing.T) {
	m := openTiny(t)
	files := streamImages(t, 9)
	eng := tinyEngine(t, m, Options{Threads: 1})
	want := collectStream(t, eng, files, StreamOptions{Streams: 1, Batch: 3})
	files[1] = []byte("not an image")
	files[4] = nil // cannot be read
	files[5] = []byte(enginetest.PanicMagic + "rest of a file")
	files[6] = []byte{}
	failed := map[int]string{1: "format", 4: "cannot be read", 5: "panicked", 6: "empty file"}
	for _, opts := range []StreamOptions{{Streams: 1, Batch: 3}, {Streams: 3, Batch: 2}} {
		got := collectStream(t, eng, files, opts)
		for i, r := range got {
			what := fmt.Sprintf("%+v, image %d", opts, i)
			if msg, bad := failed[i]; bad {
				if r.Err == nil || !strings.Contains(r.Err.Error(), msg) {
					t.Errorf("%s: error %v, want one saying %q", what, r.Err, msg)
				}
				continue
			}
			if r.Err != nil {
				t.Fatalf("%s: %v", what, r.Err)
			}
			sameEncoding(t, what, r.Encoding, want[i].Encoding)
		}
	}
}

// TestEncodeImageStreamStops: an error from yield, or a cancelled context,
// stops the stream: nothing is yielded after it, and read is not called
// once EncodeImageStream has returned.
func TestEncodeImageStreamStops(t *testing.T) {
	m := openTiny(t)
	files := streamImages(t, 40)
	eng := tinyEngine(t, m, Options{Threads: 1})
	stop := errors.New("enough")
	for _, tc := range []struct {
		name string
		err  error
	}{{"yield error", stop}, {"cancelled", context.Canceled}} {
		ctx, cancel := context.WithCancel(context.Background())
		var returned atomic.Bool
		var lateReads atomic.Int64
		yielded := 0
		err := eng.EncodeImageStream(ctx, len(files), func(i int) ([]byte, error) {
			if returned.Load() {
				lateReads.Add(1)
			}
			return files[i], nil
		}, StreamOptions{Streams: 2, Batch: 2}, func(r ImageResult) error {
			yielded++
			if r.Index != 2 {
				return nil
			}
			if tc.err == stop {
				return stop
			}
			cancel()
			return nil
		})
		returned.Store(true)
		cancel()
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		}
		if yielded != 3 {
			t.Errorf("%s: %d results yielded, want 3 (none after the stop)", tc.name, yielded)
		}
		if n := lateReads.Load(); n != 0 {
			t.Errorf("%s: read called %d times after EncodeImageStream returned", tc.name, n)
		}
	}

	// Already cancelled: nothing is read or yielded.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := eng.EncodeImageStream(ctx, len(files), func(i int) ([]byte, error) {
		t.Errorf("read image %d of a cancelled stream", i)
		return files[i], nil
	}, StreamOptions{}, func(r ImageResult) error {
		t.Errorf("yielded image %d of a cancelled stream", r.Index)
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before the start: error %v", err)
	}
	if err := eng.EncodeImageStream(context.Background(), 0, nil, StreamOptions{}, nil); err != nil {
		t.Errorf("no images: %v", err)
	}
	if err := eng.EncodeImageStream(context.Background(), 3, nil, StreamOptions{Streams: -1}, nil); err == nil {
		t.Error("negative streams: no error")
	}
}

func TestSpreadBatches(t *testing.T) {
	for _, c := range []struct{ n, batch, streams, size, count int }{
		{0, 16, 2, 16, 0},
		{1, 16, 2, 1, 1},
		{3, 16, 4, 1, 3},
		{10, 16, 2, 5, 2},
		{10, 16, 1, 10, 1},
		{17, 16, 3, 6, 3},
		{60, 16, 2, 15, 4},
		{61, 16, 2, 16, 4},
		{64, 16, 4, 16, 4},
		{100, 16, 3, 12, 9},
		{5, 1, 2, 1, 5},
	} {
		size, count := spreadBatches(c.n, c.batch, c.streams)
		if size != c.size || count != c.count {
			t.Errorf("spreadBatches(%d, %d, %d) = %d, %d; want %d, %d", c.n, c.batch, c.streams, size, count, c.size, c.count)
		}
		if c.n > 0 && (size > c.batch || (count-1)*size >= c.n || count*size < c.n) {
			t.Errorf("spreadBatches(%d, %d, %d) = %d, %d: not batches of at most %d covering the images", c.n, c.batch, c.streams, size, count, c.batch)
		}
	}
}
