package pipeline

import (
	"context"
	"image"
	"image/draw"
	"math"
	"slices"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/vision"
)

// TestWindowStarts: windows every half side, the last flush with the edge.
func TestWindowStarts(t *testing.T) {
	for _, c := range []struct {
		l, n int
		want []int
	}{{64, 64, []int{0}}, {50, 64, []int{0}}, {192, 64, []int{0, 32, 64, 96, 128}}, {100, 64, []int{0, 32, 36}}, {96, 64, []int{0, 32}}} {
		if got := windowStarts(c.l, c.n); !slices.Equal(got, c.want) {
			t.Errorf("windowStarts(%d, %d) = %v, want %v", c.l, c.n, got, c.want)
		}
	}
}

// TestStitchAverages: a map constant per window stitches to the mean of the
// windows covering each cell, weighted by the area shared; cells covered
// by one window keep its value.
func TestStitchAverages(t *testing.T) {
	wp := &windowPlan{h: 4, w: 8, side: 4, at: []image.Point{{0, 0}, {2, 0}, {4, 0}}}
	st := newStitch(wp, vision.Grid{H: 2, W: 2}) // 2-pixel patches: the image is 2x4 cells
	if st.grid != (vision.Grid{H: 2, W: 4}) {
		t.Fatalf("grid %v", st.grid)
	}
	ms := [][]float32{{1, 1, 1, 1}, {2, 2, 2, 2}, {4, 4, 4, 4}} // [T=1, P=4] per window
	got := st.rows(ms, 1, 4)
	want := []float32{1, 1.5, 3, 4, 1, 1.5, 3, 4}
	if !slices.Equal(got, want) {
		t.Errorf("stitched %v, want %v", got, want)
	}
	cols := st.cols([][]float32{{1, 10, 1, 10, 1, 10, 1, 10}, {2, 20, 2, 20, 2, 20, 2, 20}, {4, 40, 4, 40, 4, 40, 4, 40}}, 2)
	if cols[2] != 1.5 || cols[3] != 15 || cols[6] != 4 || cols[7] != 40 {
		t.Errorf("stitched columns %v", cols)
	}
}

// TestWindowsFindObjectsOutsideTheCrop: on wide images (3:1) whose one
// object lies wholly in the left third, outside the centre square the
// model sees, the built-in model's map of the shape word over the whole
// image (windows) peaks inside the object for at least 90% of the scenes;
// without windows the map covers the centre square only, where the object
// is not.
func TestWindowsFindObjectsOutsideTheCrop(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(models.DefaultRef, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, Options{})
	side := eng.inH
	g := scenes.Generator{Seed: 3003, MinObjects: 1, MaxObjects: 1, Distinct: true}
	const n = 20
	inside := 0
	for k := range n {
		s := g.Scene(k)
		s.Background = scenes.Background{Kind: scenes.Plain, A: s.Background.A}
		left := s.Render(side)
		empty := s
		empty.Objects = nil
		bg := empty.Render(side).At(0, 0)
		img := image.NewRGBA(image.Rect(0, 0, 3*side, side))
		draw.Draw(img, img.Bounds(), &image.Uniform{C: bg}, image.Point{}, draw.Src)
		draw.Draw(img, left.Bounds(), left, image.Point{}, draw.Src)
		ps, err := eng.Prepare(context.Background(), s.Caption)
		if err != nil {
			t.Fatal(err)
		}
		tok := slices.Index(s.Words, s.Objects[0].Shape) + 1
		if tok == 0 {
			t.Fatalf("scene %d: %q has no word %q", k, s.Caption, s.Objects[0].Shape)
		}
		atts, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, AttendOptions{Windows: true})
		if err != nil {
			t.Fatal(err)
		}
		a := atts[0][0]
		gh, gw := a.Grid.H, a.Grid.W
		if gw != 3*gh {
			t.Fatalf("whole-image grid %v for a 3:1 image", a.Grid)
		}
		cov := s.Coverage(side, gh)[0] // the left square: cells 0..gh-1 of each row
		row := a.TextToImage[tok*gw*gh : (tok+1)*gw*gh]
		at := 0
		for c := range row {
			if row[c] > row[at] {
				at = c
			}
		}
		if i, j := at/gw, at%gw; j < gh && cov[i*gh+j] >= 0.5 {
			inside++
		}
		plain, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, AttendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if plain[0][0].Grid.W != gh {
			t.Fatalf("without windows the grid is %v", plain[0][0].Grid)
		}
		sheet, err := a.Heatmap(img)
		if err != nil {
			t.Fatal(err)
		}
		if w := sheet.Bounds().Dx(); w%(3*HeatmapPanel) != 0 {
			t.Fatalf("the sheet of a 3:1 image is %d wide, not panels of %d (its aspect)", w, 3*HeatmapPanel)
		}
		if _, err := a.Heatmap(eng.HeatmapBase(img)); err == nil {
			t.Error("a whole-image map drawn over the centre crop's base")
		}
	}
	t.Logf("windows: the shape word peaks inside its object in %d of %d wide scenes", inside, n)
	if inside*10 < n*9 {
		t.Errorf("windows: the shape word peaks inside its object in %d of %d scenes, want ≥ 90%%", inside, n)
	}
	if _, err := eng.Attend(context.Background(), &ImageEncoding{}, nil, AttendOptions{Windows: true}); err == nil {
		t.Error("Attend took windows on one encoding")
	}
}

// TestWindowsOneWindow: an image the size of one window gives, with
// windows, the maps it gives without (the same patches, the same softmax).
func TestWindowsOneWindow(t *testing.T) {
	m := openTiny(t)
	eng := tinyEngine(t, m, Options{})
	img := image.NewRGBA(image.Rect(0, 0, eng.inW, eng.inH))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	ps, err := eng.Prepare(context.Background(), "a red square", "two blue dots")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, AttendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	win, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, AttendOptions{Windows: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		a, b := plain[0][i], win[0][i]
		if a.Grid != b.Grid {
			t.Fatalf("grid %v with windows, %v without", b.Grid, a.Grid)
		}
		for name, pair := range map[string][2][]float32{"text_to_image": {a.TextToImage, b.TextToImage}, "image_to_text": {a.ImageToText, b.ImageToText}, "similarity": {a.Similarity, b.Similarity}} {
			if len(pair[0]) == 0 || len(pair[0]) != len(pair[1]) {
				t.Fatalf("%s: %d and %d values", name, len(pair[0]), len(pair[1]))
			}
			for k := range pair[0] {
				if d := pair[0][k] - pair[1][k]; d > 1e-5 || d < -1e-5 {
					t.Fatalf("prompt %d %s[%d]: %g without windows, %g with", i, name, k, pair[0][k], pair[1][k])
				}
			}
		}
		if d := a.Score - b.Score; d > 1e-6 || d < -1e-6 {
			t.Errorf("score %g and %g", a.Score, b.Score)
		}
	}
	// One window: the image's embedding is its encoding's, normalised.
	encs, err := eng.EncodeImages(context.Background(), []image.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	want := unit(encs[0].Embeds)
	got := win[0][0].ImageEmbeds
	if len(got) != len(want) {
		t.Fatalf("ImageEmbeds: %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("ImageEmbeds[%d] = %g, the normalised embedding %g", i, got[i], want[i])
		}
	}
}

// unit returns x / ‖x‖.
func unit(x []float32) []float32 {
	var n float64
	for _, v := range x {
		n += float64(v) * float64(v)
	}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(float64(v) / math.Sqrt(n))
	}
	return out
}

// TestWindowsImageEmbeds: over several windows the image's embedding is
// the normalised mean of the windows' normalised embeddings, each window
// encoded on its own here.
func TestWindowsImageEmbeds(t *testing.T) {
	m := openTiny(t)
	eng := tinyEngine(t, m, Options{})
	img := image.NewRGBA(image.Rect(0, 0, 3*eng.inW, eng.inH))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*13 + i/7)
	}
	wp, err := eng.planWindows(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(wp.at) < 3 {
		t.Fatalf("%d windows over a 3:1 image", len(wp.at))
	}
	acc := make([]float64, eng.JointDim())
	px := make([]float32, 3*wp.side*wp.side)
	for k := range wp.at {
		wp.window(px, k)
		encs, err := eng.EncodePixels(context.Background(), px, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range unit(encs[0].Embeds) {
			acc[i] += float64(v)
		}
	}
	want := make([]float32, len(acc))
	for i, v := range acc {
		want[i] = float32(v)
	}
	want = unit(want)
	ps, err := eng.Prepare(context.Background(), "a red square")
	if err != nil {
		t.Fatal(err)
	}
	win, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, AttendOptions{Windows: true})
	if err != nil {
		t.Fatal(err)
	}
	got := win[0][0].ImageEmbeds
	for i := range want {
		if d := got[i] - want[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("ImageEmbeds[%d] = %g, the windows' mean %g", i, got[i], want[i])
		}
	}
}
