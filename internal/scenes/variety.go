package scenes

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"math"
)

// cleanShare is the fraction of a varied generator's scenes drawn the
// generator's one way (default proportions, backgrounds and rendering).
const cleanShare = 0.2

// Style is how a varied scene is drawn after its shapes are rasterised.
// Lengths are in pixels of a 64-pixel rendering and scale with the size.
type Style struct {
	// Aliased draws one sample per pixel (hard, stair-stepped edges).
	Aliased bool `json:"aliased,omitempty"`
	// Pixels, when set, renders the scene at Pixels×Pixels and scales it
	// up bilinearly (a small source image enlarged by preprocessing).
	Pixels int `json:"pixels,omitempty"`
	// Blur is the standard deviation of a Gaussian blur.
	Blur float64 `json:"blur,omitempty"`
	// Noise is the standard deviation of per-pixel colour noise (0–255).
	Noise float64 `json:"noise,omitempty"`
	// JPEG, when set, is the quality the image is encoded at and decoded
	// back from.
	JPEG int `json:"jpeg,omitempty"`
	// Seed drives the pixel noise.
	Seed uint64 `json:"seed,omitempty"`
}

// varied reports whether o has proportions of its own (a varied drawing).
func (o Object) varied() bool {
	return o.Apex != 0 || o.Height != 0 || o.Points != 0 || o.Waist != 0 || o.Stroke != 0
}

// vary fills s with n objects drawn in varied ways on a varied backdrop.
func (s *Scene) vary(r *rng, n int, distinct bool) {
	for {
		s.Background = variedBackground(r)
		allowed := allowedColours(s.Background)
		if len(allowed) < n {
			continue
		}
		objs, ok := placeVaried(r, n, allowed, distinct)
		if !ok {
			continue
		}
		s.Objects = objs
		break
	}
	st := &Style{Seed: r.next()}
	if r.float() < 0.25 {
		st.Aliased = true
	}
	if r.float() < 0.15 {
		st.Pixels = 28 + r.intn(29)
	}
	if r.float() < 0.3 {
		st.Blur = r.uniform(0.3, 1.3)
	}
	if r.float() < 0.35 {
		st.Noise = r.uniform(2, 18)
	}
	if r.float() < 0.35 {
		st.JPEG = 15 + r.intn(76)
	}
	s.Style = st
}

// variedBackground draws a backdrop of any kind; plain ones are often grey.
func variedBackground(r *rng) Background {
	randRGB := func() [3]float64 {
		return [3]float64{r.uniform(0, 255), r.uniform(0, 255), r.uniform(0, 255)}
	}
	b := Background{A: randRGB()}
	switch r.intn(7) {
	case 0:
		b.Kind = Plain
		if r.float() < 0.6 {
			g := r.uniform(40, 235)
			b.A = [3]float64{g, g, g}
		}
	case 1:
		b.Kind = Gradient
		b.B = randRGB()
		b.Angle = r.uniform(0, 2*math.Pi)
	case 2:
		b.Kind = Noisy
		b.Amp = r.uniform(10, 40)
		b.Noise = r.next()
	case 3:
		b.Kind = Stripes
		b.B = near(r, b.A)
		b.Angle = r.uniform(0, math.Pi)
		b.Period = r.uniform(0.04, 0.25)
	case 4:
		b.Kind = Checker
		b.B = near(r, b.A)
		b.Angle = r.uniform(0, math.Pi/2)
		b.Period = r.uniform(0.05, 0.25)
	default:
		b.Kind = Blotchy
		b.B = randRGB()
		b.Period = r.uniform(0.1, 0.5)
		b.Amp = r.uniform(0, 25)
		b.Noise = r.next()
	}
	return b
}

// near returns a colour up to 90 away from a per channel (a texture's
// second colour, so that shapes can contrast with both).
func near(r *rng, a [3]float64) [3]float64 {
	var b [3]float64
	for c := range 3 {
		b[c] = math.Max(0, math.Min(255, a[c]+r.uniform(-90, 90)))
	}
	return b
}

// textureAt is the colour of a Stripes, Checker or Blotchy backdrop at a
// normalised point.
func (b *backdrop) textureAt(x, y float64) [3]float64 {
	mix := func(t float64) [3]float64 {
		return [3]float64{b.A[0] + t*(b.B[0]-b.A[0]), b.A[1] + t*(b.B[1]-b.A[1]), b.A[2] + t*(b.B[2]-b.A[2])}
	}
	cos, sin := b.cos, b.sin
	u := (x-0.5)*cos + (y-0.5)*sin
	v := -(x-0.5)*sin + (y-0.5)*cos
	switch b.Kind {
	case Stripes:
		if math.Mod(math.Floor(u/b.Period), 2) == 0 {
			return b.A
		}
		return b.B
	case Checker:
		if int(math.Floor(u/b.Period)+math.Floor(v/b.Period))&1 == 0 {
			return b.A
		}
		return b.B
	}
	// Blotchy: three octaves of value noise blend A into B; finer grey
	// grain on top.
	cells := max(2, int(1/b.Period))
	t := 0.55*valueNoise(b.Noise, cells, x, y) + 0.3*valueNoise(b.Noise+1, 2*cells, x, y) + 0.15*valueNoise(b.Noise+2, 4*cells, x, y)
	t = math.Max(0, math.Min(1, 1.6*(t-0.5)+0.5))
	c := mix(t)
	d := b.Amp * (2*valueNoise(b.Noise+3, 48, x, y) - 1)
	return [3]float64{c[0] + d, c[1] + d, c[2] + d}
}

// placeVaried is place for varied scenes: proportions, outlines, sizes from
// tiny to filling the frame (one object) and objects partly cut by the
// border.
func placeVaried(r *rng, n int, allowed []int, distinct bool) ([]Object, bool) {
	cp, sp := pickKinds(r, n, allowed, distinct)
	rmin, rmax := 0.09, 0.5
	switch n {
	case 2:
		rmin, rmax = 0.1, 0.28
	case 3:
		rmin, rmax = 0.09, 0.2
	}
	objs := make([]Object, 0, n)
	for k := 0; k < n; k++ {
		c := allowed[cp[k]]
		o := Object{Colour: Colours[c], Shape: Shapes[sp[k]]}
		for ch := range 3 {
			o.RGB[ch] = math.Max(0, math.Min(255, palette[c][ch]+r.uniform(-25, 25)))
		}
		if r.float() < 0.5 {
			o.Angle = r.uniform(-0.3, 0.3)
		}
		switch o.Shape {
		case "triangle":
			switch u := r.float(); {
			case u < 0.35:
				o.Apex = r.uniform(-0.15, 0.15) // isosceles
			case u < 0.6:
				o.Apex = r.uniform(0.75, 1) // right-angled or nearly
				if r.float() < 0.5 {
					o.Apex = -o.Apex
				}
			default:
				o.Apex = r.uniform(-1, 1)
			}
			if o.Apex == 0 {
				o.Apex = 1e-9
			}
			o.Height = math.Exp(r.uniform(math.Log(0.55), math.Log(1.7)))
			if r.float() < 0.25 {
				// Pointing down, left or right.
				o.Angle += float64(1+r.intn(3)) * math.Pi / 2
			}
		case "star":
			o.Points = 5
			if r.float() < 0.35 {
				o.Points = 6
			}
			o.Waist = r.uniform(0.28, 0.62)
			if r.float() < 0.3 {
				o.Angle += math.Pi / float64(o.Points) // point down
			}
		case "cross":
			o.Waist = r.uniform(0.14, 0.45)
		}
		cut := r.float() < 0.25
		o.R = r.uniform(rmin, rmax)
		if r.float() < 0.3 {
			o.Stroke = math.Max(1.2/(64*o.R), r.uniform(0.07, 0.3))
		}
		placed := false
		for try := 0; try < 200 && !placed; try++ {
			lo := o.R + 0.01
			if cut {
				// Up to about a third of the object outside the frame.
				lo = 0.45 * o.R
			}
			if lo > 0.5 {
				lo = 0.5
			}
			o.X = r.uniform(lo, 1-lo)
			o.Y = r.uniform(lo, 1-lo)
			placed = !overlaps(o, objs)
			if !placed && try%20 == 19 {
				o.R = math.Max(rmin, 0.8*o.R)
			}
		}
		if !placed {
			return nil, false
		}
		objs = append(objs, o)
	}
	return objs, true
}

// variedOutline returns the polygon of a varied object centred at the
// origin with radius 1 before rotation (nil for a circle).
func variedOutline(o Object) [][2]float64 {
	switch o.Shape {
	case "triangle":
		// The triangle's bounding box, centred, half-sides bw × bh.
		const m = 0.78
		bw, bh := m, m
		if o.Height >= 1 {
			bw = m / o.Height
		} else {
			bh = m * o.Height
		}
		return [][2]float64{{o.Apex * bw, -bh}, {bw, bh}, {-bw, bh}}
	case "star":
		p := max(o.Points, 3)
		var out [][2]float64
		for k := 0; k < 2*p; k++ {
			a := -math.Pi/2 + float64(k)*math.Pi/float64(p)
			rad := 1.0
			if k%2 == 1 {
				rad = o.Waist
			}
			out = append(out, [2]float64{rad * math.Cos(a), rad * math.Sin(a)})
		}
		return out
	case "cross":
		w, l := o.Waist, 0.95
		return [][2]float64{
			{-w, -l}, {w, -l}, {w, -w}, {l, -w}, {l, w}, {w, w},
			{w, l}, {-w, l}, {-w, w}, {-l, w}, {-l, -w}, {-w, -w},
		}
	}
	return outline(o.Shape)
}

// edgeDistance is the distance from (u, v) to the polygon's boundary.
func edgeDistance(poly [][2]float64, u, v float64) float64 {
	best := math.Inf(1)
	for i, j := 0, len(poly)-1; i < len(poly); j, i = i, i+1 {
		ax, ay, bx, by := poly[j][0], poly[j][1], poly[i][0], poly[i][1]
		dx, dy := bx-ax, by-ay
		t := ((u-ax)*dx + (v-ay)*dy) / (dx*dx + dy*dy)
		t = math.Max(0, math.Min(1, t))
		best = math.Min(best, math.Hypot(u-ax-t*dx, v-ay-t*dy))
	}
	return best
}

// paints reports whether the object's ink covers the normalised point: its
// whole area when filled, a band Stroke wide inside its edge when outlined.
func (t *shapeTest) paints(x, y float64) bool {
	if !t.contains(x, y) {
		return false
	}
	if t.o.Stroke == 0 {
		return true
	}
	dx, dy := (x-t.o.X)/t.o.R, (y-t.o.Y)/t.o.R
	if t.circleOnly {
		return 1-math.Hypot(dx, dy) < t.o.Stroke
	}
	u := t.cos*dx + t.sin*dy
	v := -t.sin*dx + t.cos*dy
	return edgeDistance(t.poly, u, v) < t.o.Stroke
}

// renderVaried draws a varied scene at size×size pixels as its Style says.
func (s Scene) renderVaried(size int) *image.RGBA {
	st := Style{}
	if s.Style != nil {
		st = *s.Style
	}
	scale := float64(size) / 64
	src := size
	if st.Pixels > 0 && float64(st.Pixels)*scale < float64(size) {
		src = max(4, int(float64(st.Pixels)*scale))
	}
	ss := 4
	if st.Aliased {
		ss = 1
	} else if src > 128 {
		ss = 2
	}
	buf := make([]float64, 3*src*src)
	s.supersample(src, ss, (*shapeTest).paints, func(px, py int, c [3]float64) {
		copy(buf[3*(py*src+px):], c[:])
	})
	if src != size {
		buf = upscale(buf, src, size)
	}
	if st.Blur > 0 {
		blur(buf, size, st.Blur*scale)
	}
	if st.Noise > 0 {
		r := &rng{s: st.Seed}
		for i := range buf {
			buf[i] += st.Noise * r.normal()
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	for p := 0; p < size*size; p++ {
		img.SetRGBA(p%size, p/size, color.RGBA{R: clamp8(buf[3*p]), G: clamp8(buf[3*p+1]), B: clamp8(buf[3*p+2]), A: 255})
	}
	if st.JPEG > 0 {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: st.JPEG}); err == nil {
			if dec, err := jpeg.Decode(&b); err == nil {
				out := image.NewRGBA(img.Rect)
				for y := 0; y < size; y++ {
					for x := 0; x < size; x++ {
						out.Set(x, y, dec.At(x, y))
					}
				}
				img = out
			}
		}
	}
	return img
}

// normal returns a standard normal value (Box–Muller).
func (r *rng) normal() float64 {
	u := r.float()
	if u < 1e-300 {
		u = 1e-300
	}
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*r.float())
}

// upscale resizes an n×n RGB buffer to m×m bilinearly (pixel centres
// aligned).
func upscale(src []float64, n, m int) []float64 {
	out := make([]float64, 3*m*m)
	f := float64(n) / float64(m)
	for y := 0; y < m; y++ {
		sy := math.Max(0, math.Min(float64(n-1), (float64(y)+0.5)*f-0.5))
		y0 := int(sy)
		y1 := min(n-1, y0+1)
		ty := sy - float64(y0)
		for x := 0; x < m; x++ {
			sx := math.Max(0, math.Min(float64(n-1), (float64(x)+0.5)*f-0.5))
			x0 := int(sx)
			x1 := min(n-1, x0+1)
			tx := sx - float64(x0)
			for c := range 3 {
				a := src[3*(y0*n+x0)+c] + tx*(src[3*(y0*n+x1)+c]-src[3*(y0*n+x0)+c])
				b := src[3*(y1*n+x0)+c] + tx*(src[3*(y1*n+x1)+c]-src[3*(y1*n+x0)+c])
				out[3*(y*m+x)+c] = a + ty*(b-a)
			}
		}
	}
	return out
}

// blur applies a separable Gaussian blur of standard deviation sigma pixels
// to a size×size RGB buffer in place (edges clamped).
func blur(buf []float64, size int, sigma float64) {
	rad := int(math.Ceil(3 * sigma))
	k := make([]float64, 2*rad+1)
	sum := 0.0
	for i := range k {
		d := float64(i - rad)
		k[i] = math.Exp(-d * d / (2 * sigma * sigma))
		sum += k[i]
	}
	for i := range k {
		k[i] /= sum
	}
	tmp := make([]float64, len(buf))
	for pass := 0; pass < 2; pass++ {
		for y := 0; y < size; y++ {
			for x := 0; x < size; x++ {
				var acc [3]float64
				for i, w := range k {
					xx, yy := x, y
					if pass == 0 {
						xx = min(size-1, max(0, x+i-rad))
					} else {
						yy = min(size-1, max(0, y+i-rad))
					}
					for c := range 3 {
						acc[c] += w * buf[3*(yy*size+xx)+c]
					}
				}
				for c := range 3 {
					tmp[3*(y*size+x)+c] = acc[c]
				}
			}
		}
		copy(buf, tmp)
	}
}
