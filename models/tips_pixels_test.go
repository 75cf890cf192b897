package models

import "testing"

// TestTipsProcessorSize reads the forms Tipsv2ImageProcessor's size takes,
// and leaves to image_size the configs that resize to no fixed size.
func TestTipsProcessorSize(t *testing.T) {
	for _, c := range []struct {
		json string
		h, w int
		ok   bool
	}{
		{`{"size": {"height": 24, "width": 20}}`, 24, 20, true},
		{`{"do_resize": true, "size": 448}`, 448, 448, true},
		{`{"size": [12, 8]}`, 12, 8, true},
		{`{"do_resize": false, "size": {"height": 24, "width": 20}}`, 0, 0, false},
		{`{"size": {"shortest_edge": 224}}`, 0, 0, false},
		{`{"size": null}`, 0, 0, false},
		{`{}`, 0, 0, false},
		{`{"size": {"height": 0, "width": 20}}`, 0, 20, false},
		{`not json`, 0, 0, false},
	} {
		h, w, ok := tipsProcessorSize([]byte(c.json))
		if ok != c.ok || (ok && (h != c.h || w != c.w)) {
			t.Errorf("%s: %dx%d %v, want %dx%d %v", c.json, h, w, ok, c.h, c.w, c.ok)
		}
	}
}
