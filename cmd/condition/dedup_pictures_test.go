package main

import (
	"encoding/json"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// checkDedupPictures checks the pictures dedup wrote into dir for a job of
// images images with 3 groups of one byte copy each: the PNGs decode at
// their layout's size (groups.png: 3 lines of 2 cells of 168×196), and
// nn-histogram.json counts every image once, the 6 copies in the last bin
// (cosine 1).
func checkDedupPictures(t *testing.T, dir string, images int) {
	t.Helper()
	decode := func(name string) image.Image {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return img
	}
	if s := decode("nn-histogram.png").Bounds().Size(); s != image.Pt(800, 420) {
		t.Errorf("nn-histogram.png: %v, want 800×420", s)
	}
	if s := decode("groups.png").Bounds().Size(); s != image.Pt(2*168, 3*196) {
		t.Errorf("groups.png: %v, want 336×588 (3 groups of 2)", s)
	}
	if s := decode("near-threshold.png").Bounds().Size(); s.X != 2*168 || s.Y < 3*196 || s.Y%196 != 0 {
		t.Errorf("near-threshold.png: %v, want 336 wide, 3 pairs above the threshold or more", s)
	}
	b, err := os.ReadFile(filepath.Join(dir, "nn-histogram.json"))
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Counts []int `json:"counts"`
		Images int   `json:"images"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, c := range h.Counts {
		sum += c
	}
	if h.Images != images || sum != images || len(h.Counts) != 200 || h.Counts[199] < 6 {
		t.Errorf("nn-histogram.json: %d images, counts summing to %d in %d bins, last %v; want %d images, 6 or more at cosine 1", h.Images, sum, len(h.Counts), h.Counts[len(h.Counts)-1:], images)
	}
}
