package batch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	_ "github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
)

// TestHeatmapScaleAcrossWords: on every demo scene, the panel of a colour
// word absent from the image is dimmer over the object than the panel of
// the object's own colour: maps share one scale (the word's cosine with
// each patch), they are not each stretched to their own range.
func TestHeatmapScaleAcrossWords(t *testing.T) {
	orttest.Load(t)
	eng, err := pipeline.Open(context.Background(), "default", pipeline.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	dir := filepath.Join("..", "..", "testdata", "scenes")
	f, err := os.Open(filepath.Join(dir, "scenes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	colours := []string{"red", "green", "blue", "yellow", "purple", "orange", "white", "black"}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for i := 0; sc.Scan(); i++ {
		var s struct {
			Objects []struct{ Colour, Shape string }
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		img, mask := readPNG(t, filepath.Join(dir, "images", fmt.Sprintf("scene_%03d.png", i))), readPNG(t, filepath.Join(dir, "masks", fmt.Sprintf("scene_%03d_mask.png", i)))
		used := map[string]bool{}
		for _, o := range s.Objects {
			used[o.Colour] = true
		}
		absent := ""
		for _, c := range colours {
			if !used[c] {
				absent = c
				break
			}
		}
		o := s.Objects[0]
		ps, err := eng.Prepare(context.Background(), "a "+o.Colour+" "+o.Shape, "a "+absent+" "+o.Shape)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, pipeline.AttendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The mean of the colour word's map over the patches whose centre
		// is on object 0 (grey level 80 in the mask).
		mean := func(a pipeline.Attention) float64 {
			ov := a.Overlays()[0]
			if !ov.Absolute() {
				t.Fatalf("scene %d: %q has no fixed scale", i, ov.Label)
			}
			g, b := a.Grid, mask.Bounds()
			sum, k := 0.0, 0
			for j, v := range ov.Map {
				r, c := g.Cell(j)
				x, y := b.Min.X+(2*c+1)*b.Dx()/(2*g.W), b.Min.Y+(2*r+1)*b.Dy()/(2*g.H)
				if l, _, _, _ := mask.At(x, y).RGBA(); l>>8 == 80 {
					sum += float64(v)
					k++
				}
			}
			if k == 0 {
				return -1
			}
			return sum / float64(k)
		}
		present, missing := mean(atts[0][0]), mean(atts[0][1])
		if present < 0 {
			continue // the object covers no patch centre
		}
		n++
		t.Logf("scene %d: %-7s %.3f, %-7s %.3f over the %s %s", i, o.Colour, present, absent, missing, o.Colour, o.Shape)
		if missing >= present {
			t.Errorf("scene %d: %q (absent) is as bright over the %s %s as %q: %.3f ≥ %.3f", i, absent, o.Colour, o.Shape, o.Colour, missing, present)
		}
	}
	if n < 8 {
		t.Fatalf("only %d scenes checked", n)
	}
}

func readPNG(t *testing.T, p string) image.Image {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return img
}
