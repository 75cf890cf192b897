package index

import (
	"context"
	"fmt"
	"runtime"
	"sync"

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
	data, unread := x.ReadImage(ctx, h)
	if unread == nil {
		img, derr := eng.DecodeImage(data)
		if derr != nil {
			unread = fmt.Errorf("%s: %w", h.Source, derr)
		} else {
			base = eng.HeatmapBase(img)
		}
	}
	sheet, err := h.Attention.Heatmap(base)
	if err != nil {
		return nil, unread, fmt.Errorf("%s: %w", h.Path, err)
	}
	png, err = pipeline.EncodePNG(sheet)
	return png, unread, err
}
