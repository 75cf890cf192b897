package index

import (
	"context"
	"errors"
	"fmt"
	"image"
	"runtime"
	"sync"

	"github.com/conditionhq/condition/vision/video"

	"github.com/conditionhq/condition/pipeline"
)

// Sheets draws each hit's heatmap sheet (its Attention, from a search with
// SearchOptions.Words) over its original image, read from where the job
// read it (ReadImage), and encodes it as PNG, on one goroutine per core.
// pngs[i] is hit i's sheet, nil for a hit without Attention. When an
// original cannot be read or decoded its sheet is drawn over a grey panel
// and unread[i] says why. err is the first failure to draw or encode.
func (x *Index) Sheets(ctx context.Context, eng *pipeline.Engine, hits []Hit) (pngs [][]byte, unread []error, err error) {
	pngs, unread = make([][]byte, len(hits)), make([]error, len(hits))
	errs := make([]error, len(hits))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(hits)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				pngs[i], unread[i], errs[i] = x.sheet(ctx, eng, &hits[i])
			}
		}()
	}
feed:
	for i := range hits {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return pngs, unread, nil
}

// sheet draws and encodes one hit's sheet (see Sheets).
func (x *Index) sheet(ctx context.Context, eng *pipeline.Engine, h *Hit) (png []byte, unread, err error) {
	if h.Attention == nil {
		return nil, nil, nil
	}
	var base pipeline.HeatmapBase // the zero one: a grey panel
	a := *h.Attention
	if h.Video != "" && h.Time != nil {
		a.ImageLabel = fmt.Sprintf("t=%.2f s", *h.Time)
		var img image.Image
		if img, unread = x.readFrame(ctx, h); unread == nil {
			base = eng.HeatmapBase(img)
		}
	} else if data, rerr := x.ReadImage(ctx, h); rerr != nil {
		unread = rerr
	} else if img, derr := eng.DecodeImage(data); derr != nil {
		unread = fmt.Errorf("%s: %w", h.Source, derr)
	} else {
		base = eng.HeatmapBase(img)
	}
	sheet, err := a.Heatmap(base)
	if err != nil {
		return nil, unread, fmt.Errorf("%s: %w", h.Path, err)
	}
	png, err = pipeline.EncodePNG(sheet)
	return png, unread, err
}

// errFrameFound stops readFrame's decode at the frame it looks for.
var errFrameFound = errors.New("frame found")

// readFrame decodes the frame of a hit that is a video's frame from the
// video the job read (a local file), as the job sampled it: the frame
// whose time is the hit's.
func (x *Index) readFrame(ctx context.Context, h *Hit) (image.Image, error) {
	if h.Source == "" || isURL(x.store, h.Source) {
		return nil, fmt.Errorf("the frame at %s s of %s: only a local video is read again", video.Seconds(*h.Time), h.Video)
	}
	var img image.Image
	_, err := video.DecodeFile(ctx, h.Source, video.Options{Sampling: video.SampleAll, MaxPixels: -1}, func(f video.Frame) error {
		if video.Seconds(f.Time) == video.Seconds(*h.Time) {
			img = f.Image
			return errFrameFound
		}
		return nil
	})
	switch {
	case img != nil:
		return img, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w", h.Source, err)
	}
	return nil, fmt.Errorf("%s has no frame at %s s", h.Source, video.Seconds(*h.Time))
}
