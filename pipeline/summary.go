package pipeline

import (
	"fmt"
	"sort"
)

// Scored is a named value: a patch ("row,col") with a word's weight on it,
// or a word with a region's weight on it.
type Scored struct {
	Name   string  `json:"name"`
	Weight float32 `json:"weight"`
}

// WordPatches is one content word of a prompt and the patches it is most
// like (in CLIP's joint space) or attends to most.
type WordPatches struct {
	Word    string   `json:"word"`
	Tokens  [2]int   `json:"tokens"`  // the word's tokens: [start, end) in the prompt's
	Patches []Scored `json:"patches"` // named "row,col", best first
}

// Region is one part of a 3×3 split of the patch grid ("top left" …
// "bottom right") and the words its patches attend to most.
type Region struct {
	Region string   `json:"region"`
	Words  []Scored `json:"words"` // best first
}

// regionNames are the parts of a 3×3 split of the patch grid.
var regionNames = [3][3]string{
	{"top left", "top", "top right"},
	{"left", "centre", "right"},
	{"bottom left", "bottom", "bottom right"},
}

// TopPatches returns, for each content word (as Overlays picks them), the
// k patches where its map is largest.
func (a *Attention) TopPatches(k int) []WordPatches {
	var out []WordPatches
	for _, ov := range a.Overlays() {
		ps := make([]Scored, len(ov.Map))
		for j, v := range ov.Map {
			ps[j] = Scored{Name: fmt.Sprintf("%d,%d", j/a.Grid.W, j%a.Grid.W), Weight: v}
		}
		out = append(out, WordPatches{Word: ov.Label, Tokens: [2]int{ov.Start, ov.End}, Patches: topScored(ps, k)})
	}
	return out
}

// RegionWords returns, for each part of a 3×3 split of the patch grid, the
// k content words its patches attend to most (image → text, the mean over
// the part's patches of the word's tokens' weights). It is nil when the
// image → text maps were not computed.
func (a *Attention) RegionWords(k int) []Region {
	if a.ImageToText == nil || a.Prompt == nil {
		return nil
	}
	g, ps := a.Grid, a.Prompt
	t := ps.T()
	var out []Region
	for ry := range 3 {
		for rx := range 3 {
			n := 0
			sums := make([]float32, len(ps.Words))
			for j := range g.H * g.W {
				row, col := j/g.W, j%g.W
				if row*3/g.H != ry || col*3/g.W != rx {
					continue
				}
				n++
				for wi, w := range ps.Words {
					for tok := w.Start; tok < w.End; tok++ {
						sums[wi] += a.ImageToText[j*t+tok]
					}
				}
			}
			if n == 0 {
				continue
			}
			var ws []Scored
			for wi, w := range ps.Words {
				if !isContentWord(w) {
					continue
				}
				ws = append(ws, Scored{Name: w.Text, Weight: sums[wi] / float32(n)})
			}
			out = append(out, Region{Region: regionNames[ry][rx], Words: topScored(ws, k)})
		}
	}
	return out
}

// topScored sorts xs best first (stable) and keeps the first k.
func topScored(xs []Scored, k int) []Scored {
	sort.SliceStable(xs, func(i, j int) bool { return xs[i].Weight > xs[j].Weight })
	if len(xs) > k {
		xs = xs[:k]
	}
	return xs
}
