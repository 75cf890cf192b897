package vision

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
)

// PreprocessorConfigFile is the file name of a model's image processor
// configuration in the Hugging Face layout.
const PreprocessorConfigFile = "preprocessor_config.json"

// maxSide bounds the sizes a configuration may ask for, and maxOutput the
// pixels of one output, so that a hostile config cannot ask for gigabytes.
const (
	maxSide   = 1 << 14
	maxOutput = 1 << 26
)

// Size is a target size: ShortestEdge > 0 means "the shorter side becomes
// ShortestEdge, the longer side int(ShortestEdge·long/short)"; otherwise
// Height × Width exactly.
type Size struct {
	ShortestEdge int `json:"shortest_edge,omitempty"`
	Height       int `json:"height,omitempty"`
	Width        int `json:"width,omitempty"`
}

// Preprocessor turns an image into CLIP's pixel_values as Hugging Face's
// CLIPImageProcessor does (SiglipImageProcessor is the same steps without
// the crop), or, when NaFlex is set, into SigLIP 2's patches as
// Siglip2ImageProcessor does (ApplyNaFlexInto). Build it with
// ParsePreprocessorConfig, LoadPreprocessor, DefaultPreprocessor,
// SiglipPreprocessor or NaFlexPreprocessor; its fields mirror
// preprocessor_config.json. A Preprocessor is read-only once built and safe
// for concurrent use.
type Preprocessor struct {
	DoConvertRGB  bool       `json:"do_convert_rgb"`
	DoResize      bool       `json:"do_resize"`
	Size          Size       `json:"size"`
	Resample      Resample   `json:"resample"`
	DoCenterCrop  bool       `json:"do_center_crop"`
	CropSize      Size       `json:"crop_size"` // Height and Width
	DoRescale     bool       `json:"do_rescale"`
	RescaleFactor float64    `json:"rescale_factor"`
	DoNormalize   bool       `json:"do_normalize"`
	Mean          [3]float32 `json:"image_mean"`
	Std           [3]float32 `json:"image_std"`
	// CropRound places the centre crop as torchvision's CenterCrop does
	// (OpenCLIP's transform): top = round((h − crop_h) / 2), halves to
	// even as Python's round, where Hugging Face's processors floor it;
	// they differ when the resized side is 3, 7, 11… pixels over the crop.
	// Read from the key "crop_round", which only the preprocessor made
	// from an OpenCLIP config (open_clip_config.json) carries.
	CropRound bool `json:"crop_round,omitempty"`
	// NaFlex is nil but for SigLIP 2's NaFlex processor.
	NaFlex *NaFlex `json:"naflex,omitempty"`
}

// OpenAI CLIP's normalisation (transformers' OPENAI_CLIP_MEAN, _STD).
var (
	clipMean = [3]float64{0.48145466, 0.4578275, 0.40821073}
	clipStd  = [3]float64{0.26862954, 0.26130258, 0.27577711}
)

// DefaultPreprocessor returns CLIPImageProcessor's defaults, which are
// also OpenAI CLIP's settings: shortest edge 224, bicubic, centre crop
// 224×224, rescale 1/255, normalise with CLIP's mean and std, RGB.
func DefaultPreprocessor() *Preprocessor {
	p := &Preprocessor{
		DoConvertRGB:  true,
		DoResize:      true,
		Size:          Size{ShortestEdge: 224},
		Resample:      Bicubic,
		DoCenterCrop:  true,
		CropSize:      Size{Height: 224, Width: 224},
		DoRescale:     true,
		RescaleFactor: 1.0 / 255,
		DoNormalize:   true,
	}
	for c := range 3 {
		p.Mean[c], p.Std[c] = float32(clipMean[c]), float32(clipStd[c])
	}
	return p
}

// SiglipPreprocessor returns SiglipImageProcessor's defaults: resize to
// exactly 224×224 (bicubic, no crop), rescale 1/255, normalise with mean and
// std 0.5, RGB.
func SiglipPreprocessor() *Preprocessor {
	return &Preprocessor{
		DoConvertRGB: true, DoResize: true, Size: Size{Height: 224, Width: 224}, Resample: Bicubic,
		DoRescale: true, RescaleFactor: 1.0 / 255, DoNormalize: true,
		Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5},
	}
}

// TipsPreprocessor returns Tipsv2ImageProcessor's defaults: resize to
// exactly 448×448 (bilinear, antialiased, no crop), rescale 1/255, no
// normalisation, RGB. transformers runs it with torchvision (its
// TorchvisionBackend: tvF.resize of the uint8 image, then image × 1/255);
// this package resizes with Pillow's arithmetic, the same triangle filter
// over the same support (docs/models.md says how far the two are apart).
func TipsPreprocessor() *Preprocessor {
	return &Preprocessor{
		DoConvertRGB: true, DoResize: true, Size: Size{Height: 448, Width: 448}, Resample: Bilinear,
		DoRescale: true, RescaleFactor: 1.0 / 255,
	}
}

// LoadPreprocessor reads preprocessor_config.json from a model directory.
func LoadPreprocessor(fsys fs.FS) (*Preprocessor, error) {
	b, err := fs.ReadFile(fsys, PreprocessorConfigFile)
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	p, err := parseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("vision: %s: %w", PreprocessorConfigFile, err)
	}
	return p, nil
}

// LoadPreprocessorFile reads a preprocessor_config.json file.
func LoadPreprocessorFile(path string) (*Preprocessor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	p, err := parseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("vision: %s: %w", path, err)
	}
	return p, nil
}

// ParsePreprocessorConfig parses a preprocessor_config.json: the legacy
// form ("size": 224, "crop_size": 224) and the dict forms ({"shortest_edge":
// 224}, {"height": 224, "width": 224}) alike. Missing or null keys take
// the processor's defaults (CLIPImageProcessor's unless image_processor_type
// names another); keys it does not use are ignored. The processors read are
// CLIPImageProcessor, SiglipImageProcessor, Siglip2ImageProcessor (NaFlex)
// and Tipsv2ImageProcessor (TipsPreprocessor) and their Fast variants; any
// other image_processor_type is an error that names it.
func ParsePreprocessorConfig(b []byte) (*Preprocessor, error) {
	p, err := parseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("vision: preprocessor config: %w", err)
	}
	return p, nil
}

func parseConfig(b []byte) (*Preprocessor, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	get := func(key string) (json.RawMessage, bool) {
		v, ok := raw[key]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			return nil, false
		}
		return v, true
	}
	kind, err := processorType(get)
	if err != nil {
		return nil, err
	}
	p := DefaultPreprocessor()
	switch kind {
	case "SiglipImageProcessor", "SiglipImageProcessorFast":
		p = SiglipPreprocessor()
	case "Siglip2ImageProcessor", "Siglip2ImageProcessorFast":
		return parseNaFlex(get)
	case "Tipsv2ImageProcessor", "Tipsv2ImageProcessorFast":
		p = TipsPreprocessor()
	}
	if err := parseCommon(p, get); err != nil {
		return nil, err
	}
	if v, ok := get("do_center_crop"); ok {
		if err := json.Unmarshal(v, &p.DoCenterCrop); err != nil {
			return nil, fmt.Errorf("do_center_crop: want true or false, got %s", v)
		}
	}
	if v, ok := get("crop_round"); ok {
		if err := json.Unmarshal(v, &p.CropRound); err != nil {
			return nil, fmt.Errorf("crop_round: want true or false, got %s", v)
		}
	}
	if v, ok := get("size"); ok {
		// Tipsv2ImageProcessor's size is a square when one number
		// (default_to_square), not a shortest edge.
		s, err := parseSize("size", v, kind == "Tipsv2ImageProcessor" || kind == "Tipsv2ImageProcessorFast")
		if err != nil {
			return nil, err
		}
		p.Size = s
	}
	if v, ok := get("crop_size"); ok {
		s, err := parseSize("crop_size", v, true)
		if err != nil {
			return nil, err
		}
		p.CropSize = s
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// parseCommon reads the keys every processor here has: the do_* switches
// (but do_center_crop), resample, rescale_factor, image_mean, image_std.
func parseCommon(p *Preprocessor, get func(string) (json.RawMessage, bool)) error {
	for key, dst := range map[string]*bool{
		"do_convert_rgb": &p.DoConvertRGB, "do_resize": &p.DoResize,
		"do_rescale": &p.DoRescale, "do_normalize": &p.DoNormalize,
	} {
		if v, ok := get(key); ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return fmt.Errorf("%s: want true or false, got %s", key, v)
			}
		}
	}
	if v, ok := get("resample"); ok {
		n, err := parseInt(v)
		if err != nil {
			return fmt.Errorf("resample: %w", err)
		}
		p.Resample = Resample(n)
	}
	if v, ok := get("rescale_factor"); ok {
		if err := json.Unmarshal(v, &p.RescaleFactor); err != nil {
			return fmt.Errorf("rescale_factor: want a number, got %s", v)
		}
	}
	for key, dst := range map[string]*[3]float32{"image_mean": &p.Mean, "image_std": &p.Std} {
		if v, ok := get(key); ok {
			if err := parseTriple(key, v, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

// processorTypes are the image_processor_type values ParsePreprocessorConfig
// reads (a legacy feature_extractor_type "XFeatureExtractor" counts as
// "XImageProcessor", as in transformers). The Fast variants are read as
// their Pillow counterparts, whose arithmetic this package reproduces.
var processorTypes = []string{
	"CLIPImageProcessor", "CLIPImageProcessorFast",
	"SiglipImageProcessor", "SiglipImageProcessorFast",
	"Siglip2ImageProcessor", "Siglip2ImageProcessorFast",
	"Tipsv2ImageProcessor", "Tipsv2ImageProcessorFast",
}

// processorType returns the config's image_processor_type (else its
// feature_extractor_type with FeatureExtractor read as ImageProcessor, as
// transformers' AutoImageProcessor does), "" when it has neither (or an
// empty one), or an error naming a type that processorTypes does not list.
func processorType(get func(string) (json.RawMessage, bool)) (string, error) {
	key := "image_processor_type"
	v, ok := get(key)
	if !ok {
		key = "feature_extractor_type"
		if v, ok = get(key); !ok {
			return "", nil
		}
	}
	var name string
	if err := json.Unmarshal(v, &name); err != nil {
		return "", fmt.Errorf("%s: want a string, got %s", key, v)
	}
	kind := name
	if kind == "" {
		return "", nil
	}
	if key == "feature_extractor_type" {
		kind = strings.Replace(name, "FeatureExtractor", "ImageProcessor", 1)
	}
	if slices.Contains(processorTypes, kind) {
		return kind, nil
	}
	return "", fmt.Errorf("%s %q is not an image processor this program implements (want one of %s)", key, name, strings.Join(processorTypes, ", "))
}

// parseNaFlex reads a Siglip2ImageProcessor config over NaFlexPreprocessor's
// defaults. Keys of the other processors (size, crop_size,
// do_center_crop) are not Siglip2ImageProcessor's and are ignored.
func parseNaFlex(get func(string) (json.RawMessage, bool)) (*Preprocessor, error) {
	p := NaFlexPreprocessor()
	if err := parseCommon(p, get); err != nil {
		return nil, err
	}
	nf := p.NaFlex
	if v, ok := get("patch_size"); ok {
		n, err := parseInt(v)
		if err != nil {
			return nil, fmt.Errorf("patch_size: %w", err)
		}
		nf.PatchSize = n
	}
	if v, ok := get("max_num_patches"); ok {
		n, err := parseInt(v)
		if err != nil {
			return nil, fmt.Errorf("max_num_patches: %w", err)
		}
		nf.MaxNumPatches = n
	} else {
		nf.MaxNumPatchesDefaulted = true
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// parseInt accepts a JSON integer (not 224.5, not "224").
func parseInt(v json.RawMessage) (int, error) {
	if t := bytes.TrimSpace(v); len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, fmt.Errorf("want an integer, got %s", v)
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		return 0, fmt.Errorf("want an integer, got %s", v)
	}
	i, err := n.Int64()
	if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, fmt.Errorf("want an integer, got %s", v)
	}
	return int(i), nil
}

// parseSize reads an int, a [height, width] list or a dict, as
// transformers' get_size_dict: an int means shortest_edge for "size" and
// height = width for "crop_size" (square).
func parseSize(key string, v json.RawMessage, square bool) (Size, error) {
	switch bytes.TrimSpace(v)[0] {
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return Size{}, fmt.Errorf("%s: %w", key, err)
		}
		var s Size
		for k, x := range m {
			n, err := parseInt(x)
			if err != nil {
				return Size{}, fmt.Errorf("%s.%s: %w", key, k, err)
			}
			switch k {
			case "shortest_edge":
				s.ShortestEdge = n
			case "height":
				s.Height = n
			case "width":
				s.Width = n
			default:
				return Size{}, fmt.Errorf("%s: key %q is not supported (want shortest_edge, or height and width)", key, k)
			}
		}
		if s.ShortestEdge != 0 {
			s.Height, s.Width = 0, 0 // CLIPImageProcessor.resize looks at shortest_edge first
		}
		return s, nil
	case '[':
		var l []json.RawMessage
		if err := json.Unmarshal(v, &l); err != nil || len(l) != 2 {
			return Size{}, fmt.Errorf("%s: want [height, width], got %s", key, v)
		}
		h, err := parseInt(l[0])
		if err != nil {
			return Size{}, fmt.Errorf("%s[0]: %w", key, err)
		}
		w, err := parseInt(l[1])
		if err != nil {
			return Size{}, fmt.Errorf("%s[1]: %w", key, err)
		}
		return Size{Height: h, Width: w}, nil
	}
	n, err := parseInt(v)
	if err != nil {
		return Size{}, fmt.Errorf("%s: %w", key, err)
	}
	if square {
		return Size{Height: n, Width: n}, nil
	}
	return Size{ShortestEdge: n}, nil
}

// parseTriple reads a list of 3 numbers, or one number for all channels.
func parseTriple(key string, v json.RawMessage, dst *[3]float32) error {
	var l []float64
	if err := json.Unmarshal(v, &l); err != nil {
		var x float64
		if err2 := json.Unmarshal(v, &x); err2 != nil {
			return fmt.Errorf("%s: want 3 numbers, got %s", key, v)
		}
		l = []float64{x}
	}
	switch len(l) {
	case 1:
		l = []float64{l[0], l[0], l[0]}
	case 3:
	default:
		return fmt.Errorf("%s: want 3 numbers (one per RGB channel), got %d", key, len(l))
	}
	for c := range 3 {
		dst[c] = float32(l[c]) // as numpy's np.array(mean, dtype=float32)
	}
	return nil
}

// Validate checks that p is usable: sizes positive and at most 16384,
// a supported filter, non-zero std; for NaFlex, a positive patch size and
// budget.
func (p *Preprocessor) Validate() error {
	okSide := func(n int) bool { return n > 0 && n <= maxSide }
	if p.NaFlex != nil {
		if err := p.NaFlex.validate(); err != nil {
			return err
		}
		if p.DoResize {
			if _, ok := p.Resample.filter(); !ok {
				return fmt.Errorf("resample %d (%v) is not supported; want 1 (lanczos), 2 (bilinear), 3 (bicubic), 4 (box) or 5 (hamming)", int(p.Resample), p.Resample)
			}
		}
	} else if p.DoResize {
		s := p.Size
		if s.ShortestEdge != 0 {
			if !okSide(s.ShortestEdge) {
				return fmt.Errorf("size.shortest_edge %d out of range 1..%d", s.ShortestEdge, maxSide)
			}
		} else if !okSide(s.Height) || !okSide(s.Width) {
			return fmt.Errorf("size must have shortest_edge, or height and width, in 1..%d (got %+v)", maxSide, s)
		}
		if _, ok := p.Resample.filter(); !ok {
			return fmt.Errorf("resample %d (%v) is not supported; want 1 (lanczos), 2 (bilinear), 3 (bicubic), 4 (box) or 5 (hamming)", int(p.Resample), p.Resample)
		}
	}
	if p.NaFlex == nil && p.DoCenterCrop && (!okSide(p.CropSize.Height) || !okSide(p.CropSize.Width)) {
		return fmt.Errorf("crop_size must have height and width in 1..%d (got %+v)", maxSide, p.CropSize)
	}
	if p.DoRescale && (math.IsNaN(p.RescaleFactor) || math.IsInf(p.RescaleFactor, 0)) {
		return fmt.Errorf("rescale_factor %v is not a finite number", p.RescaleFactor)
	}
	if p.DoNormalize {
		for c := range 3 {
			if p.Std[c] == 0 || math.IsNaN(float64(p.Std[c])) {
				return fmt.Errorf("image_std[%d] is %v", c, p.Std[c])
			}
		}
	}
	return nil
}

// ResizedSize is the height and width an image of w×h has after the resize
// step (w×h itself when DoResize is false), as transformers'
// get_resize_output_image_size computes it: the longer side is
// int(shortest_edge · long / short), truncated.
func (p *Preprocessor) ResizedSize(w, h int) (rh, rw int) {
	if !p.DoResize {
		return h, w
	}
	s := p.Size
	if s.ShortestEdge == 0 {
		return s.Height, s.Width
	}
	short, long := h, w
	if w <= h {
		short, long = w, h
	}
	newLong := int(float64(int64(s.ShortestEdge)*int64(long)) / float64(short))
	if w <= h {
		return newLong, s.ShortestEdge
	}
	return s.ShortestEdge, newLong
}

// OutputSize is the height and width of pixel_values for an image of w×h
// (after orientation): the crop size when DoCenterCrop, else ResizedSize.
func (p *Preprocessor) OutputSize(w, h int) (oh, ow int) {
	if p.DoCenterCrop {
		return p.CropSize.Height, p.CropSize.Width
	}
	return p.ResizedSize(w, h)
}

// Apply returns img's pixel_values [3, H, W] (channels first, float32) with
// H and W. See ApplyInto.
func (p *Preprocessor) Apply(img image.Image) (pixels []float32, h, w int, err error) {
	b := img.Bounds()
	oh, ow := p.OutputSize(b.Dx(), b.Dy())
	if int64(oh)*int64(ow) > maxOutput {
		return nil, 0, 0, fmt.Errorf("vision: preprocess: a %dx%d image would become %dx%d, over %d pixels", b.Dx(), b.Dy(), ow, oh, maxOutput)
	}
	pixels = make([]float32, 3*oh*ow)
	h, w, err = p.ApplyInto(pixels, img)
	if err != nil {
		return nil, 0, 0, err
	}
	return pixels, h, w, nil
}

// ApplyInto writes img's pixel_values [3, H, W] into dst[:3·H·W] and
// returns H and W (OutputSize tells them beforehand). Working buffers come
// from a pool, so batches allocate nothing per image once warm.
//
// The steps are CLIPImageProcessor.preprocess's, on Pillow's arithmetic:
// convert to RGB (Image.convert("RGB"); with DoConvertRGB false, images that
// Pillow would not open as RGB are refused); resize with Pillow's
// resampler; centre crop at top = (h - crop_h) // 2, left likewise,
// zero-padding where the crop is larger than the image; rescale in float64
// then cast to float32; normalise in float32. Images 1 or 3 pixels high
// are treated as channels-last (transformers' own channel inference
// misreads them as channels-first unless input_data_format is given).
func (p *Preprocessor) ApplyInto(dst []float32, img image.Image) (h, w int, err error) {
	if p.NaFlex != nil {
		return 0, 0, errors.New("vision: preprocess: SigLIP 2's NaFlex processor makes patches, not a [3, H, W] tensor: use ApplyNaFlexInto")
	}
	if img == nil {
		return 0, 0, errors.New("vision: preprocess: nil image")
	}
	b := img.Bounds()
	if b.Empty() {
		return 0, 0, errors.New("vision: preprocess: empty image")
	}
	if !p.DoConvertRGB {
		if m := pilMode(img); m != "RGB" {
			return 0, 0, fmt.Errorf("vision: preprocess: do_convert_rgb is false but the image is %s, not RGB (the model needs 3 channels)", m)
		}
	}
	var f filter
	if p.DoResize {
		var ok bool
		if f, ok = p.Resample.filter(); !ok {
			return 0, 0, fmt.Errorf("vision: preprocess: resample %v is not supported", p.Resample)
		}
	}
	sw, sh := b.Dx(), b.Dy()
	rh, rw := p.ResizedSize(sw, sh)
	oh, ow := p.OutputSize(sw, sh)
	if rh <= 0 || rw <= 0 {
		return 0, 0, fmt.Errorf("vision: preprocess: a %dx%d image resizes to %dx%d", sw, sh, rw, rh)
	}
	if int64(oh)*int64(ow) > maxOutput {
		return 0, 0, fmt.Errorf("vision: preprocess: a %dx%d image would become %dx%d, over %d pixels", sw, sh, ow, oh, maxOutput)
	}
	if len(dst) < 3*oh*ow {
		return 0, 0, fmt.Errorf("vision: preprocess: dst has %d values, need 3x%dx%d = %d", len(dst), oh, ow, 3*oh*ow)
	}
	// The crop window in resized coordinates: output (i, j) is resized
	// pixel (top+i, left+j), or zero outside the resized image.
	top, left := 0, 0
	if p.DoCenterCrop {
		top, left = cropOffset(rh-oh, p.CropRound), cropOffset(rw-ow, p.CropRound)
	}
	win := image.Rect(left, top, left+ow, top+oh).Intersect(image.Rect(0, 0, rw, rh))

	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	s.src.init(img, &s.conv)
	defer s.src.reset() // keep no reference to img in the pool

	var win8 []byte
	winStride := 3 * win.Dx()
	resize := p.DoResize && (rw != sw || rh != sh)
	rgbx := resize && useRGBX() // win8 holds RGBX rows (rgbx.go)
	if rgbx {
		winStride = rgbxStride(win.Dx())
	}
	if !win.Empty() {
		s.win = grow(s.win, winStride*win.Dy())
		win8 = s.win
		if rgbx {
			resampleRGBX(win8, &s.src, sw, sh, rw, rh, win, f, &s.rs)
		} else if resize {
			resample(win8, &s.src, sw, sh, rw, rh, win, f, &s.rs)
		} else {
			for y := win.Min.Y; y < win.Max.Y; y++ {
				s.src.rgbRow(win8[(y-win.Min.Y)*winStride:][:winStride], y, win.Min.X, win.Max.X)
			}
		}
	}
	lut := &s.lut
	if k := p.lutKey(); !s.lutOK || s.lutKey != k {
		p.fillLUT(lut)
		s.lutKey, s.lutOK = k, true
	}
	plane := oh * ow
	if rgbx {
		normaliseRGBX(dst[:3*plane], oh, ow, top, left, win, win8, winStride, lut)
		return oh, ow, nil
	}
	for c := range 3 {
		out := dst[c*plane : (c+1)*plane]
		pad := lut[c][0]
		for i := 0; i < oh; i++ {
			row := out[i*ow : (i+1)*ow]
			y := top + i
			if y < win.Min.Y || y >= win.Max.Y {
				for j := range row {
					row[j] = pad
				}
				continue
			}
			x0, x1 := win.Min.X-left, win.Max.X-left // window columns in output coordinates
			for j := 0; j < x0; j++ {
				row[j] = pad
			}
			in := win8[(y-win.Min.Y)*winStride:]
			for j := x0; j < x1; j++ {
				row[j] = lut[c][in[3*(j-x0)+c]]
			}
			for j := x1; j < ow; j++ {
				row[j] = pad
			}
		}
	}
	return oh, ow, nil
}

// fillLUT sets what each 8-bit value becomes in each channel: rescale as
// transformers does (float64 multiply, cast to float32), then normalise in
// float32 ((x - mean) / std, mean and std as float32).
func (p *Preprocessor) fillLUT(t *[3][256]float32) {
	for c := range 3 {
		for v := range 256 {
			x := float32(v)
			if p.DoRescale {
				x = float32(float64(v) * p.RescaleFactor)
			}
			if p.DoNormalize {
				x = (x - p.Mean[c]) / p.Std[c]
			}
			t[c][v] = x
		}
	}
}

// cropOffset returns where a centre crop d pixels smaller than the resized
// side starts: d/2 floored (Hugging Face's processors), or with round
// rounded half to even (torchvision's CenterCrop, Python's round) when the
// crop lies inside the image (d ≥ 0).
func cropOffset(d int, round bool) int {
	if !round || d < 0 {
		return floorDiv(d, 2)
	}
	if d%4 == 3 { // d/2 = k + 1/2 with k odd: to the even k + 1
		return d/2 + 1
	}
	return d / 2
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// pilMode names the Pillow mode the image corresponds to, for the
// DoConvertRGB=false check and error messages.
func pilMode(img image.Image) string {
	b := img.Bounds()
	switch m := img.(type) {
	case *image.YCbCr:
		return "RGB"
	case *image.RGBA:
		if opaque8(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), b.Dx(), b.Dy()) {
			return "RGB"
		}
		return "RGBA"
	case *image.RGBA64:
		if opaque16(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), b.Dx(), b.Dy()) {
			return "RGB"
		}
		return "RGBA"
	case *image.NRGBA, *image.NRGBA64, *image.NYCbCrA:
		return "RGBA (with alpha)"
	case *image.Gray:
		return "L (gray)"
	case *image.Gray16:
		return "I (16-bit gray)"
	case *image.Paletted:
		return "P (paletted)"
	case *image.CMYK:
		return "CMYK"
	}
	return fmt.Sprintf("%T", img)
}

// scratch is the per-call working memory of ApplyInto.
type scratch struct {
	src    rgbRows
	win    []byte
	lut    [3][256]float32
	lutKey lutKey
	lutOK  bool
	conv   convScratch
	rs     resampleScratch
}

// lutKey is what fillLUT depends on, floats by their bits (so that -0 and
// +0 differ and NaN equals itself).
type lutKey struct {
	doRescale, doNormalize bool
	rescale                uint64
	mean, std              [3]uint32
}

func (p *Preprocessor) lutKey() lutKey {
	k := lutKey{doRescale: p.DoRescale, doNormalize: p.DoNormalize, rescale: math.Float64bits(p.RescaleFactor)}
	for c := range 3 {
		k.mean[c], k.std[c] = math.Float32bits(p.Mean[c]), math.Float32bits(p.Std[c])
	}
	return k
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}
