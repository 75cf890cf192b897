package vision

import (
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/conditionhq/condition/tensorio"
)

// The NaFlex golden data comes from scripts/pysiglip2/make_goldens.py:
// test images made with Pillow, and the outputs of naflex_processor.py (a
// numpy + Pillow transcription of transformers' Siglip2ImageProcessor) for
// each image and config. The Go side decodes the PNGs with Decode and
// parses the configs with LoadPreprocessorFile.
const naflexDir = "testdata/naflex"

// naflexTol bounds |Go - Python| per pixel value. The arithmetic is the
// same (Pillow's integer resampling, float64 rescale, float32 normalise),
// so the values are expected to be equal; the test allows 1e-5 and logs
// how many differ at all.
const naflexTol = 1e-5

// pySize is a transcription of transformers' get_image_size_for_max_num_patches
// kept apart from the package's own: Python's float64 arithmetic,
// operation by operation (num_patches as a product of float quotients).
func pySize(imageHeight, imageWidth, patchSize, maxNumPatches int) (int, int) {
	eps := 1e-5
	scaled := func(scale float64, size int) int {
		s := float64(size) * scale
		s = math.Ceil(s/float64(patchSize)) * float64(patchSize)
		s = math.Max(float64(patchSize), s)
		return int(s)
	}
	scaleMin, scaleMax := eps/10, 100.0
	for (scaleMax - scaleMin) >= eps {
		scale := (scaleMin + scaleMax) / 2
		h := scaled(scale, imageHeight)
		w := scaled(scale, imageWidth)
		numPatches := (float64(h) / float64(patchSize)) * (float64(w) / float64(patchSize))
		if numPatches <= float64(maxNumPatches) {
			scaleMin = scale
		} else {
			scaleMax = scale
		}
	}
	return scaled(scaleMin, imageHeight), scaled(scaleMin, imageWidth)
}

// checkNaFlexSize fails t unless NaFlexSize(h, w, p, n) gives pySize's
// answer, a multiple of p of at least one patch on each side within n
// patches, or refuses because that answer is over the budget.
func checkNaFlexSize(t *testing.T, h, w, p, n int) {
	t.Helper()
	wh, ww := pySize(h, w, p, n)
	over := (wh/p)*(ww/p) > n
	th, tw, err := NaFlexSize(h, w, p, n)
	if over {
		if err == nil || !strings.Contains(err.Error(), "over max_num_patches") {
			t.Fatalf("NaFlexSize(%d, %d, %d, %d): Python gives %dx%d, over the budget; got %dx%d, error %v", h, w, p, n, wh, ww, th, tw, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("NaFlexSize(%d, %d, %d, %d): %v", h, w, p, n, err)
	}
	if th != wh || tw != ww {
		t.Fatalf("NaFlexSize(%d, %d, %d, %d) = %dx%d, Python's search gives %dx%d", h, w, p, n, th, tw, wh, ww)
	}
	if th%p != 0 || tw%p != 0 || th < p || tw < p || (th/p)*(tw/p) > n {
		t.Fatalf("NaFlexSize(%d, %d, %d, %d) = %dx%d: not multiples of the patch, under one patch or over the budget", h, w, p, n, th, tw)
	}
}

func FuzzNaFlexSize(f *testing.F) {
	f.Add(uint32(100), uint32(100), uint16(16), uint32(256))
	f.Add(uint32(1), uint32(1), uint16(16), uint32(256))
	f.Add(uint32(20), uint32(500), uint16(16), uint32(64))
	f.Add(uint32(2_000_000), uint32(1), uint16(1), uint32(1))
	f.Add(uint32(1<<24), uint32(1<<24), uint16(16), uint32(256))
	f.Add(uint32(480), uint32(640), uint16(14), uint32(729))
	f.Fuzz(func(t *testing.T, h, w uint32, p uint16, n uint32) {
		// Sides 1..2^24 (NaFlexSize's range), patches 1..1024, budgets
		// 1..2^20.
		hh, ww := int(h%(1<<24))+1, int(w%(1<<24))+1
		pp, nn := int(p%1024)+1, int(n%(1<<20))+1
		checkNaFlexSize(t, hh, ww, pp, nn)
	})
}

// TestNaFlexSizeTable checks NaFlexSize against sizes.json, which
// make_goldens.py fills by running its Python transcription.
func TestNaFlexSizeTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(naflexDir, "sizes.json"))
	if err != nil {
		t.Fatalf("%v (scripts/pysiglip2/make_goldens.py makes it)", err)
	}
	var tab struct {
		Sizes []struct {
			Height, Width int
			PatchSize     int   `json:"patch_size"`
			MaxNumPatches int   `json:"max_num_patches"`
			Target        []int `json:"target"`
		} `json:"sizes"`
	}
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Sizes) < 100 {
		t.Fatalf("sizes.json has %d cases", len(tab.Sizes))
	}
	over := 0
	for _, c := range tab.Sizes {
		p, n := c.PatchSize, c.MaxNumPatches
		th, tw, err := NaFlexSize(c.Height, c.Width, p, n)
		if (c.Target[0]/p)*(c.Target[1]/p) > n {
			over++
			if err == nil || !strings.Contains(err.Error(), "over max_num_patches") {
				t.Errorf("%+v: over the budget in Python; got %dx%d, error %v", c, th, tw, err)
			}
			continue
		}
		if err != nil || th != c.Target[0] || tw != c.Target[1] {
			t.Errorf("%dx%d (h x w), patch %d, budget %d: got %dx%d (%v), Python %v", c.Height, c.Width, p, n, th, tw, err, c.Target)
		}
		if wh, ww := pySize(c.Height, c.Width, p, n); wh != c.Target[0] || ww != c.Target[1] {
			t.Errorf("%+v: the test's transcription gives %dx%d", c, wh, ww)
		}
	}
	if over == 0 {
		t.Error("sizes.json has no case over the budget")
	}
}

func TestNaFlexSizeErrors(t *testing.T) {
	for _, c := range [][4]int{{0, 5, 16, 256}, {5, -1, 16, 256}, {5, 5, 0, 256}, {5, 5, 16, 0}, {5, 5, -16, 256}, {1<<24 + 1, 5, 16, 256}} {
		if _, _, err := NaFlexSize(c[0], c[1], c[2], c[3]); err == nil || !strings.HasPrefix(err.Error(), "vision: naflex: ") {
			t.Errorf("NaFlexSize%v: got %v", c, err)
		}
	}
	// eps/10 is Python's float64 division, not the exact constant.
	if eps := 1e-5; eps/10 != 1.0000000000000002e-06 {
		t.Errorf("eps/10 = %v", eps/10)
	}
}

type naflexCase struct {
	Image              string `json:"image"`
	Config             string `json:"config"`
	PILMode            string `json:"pil_mode"`
	Width              int    `json:"width"`
	Height             int    `json:"height"`
	Grid               []int  `json:"grid"`
	PixelValues        string `json:"pixel_values"`
	PixelAttentionMask string `json:"pixel_attention_mask"`
	SpatialShapes      string `json:"spatial_shapes"`
}

func readNaFlexNPY(t *testing.T, rel string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(naflexDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestNaFlexGoldens checks pixel_values (within naflexTol),
// pixel_attention_mask and spatial_shapes (equal) against the Python
// reference for every case of cases.json, with each resampling kernel set.
func TestNaFlexGoldens(t *testing.T) { eachImpl(t, testNaFlexGoldens) }

func testNaFlexGoldens(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(naflexDir, "cases.json"))
	if err != nil {
		t.Fatalf("%v (scripts/pysiglip2/make_goldens.py makes it)", err)
	}
	var meta struct {
		Cases []naflexCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if len(meta.Cases) < 20 {
		t.Fatalf("cases.json lists %d cases", len(meta.Cases))
	}
	for _, c := range meta.Cases {
		name := strings.TrimSuffix(filepath.Base(c.Image), ".png") + "/" + strings.TrimSuffix(filepath.Base(c.Config), ".json")
		t.Run(name, func(t *testing.T) {
			p, err := LoadPreprocessorFile(filepath.Join(naflexDir, c.Config))
			if err != nil {
				t.Fatal(err)
			}
			img, err := DecodeFile(filepath.Join(naflexDir, c.Image), DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() != c.Width || b.Dy() != c.Height {
				t.Fatalf("decoded %v, want %dx%d", b, c.Width, c.Height)
			}
			wantPV := readNaFlexNPY(t, c.PixelValues)
			wantMask := readNaFlexNPY(t, c.PixelAttentionMask)
			wantSS := readNaFlexNPY(t, c.SpatialShapes)
			n, dim := p.NaFlex.MaxNumPatches, p.NaFlex.PatchDim()
			if wantPV.DType != tensorio.DTypeF32 || len(wantPV.Shape) != 2 || wantPV.Shape[0] != n || wantPV.Shape[1] != dim {
				t.Fatalf("golden pixel_values %s %v, want F32 [%d, %d]", wantPV.DType, wantPV.Shape, n, dim)
			}
			if wantMask.DType != tensorio.DTypeI32 || len(wantMask.Shape) != 1 || wantMask.Shape[0] != n {
				t.Fatalf("golden mask %s %v", wantMask.DType, wantMask.Shape)
			}
			if wantSS.DType != tensorio.DTypeI64 || len(wantSS.Shape) != 1 || wantSS.Shape[0] != 2 {
				t.Fatalf("golden spatial_shapes %s %v", wantSS.DType, wantSS.Shape)
			}
			ss := wantSS.Data.([]int64)

			g, err := p.NaFlexGrid(c.Width, c.Height)
			if err != nil {
				t.Fatal(err)
			}
			if int64(g.H) != ss[0] || int64(g.W) != ss[1] {
				t.Errorf("NaFlexGrid %v, Python %v", g, ss)
			}
			pv, mask, spatial, err := p.ApplyNaFlex(img)
			if err != nil {
				t.Fatal(err)
			}
			if spatial[0] != ss[0] || spatial[1] != ss[1] {
				t.Errorf("spatial_shapes %v, Python %v", spatial, ss)
			}
			for i, m := range wantMask.Data.([]int32) {
				if mask[i] != m {
					t.Fatalf("pixel_attention_mask[%d] = %d, Python %d", i, mask[i], m)
				}
			}
			want := wantPV.Data.([]float32)
			var d diffStats
			bad := 0
			for i, v := range want {
				d.add(float64(pv[i]), float64(v))
				if math.Abs(float64(pv[i])-float64(v)) > naflexTol {
					if bad++; bad <= 5 {
						t.Errorf("pixel_values[%d, %d] = %v, Python %v", i/dim, i%dim, pv[i], v)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d values off by more than %g: %v", bad, naflexTol, d)
			}
			if d.differ != 0 {
				t.Logf("%s %s: %v", c.Image, c.Config, d)
			}
		})
	}
}

func TestParseNaFlexConfig(t *testing.T) {
	p, err := ParsePreprocessorConfig([]byte(`{"image_processor_type": "Siglip2ImageProcessor"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := NaFlexPreprocessor()
	want.NaFlex.MaxNumPatchesDefaulted = true
	if got := *p.NaFlex; got != *want.NaFlex {
		t.Errorf("NaFlex %+v, want %+v", got, *want.NaFlex)
	}
	p.NaFlex, want.NaFlex = nil, nil
	if *p != *want {
		t.Errorf("got  %+v\nwant %+v", *p, *want)
	}

	p, err = ParsePreprocessorConfig([]byte(`{"image_processor_type": "Siglip2ImageProcessorFast", "patch_size": 14, "max_num_patches": 729,
		"resample": 3, "image_mean": [0.1, 0.2, 0.3], "image_std": 0.25, "rescale_factor": 0.5, "do_resize": false, "do_rescale": false,
		"do_normalize": false, "do_convert_rgb": null, "size": {"longest_edge": 1}, "crop_size": "x", "do_center_crop": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if *p.NaFlex != (NaFlex{PatchSize: 14, MaxNumPatches: 729}) || p.Resample != Bicubic || p.Mean != [3]float32{0.1, 0.2, 0.3} ||
		p.Std != [3]float32{0.25, 0.25, 0.25} || p.RescaleFactor != 0.5 || p.DoResize || p.DoRescale || p.DoNormalize ||
		!p.DoConvertRGB || p.DoCenterCrop || p.Size != (Size{}) {
		t.Errorf("got %+v %+v", *p, *p.NaFlex)
	}

	for _, tt := range []struct{ json, wantErr string }{
		{`{"image_processor_type": "Siglip2ImageProcessor", "patch_size": 0}`, "patch_size 0 out of range"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "patch_size": -16}`, "patch_size -16 out of range"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "patch_size": 16.5}`, "patch_size: want an integer"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "max_num_patches": 0}`, "max_num_patches 0: want a positive number"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "max_num_patches": -1}`, "max_num_patches -1: want a positive number"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "max_num_patches": "256"}`, "max_num_patches: want an integer"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "max_num_patches": 1000000000}`, "is over"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "resample": 0}`, "resample 0 (nearest) is not supported"},
		{`{"image_processor_type": "Siglip2ImageProcessor", "image_std": [1, 0, 1]}`, "image_std[1] is 0"},
		{`{"image_processor_type": "BitImageProcessor", "size": 448}`, `image_processor_type "BitImageProcessor" is not an image processor this program implements`},
		{`{"feature_extractor_type": "ViTFeatureExtractor"}`, `feature_extractor_type "ViTFeatureExtractor" is not an image processor`},
		{`{"image_processor_type": 3}`, "image_processor_type: want a string, got 3"},
	} {
		_, err := ParsePreprocessorConfig([]byte(tt.json))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "vision: ") {
			t.Errorf("%s: got error %v, want one containing %q", tt.json, err, tt.wantErr)
		}
	}
	fsys := fstest.MapFS{PreprocessorConfigFile: {Data: []byte(`{"image_processor_type": "BitImageProcessor"}`)}}
	if _, err := LoadPreprocessor(fsys); err == nil || !strings.Contains(err.Error(), PreprocessorConfigFile) || !strings.Contains(err.Error(), "BitImageProcessor") {
		t.Errorf("BitImageProcessor folder: got %v, want an error naming the file and the type", err)
	}
}

// TestProcessorTypes checks that every processor type this package reads
// parses to its family's preprocessor, and that a JSON-encoded CLIP or
// SigLIP preprocessor is what it was before NaFlex (no "naflex" key).
func TestProcessorTypes(t *testing.T) {
	for typ, naflex := range map[string]bool{
		"CLIPImageProcessor": false, "CLIPImageProcessorFast": false, "SiglipImageProcessor": false,
		"SiglipImageProcessorFast": false, "Siglip2ImageProcessor": true, "Siglip2ImageProcessorFast": true,
	} {
		p, err := ParsePreprocessorConfig([]byte(`{"image_processor_type": "` + typ + `"}`))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if (p.NaFlex != nil) != naflex {
			t.Errorf("%s: NaFlex %v", typ, p.NaFlex)
		}
	}
	for _, cfg := range []string{`{"feature_extractor_type": "CLIPFeatureExtractor"}`, `{"feature_extractor_type": "SiglipFeatureExtractor"}`,
		`{"image_processor_type": "CLIPImageProcessor", "feature_extractor_type": "SomethingElse"}`, `{"image_processor_type": null}`, `{"image_processor_type": ""}`} {
		if _, err := ParsePreprocessorConfig([]byte(cfg)); err != nil {
			t.Errorf("%s: %v", cfg, err)
		}
	}
	for _, p := range []*Preprocessor{DefaultPreprocessor(), SiglipPreprocessor()} {
		b, err := json.Marshal(p)
		if err != nil || strings.Contains(string(b), "naflex") {
			t.Errorf("%s (%v): a CLIP or SigLIP preprocessor's JSON changed", b, err)
		}
	}
}

// TestTipsConfig checks Tipsv2ImageProcessor's reading: its defaults
// (448×448 bilinear, rescale 1/255, no normalisation, no crop), a size
// given as one number (a square), and the keys it shares with the others.
func TestTipsConfig(t *testing.T) {
	for _, tt := range []struct {
		json string
		want Size
	}{
		{`{"image_processor_type": "Tipsv2ImageProcessor"}`, Size{Height: 448, Width: 448}},
		{`{"image_processor_type": "Tipsv2ImageProcessorFast", "size": {"height": 224, "width": 336}}`, Size{Height: 224, Width: 336}},
		{`{"image_processor_type": "Tipsv2ImageProcessor", "size": 16}`, Size{Height: 16, Width: 16}},
	} {
		p, err := ParsePreprocessorConfig([]byte(tt.json))
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		if p.Size != tt.want || p.Resample != Bilinear || p.DoNormalize || p.DoCenterCrop || !p.DoRescale || p.RescaleFactor != 1.0/255 || p.NaFlex != nil {
			t.Errorf("%s: got %+v", tt.json, p)
		}
		if h, w := p.OutputSize(640, 480); h != tt.want.Height || w != tt.want.Width {
			t.Errorf("%s: output size %dx%d", tt.json, h, w)
		}
	}
}

// TestRepositoryConfigs parses every preprocessor config the repository
// ships or tests with: none may be refused.
func TestRepositoryConfigs(t *testing.T) {
	var files []string
	for _, pat := range []string{"../testdata/*/preprocessor_config.json", "../testdata/*/*/preprocessor_config.json",
		"../testdata/images/configs/*.json", "../models/embedded/model/preprocessor_config.json", naflexDir + "/configs/*.json"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d configs: %v", len(files), files)
	}
	for _, f := range files {
		if _, err := LoadPreprocessorFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestNaFlexLayout checks the patch order and channel layout on an image
// cut as it is (do_resize, do_rescale and do_normalize off): value k of
// patch i is the byte at its row, column and channel.
func TestNaFlexLayout(t *testing.T) {
	p := NaFlexPreprocessor()
	p.DoResize, p.DoRescale, p.DoNormalize = false, false, false
	p.NaFlex = &NaFlex{PatchSize: 4, MaxNumPatches: 20}
	img := testImage(12, 8) // 2 x 3 patches
	pv, mask, spatial, err := p.ApplyNaFlex(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(pv) != 20*48 || len(mask) != 20 || spatial[0] != 2 || spatial[1] != 3 {
		t.Fatalf("got %d values, %d mask, spatial %v", len(pv), len(mask), spatial)
	}
	for i := range 20 {
		if want := int32(0); i < 6 {
			want = 1
			if mask[i] != want {
				t.Errorf("mask[%d] = %d", i, mask[i])
			}
		} else if mask[i] != want {
			t.Errorf("mask[%d] = %d", i, mask[i])
		}
	}
	for i := range 20 {
		for r := range 4 {
			for c := range 4 {
				for k := range 3 {
					got := pv[i*48+(r*4+c)*3+k]
					want := float32(0)
					if i < 6 {
						y, x := (i/3)*4+r, (i%3)*4+c
						want = float32(img.Pix[img.PixOffset(x, y)+k])
					}
					if got != want {
						t.Fatalf("patch %d row %d col %d channel %d: %v, want %v", i, r, c, k, got, want)
					}
				}
			}
		}
	}
}

func TestNaFlexErrors(t *testing.T) {
	p := NaFlexPreprocessor()
	n, dim := p.NaFlex.MaxNumPatches, p.NaFlex.PatchDim()
	pv, mask, ss := make([]float32, n*dim), make([]int32, n), make([]int64, 2)
	img := testImage(100, 60)
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "vision: ") {
			t.Errorf("%s: got %v, want an error containing %q", what, err, want)
		}
	}
	_, err := p.ApplyNaFlexInto(pv[:10], mask, ss, img)
	check("short pixels", err, "pixels has 10 values, need 256 patches x 768")
	_, err = p.ApplyNaFlexInto(pv, mask[:3], ss, img)
	check("short mask", err, "mask has 3 values")
	_, err = p.ApplyNaFlexInto(pv, mask, ss[:1], img)
	check("short spatial", err, "spatial has 1 values")
	_, err = p.ApplyNaFlexInto(pv, mask, ss, nil)
	check("nil image", err, "nil image")
	_, err = p.ApplyNaFlexInto(pv, mask, ss, image.NewRGBA(image.Rectangle{}))
	check("empty image", err, "empty image")
	_, _, err = p.ApplyInto(pv, img)
	check("ApplyInto on NaFlex", err, "use ApplyNaFlexInto")
	_, _, _, err = p.Apply(img)
	check("Apply on NaFlex", err, "use ApplyNaFlexInto")
	_, err = DefaultPreprocessor().ApplyNaFlexInto(pv, mask, ss, img)
	check("CLIP preprocessor", err, "not SigLIP 2's NaFlex processor")
	_, _, _, err = DefaultPreprocessor().ApplyNaFlex(img)
	check("CLIP preprocessor", err, "not SigLIP 2's NaFlex processor")

	q := *p
	q.DoConvertRGB = false
	_, err = q.ApplyNaFlexInto(pv, mask, ss, image.NewGray(image.Rect(0, 0, 4, 4)))
	check("gray with do_convert_rgb false", err, "do_convert_rgb is false but the image is L (gray)")

	r := *p
	r.DoResize = false
	_, err = r.ApplyNaFlexInto(pv, mask, ss, img)
	check("not a multiple", err, "not a multiple of the 16-pixel patch")
	_, err = r.ApplyNaFlexInto(pv, mask, ss, testImage(320, 320))
	check("over the budget", err, "is 20 x 20 patches of 16 pixels, over max_num_patches 256")
	if g, err := r.ApplyNaFlexInto(pv, mask, ss, testImage(256, 16)); err != nil || g != (Grid{H: 1, W: 16}) {
		t.Errorf("a 256x16 image, no resize: %v %v", g, err)
	}

	s := *p
	s.NaFlex = &NaFlex{PatchSize: 1, MaxNumPatches: 1}
	_, err = s.NaFlexGrid(1, 2_000_000)
	check("over the budget at the smallest scale", err, "a 1x2000000 image (width x height) needs 1 x 3 patches of 1 pixels (1x3) even at the smallest scale, over max_num_patches 1")
	for _, tt := range []struct {
		nf   NaFlex
		want string
	}{
		{NaFlex{PatchSize: 0, MaxNumPatches: 1}, "patch_size 0 out of range"},
		{NaFlex{PatchSize: 16, MaxNumPatches: 0}, "max_num_patches 0: want a positive number"},
		{NaFlex{PatchSize: -1, MaxNumPatches: -1}, "patch_size -1 out of range"},
	} {
		s.NaFlex = &tt.nf
		_, err = s.NaFlexGrid(10, 10)
		check("bad NaFlex", err, tt.want)
		_, err = s.ApplyNaFlexInto(pv, mask, ss, img)
		check("bad NaFlex", err, tt.want)
		_, _, _, err = s.ApplyNaFlex(img)
		check("bad NaFlex", err, tt.want)
	}
}

// TestNaFlexAllocs checks that ApplyNaFlexInto allocates next to nothing
// once its pool is warm, and that stale values in the buffers are
// overwritten.
func TestNaFlexAllocs(t *testing.T) {
	p := NaFlexPreprocessor()
	n, dim := p.NaFlex.MaxNumPatches, p.NaFlex.PatchDim()
	pv, mask, ss := make([]float32, n*dim), make([]int32, n), make([]int64, 2)
	for i := range pv {
		pv[i] = 7
	}
	for i := range mask {
		mask[i] = 7
	}
	img := testImage(300, 40)
	g, err := p.ApplyNaFlexInto(pv, mask, ss, img)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _, err := p.ApplyNaFlex(img)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pv {
		if pv[i] != want[i] {
			t.Fatalf("reused buffer: value %d is %v, fresh %v", i, pv[i], want[i])
		}
	}
	for i := range mask {
		if (mask[i] == 1) != (i < g.Patches()) || mask[i] > 1 {
			t.Fatalf("reused buffer: mask[%d] = %d", i, mask[i])
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := p.ApplyNaFlexInto(pv, mask, ss, img); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 && !raceEnabled {
		t.Errorf("ApplyNaFlexInto allocates %v times per image once warm, want at most 1", allocs)
	}
}
