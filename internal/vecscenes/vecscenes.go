// Package vecscenes draws held-out scenes for evaluating the default model
// with a renderer of its own, written apart from the training data's
// (internal/scenes) and never used for training: filled or outlined shapes
// drawn as vector paths with golang.org/x/image/vector, in the proportions
// of a hand-made drawing (isosceles, right-angled and scalene triangles,
// five- and six-pointed stars with thin waists, crosses of several arm
// widths, upright, no rotation), in named colours (Pillow's and CSS's, with
// shades), on grey, plain, graded or speckled backdrops, in images of 64 to
// 224 pixels a side that need not be square.
//
// Objects lie inside the centred square a CLIP preprocessor crops (resize
// the shortest edge, centre crop), so every word names something the model
// sees. Scenes are deterministic for a seed and an index. Scene.Coverage
// gives each object's share of each patch of the model's input, following
// CLIP's crop or SigLIP's whole-image square resize.
package vecscenes

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"strings"

	"golang.org/x/image/vector"
)

// Colours and Shapes are the words the scenes draw, in the order of the
// default model's vocabulary.
var (
	Colours = []string{"red", "green", "blue", "yellow", "purple", "orange", "white", "black"}
	Shapes  = []string{"circle", "square", "triangle", "star", "cross"}
)

// shades holds, per colour word, named colours a drawing program would use
// for it (Pillow's ImageColor names first).
var shades = map[string][]color.RGBA{
	"red":    {{255, 0, 0, 255}, {220, 20, 60, 255}, {178, 34, 34, 255}, {205, 40, 40, 255}},
	"green":  {{0, 128, 0, 255}, {34, 139, 34, 255}, {50, 205, 50, 255}, {46, 139, 87, 255}},
	"blue":   {{0, 0, 255, 255}, {65, 105, 225, 255}, {0, 0, 205, 255}, {30, 144, 255, 255}},
	"yellow": {{255, 255, 0, 255}, {255, 215, 0, 255}, {240, 230, 60, 255}},
	"purple": {{128, 0, 128, 255}, {148, 0, 211, 255}, {102, 51, 153, 255}, {138, 43, 226, 255}},
	"orange": {{255, 165, 0, 255}, {255, 140, 0, 255}, {255, 127, 40, 255}},
	"white":  {{255, 255, 255, 255}, {250, 250, 245, 255}, {240, 240, 240, 255}},
	"black":  {{0, 0, 0, 255}, {30, 30, 30, 255}, {20, 20, 40, 255}},
}

// Ref says which word of a caption names which object, and whether it is
// the object's colour or its shape.
type Ref struct {
	Word   int    `json:"word"`
	Object int    `json:"object"`
	Kind   string `json:"kind"` // "colour" or "shape"
}

// Object is one drawn shape: its words, its colour, and its path in pixels
// (closed polygons; a circle is a many-sided polygon).
type Object struct {
	Colour string       `json:"colour"`
	Shape  string       `json:"shape"`
	RGB    color.RGBA   `json:"rgb"`
	Box    [4]float64   `json:"box"`              // x0, y0, x1, y1 in pixels
	Stroke float64      `json:"stroke,omitempty"` // outline width in pixels; 0 filled
	Path   [][2]float64 `json:"-"`
}

// Scene is one image with its caption.
type Scene struct {
	Seed    uint64   `json:"seed"`
	Index   int      `json:"index"`
	W       int      `json:"w"`
	H       int      `json:"h"`
	Objects []Object `json:"objects"`
	Caption string   `json:"caption"`
	Words   []string `json:"words"`
	Refs    []Ref    `json:"refs"`
	// Backdrop is the kind of background: "grey", "colour", "grade" or
	// "speckle".
	Backdrop string `json:"backdrop"`
	// Aliased is true when edges are drawn with one sample per pixel.
	Aliased bool `json:"aliased,omitempty"`
	// JPEG is the quality the image was saved at (0: not saved as JPEG).
	JPEG int `json:"jpeg,omitempty"`

	bg func(x, y int) color.RGBA
}

// Generator makes scenes of Objects objects (1 or 2), every object with
// its own colour and its own shape.
type Generator struct {
	Seed    uint64
	Objects int
}

// Scene returns scene i of the generator.
func (g Generator) Scene(i int) Scene {
	r := rand.New(rand.NewPCG(g.Seed, uint64(i)*0x9e3779b97f4a7c15+1))
	n := max(1, min(2, g.Objects))
	s := Scene{Seed: g.Seed, Index: i}
	s.W, s.H = 64+r.IntN(161), 64+r.IntN(161)
	if r.Float64() < 0.35 {
		s.H = s.W // square images too
	}
	side := float64(min(s.W, s.H))
	cx0, cy0 := (float64(s.W)-side)/2, (float64(s.H)-side)/2
	bgRGB := s.backdrop(r)
	s.Aliased = r.Float64() < 0.3
	if r.Float64() < 0.15 {
		s.JPEG = 55 + r.IntN(41)
	}
	cols := r.Perm(len(Colours))
	shps := r.Perm(len(Shapes))
	for k, c := 0, 0; k < n; c++ {
		colour := Colours[cols[c]]
		rgb := shades[colour][r.IntN(len(shades[colour]))]
		if contrast(rgb, bgRGB) < 110 {
			continue
		}
		o := Object{Colour: colour, Shape: Shapes[shps[k]], RGB: rgb}
		tries := 0
		for {
			var size float64
			if n == 1 {
				size = side * (0.3 + 0.5*r.Float64())
			} else {
				size = side * (0.26 + 0.18*r.Float64())
			}
			w, h := size, size
			if o.Shape == "triangle" {
				h = size * (0.7 + 0.7*r.Float64())
				if h > side*0.85 {
					h = side * 0.85
				}
			}
			m := side * 0.04
			x0 := cx0 + m + r.Float64()*(side-2*m-w)
			y0 := cy0 + m + r.Float64()*(side-2*m-h)
			o.Box = [4]float64{x0, y0, x0 + w, y0 + h}
			if k == 0 || apart(o.Box, s.Objects[0].Box, side*0.04) {
				break
			}
			if tries++; tries%50 == 0 {
				// No room beside the first object: move it to a corner.
				b := &s.Objects[0].Box
				bw, bh := b[2]-b[0], b[3]-b[1]
				b[0], b[1] = cx0+m, cy0+m
				b[2], b[3] = b[0]+bw, b[1]+bh
			}
		}
		s.Objects = append(s.Objects, o)
		k++
	}
	for k := range s.Objects {
		o := &s.Objects[k]
		o.Path = path(r, o.Shape, o.Box)
		if r.Float64() < 0.2 {
			o.Stroke = math.Max(1.5*side/64, (o.Box[2]-o.Box[0])*(0.06+0.08*r.Float64()))
		}
	}
	s.caption(r)
	return s
}

// backdrop chooses the scene's background and returns its mean colour.
func (s *Scene) backdrop(r *rand.Rand) color.RGBA {
	grey := func(v int) color.RGBA { return color.RGBA{uint8(v), uint8(v), uint8(v), 255} }
	switch u := r.Float64(); {
	case u < 0.5: // plain grey, as most drawings
		s.Backdrop = "grey"
		c := grey(90 + r.IntN(120))
		s.bg = func(int, int) color.RGBA { return c }
		return c
	case u < 0.7: // a plain pale or dark colour
		s.Backdrop = "colour"
		c := color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
		s.bg = func(int, int) color.RGBA { return c }
		return c
	case u < 0.85: // a vertical or horizontal grade between two greys
		s.Backdrop = "grade"
		a, b := 80+r.IntN(90), 80+r.IntN(90)
		vertical := r.Float64() < 0.5
		w, h := s.W, s.H
		s.bg = func(x, y int) color.RGBA {
			t := float64(x) / float64(w)
			if vertical {
				t = float64(y) / float64(h)
			}
			return grey(int(float64(a) + t*float64(b-a)))
		}
		return grey((a + b) / 2)
	default: // grey with speckle
		s.Backdrop = "speckle"
		c := 100 + r.IntN(100)
		amp := 8 + r.IntN(18)
		seed := r.Uint64()
		w := s.W
		s.bg = func(x, y int) color.RGBA {
			h := seed ^ uint64(y*w+x)*0xd6e8feb86659fd93
			h ^= h >> 32
			h *= 0xd6e8feb86659fd93
			h ^= h >> 29
			return grey(min(255, max(0, c+int(h%uint64(2*amp+1))-amp)))
		}
		return grey(c)
	}
}

func contrast(a, b color.RGBA) float64 {
	dr, dg, db := float64(a.R)-float64(b.R), float64(a.G)-float64(b.G), float64(a.B)-float64(b.B)
	return math.Sqrt(dr*dr + dg*dg + db*db)
}

// apart reports whether two boxes are at least gap apart along x or y.
func apart(a, b [4]float64, gap float64) bool {
	return a[2]+gap <= b[0] || b[2]+gap <= a[0] || a[3]+gap <= b[1] || b[3]+gap <= a[1]
}

// path returns the outline of a shape filling the box, upright.
func path(r *rand.Rand, shape string, b [4]float64) [][2]float64 {
	x0, y0, x1, y1 := b[0], b[1], b[2], b[3]
	w, h := x1-x0, y1-y0
	cx, cy := (x0+x1)/2, (y0+y1)/2
	switch shape {
	case "circle":
		var p [][2]float64
		for k := 0; k < 64; k++ {
			a := 2 * math.Pi * float64(k) / 64
			p = append(p, [2]float64{cx + w/2*math.Cos(a), cy + h/2*math.Sin(a)})
		}
		return p
	case "square":
		return [][2]float64{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}
	case "triangle":
		var ax float64
		switch u := r.Float64(); {
		case u < 0.5:
			ax = cx // isosceles
		case u < 0.65:
			ax = x0 // right-angled
		case u < 0.8:
			ax = x1
		default:
			ax = x0 + w*(0.15+0.7*r.Float64())
		}
		return [][2]float64{{ax, y0}, {x1, y1}, {x0, y1}}
	case "star":
		pts := 5
		if r.Float64() < 0.35 {
			pts = 6
		}
		inner := 0.34 + 0.16*r.Float64()
		rad := w / 2
		// A five-pointed star is shorter than wide: centre it in its box.
		ycs := cy + rad*(1-math.Cos(math.Pi/float64(pts)))/2
		if pts == 6 {
			ycs = cy
		}
		var p [][2]float64
		for k := 0; k < 2*pts; k++ {
			a := -math.Pi/2 + math.Pi*float64(k)/float64(pts)
			rr := rad
			if k%2 == 1 {
				rr = rad * inner
			}
			p = append(p, [2]float64{cx + rr*math.Cos(a), ycs + rr*math.Sin(a)})
		}
		return p
	case "cross":
		a := w * (0.1 + 0.12*r.Float64()) // half the arm's width
		return [][2]float64{
			{cx - a, y0}, {cx + a, y0}, {cx + a, cy - a}, {x1, cy - a}, {x1, cy + a}, {cx + a, cy + a},
			{cx + a, y1}, {cx - a, y1}, {cx - a, cy + a}, {x0, cy + a}, {x0, cy - a}, {cx - a, cy - a},
		}
	}
	return nil
}

// caption writes the scene's caption in the default model's grammar.
func (s *Scene) caption(r *rand.Rand) {
	name := func(k int) {
		o := s.Objects[k]
		art := "a"
		if strings.ContainsRune("aeiou", rune(o.Colour[0])) {
			art = "an"
		}
		s.Words = append(s.Words, art)
		s.Refs = append(s.Refs, Ref{Word: len(s.Words), Object: k, Kind: "colour"}, Ref{Word: len(s.Words) + 1, Object: k, Kind: "shape"})
		s.Words = append(s.Words, o.Colour, o.Shape)
	}
	if len(s.Objects) == 1 {
		name(0)
	} else {
		first, second := 0, 1
		if r.Float64() < 0.5 {
			first, second = 1, 0
		}
		a, b := s.Objects[first].Box, s.Objects[second].Box
		rel := []string{"and"}
		if r.Float64() < 0.6 {
			switch {
			case a[3] <= b[1]:
				rel = []string{"above"}
			case b[3] <= a[1]:
				rel = []string{"below"}
			case a[2] <= b[0]:
				rel = []string{"to", "the", "left", "of"}
			case b[2] <= a[0]:
				rel = []string{"to", "the", "right", "of"}
			}
		}
		name(first)
		s.Words = append(s.Words, rel...)
		name(second)
	}
	s.Caption = strings.Join(s.Words, " ")
}

// rasterize returns the coverage of object k's ink at every pixel.
func (s Scene) rasterize(k int, ink bool) *image.Alpha {
	o := s.Objects[k]
	z := vector.NewRasterizer(s.W, s.H)
	poly := func(p [][2]float64, reverse bool) {
		n := len(p)
		at := func(i int) [2]float64 {
			if reverse {
				return p[n-1-i]
			}
			return p[i]
		}
		z.MoveTo(float32(at(0)[0]), float32(at(0)[1]))
		for i := 1; i < n; i++ {
			z.LineTo(float32(at(i)[0]), float32(at(i)[1]))
		}
		z.ClosePath()
	}
	if !ink || o.Stroke == 0 {
		poly(o.Path, false)
	} else {
		// An outline: each edge as a band Stroke wide inside the shape,
		// as a quadrilateral between the edge and the inset polygon.
		in := inset(o.Path, o.Stroke)
		n := len(o.Path)
		for i := 0; i < n; i++ {
			j := (i + 1) % n
			poly([][2]float64{o.Path[i], o.Path[j], in[j], in[i]}, signedArea(o.Path) < 0)
		}
	}
	m := image.NewAlpha(image.Rect(0, 0, s.W, s.H))
	z.Draw(m, m.Bounds(), image.Opaque, image.Point{})
	return m
}

// signedArea is the polygon's signed area (positive when clockwise in
// image coordinates, y down).
func signedArea(p [][2]float64) float64 {
	a := 0.0
	for i := range p {
		j := (i + 1) % len(p)
		a += p[i][0]*p[j][1] - p[j][0]*p[i][1]
	}
	return a / 2
}

// inset returns the polygon moved d inwards: each vertex along the bisector
// of its corner (a mitre, limited to 3d for sharp points).
func inset(p [][2]float64, d float64) [][2]float64 {
	n := len(p)
	sgn := 1.0
	if signedArea(p) < 0 {
		sgn = -1
	}
	out := make([][2]float64, n)
	for i := range p {
		a, b, c := p[(i+n-1)%n], p[i], p[(i+1)%n]
		// Inward normals of the two edges (clockwise, y down: (-dy, dx)).
		n1 := unit(-(b[1] - a[1]), b[0]-a[0])
		n2 := unit(-(c[1] - b[1]), c[0]-b[0])
		nx, ny := n1[0]+n2[0], n1[1]+n2[1]
		l := math.Hypot(nx, ny)
		if l < 1e-9 {
			out[i] = b
			continue
		}
		nx, ny = nx/l, ny/l
		cosHalf := nx*n1[0] + ny*n1[1]
		m := d / math.Max(cosHalf, 1.0/3)
		out[i] = [2]float64{b[0] + sgn*m*nx, b[1] + sgn*m*ny}
	}
	return out
}

func unit(x, y float64) [2]float64 {
	l := math.Hypot(x, y)
	return [2]float64{x / l, y / l}
}

// Render draws the scene at its size, W×H.
func (s Scene) Render() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, s.W, s.H))
	for y := 0; y < s.H; y++ {
		for x := 0; x < s.W; x++ {
			img.SetRGBA(x, y, s.bg(x, y))
		}
	}
	for k, o := range s.Objects {
		m := s.rasterize(k, true)
		if s.Aliased {
			for i, a := range m.Pix {
				if a >= 128 {
					m.Pix[i] = 255
				} else {
					m.Pix[i] = 0
				}
			}
		}
		draw.DrawMask(img, img.Rect, image.NewUniform(o.RGB), image.Point{}, m, image.Point{}, draw.Over)
	}
	if s.JPEG > 0 {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: s.JPEG}); err == nil {
			if dec, err := jpeg.Decode(&b); err == nil {
				draw.Draw(img, img.Rect, dec, image.Point{}, draw.Src)
			}
		}
	}
	return img
}

// Labels returns the object mask at W×H, row-major: 0 for background, k+1
// where object k's area (its whole shape, outlined or not) covers at least
// half the pixel; the later object wins where two overlap.
func (s Scene) Labels() []uint8 {
	out := make([]uint8, s.W*s.H)
	for k := range s.Objects {
		m := s.rasterize(k, false)
		for i, a := range m.Pix {
			if a >= 128 {
				out[i] = uint8(k + 1)
			}
		}
	}
	return out
}

// CropCoverage returns, for each object, the fraction of each cell of a
// grid×grid partition of the square a CLIP preprocessor keeps (resize so the
// shortest edge is side pixels, the longer one int(side·long/short); centre
// crop side×side at floor((resized − side)/2)) that the object covers,
// counting the image's pixels by their centres: [objects][grid*grid].
func (s Scene) CropCoverage(side, grid int) [][]float64 {
	rw, rh := side, side
	if s.W > s.H {
		rw = int(float64(side*s.W) / float64(s.H))
	} else if s.H > s.W {
		rh = int(float64(side*s.H) / float64(s.W))
	}
	left, top := (rw-side)/2, (rh-side)/2
	fx, fy := float64(rw)/float64(s.W), float64(rh)/float64(s.H)
	cell := float64(side) / float64(grid)
	return cellCoverage(s.Labels(), s.W, s.H, len(s.Objects), grid,
		func(y int) int { return int(math.Floor(((float64(y)+0.5)*fy - float64(top)) / cell)) },
		func(x int) int { return int(math.Floor(((float64(x)+0.5)*fx - float64(left)) / cell)) })
}

// cellCoverage counts the labels lab [h*w] (0 background, k+1 object k) of
// objects objects into a grid×grid partition: row y of the image falls in
// cell row rowCell(y) and column x in cell column colCell(x), outside the
// grid when either is out of [0, grid). It returns, for each object, the
// fraction of each cell's pixels it covers: [objects][grid*grid].
func cellCoverage(lab []uint8, w, h, objects, grid int, rowCell, colCell func(int) int) [][]float64 {
	out := make([][]float64, objects)
	for k := range out {
		out[k] = make([]float64, grid*grid)
	}
	cols := make([]int, w)
	for x := range cols {
		cols[x] = colCell(x)
	}
	count := make([]float64, grid*grid)
	for y := range h {
		gy := rowCell(y)
		if gy < 0 || gy >= grid {
			continue
		}
		for x, gx := range cols {
			if gx < 0 || gx >= grid {
				continue
			}
			j := gy*grid + gx
			count[j]++
			if l := lab[y*w+x]; l > 0 {
				out[l-1][j]++
			}
		}
	}
	for k := range out {
		for j := range out[k] {
			if count[j] > 0 {
				out[k][j] /= count[j]
			}
		}
	}
	return out
}
