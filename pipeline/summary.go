package pipeline

import (
	"fmt"
	"sort"
)

// Scored is a named value: a patch ("row,col") with a word's weight on it,
// or a word with a region's weight on it. For a region's words, Lift is the
// region's weight over the word's mean weight on the whole image: above 1
// the region attends to the word more than the image as a whole does.
type Scored struct {
	Name   string  `json:"name"`
	Weight float32 `json:"weight"`
	Lift   float32 `json:"lift,omitempty"`
}

// WordPatches is one content word of a prompt and the patches it is most
// like (in CLIP's joint space) or attends to most.
type WordPatches struct {
	Word    string   `json:"word"`
	Tokens  [2]int   `json:"tokens"`  // the word's tokens: [start, end) in the prompt's
	Patches []Scored `json:"patches"` // named "row,col", best first
}

// Region is one part of a 3×3 split of the patch grid ("top left" …
// "bottom right") and the words most specific to it.
type Region struct {
	Region string   `json:"region"`
	Words  []Scored `json:"words"` // highest lift first
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
// k content words most specific to it (image → text). A word's Weight in a
// region is the mean over the region's patches of the word's tokens'
// weights; its Lift is that over the same mean on the whole image. Words
// are ranked by Lift, so a word that every patch attends to (a large
// background, a word the model leans on everywhere) does not lead every
// region: a region leads with the word it draws on more than the rest of
// the image does. It is nil when the image → text maps were not computed.
func (a *Attention) RegionWords(k int) []Region {
	if a.ImageToText == nil || a.Prompt == nil {
		return nil
	}
	g, ps := a.Grid, a.Prompt
	P := g.H * g.W
	// wordWeight[j][wi]: patch j's weight on word wi (summed over its tokens).
	wordWeight := make([][]float32, P)
	whole := make([]float32, len(ps.Words))
	for j := range P {
		wordWeight[j] = a.patchWordWeights(j)
		for wi, v := range wordWeight[j] {
			whole[wi] += v / float32(P)
		}
	}
	var out []Region
	for ry := range 3 {
		for rx := range 3 {
			n := 0
			sums := make([]float32, len(ps.Words))
			for j := range P {
				if (j/g.W)*3/g.H != ry || (j%g.W)*3/g.W != rx {
					continue
				}
				n++
				for wi, v := range wordWeight[j] {
					sums[wi] += v
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
				s := Scored{Name: w.Text, Weight: sums[wi] / float32(n)}
				if whole[wi] > 0 {
					s.Lift = s.Weight / whole[wi]
				}
				ws = append(ws, s)
			}
			sort.SliceStable(ws, func(i, j int) bool { return ws[i].Lift > ws[j].Lift })
			if len(ws) > k {
				ws = ws[:k]
			}
			out = append(out, Region{Region: regionNames[ry][rx], Words: ws})
		}
	}
	return out
}

// patchWordWeights returns patch j's image → text weight on each word of
// the prompt: the sum over the word's tokens.
func (a *Attention) patchWordWeights(j int) []float32 {
	t := a.Prompt.T()
	out := make([]float32, len(a.Prompt.Words))
	for wi, w := range a.Prompt.Words {
		for tok := w.Start; tok < w.End; tok++ {
			out[wi] += a.ImageToText[j*t+tok]
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
