package scenes

import (
	"image"
	"image/color"
	"math"
)

// outline returns the polygon of a shape centred at the origin with radius 1
// before rotation (nil for a circle).
func outline(shape string) [][2]float64 {
	switch shape {
	case "square":
		const h = 0.8 // half side: the square's corners stay inside the circle
		return [][2]float64{{-h, -h}, {h, -h}, {h, h}, {-h, h}}
	case "triangle":
		// Equilateral, pointing up (y grows downwards), centred on its
		// circumcircle's centre moved down a little so it looks centred.
		var p [][2]float64
		for k := 0; k < 3; k++ {
			a := -math.Pi/2 + float64(k)*2*math.Pi/3
			p = append(p, [2]float64{math.Cos(a), math.Sin(a) + 0.2})
		}
		return p
	case "star":
		var p [][2]float64
		for k := 0; k < 10; k++ {
			a := -math.Pi/2 + float64(k)*math.Pi/5
			rad := 1.0
			if k%2 == 1 {
				rad = 0.5
			}
			p = append(p, [2]float64{rad * math.Cos(a), rad * math.Sin(a)})
		}
		return p
	case "cross":
		const w, l = 0.33, 0.95
		return [][2]float64{
			{-w, -l}, {w, -l}, {w, -w}, {l, -w}, {l, w}, {w, w},
			{w, l}, {-w, l}, {-w, w}, {-l, w}, {-l, -w}, {-w, -w},
		}
	}
	return nil
}

// inPolygon reports whether p lies inside the polygon (even-odd rule).
func inPolygon(poly [][2]float64, x, y float64) bool {
	in := false
	for i, j := 0, len(poly)-1; i < len(poly); j, i = i, i+1 {
		xi, yi, xj, yj := poly[i][0], poly[i][1], poly[j][0], poly[j][1]
		if (yi > y) != (yj > y) && x < (xj-xi)*(y-yi)/(yj-yi)+xi {
			in = !in
		}
	}
	return in
}

// shapeTest is an object's point-inside test in normalised coordinates.
type shapeTest struct {
	o          Object
	poly       [][2]float64
	cos, sin   float64
	x0, y0     float64 // bounding box
	x1, y1     float64
	circleOnly bool
}

func newShapeTest(o Object) shapeTest {
	poly := outline(o.Shape)
	if o.varied() {
		poly = variedOutline(o)
	}
	return shapeTest{
		o: o, poly: poly, cos: math.Cos(o.Angle), sin: math.Sin(o.Angle),
		x0: o.X - o.R, y0: o.Y - o.R, x1: o.X + o.R, y1: o.Y + o.R,
		circleOnly: o.Shape == "circle",
	}
}

// contains reports whether the normalised point (x, y) is inside the object.
func (t *shapeTest) contains(x, y float64) bool {
	if x < t.x0 || x > t.x1 || y < t.y0 || y > t.y1 {
		return false
	}
	dx, dy := (x-t.o.X)/t.o.R, (y-t.o.Y)/t.o.R
	if t.circleOnly {
		return dx*dx+dy*dy <= 1
	}
	// Rotate the point by -Angle into the shape's frame.
	u := t.cos*dx + t.sin*dy
	v := -t.sin*dx + t.cos*dy
	return inPolygon(t.poly, u, v)
}

// Contains reports whether the normalised point (x, y) lies inside object k.
func (s Scene) Contains(k int, x, y float64) bool {
	t := newShapeTest(s.Objects[k])
	return t.contains(x, y)
}

// backdrop is a Background ready to be sampled: the cosine and sine of its
// angle computed once, not at every sample.
type backdrop struct {
	Background
	cos, sin float64
}

// sampler returns b ready to be sampled.
func (b Background) sampler() *backdrop {
	return &backdrop{b, math.Cos(b.Angle), math.Sin(b.Angle)}
}

// at returns the backdrop colour at a normalised point.
func (b *backdrop) at(x, y float64) [3]float64 {
	switch b.Kind {
	case Gradient:
		t := ((x-0.5)*b.cos+(y-0.5)*b.sin)/1.4 + 0.5
		t = math.Max(0, math.Min(1, t))
		return [3]float64{
			b.A[0] + t*(b.B[0]-b.A[0]),
			b.A[1] + t*(b.B[1]-b.A[1]),
			b.A[2] + t*(b.B[2]-b.A[2]),
		}
	case Noisy:
		// Two octaves of value noise on lattices fixed in normalised
		// coordinates, so the noise looks the same at every size.
		n := 0.6*valueNoise(b.Noise, 8, x, y) + 0.4*valueNoise(b.Noise+1, 32, x, y)
		d := b.Amp * (2*n - 1)
		return [3]float64{b.A[0] + d, b.A[1] + d, b.A[2] + d}
	case Stripes, Checker, Blotchy:
		return b.textureAt(x, y)
	}
	return b.A
}

// valueNoise returns smooth noise in [0, 1] on a cells×cells lattice.
func valueNoise(seed uint64, cells int, x, y float64) float64 {
	fx, fy := x*float64(cells), y*float64(cells)
	ix, iy := math.Floor(fx), math.Floor(fy)
	tx, ty := fx-ix, fy-iy
	tx, ty = tx*tx*(3-2*tx), ty*ty*(3-2*ty)
	v := func(i, j float64) float64 {
		h := hash2(seed, uint64(int64(i)+1000)<<32|uint64(int64(j)+1000))
		return float64(h>>11) / (1 << 53)
	}
	v00, v10, v01, v11 := v(ix, iy), v(ix+1, iy), v(ix, iy+1), v(ix+1, iy+1)
	a := v00 + tx*(v10-v00)
	b := v01 + tx*(v11-v01)
	return a + ty*(b-a)
}

// Render draws the scene at size×size pixels, antialiased by supersampling
// (and then, for a varied scene, as its Style says).
func (s Scene) Render(size int) *image.RGBA {
	if s.Style != nil || s.Background.Kind != Plain && s.Background.Kind != Gradient && s.Background.Kind != Noisy {
		return s.renderVaried(size)
	}
	for _, o := range s.Objects {
		if o.varied() {
			return s.renderVaried(size)
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	ss := 4 // samples per pixel along each axis
	if size > 128 {
		ss = 2
	}
	s.supersample(size, ss, (*shapeTest).contains, func(px, py int, c [3]float64) {
		img.SetRGBA(px, py, color.RGBA{R: clamp8(c[0]), G: clamp8(c[1]), B: clamp8(c[2]), A: 255})
	})
	return img
}

// supersample renders s at size×size pixels, ss×ss samples a pixel: at each
// sample the background, or the last object whose paints says it covers
// the sample (later objects are drawn over earlier ones); set receives each
// pixel's mean RGB.
func (s Scene) supersample(size, ss int, paints func(*shapeTest, float64, float64) bool, set func(px, py int, c [3]float64)) {
	tests := make([]shapeTest, len(s.Objects))
	for k, o := range s.Objects {
		tests[k] = newShapeTest(o)
	}
	bg := s.Background.sampler()
	inv := 1 / float64(size*ss)
	n := float64(ss * ss)
	for py := 0; py < size; py++ {
		for px := 0; px < size; px++ {
			var acc [3]float64
			for sy := 0; sy < ss; sy++ {
				for sx := 0; sx < ss; sx++ {
					x := (float64(px*ss+sx) + 0.5) * inv
					y := (float64(py*ss+sy) + 0.5) * inv
					c := bg.at(x, y)
					for k := len(tests) - 1; k >= 0; k-- {
						if paints(&tests[k], x, y) {
							c = tests[k].o.RGB
							break
						}
					}
					acc[0] += c[0]
					acc[1] += c[1]
					acc[2] += c[2]
				}
			}
			set(px, py, [3]float64{acc[0] / n, acc[1] / n, acc[2] / n})
		}
	}
}

func clamp8(v float64) uint8 {
	v = math.Round(v)
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// Labels returns the scene's object mask at size×size pixels, row-major:
// 0 for background and k+1 where the centre of the pixel lies inside object k
// (the object drawn last wins where two overlap).
func (s Scene) Labels(size int) []uint8 {
	out := make([]uint8, size*size)
	tests := make([]shapeTest, len(s.Objects))
	for k, o := range s.Objects {
		tests[k] = newShapeTest(o)
	}
	for py := 0; py < size; py++ {
		y := (float64(py) + 0.5) / float64(size)
		for px := 0; px < size; px++ {
			x := (float64(px) + 0.5) / float64(size)
			for k := len(tests) - 1; k >= 0; k-- {
				if tests[k].contains(x, y) {
					out[py*size+px] = uint8(k + 1)
					break
				}
			}
		}
	}
	return out
}

// Coverage returns, for each object, the fraction of each cell of a
// grid×grid partition of the image that the object covers, measured on a
// size×size label map (size a multiple of grid): [objects][grid*grid],
// row-major cells. With size 64 and grid 8 the cells are the default model's
// 8×8-pixel patches.
func (s Scene) Coverage(size, grid int) [][]float64 {
	lab := s.Labels(size)
	cell := size / grid
	out := make([][]float64, len(s.Objects))
	for k := range out {
		out[k] = make([]float64, grid*grid)
	}
	for py := 0; py < size; py++ {
		for px := 0; px < size; px++ {
			if l := lab[py*size+px]; l > 0 {
				out[l-1][(py/cell)*grid+px/cell]++
			}
		}
	}
	area := float64(cell * cell)
	for k := range out {
		for j := range out[k] {
			out[k][j] /= area
		}
	}
	return out
}
