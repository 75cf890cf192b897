package vision

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParsePreprocessorConfig(t *testing.T) {
	def := DefaultPreprocessor()
	tests := []struct {
		name string
		json string
		want func(p *Preprocessor)
	}{
		{"empty object gives CLIP defaults", `{}`, func(p *Preprocessor) {}},
		{"legacy int form", `{"size": 336, "crop_size": 320}`, func(p *Preprocessor) {
			p.Size = Size{ShortestEdge: 336}
			p.CropSize = Size{Height: 320, Width: 320}
		}},
		{"dict forms", `{"size": {"shortest_edge": 256}, "crop_size": {"height": 240, "width": 200}}`, func(p *Preprocessor) {
			p.Size = Size{ShortestEdge: 256}
			p.CropSize = Size{Height: 240, Width: 200}
		}},
		{"height and width", `{"size": {"height": 384, "width": 512}, "do_center_crop": false}`, func(p *Preprocessor) {
			p.Size = Size{Height: 384, Width: 512}
			p.DoCenterCrop = false
		}},
		{"list form", `{"size": [30, 40], "crop_size": [10, 20]}`, func(p *Preprocessor) {
			p.Size = Size{Height: 30, Width: 40}
			p.CropSize = Size{Height: 10, Width: 20}
		}},
		{"nulls take defaults", `{"size": null, "crop_size": null, "do_convert_rgb": null, "image_mean": null}`, func(p *Preprocessor) {}},
		{"scalar mean and std", `{"image_mean": 0.5, "image_std": [0.25]}`, func(p *Preprocessor) {
			p.Mean = [3]float32{0.5, 0.5, 0.5}
			p.Std = [3]float32{0.25, 0.25, 0.25}
		}},
		{"flags off", `{"do_resize": false, "do_center_crop": false, "do_rescale": false, "do_normalize": false, "do_convert_rgb": false, "rescale_factor": 0.5, "resample": 2}`, func(p *Preprocessor) {
			p.DoResize, p.DoCenterCrop, p.DoRescale, p.DoNormalize, p.DoConvertRGB = false, false, false, false, false
			p.RescaleFactor = 0.5
			p.Resample = Bilinear
		}},
		{"unknown keys ignored", `{"feature_extractor_type": "CLIPFeatureExtractor", "processor_class": "CLIPProcessor", "image_processor_type": "CLIPImageProcessor"}`, func(p *Preprocessor) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePreprocessorConfig([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			want := *def
			tt.want(&want)
			if *got != want {
				t.Errorf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
}

func TestParsePreprocessorConfigErrors(t *testing.T) {
	tests := []struct{ json, wantErr string }{
		{`[]`, "not a JSON object"},
		{`{"size": 224.5}`, "size: want an integer"},
		{`{"size": "224"}`, "size: want an integer"},
		{`{"size": {"longest_edge": 224}}`, `key "longest_edge" is not supported`},
		{`{"size": 0}`, "size must have shortest_edge"},
		{`{"size": 100000}`, "out of range"},
		{`{"crop_size": {"shortest_edge": 224}}`, "crop_size must have height and width"},
		{`{"crop_size": [224]}`, "want [height, width]"},
		{`{"resample": 0}`, "resample 0 (nearest) is not supported"},
		{`{"resample": 7}`, "resample 7"},
		{`{"image_mean": [0.5, 0.5]}`, "image_mean: want 3 numbers (one per RGB channel), got 2"},
		{`{"image_std": [1, 0, 1]}`, "image_std[1] is 0"},
		{`{"do_resize": "yes"}`, "do_resize: want true or false"},
	}
	for _, tt := range tests {
		_, err := ParsePreprocessorConfig([]byte(tt.json))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "vision: ") {
			t.Errorf("%s: got error %v, want one containing %q", tt.json, err, tt.wantErr)
		}
	}
}

func TestLoadPreprocessor(t *testing.T) {
	fsys := fstest.MapFS{PreprocessorConfigFile: {Data: []byte(`{"size": 32, "crop_size": 32}`)}}
	p, err := LoadPreprocessor(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size.ShortestEdge != 32 || p.CropSize.Height != 32 {
		t.Errorf("got %+v", p)
	}
	_, err = LoadPreprocessor(fstest.MapFS{})
	if err == nil || !strings.Contains(err.Error(), PreprocessorConfigFile) {
		t.Errorf("missing file: got %v", err)
	}
	bad := fstest.MapFS{PreprocessorConfigFile: {Data: []byte(`{"size": -1}`)}}
	if _, err = LoadPreprocessor(bad); err == nil || !strings.Contains(err.Error(), PreprocessorConfigFile) {
		t.Errorf("bad file: got %v, want an error naming the file", err)
	}
}

// TestResizedSize checks transformers' get_resize_output_image_size:
// int(size * long / short), truncated.
func TestResizedSize(t *testing.T) {
	p := DefaultPreprocessor()
	tests := []struct{ w, h, rh, rw int }{
		{640, 480, 224, 298}, // 224*640/480 = 298.67
		{480, 640, 298, 224},
		{224, 224, 224, 224},
		{3, 500, 37333, 224},
		{500, 3, 224, 37333},
		{1, 1, 224, 224},
		{1000, 999, 224, 224}, // 224.22
	}
	for _, tt := range tests {
		rh, rw := p.ResizedSize(tt.w, tt.h)
		if rh != tt.rh || rw != tt.rw {
			t.Errorf("%dx%d: got %dx%d (h x w), want %dx%d", tt.w, tt.h, rh, rw, tt.rh, tt.rw)
		}
	}
}

func TestApplyIntoErrorsAndAllocs(t *testing.T) {
	p := DefaultPreprocessor()
	img := testImage(640, 480)
	oh, ow := p.OutputSize(640, 480)
	dst := make([]float32, 3*oh*ow)
	if _, _, err := p.ApplyInto(dst[:10], img); err == nil || !strings.Contains(err.Error(), "dst has 10 values") {
		t.Errorf("short dst: got %v", err)
	}
	if _, _, err := p.ApplyInto(dst, img); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, err := p.ApplyInto(dst, img); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 && !raceEnabled { // the race detector empties sync.Pools at random
		t.Errorf("ApplyInto allocates %v times per image once warm, want at most 1", allocs)
	}
	q := *p
	q.DoConvertRGB = false
	if _, _, err := q.ApplyInto(dst, image.NewGray(image.Rect(0, 0, 4, 4))); err == nil || !strings.Contains(err.Error(), "do_convert_rgb is false but the image is L (gray)") {
		t.Errorf("gray with do_convert_rgb false: got %v", err)
	}
	if _, _, err := q.ApplyInto(dst, img); err != nil {
		t.Errorf("RGB with do_convert_rgb false: %v", err)
	}
	if _, _, _, err := p.Apply(image.NewRGBA(image.Rectangle{})); err == nil {
		t.Error("empty image: no error")
	}
	r := *p
	r.DoCenterCrop = false
	if _, _, _, err := r.Apply(image.NewGray(image.Rect(0, 0, 1, 400000))); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("huge output: got %v", err)
	}
}

// TestApplySubImage checks that images whose bounds do not start at (0, 0)
// give the same result as a copy that does.
func TestApplySubImage(t *testing.T) { eachImpl(t, testApplySubImage) }

func testApplySubImage(t *testing.T) {
	p := &Preprocessor{DoConvertRGB: true, DoResize: true, Size: Size{ShortestEdge: 16}, Resample: Bicubic,
		DoCenterCrop: true, CropSize: Size{Height: 16, Width: 16}, DoRescale: true, RescaleFactor: 1.0 / 255}
	big := testImage(60, 50)
	sub := big.SubImage(image.Rect(7, 5, 47, 35)).(*image.RGBA)
	cp := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for y := 0; y < 30; y++ {
		copy(cp.Pix[y*cp.Stride:][:160], sub.Pix[sub.PixOffset(7, 5+y):][:160])
	}
	a, _, _, err := p.Apply(sub)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, err := p.Apply(cp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("value %d: sub-image %v, copy %v", i, a[i], b[i])
		}
	}
}

// TestResizeWindow checks that resizing only a window gives the same
// pixels as resizing everything and cropping.
func TestResizeWindow(t *testing.T) {
	src := testImage(97, 61)
	rgb, w, h := toRGB(nil, src, nil)
	v := rgbView{pix: rgb, stride: 3 * w, w: w, h: h}
	f, _ := Bicubic.filter()
	for _, sz := range [][2]int{{40, 25}, {200, 130}, {97, 30}, {50, 61}} {
		dw, dh := sz[0], sz[1]
		var s resampleScratch
		full := make([]byte, 3*dw*dh)
		resize(full, v, dw, dh, image.Rect(0, 0, dw, dh), f, &s)
		win := image.Rect(dw/5, dh/3, dw-dw/4, dh-1)
		part := make([]byte, 3*win.Dx()*win.Dy())
		resize(part, v, dw, dh, win, f, &s)
		for y := 0; y < win.Dy(); y++ {
			for x := 0; x < 3*win.Dx(); x++ {
				if part[y*3*win.Dx()+x] != full[(y+win.Min.Y)*3*dw+3*win.Min.X+x] {
					t.Fatalf("%dx%d: window pixel (%d, %d) differs", dw, dh, x/3, y)
				}
			}
		}
	}
}

// TestBicubicKernel checks Keys' cubic (a = -0.5) at a few points.
func TestBicubicKernel(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{{0, 1}, {1, 0}, {2, 0}, {0.5, 0.5625}, {1.5, -0.0625}, {-0.5, 0.5625}, {3, 0}} {
		if got := bicubicKernel(c.x); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("bicubic(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

func TestToRGBConversions(t *testing.T) {
	// 16-bit gray clips to 0..255 (Pillow's "I" to "RGB").
	g := image.NewGray16(image.Rect(0, 0, 3, 1))
	g.SetGray16(0, 0, color.Gray16{Y: 100})
	g.SetGray16(1, 0, color.Gray16{Y: 255})
	g.SetGray16(2, 0, color.Gray16{Y: 256})
	if rgb, _, _ := toRGB(nil, g, nil); string(rgb) != "\x64\x64\x64\xff\xff\xff\xff\xff\xff" {
		t.Errorf("gray16: %v", rgb)
	}
	// CMYK: Pillow's cmyk2rgb.
	c := image.NewCMYK(image.Rect(0, 0, 1, 1))
	c.Pix = []byte{100, 0, 255, 50}
	if rgb, _, _ := toRGB(nil, c, nil); rgb[0] != 125 || rgb[1] != 205 || rgb[2] != 0 {
		// nk = 205; 205 - round(100*205/255) = 205 - 80 = 125
		t.Errorf("cmyk: %v", rgb)
	}
	// NRGBA drops alpha without blending.
	n := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	n.Pix = []byte{10, 20, 30, 0}
	if rgb, _, _ := toRGB(nil, n, nil); string(rgb) != "\x0a\x14\x1e" {
		t.Errorf("nrgba: %v", rgb)
	}
}

// testImage is a deterministic RGB test pattern.
func testImage(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := m.PixOffset(x, y)
			m.Pix[i] = uint8(x * 255 / max(w-1, 1))
			m.Pix[i+1] = uint8(y * 255 / max(h-1, 1))
			m.Pix[i+2] = uint8((x*7 + y*13) % 256)
			if (x/8+y/8)%2 == 0 {
				m.Pix[i+2] = 255
			}
			m.Pix[i+3] = 255
		}
	}
	return m
}

func TestLoadPreprocessorFileGolden(t *testing.T) {
	path := filepath.Join(goldenDir, "configs", "clip224.json")
	p, err := LoadPreprocessorFile(path)
	if err != nil {
		t.Fatalf("committed golden data: %v", err)
	}
	if *p != *DefaultPreprocessor() {
		t.Errorf("OpenAI CLIP's config parses to %+v, want the defaults %+v", *p, *DefaultPreprocessor())
	}
}

// randomImage returns an image of the given kind, w×h, with bounds starting
// at (ox, oy): random pixels, or with pattern, columns and rows alternating
// 0 and 255 (the input that drives Pillow's sums furthest out).
func randomImage(rng *rand.Rand, kind string, w, h, ox, oy int, pattern bool) image.Image {
	r := image.Rect(ox, oy, ox+w, oy+h)
	fill := func(pix []byte) {
		for i := range pix {
			pix[i] = uint8(rng.IntN(256))
		}
	}
	val := func(x, y int) uint8 {
		if (x+y)&1 == 0 {
			return 255
		}
		return 0
	}
	switch kind {
	case "rgba", "rgba-alpha", "nrgba":
		var pix []byte
		var stride int
		var m image.Image
		if kind == "nrgba" {
			n := image.NewNRGBA(r)
			pix, stride, m = n.Pix, n.Stride, n
		} else {
			n := image.NewRGBA(r)
			pix, stride, m = n.Pix, n.Stride, n
		}
		fill(pix)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				p := pix[y*stride+4*x:][:4]
				if pattern {
					p[0], p[1], p[2] = val(x, y), val(x, y), 255-val(x, y)
				}
				if kind == "rgba" {
					p[3] = 255
				} else if kind == "rgba-alpha" {
					p[3] = max(p[3], p[0], p[1], p[2]) // valid premultiplied
				}
			}
		}
		return m
	case "gray":
		m := image.NewGray(r)
		fill(m.Pix)
		if pattern {
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					m.Pix[y*m.Stride+x] = val(x, y)
				}
			}
		}
		return m
	case "gray16":
		m := image.NewGray16(r)
		fill(m.Pix)
		for i := 0; i < len(m.Pix); i += 2 {
			if rng.IntN(4) != 0 {
				m.Pix[i] = 0
			}
		}
		return m
	case "rgba64", "nrgba64":
		if kind == "rgba64" {
			m := image.NewRGBA64(r)
			fill(m.Pix)
			for i := 6; i < len(m.Pix); i += 8 {
				m.Pix[i], m.Pix[i+1] = 255, 255
			}
			return m
		}
		m := image.NewNRGBA64(r)
		fill(m.Pix)
		return m
	case "paletted":
		pal := make(color.Palette, 1+rng.IntN(256))
		for i := range pal {
			pal[i] = color.NRGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))}
		}
		m := image.NewPaletted(r, pal)
		for i := range m.Pix {
			m.Pix[i] = uint8(rng.IntN(len(pal)))
		}
		return m
	case "cmyk":
		m := image.NewCMYK(r)
		fill(m.Pix)
		return m
	}
	// "ycbcr444", "ycbcr420", ...: planes of a larger image, then the
	// sub-image at (ox, oy), so odd origins are covered.
	ratios := map[string]image.YCbCrSubsampleRatio{
		"ycbcr444": image.YCbCrSubsampleRatio444, "ycbcr422": image.YCbCrSubsampleRatio422,
		"ycbcr420": image.YCbCrSubsampleRatio420, "ycbcr440": image.YCbCrSubsampleRatio440,
		"ycbcr411": image.YCbCrSubsampleRatio411, "ycbcr410": image.YCbCrSubsampleRatio410,
	}
	ratio, ok := ratios[kind]
	if !ok {
		panic("randomImage: unknown kind " + kind)
	}
	m := image.NewYCbCr(image.Rect(0, 0, ox+w, oy+h), ratio)
	fill(m.Y)
	fill(m.Cb)
	fill(m.Cr)
	if pattern {
		for y := 0; y < oy+h; y++ {
			for x := 0; x < ox+w; x++ {
				m.Y[y*m.YStride+x] = val(x, y)
			}
		}
	}
	return m.SubImage(r)
}

// toRGB writes img as packed 8-bit RGB (3 bytes a pixel, rows of 3·w bytes,
// no padding) into dst, growing it as needed, and returns it with the size.
// The conversion is Pillow's Image.convert("RGB") for the mode Pillow opens
// the same file in (see rgbRows). The tests check conversions with it;
// preprocessing reads rows (rgbRows) instead.
//
// tmp, if not nil, holds working rows reused across calls.
func toRGB(dst []byte, img image.Image, tmp *convScratch) ([]byte, int, int) {
	if tmp == nil {
		tmp = new(convScratch)
	}
	var r rgbRows
	r.init(img, tmp)
	w, h := r.w, r.h
	dst = grow(dst, 3*w*h)
	for y := 0; y < h; y++ {
		r.rgbRow(dst[3*w*y:][:3*w], y, 0, w)
	}
	return dst, w, h
}

var imageKinds = []string{"rgba", "rgba-alpha", "nrgba", "gray", "gray16", "rgba64", "nrgba64", "paletted", "cmyk",
	"ycbcr444", "ycbcr422", "ycbcr420", "ycbcr440", "ycbcr411", "ycbcr410"}

// TestToRGBMatchesGeneric checks the row converter against the whole-image
// conversion it replaced, on every layout, size parity and origin parity.
func TestToRGBMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kind := range imageKinds {
		for _, sz := range [][4]int{{1, 1, 0, 0}, {2, 3, 1, 0}, {3, 2, 0, 1}, {5, 4, 1, 1}, {17, 13, 0, 0}, {16, 9, 3, 2}, {33, 31, 2, 3}} {
			img := randomImage(rng, kind, sz[0], sz[1], sz[2], sz[3], false)
			want, ww, wh := toRGBGeneric(nil, img, nil)
			got, gw, gh := toRGB(nil, img, nil)
			if gw != ww || gh != wh || !bytes.Equal(got, want) {
				t.Errorf("%s %dx%d at (%d, %d): RGB differs from the reference", kind, sz[0], sz[1], sz[2], sz[3])
			}
			// Column ranges, as the resampler asks for them.
			var r rgbRows
			r.init(img, new(convScratch))
			w := sz[0]
			for y := 0; y < sz[1]; y++ {
				for x0 := 0; x0 < w; x0++ {
					for x1 := x0 + 1; x1 <= w; x1++ {
						row := make([]byte, 3*(x1-x0))
						r.rgbRow(row, y, x0, x1)
						if !bytes.Equal(row, want[3*(y*w+x0):3*(y*w+x1)]) {
							t.Fatalf("%s %dx%d: row %d columns %d..%d differ", kind, sz[0], sz[1], y, x0, x1)
						}
					}
				}
			}
		}
	}
}

// TestApplyMatchesGeneric checks ApplyInto against applyGeneric (the
// straightforward implementation that the golden files were first matched
// with), bit for bit, over random images of every layout and random
// configurations: every filter, down- and up-scaling, crops larger than the
// image, no resize, no crop.
func TestApplyMatchesGeneric(t *testing.T) { eachImpl(t, testApplyMatchesGeneric) }

func testApplyMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	filters := []Resample{Bicubic, Bilinear, Lanczos, Box, Hamming}
	n := 400
	if testing.Short() {
		n = 100
	}
	for i := range n {
		kind := imageKinds[i%len(imageKinds)]
		w, h := 1+rng.IntN(90), 1+rng.IntN(90)
		if i%25 == 0 {
			w, h = 200+rng.IntN(200), 150+rng.IntN(200)
		}
		img := randomImage(rng, kind, w, h, rng.IntN(3), rng.IntN(3), rng.IntN(4) == 0)
		p := DefaultPreprocessor()
		p.Resample = filters[rng.IntN(len(filters))]
		switch rng.IntN(6) {
		case 0:
			p.Size = Size{Height: 1 + rng.IntN(120), Width: 1 + rng.IntN(120)}
		case 1:
			p.DoResize = false
		default:
			p.Size = Size{ShortestEdge: 1 + rng.IntN(100)}
		}
		p.CropSize = Size{Height: 1 + rng.IntN(100), Width: 1 + rng.IntN(100)}
		if rng.IntN(5) == 0 {
			p.DoCenterCrop = false
		}
		rh, rw := p.ResizedSize(w, h)
		if int64(rh)*int64(rw) > 1<<22 {
			continue
		}
		checkApplyMatchesGeneric(t, p, img,
			fmt.Sprintf("case %d: %s %dx%d, %v to %+v, crop %v %+v", i, kind, w, h, p.Resample, p.Size, p.DoCenterCrop, p.CropSize))
	}
}

// checkApplyMatchesGeneric fails t unless ApplyInto gives img's
// pixel_values bit for bit as applyGeneric (the reference) does; what names
// the case in the message.
func checkApplyMatchesGeneric(t *testing.T, p *Preprocessor, img image.Image, what string) {
	t.Helper()
	b := img.Bounds()
	oh, ow := p.OutputSize(b.Dx(), b.Dy())
	want := make([]float32, 3*oh*ow)
	got := make([]float32, 3*oh*ow)
	if _, _, err := p.applyGeneric(want, img); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.ApplyInto(got, img); err != nil {
		t.Fatal(err)
	}
	for j := range want {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			t.Fatalf("%s: value %d (channel %d, y %d, x %d) is %v, reference %v",
				what, j, j/(oh*ow), j%(oh*ow)/ow, j%ow, got[j], want[j])
		}
	}
}

// TestLanes checks the two-sums-in-one-uint64 arithmetic at the ends of
// the int32 range the resampler can reach.
func TestLanes(t *testing.T) {
	for _, c := range [][2]int32{{0, 0}, {1, -1}, {-1, 1}, {-1, -1}, {math.MaxInt32, math.MinInt32}, {math.MinInt32, math.MaxInt32},
		{-(1 << 30), 1 << 30}, {123456789, -987654321}} {
		// Build the pair as the passes do: a sum of products.
		s := uint64(int64(c[0])) + uint64(int64(c[1]))<<32
		if a, b := lanes(s); a != c[0] || b != c[1] {
			t.Errorf("lanes(%d, %d) = %d, %d", c[0], c[1], a, b)
		}
	}
	// Sums of products of bytes and signed weights whose magnitudes add up
	// to at most 2^23 (Pillow's normalised weights stay well below that),
	// against the same sums in int64.
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		s := uint64(halfPair)
		a, b := int64(1<<(precision-1)), int64(1<<(precision-1))
		for range 1 + rng.IntN(4) {
			p0, p1 := uint8(rng.IntN(256)), uint8(rng.IntN(256))
			if rng.IntN(2) == 0 {
				p0, p1 = 255*(p0&1), 255*(p1&1)
			}
			k := int32(rng.IntN(1<<22)) - 1<<21
			a += int64(p0) * int64(k)
			b += int64(p1) * int64(k)
			s += (uint64(p0) | uint64(p1)<<32) * uint64(int64(k))
		}
		if x, y := lanes(s); int64(x) != a || int64(y) != b {
			t.Fatalf("lanes gives %d, %d; want %d, %d", x, y, a, b)
		}
	}
}

// TestApplyMatchesGenericIntegerScale covers integer downscaling factors,
// where the weights of interior outputs are symmetric and summed folded
// (dot3Sym and the folded vertical pass), for every filter, against the
// reference.
func TestApplyMatchesGenericIntegerScale(t *testing.T) {
	eachImpl(t, testApplyMatchesGenericIntegerScale)
}

func testApplyMatchesGenericIntegerScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var c coeffs
	f, _ := Bicubic.filter()
	makeCoeffs(&c, 256, 64, 0, 64, f, nil)
	nsym := 0
	for _, s := range c.sym {
		if s {
			nsym++
		}
	}
	if nsym < 60 {
		t.Fatalf("256 -> 64 bicubic: %d of 64 outputs found symmetric, want the interior ones (at least 60)", nsym)
	}
	for _, r := range []Resample{Bicubic, Bilinear, Lanczos, Box, Hamming} {
		for _, sz := range [][3]int{{256, 256, 64}, {96, 120, 48}, {64, 64, 16}, {60, 75, 20}, {33, 44, 11}, {200, 150, 50}} {
			for _, kind := range []string{"ycbcr420", "rgba", "gray"} {
				img := randomImage(rng, kind, sz[0], sz[1], 0, 0, rng.IntN(2) == 0)
				p := DefaultPreprocessor()
				p.Resample = r
				p.Size = Size{ShortestEdge: sz[2]}
				p.CropSize = Size{Height: sz[2], Width: sz[2]}
				checkApplyMatchesGeneric(t, p, img, fmt.Sprintf("%v %s %dx%d to %d", r, kind, sz[0], sz[1], sz[2]))
			}
		}
	}
}

// TestApplyLUTChanges checks that pooled working memory does not carry one
// configuration's value table into a call with another: each call, in
// turn, against the reference.
func TestApplyLUTChanges(t *testing.T) { eachImpl(t, testApplyLUTChanges) }

func testApplyLUTChanges(t *testing.T) {
	img := testImage(40, 30)
	configs := []func(p *Preprocessor){
		func(p *Preprocessor) {},
		func(p *Preprocessor) { p.Mean = [3]float32{0.1, 0.2, 0.3} },
		func(p *Preprocessor) { p.DoNormalize = false },
		func(p *Preprocessor) { p.DoRescale = false },
		func(p *Preprocessor) { p.RescaleFactor = 0.5 },
		func(p *Preprocessor) { p.Std = [3]float32{1, 2, 3} },
		func(p *Preprocessor) {},
	}
	for round := range 2 {
		for i, set := range configs {
			p := DefaultPreprocessor()
			p.Size, p.CropSize = Size{ShortestEdge: 16}, Size{Height: 16, Width: 16}
			set(p)
			checkApplyMatchesGeneric(t, p, img, fmt.Sprintf("round %d, config %d", round, i))
		}
	}
}
