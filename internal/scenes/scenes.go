// Package scenes generates synthetic scenes, deterministically from a seed:
// one to three coloured shapes on a plain, gradient or noisy background, with
// a caption that names them and a mask of every object. It is the single
// definition of the data the embedded default model was trained on
// (scripts/train_default reads what tools/gendata writes) and of the held-out
// scenes its evaluation uses.
//
// Coordinates are normalised: x to the right and y downwards, both in [0, 1],
// so a scene renders at any size.
package scenes

import (
	"fmt"
	"math"
	"strings"
)

// Colours are the colour words of the caption grammar, in a fixed order.
var Colours = []string{"red", "green", "blue", "yellow", "purple", "orange", "white", "black"}

// Shapes are the shape words of the caption grammar, in a fixed order.
var Shapes = []string{"circle", "square", "triangle", "star", "cross"}

// Vocabulary lists every word the caption grammar uses (a comma is a word).
var Vocabulary = []string{
	"a", "an", "red", "green", "blue", "yellow", "purple", "orange", "white", "black",
	"circle", "square", "triangle", "star", "cross",
	"and", ",", "above", "below", "to", "the", "left", "right", "of",
	"on", "at", "top", "bottom", "in", "middle",
}

// palette holds the base RGB of each colour in Colours; objects are drawn in
// their colour with a small jitter.
var palette = [][3]float64{
	{220, 30, 30},   // red
	{30, 170, 50},   // green
	{30, 70, 225},   // blue
	{245, 220, 30},  // yellow
	{140, 50, 185},  // purple
	{250, 140, 20},  // orange
	{250, 250, 250}, // white
	{15, 15, 15},    // black
}

// Background kinds.
const (
	Plain    = "plain"
	Gradient = "gradient"
	Noisy    = "noisy"
	Stripes  = "stripes"
	Checker  = "checker"
	Blotchy  = "blotchy"
)

// minContrast is the least Euclidean RGB distance between an object's colour
// and the background anywhere near it.
const minContrast = 120

// Background is a scene's backdrop. Plain uses A; Gradient blends A into B
// along the direction Angle (radians); Noisy is A plus smooth grey noise of
// amplitude Amp (in 0–255 units). Varied scenes also use Stripes and
// Checker of A and B (Period wide, turned by Angle) and Blotchy, smooth
// colour noise between A and B with grain Period and Amp of grain noise.
type Background struct {
	Kind  string     `json:"kind"`
	A     [3]float64 `json:"a"`
	B     [3]float64 `json:"b,omitempty"`
	Angle float64    `json:"angle,omitempty"`
	Amp   float64    `json:"amp,omitempty"`
	Noise uint64     `json:"noise,omitempty"`
	// Period is the width of a stripe or a checker square, or the grain
	// of blotches (varied scenes' textures), normalised.
	Period float64 `json:"period,omitempty"`
}

// Object is one shape in a scene. X, Y is its centre and R the radius of the
// circle it fits in, all normalised; Angle is its rotation in radians.
type Object struct {
	Colour string     `json:"colour"`
	Shape  string     `json:"shape"`
	RGB    [3]float64 `json:"rgb"`
	X      float64    `json:"x"`
	Y      float64    `json:"y"`
	R      float64    `json:"r"`
	Angle  float64    `json:"angle"`
	// The proportions of a varied drawing (Generator.Variety); all zero
	// for the generator's one drawing of each shape. Apex is a triangle's
	// apex offset from the middle of its base, in half-widths (0 isosceles,
	// ±1 right-angled); Height its height over its base; Points a star's
	// points; Waist a star's inner radius or a cross's arm half-width;
	// Stroke the width of an outline (0: filled), all as fractions of R.
	Apex   float64 `json:"apex,omitempty"`
	Height float64 `json:"height,omitempty"`
	Points int     `json:"points,omitempty"`
	Waist  float64 `json:"waist,omitempty"`
	Stroke float64 `json:"stroke,omitempty"`
}

// Ref says which word of a caption names which object, and whether the word
// is the object's colour or its shape.
type Ref struct {
	Word   int    `json:"word"`   // index into Scene.Words
	Object int    `json:"object"` // index into Scene.Objects
	Kind   string `json:"kind"`   // "colour" or "shape"
}

// Scene is one generated scene.
type Scene struct {
	Seed       uint64     `json:"seed"`  // the generator's seed
	Index      int        `json:"index"` // the scene's index under that seed
	Background Background `json:"background"`
	Objects    []Object   `json:"objects"`
	Caption    string     `json:"caption"`
	// Words is the caption split as CLIP's pre-tokenizer splits it (a comma
	// is its own word); with the default model's vocabulary each word is one
	// token, so word i is token i+1 after the start token.
	Words []string `json:"words"`
	Refs  []Ref    `json:"refs"`
	// Style is how a varied scene is drawn (Generator.Variety); nil for
	// the generator's one way (antialiased, sharp, clean).
	Style *Style `json:"style,omitempty"`
}

// Generator makes scenes. The zero value is not useful: set MaxObjects.
//
// Unless Distinct is set, a quarter of the scenes with two or more objects
// have two objects of the same colour and another quarter two of the same
// shape (never both), so that neither colour nor shape alone tells the
// objects of a scene apart. With Distinct, every object of a scene has its
// own colour and its own shape, so that every colour or shape word of a
// caption names exactly one object (the evaluation's scenes).
//
// With Variety, scenes vary how they are drawn as well as what they show
// (see variety.go): shape proportions, outlines, sizes from tiny to filling
// the frame, objects cut by the border, textured backgrounds, aliasing,
// blur, noise and JPEG artefacts. The training data uses it; without it the
// generator makes exactly the scenes it always made (the demo fixtures and
// the held-out evaluation depend on them).
type Generator struct {
	Seed       uint64
	MinObjects int // at least 1
	MaxObjects int // at most 3
	Distinct   bool
	Variety    bool
}

// NewGenerator returns a generator of scenes with one to three objects.
func NewGenerator(seed uint64) Generator {
	return Generator{Seed: seed, MinObjects: 1, MaxObjects: 3}
}

// Scene returns scene i. The same generator settings and index always give
// the same scene.
func (g Generator) Scene(i int) Scene {
	lo, hi := max(1, g.MinObjects), min(3, g.MaxObjects)
	if hi < lo {
		hi = lo
	}
	r := &rng{s: hash2(g.Seed, uint64(i))}
	n := lo
	if hi > lo {
		// 1: 30%, 2: 45%, 3: 25% when all counts are allowed.
		w := []float64{0.30, 0.45, 0.25}
		total := 0.0
		for k := lo; k <= hi; k++ {
			total += w[k-1]
		}
		u := r.float() * total
		for n = lo; n < hi; n++ {
			u -= w[n-1]
			if u < 0 {
				break
			}
		}
	}
	s := Scene{Seed: g.Seed, Index: i}
	if g.Variety && r.float() >= cleanShare {
		s.vary(r, n, g.Distinct)
		s.Words, s.Refs = caption(r, s.Objects)
		s.Caption = join(s.Words)
		return s
	}
	for {
		s.Background = background(r)
		allowed := allowedColours(s.Background)
		if len(allowed) < n {
			continue
		}
		objs, ok := place(r, n, allowed, g.Distinct)
		if !ok {
			continue
		}
		s.Objects = objs
		break
	}
	s.Words, s.Refs = caption(r, s.Objects)
	s.Caption = join(s.Words)
	return s
}

// background draws a random backdrop.
func background(r *rng) Background {
	randRGB := func() [3]float64 {
		return [3]float64{r.uniform(0, 255), r.uniform(0, 255), r.uniform(0, 255)}
	}
	b := Background{A: randRGB()}
	switch r.intn(3) {
	case 0:
		b.Kind = Plain
	case 1:
		b.Kind = Gradient
		b.B = randRGB()
		b.Angle = r.uniform(0, 2*math.Pi)
	default:
		b.Kind = Noisy
		b.Amp = r.uniform(10, 30)
		b.Noise = r.next()
	}
	return b
}

func dist(a, b [3]float64) float64 {
	return math.Sqrt((a[0]-b[0])*(a[0]-b[0]) + (a[1]-b[1])*(a[1]-b[1]) + (a[2]-b[2])*(a[2]-b[2]))
}

// allowedColours returns the indices of the colours that contrast with the
// background everywhere (both ends and the middle of a gradient).
func allowedColours(b Background) []int {
	probes := [][3]float64{b.A}
	if b.Kind != Plain && b.Kind != Noisy {
		mid := [3]float64{(b.A[0] + b.B[0]) / 2, (b.A[1] + b.B[1]) / 2, (b.A[2] + b.B[2]) / 2}
		probes = append(probes, b.B, mid)
	}
	var out []int
	for c, rgb := range palette {
		ok := true
		for _, p := range probes {
			// Jitter moves an object's colour by up to 15 per channel.
			if dist(rgb, p) < minContrast+26 {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// place draws n objects with colours from allowed whose enclosing circles do
// not overlap. Colours and shapes are distinct, except that without distinct
// the second object may share the first one's colour or (not and) its shape.
func place(r *rng, n int, allowed []int, distinct bool) ([]Object, bool) {
	cp, sp := pickKinds(r, n, allowed, distinct)
	rmin, rmax := 0.13, 0.22
	if n == 3 {
		rmin, rmax = 0.12, 0.18
	}
	objs := make([]Object, 0, n)
	for k := 0; k < n; k++ {
		c := allowed[cp[k]]
		o := Object{Colour: Colours[c], Shape: Shapes[sp[k]]}
		for ch := range 3 {
			o.RGB[ch] = math.Max(0, math.Min(255, palette[c][ch]+r.uniform(-15, 15)))
		}
		o.Angle = r.uniform(-0.3, 0.3)
		placed := false
		for try := 0; try < 200 && !placed; try++ {
			o.R = r.uniform(rmin, rmax)
			o.X = r.uniform(o.R+0.02, 1-o.R-0.02)
			o.Y = r.uniform(o.R+0.02, 1-o.R-0.02)
			placed = !overlaps(o, objs)
		}
		if !placed {
			return nil, false
		}
		objs = append(objs, o)
	}
	return objs, true
}

// pickKinds draws the order in which the objects take colours (indices into
// allowed) and shapes (into Shapes): distinct for every object, except that
// without distinct the second object may share the first one's colour or
// (not and) its shape.
func pickKinds(r *rng, n int, allowed []int, distinct bool) (cp, sp []int) {
	cp = r.perm(len(allowed))
	sp = r.perm(len(Shapes))
	if !distinct && n >= 2 {
		switch u := r.float(); {
		case u < 0.25:
			cp[1] = cp[0]
		case u < 0.5:
			sp[1] = sp[0]
		}
	}
	return cp, sp
}

// overlaps reports whether o's enclosing circle comes within 0.02 of any of
// objs'.
func overlaps(o Object, objs []Object) bool {
	for _, p := range objs {
		if math.Hypot(o.X-p.X, o.Y-p.Y) < o.R+p.R+0.02 {
			return true
		}
	}
	return false
}

// caption describes the objects; it returns the words and which words name
// which object.
func caption(r *rng, objs []Object) ([]string, []Ref) {
	var words []string
	var refs []Ref
	say := func(k int) {
		if strings.IndexByte("aeiou", objs[k].Colour[0]) >= 0 {
			words = append(words, "an")
		} else {
			words = append(words, "a")
		}
		refs = append(refs, Ref{Word: len(words), Object: k, Kind: "colour"})
		words = append(words, objs[k].Colour)
		refs = append(refs, Ref{Word: len(words), Object: k, Kind: "shape"})
		words = append(words, objs[k].Shape)
	}
	switch len(objs) {
	case 1:
		say(0)
		o := objs[0]
		var where [][]string
		if o.X < 0.33 {
			where = append(where, []string{"on", "the", "left"})
		}
		if o.X > 0.67 {
			where = append(where, []string{"on", "the", "right"})
		}
		if o.Y < 0.33 {
			where = append(where, []string{"at", "the", "top"})
		}
		if o.Y > 0.67 {
			where = append(where, []string{"at", "the", "bottom"})
		}
		if math.Abs(o.X-0.5) < 0.15 && math.Abs(o.Y-0.5) < 0.15 {
			where = append(where, []string{"in", "the", "middle"})
		}
		if len(where) > 0 && r.float() < 0.5 {
			words = append(words, where[r.intn(len(where))]...)
		}
	case 2:
		a, b := 0, 1
		if r.float() < 0.5 {
			a, b = 1, 0
		}
		dx, dy := objs[b].X-objs[a].X, objs[b].Y-objs[a].Y
		var rel []string
		switch {
		case math.Abs(dy) > math.Abs(dx)+0.05 && dy > 0:
			rel = []string{"above"}
		case math.Abs(dy) > math.Abs(dx)+0.05:
			rel = []string{"below"}
		case math.Abs(dx) > math.Abs(dy)+0.05 && dx > 0:
			rel = []string{"to", "the", "left", "of"}
		case math.Abs(dx) > math.Abs(dy)+0.05:
			rel = []string{"to", "the", "right", "of"}
		}
		if rel == nil || r.float() < 0.4 {
			rel = []string{"and"}
		}
		say(a)
		words = append(words, rel...)
		say(b)
	default:
		p := r.perm(len(objs))
		for i, k := range p {
			switch {
			case i == len(p)-1:
				words = append(words, "and")
			case i > 0:
				words = append(words, ",")
			}
			say(k)
		}
	}
	return words, refs
}

// join writes words as a caption: spaces between words, none before a comma.
func join(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 && w != "," {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// String returns the caption.
func (s Scene) String() string { return s.Caption }

// Validate checks that the words make the caption and that every reference
// names a word of its object.
func (s Scene) Validate() error {
	if join(s.Words) != s.Caption {
		return fmt.Errorf("scenes: scene %d: words %q do not make caption %q", s.Index, s.Words, s.Caption)
	}
	for _, ref := range s.Refs {
		if ref.Word < 0 || ref.Word >= len(s.Words) || ref.Object < 0 || ref.Object >= len(s.Objects) {
			return fmt.Errorf("scenes: scene %d: reference %+v out of range", s.Index, ref)
		}
		o := s.Objects[ref.Object]
		want := o.Shape
		if ref.Kind == "colour" {
			want = o.Colour
		}
		if s.Words[ref.Word] != want {
			return fmt.Errorf("scenes: scene %d: word %d is %q, want %q", s.Index, ref.Word, s.Words[ref.Word], want)
		}
	}
	return nil
}
