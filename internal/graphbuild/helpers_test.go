package graphbuild

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/tensorio"
)

var (
	tinyDir       = filepath.Join("..", "..", "testdata", "tinyclip")
	tinySiglipDir = filepath.Join("..", "..", "testdata", "tinysiglip")
)

// readConfig reads a CLIPConfig from a config.json the way models.Config
// does for the fields the graphs need (the tests' own reading, so that a
// mistake in either shows).
func readConfig(t testing.TB, path string) CLIPConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		ModelType     string `json:"model_type"`
		ProjectionDim int    `json:"projection_dim"`
		Text          struct {
			VocabSize  int     `json:"vocab_size"`
			Hidden     int     `json:"hidden_size"`
			Inter      int     `json:"intermediate_size"`
			Layers     int     `json:"num_hidden_layers"`
			Heads      int     `json:"num_attention_heads"`
			MaxPos     int     `json:"max_position_embeddings"`
			Act        string  `json:"hidden_act"`
			Eps        float64 `json:"layer_norm_eps"`
			EosTokenID int     `json:"eos_token_id"`
		} `json:"text_config"`
		Vision struct {
			Hidden   int     `json:"hidden_size"`
			Inter    int     `json:"intermediate_size"`
			Layers   int     `json:"num_hidden_layers"`
			Heads    int     `json:"num_attention_heads"`
			Channels int     `json:"num_channels"`
			Image    int     `json:"image_size"`
			Patch    int     `json:"patch_size"`
			Act      string  `json:"hidden_act"`
			Eps      float64 `json:"layer_norm_eps"`
		} `json:"vision_config"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	tc, vc := raw.Text, raw.Vision
	return CLIPConfig{ModelType: raw.ModelType, ProjectionDim: raw.ProjectionDim,
		Text: TextConfig{VocabSize: tc.VocabSize, HiddenSize: tc.Hidden, IntermediateSize: tc.Inter, Layers: tc.Layers,
			Heads: tc.Heads, MaxPositions: tc.MaxPos, HiddenAct: tc.Act, LayerNormEps: tc.Eps, EosTokenID: tc.EosTokenID},
		Vision: VisionConfig{HiddenSize: vc.Hidden, IntermediateSize: vc.Inter, Layers: vc.Layers, Heads: vc.Heads,
			Channels: vc.Channels, ImageSize: vc.Image, PatchSize: vc.Patch, HiddenAct: vc.Act, LayerNormEps: vc.Eps}}
}

// readSiglipConfig reads a SiglipConfig from a config.json, filling in
// what the file leaves out with transformers' SiglipTextConfig and
// SiglipVisionConfig defaults (the tests' own reading, as readConfig).
func readSiglipConfig(t testing.TB, path string) SiglipConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type tower struct {
		VocabSize      int     `json:"vocab_size"`
		Hidden         int     `json:"hidden_size"`
		Inter          int     `json:"intermediate_size"`
		Layers         int     `json:"num_hidden_layers"`
		Heads          int     `json:"num_attention_heads"`
		MaxPos         int     `json:"max_position_embeddings"`
		ProjectionSize int     `json:"projection_size"`
		Channels       int     `json:"num_channels"`
		Image          int     `json:"image_size"`
		NumPatches     int     `json:"num_patches"`
		Patch          int     `json:"patch_size"`
		Act            string  `json:"hidden_act"`
		Eps            float64 `json:"layer_norm_eps"`
	}
	def := tower{VocabSize: 32000, Hidden: 768, Inter: 3072, Layers: 12, Heads: 12, MaxPos: 64,
		Channels: 3, Image: 224, Patch: 16, Act: "gelu_pytorch_tanh", Eps: 1e-6}
	raw := struct {
		ModelType string `json:"model_type"`
		Text      tower  `json:"text_config"`
		Vision    tower  `json:"vision_config"`
	}{Text: def, Vision: def}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	tc, vc := raw.Text, raw.Vision
	return SiglipConfig{ModelType: raw.ModelType, ProjectionSize: tc.ProjectionSize,
		Text: TextConfig{VocabSize: tc.VocabSize, HiddenSize: tc.Hidden, IntermediateSize: tc.Inter, Layers: tc.Layers,
			Heads: tc.Heads, MaxPositions: tc.MaxPos, HiddenAct: tc.Act, LayerNormEps: tc.Eps},
		Vision: VisionConfig{HiddenSize: vc.Hidden, IntermediateSize: vc.Inter, Layers: vc.Layers, Heads: vc.Heads,
			Channels: vc.Channels, ImageSize: vc.Image, PatchSize: vc.Patch, HiddenAct: vc.Act, LayerNormEps: vc.Eps,
			NumPatches: vc.NumPatches}}
}

func readNPY(t testing.TB, name string) tensorio.Tensor {
	t.Helper()
	return readNPYIn(t, tinyDir, name)
}

// readNPYIn reads dir/golden/name.npy.
func readNPYIn(t testing.TB, dir, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(dir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func floats(t testing.TB, x tensorio.Tensor) []float32 {
	t.Helper()
	v, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// run runs the graph file path on in and returns its outputs as float32.
func run(t testing.TB, path string, inNames []string, in []tensorio.Tensor, outNames []string) [][]float32 {
	t.Helper()
	s, err := ort.GraphFile(path).NewSession(inNames, outNames, ort.SessionOptions{Threads: 2})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer s.Close()
	outs, err := s.Run(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	res := make([][]float32, len(outs))
	for i, o := range outs {
		res[i] = floats(t, o)
	}
	return res
}

// relDiff returns max |a-b| / max |a| (NaN when the lengths differ or b
// holds a NaN).
func relDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.NaN()
	}
	var d, m float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(y) || math.IsInf(y, 0) {
			return math.NaN()
		}
		d = math.Max(d, math.Abs(x-y))
		m = math.Max(m, math.Abs(x))
	}
	return d / m
}

func mathFloat32bits(f float32) uint32 { return math.Float32bits(f) }
