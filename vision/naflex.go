package vision

import (
	"errors"
	"fmt"
	"image"
	"math"
)

// SigLIP 2's NaFlex processor defaults (transformers' Siglip2ImageProcessor).
const (
	NaFlexPatchSize     = 16
	NaFlexMaxNumPatches = 256
)

// maxNaFlexSide bounds the image sides NaFlexSize accepts, so that its
// arithmetic (sides scaled by up to 100) stays exact in float64 and fits an
// int of 32 bits.
const maxNaFlexSide = 1 << 24

// NaFlex holds the settings of SigLIP 2's NaFlex processor that
// CLIPImageProcessor does not have. A Preprocessor with a non-nil NaFlex
// turns an image into patches at its own aspect ratio (ApplyNaFlexInto)
// rather than into a fixed [3, H, W] tensor; its Size, CropSize and
// DoCenterCrop are then unused.
type NaFlex struct {
	PatchSize     int `json:"patch_size"`
	MaxNumPatches int `json:"max_num_patches"`
	// MaxNumPatchesDefaulted is true when the config did not give
	// max_num_patches and NaFlexMaxNumPatches took its place, so that a
	// caller can say so.
	MaxNumPatchesDefaulted bool `json:"-"`
}

// PatchDim is the width of one row of pixel_values: 3·PatchSize².
func (n *NaFlex) PatchDim() int { return 3 * n.PatchSize * n.PatchSize }

// validate checks the patch size and the budget, and that one image's
// pixel_values [MaxNumPatches, 3·PatchSize²] stays within maxOutput pixels.
func (n *NaFlex) validate() error {
	if n.PatchSize <= 0 || n.PatchSize > maxSide {
		return fmt.Errorf("patch_size %d out of range 1..%d", n.PatchSize, maxSide)
	}
	if n.MaxNumPatches <= 0 {
		return fmt.Errorf("max_num_patches %d: want a positive number of patches", n.MaxNumPatches)
	}
	if int64(n.MaxNumPatches)*int64(n.PatchSize)*int64(n.PatchSize) > maxOutput {
		return fmt.Errorf("max_num_patches %d of %dx%d pixels is over %d pixels", n.MaxNumPatches, n.PatchSize, n.PatchSize, maxOutput)
	}
	return nil
}

// NaFlexPreprocessor returns Siglip2ImageProcessor's defaults: resize
// keeping the aspect ratio to at most 256 patches of 16×16 pixels
// (bilinear), rescale 1/255, normalise with mean and std 0.5, RGB.
func NaFlexPreprocessor() *Preprocessor {
	return &Preprocessor{
		DoConvertRGB: true, DoResize: true, Resample: Bilinear,
		DoRescale: true, RescaleFactor: 1.0 / 255, DoNormalize: true,
		Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5},
		NaFlex: &NaFlex{PatchSize: NaFlexPatchSize, MaxNumPatches: NaFlexMaxNumPatches},
	}
}

// NaFlexSize returns the height and width, both multiples of patch and at
// least one patch, that an image of height×width pixels is resized to so
// that it has at most maxPatches patches, as transformers'
// get_image_size_for_max_num_patches computes it: a binary search on the
// scale between 1e-6 and 100 (to 1e-5), each side scaled, rounded up to a
// multiple of patch, in float64. The search keeps its lower bound without
// testing it, so that an image more than 10⁶ patches long on a side comes
// out over the budget: that is an error here, naming the sizes.
func NaFlexSize(height, width, patch, maxPatches int) (th, tw int, err error) {
	if height <= 0 || width <= 0 || height > maxNaFlexSide || width > maxNaFlexSide {
		return 0, 0, fmt.Errorf("vision: naflex: image of %dx%d pixels (width x height): sides must be in 1..%d", width, height, maxNaFlexSide)
	}
	if patch <= 0 || maxPatches <= 0 {
		return 0, 0, fmt.Errorf("vision: naflex: patch size %d and max_num_patches %d must be positive", patch, maxPatches)
	}
	th, tw = naflexSize(height, width, patch, maxPatches)
	if n := float64(th/patch) * float64(tw/patch); n > float64(maxPatches) {
		return 0, 0, fmt.Errorf("vision: naflex: a %dx%d image (width x height) needs %d x %d patches of %d pixels (%dx%d) even at the smallest scale, over max_num_patches %d",
			width, height, tw/patch, th/patch, patch, tw, th, maxPatches)
	}
	return th, tw, nil
}

// naflexSize is the binary search of NaFlexSize, on valid arguments.
func naflexSize(height, width, patch, maxPatches int) (th, tw int) {
	// eps is a variable so that eps/10 is a float64 division, as Python's
	// (1.0000000000000002e-06), not an exact constant.
	eps := 1e-5
	lo, hi := eps/10, 100.0
	budget := float64(maxPatches)
	for hi-lo >= eps {
		scale := (lo + hi) / 2
		h := scaledSide(scale, height, patch)
		w := scaledSide(scale, width, patch)
		if float64(h/patch)*float64(w/patch) <= budget {
			lo = scale
		} else {
			hi = scale
		}
	}
	return scaledSide(lo, height, patch), scaledSide(lo, width, patch)
}

// scaledSide is size·scale rounded up to a multiple of patch, at least one
// patch (get_scaled_image_size).
func scaledSide(scale float64, size, patch int) int {
	s := float64(size) * scale
	n := int(math.Ceil(s/float64(patch))) * patch
	return max(patch, n)
}

// NaFlexGrid returns the grid of patches an image of w×h pixels (after
// orientation) becomes: resized to Grid.H·PatchSize × Grid.W·PatchSize
// pixels (NaFlexSize) when DoResize, else cut as it is, which needs sides
// that are multiples of the patch. spatial_shapes is (Grid.H, Grid.W). It
// is an error if p is not a NaFlex preprocessor or the image needs more
// than MaxNumPatches patches.
func (p *Preprocessor) NaFlexGrid(w, h int) (Grid, error) {
	nf := p.NaFlex
	if nf == nil {
		return Grid{}, errors.New("vision: naflex: the preprocessor is not SigLIP 2's NaFlex processor (image_processor_type Siglip2ImageProcessor)")
	}
	if err := nf.validate(); err != nil {
		return Grid{}, fmt.Errorf("vision: naflex: %w", err)
	}
	ps := nf.PatchSize
	if !p.DoResize {
		if w <= 0 || h <= 0 || w%ps != 0 || h%ps != 0 {
			return Grid{}, fmt.Errorf("vision: naflex: do_resize is false and the image is %dx%d pixels (width x height), not a multiple of the %d-pixel patch on both sides", w, h, ps)
		}
		g := Grid{H: h / ps, W: w / ps}
		if g.H > nf.MaxNumPatches/g.W {
			return Grid{}, fmt.Errorf("vision: naflex: do_resize is false and a %dx%d image (width x height) is %d x %d patches of %d pixels, over max_num_patches %d",
				w, h, g.W, g.H, ps, nf.MaxNumPatches)
		}
		return g, nil
	}
	th, tw, err := NaFlexSize(h, w, ps, nf.MaxNumPatches)
	if err != nil {
		return Grid{}, err
	}
	return Grid{H: th / ps, W: tw / ps}, nil
}

// ApplyNaFlex returns img's pixel_values [MaxNumPatches, 3·PatchSize²]
// (float32), pixel_attention_mask [MaxNumPatches] (int32) and
// spatial_shapes [2] (int64: patch rows, patch columns). See
// ApplyNaFlexInto.
func (p *Preprocessor) ApplyNaFlex(img image.Image) (pixels []float32, mask []int32, spatial []int64, err error) {
	if p.NaFlex == nil {
		_, err := p.NaFlexGrid(0, 0)
		return nil, nil, nil, err
	}
	if err := p.NaFlex.validate(); err != nil {
		return nil, nil, nil, fmt.Errorf("vision: naflex: %w", err)
	}
	n := p.NaFlex.MaxNumPatches
	pixels, mask, spatial = make([]float32, n*p.NaFlex.PatchDim()), make([]int32, n), make([]int64, 2)
	if _, err := p.ApplyNaFlexInto(pixels, mask, spatial, img); err != nil {
		return nil, nil, nil, err
	}
	return pixels, mask, spatial, nil
}

// ApplyNaFlexInto writes img's pixel_values [MaxNumPatches, 3·PatchSize²]
// into pixels, its pixel_attention_mask [MaxNumPatches] into mask and its
// spatial_shapes [2] (patch rows, patch columns) into spatial, and returns
// the grid. Working buffers come from a pool, as ApplyInto's.
//
// The steps are Siglip2ImageProcessor.preprocess's, on Pillow's
// arithmetic: convert to RGB as ApplyInto does; resize to NaFlexGrid's
// size with Pillow's resampler and the configured filter; rescale in
// float64 then cast to float32; normalise in float32; cut into patches in
// row-major order, each patch's values ordered by row, column, then
// channel (row r, column c, channel k of patch i at
// pixels[i·3·P² + (r·P + c)·3 + k]); rows past the grid's patches are
// zeros, with mask 0 (1 for real patches).
func (p *Preprocessor) ApplyNaFlexInto(pixels []float32, mask []int32, spatial []int64, img image.Image) (Grid, error) {
	nf := p.NaFlex
	if nf == nil {
		return p.NaFlexGrid(0, 0)
	}
	if err := nf.validate(); err != nil {
		return Grid{}, fmt.Errorf("vision: naflex: %w", err)
	}
	if img == nil {
		return Grid{}, errors.New("vision: naflex: nil image")
	}
	b := img.Bounds()
	if b.Empty() {
		return Grid{}, errors.New("vision: naflex: empty image")
	}
	if !p.DoConvertRGB {
		if m := pilMode(img); m != "RGB" {
			return Grid{}, fmt.Errorf("vision: naflex: do_convert_rgb is false but the image is %s, not RGB (the model needs 3 channels)", m)
		}
	}
	var f filter
	if p.DoResize {
		var ok bool
		if f, ok = p.Resample.filter(); !ok {
			return Grid{}, fmt.Errorf("vision: naflex: resample %d (%v) is not supported", int(p.Resample), p.Resample)
		}
	}
	n, ps, dim := nf.MaxNumPatches, nf.PatchSize, nf.PatchDim()
	switch {
	case len(pixels) < n*dim:
		return Grid{}, fmt.Errorf("vision: naflex: pixels has %d values, need %d patches x %d = %d", len(pixels), n, dim, n*dim)
	case len(mask) < n:
		return Grid{}, fmt.Errorf("vision: naflex: mask has %d values, need %d", len(mask), n)
	case len(spatial) < 2:
		return Grid{}, fmt.Errorf("vision: naflex: spatial has %d values, need 2", len(spatial))
	}
	sw, sh := b.Dx(), b.Dy()
	g, err := p.NaFlexGrid(sw, sh)
	if err != nil {
		return Grid{}, err
	}
	th, tw := g.H*ps, g.W*ps

	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	s.src.init(img, &s.conv)
	defer s.src.reset() // keep no reference to img in the pool

	win := image.Rect(0, 0, tw, th)
	resize := p.DoResize && (tw != sw || th != sh)
	bpp, stride := 3, 3*tw
	rgbx := resize && useRGBX() // RGBX rows (rgbx.go)
	if rgbx {
		bpp, stride = 4, rgbxStride(tw)
	}
	s.win = grow(s.win, stride*th)
	rgb := s.win
	switch {
	case rgbx:
		resampleRGBX(rgb, &s.src, sw, sh, tw, th, win, f, &s.rs)
	case resize:
		resample(rgb, &s.src, sw, sh, tw, th, win, f, &s.rs)
	default:
		for y := range th {
			s.src.rgbRow(rgb[y*stride:][:3*tw], y, 0, tw)
		}
	}
	lut := &s.lut
	if k := p.lutKey(); !s.lutOK || s.lutKey != k {
		p.fillLUT(lut)
		s.lutKey, s.lutOK = k, true
	}
	patchify(pixels[:g.Patches()*dim], rgb, stride, bpp, g, ps, lut)
	clear(pixels[g.Patches()*dim : n*dim])
	for i := range mask[:n] {
		mask[i] = 0
		if i < g.Patches() {
			mask[i] = 1
		}
	}
	spatial[0], spatial[1] = int64(g.H), int64(g.W)
	return g, nil
}

// patchify writes the g.H×g.W patches of ps×ps pixels of rgb (rows of
// stride bytes, bpp bytes a pixel, R, G, B first) into dst
// [g.Patches(), 3·ps²], each value through the channel's table.
func patchify(dst []float32, rgb []byte, stride, bpp int, g Grid, ps int, lut *[3][256]float32) {
	dim := 3 * ps * ps
	for gy := range g.H {
		for gx := range g.W {
			out := dst[(gy*g.W+gx)*dim:][:dim]
			for r := range ps {
				in := rgb[(gy*ps+r)*stride+gx*ps*bpp:][:ps*bpp]
				o := out[r*ps*3:][:ps*3]
				for c := range ps {
					px := in[c*bpp:][:3]
					o[3*c] = lut[0][px[0]]
					o[3*c+1] = lut[1][px[1]]
					o[3*c+2] = lut[2][px[2]]
				}
			}
		}
	}
}

// PackedLen is the length of one image's packed buffer (ApplyNaFlexPacked):
// pixel_values [MaxNumPatches, PatchDim] followed by the image's patch
// grid, rows then columns.
func (n *NaFlex) PackedLen() int { return n.MaxNumPatches*n.PatchDim() + 2 }

// ApplyNaFlexPacked preprocesses img as ApplyNaFlexInto does into one
// buffer, dst [PackedLen]: its pixel_values [MaxNumPatches, PatchDim], then
// its grid's rows and columns (as float32, exact: a grid is within the
// patch budget). The mask is the grid's first rows·columns patches
// (PackedGrid reads the grid back).
func (p *Preprocessor) ApplyNaFlexPacked(dst []float32, img image.Image) (Grid, error) {
	nf := p.NaFlex
	if nf == nil {
		return p.NaFlexGrid(0, 0)
	}
	if len(dst) != nf.PackedLen() {
		return Grid{}, fmt.Errorf("vision: naflex: the packed buffer has %d values, need %d patches x %d + 2 = %d", len(dst), nf.MaxNumPatches, nf.PatchDim(), nf.PackedLen())
	}
	mask := make([]int32, nf.MaxNumPatches)
	var spatial [2]int64
	g, err := p.ApplyNaFlexInto(dst[:len(dst)-2], mask, spatial[:], img)
	if err != nil {
		return Grid{}, err
	}
	dst[len(dst)-2], dst[len(dst)-1] = float32(g.H), float32(g.W)
	return g, nil
}

// PackedGrid returns the grid ApplyNaFlexPacked wrote at the end of buf,
// checked to be whole and within the budget of patches.
func PackedGrid(buf []float32, patches int) (Grid, error) {
	if len(buf) < 2 {
		return Grid{}, errors.New("vision: naflex: a packed buffer of fewer than 2 values")
	}
	h, w := buf[len(buf)-2], buf[len(buf)-1]
	g := Grid{H: int(h), W: int(w)}
	if float32(g.H) != h || float32(g.W) != w || g.H <= 0 || g.W <= 0 || g.Patches() > patches {
		return Grid{}, fmt.Errorf("vision: naflex: the packed buffer ends with a grid of %gx%g, expected whole rows and columns of at most %d patches", h, w, patches)
	}
	return g, nil
}

// BufferLen is the length of one image's pixel buffer for a vision tower
// taking h×w pixel_values: 3·h·w, or for SigLIP 2 NaFlex (which takes each
// image on its own grid) its packed patches and grid (NaFlex.PackedLen).
func (p *Preprocessor) BufferLen(h, w int) int {
	if p.NaFlex != nil {
		return p.NaFlex.PackedLen()
	}
	return 3 * h * w
}
