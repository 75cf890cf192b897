package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
)

// tipsPixelSize returns the pixel size a TIPSv2 model's vision graph is
// built for: the size its preprocessor_config.json resizes every image to
// (Tipsv2ImageProcessor's size: {"height", "width"}, one number for a
// square, or [height, width]), so that the graph takes what preprocessing
// gives; otherwise (no such file, do_resize false, a size of another form)
// the config's image_size, both ways. Another patch grid than the position
// table's gets the table resized when the graph is built, as
// Tipsv2VisionEmbeddings resizes it (graphbuild.BuildTips). A size that
// does not parse is left to the image preprocessor, which names it.
func (m *Model) tipsPixelSize() (h, w int) {
	s := m.config.VisionConfig.ImageSize
	if m.base == nil {
		return s, s
	}
	b, err := fs.ReadFile(m.base, PreprocessorFile)
	if err != nil {
		return s, s
	}
	if ph, pw, ok := tipsProcessorSize(b); ok {
		return ph, pw
	}
	return s, s
}

// tipsProcessorSize reads the output size of a Tipsv2ImageProcessor
// config: ok is false when it resizes to no fixed size of its own.
func tipsProcessorSize(b []byte) (h, w int, ok bool) {
	var raw struct {
		DoResize *bool           `json:"do_resize"`
		Size     json.RawMessage `json:"size"`
	}
	if json.Unmarshal(b, &raw) != nil || (raw.DoResize != nil && !*raw.DoResize) {
		return 0, 0, false
	}
	v := bytes.TrimSpace(raw.Size)
	if len(v) == 0 || string(v) == "null" {
		return 0, 0, false
	}
	var hw struct {
		Height, Width int
		ShortestEdge  int `json:"shortest_edge"`
	}
	var list []int
	var n int
	switch {
	case json.Unmarshal(v, &hw) == nil && hw.ShortestEdge == 0:
		h, w = hw.Height, hw.Width
	case json.Unmarshal(v, &list) == nil && len(list) == 2:
		h, w = list[0], list[1]
	case json.Unmarshal(v, &n) == nil:
		h, w = n, n
	}
	return h, w, h > 0 && w > 0
}

// builtPixels is what the stamps of built graphs say of the vision graph's
// pixel size: "" at the config's image_size (every graph built before the
// size was recorded), else "HxW".
func (m *Model) builtPixels() string {
	if m.family != Tipsv2 {
		return ""
	}
	h, w := m.tipsPixelSize()
	if s := m.config.VisionConfig.ImageSize; h == s && w == s {
		return ""
	}
	return fmt.Sprintf("%dx%d", h, w)
}
