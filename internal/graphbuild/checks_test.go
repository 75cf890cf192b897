package graphbuild

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

func tinyTensors(t testing.TB) map[string]tensorio.Tensor {
	t.Helper()
	ts, _, err := tensorio.ReadSafetensors(filepath.Join(tinyDir, SafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// writeCheckpoint writes tensors as dir/model.safetensors.
func writeCheckpoint(t testing.TB, dir string, ts map[string]tensorio.Tensor) {
	t.Helper()
	if err := tensorio.WriteSafetensors(filepath.Join(dir, SafetensorsFile), ts, nil); err != nil {
		t.Fatal(err)
	}
}

// writeShards writes tensors as two shards and their index; in1 picks the
// tensors of the first shard, dup names a tensor written to both.
func writeShards(t testing.TB, dir string, ts map[string]tensorio.Tensor, in1 func(string) bool, dup string) {
	t.Helper()
	parts := [2]map[string]tensorio.Tensor{{}, {}}
	index := map[string]string{}
	for n, x := range ts {
		k := 1
		if in1(n) {
			k = 0
		}
		parts[k][n] = x
		index[n] = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[k]
	}
	if dup != "" {
		parts[0][dup], parts[1][dup] = ts[dup], ts[dup]
	}
	for k, p := range parts {
		name := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[k]
		if err := tensorio.WriteSafetensors(filepath.Join(dir, name), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": index})
	if err := os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func build(t testing.TB, dir string, cfg CLIPConfig, opts Options) (string, []Written, error) {
	t.Helper()
	out := t.TempDir()
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		return out, nil, err
	}
	defer ck.Close()
	ws, err := BuildCLIP(ck, cfg, out, opts)
	return out, ws, err
}

func readGraph(t testing.TB, out, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestShardsBuildTheSameGraphs: the checkpoint split into two shards by
// model.safetensors.index.json gives the same graphs, byte for byte, as one
// file.
func TestShardsBuildTheSameGraphs(t *testing.T) {
	cfg := readConfig(t, filepath.Join(tinyDir, "config.json"))
	ts := tinyTensors(t)
	one, sharded := t.TempDir(), t.TempDir()
	writeCheckpoint(t, one, ts)
	writeShards(t, sharded, ts, func(n string) bool { return strings.HasPrefix(n, "text_model.") }, "")
	a, _, err := build(t, one, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := build(t, sharded, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{TextModelFile, VisionModelFile} {
		if !bytes.Equal(readGraph(t, a, g), readGraph(t, b, g)) {
			t.Errorf("%s: the sharded checkpoint built another graph", g)
		}
	}
}

// TestHalfPrecisionWeights: F16 and BF16 checkpoints build the graphs of
// the float32 checkpoint holding the same (rounded) values, byte for byte.
func TestHalfPrecisionWeights(t *testing.T) {
	cfg := readConfig(t, filepath.Join(tinyDir, "config.json"))
	for _, dt := range []tensorio.DType{tensorio.DTypeF16, tensorio.DTypeBF16} {
		half, rounded := map[string]tensorio.Tensor{}, map[string]tensorio.Tensor{}
		for n, x := range tinyTensors(t) {
			if x.DType != tensorio.DTypeF32 {
				half[n], rounded[n] = x, x
				continue
			}
			v, _ := x.Float32()
			h := make([]uint16, len(v))
			r := make([]float32, len(v))
			for i, f := range v {
				if dt == tensorio.DTypeF16 {
					h[i] = tensorio.Float32ToF16(f)
					r[i] = tensorio.F16ToFloat32(h[i])
				} else {
					h[i] = uint16(mathFloat32bits(f) >> 16) // truncation: any bfloat16 will do
					r[i] = tensorio.BF16ToFloat32(h[i])
				}
			}
			half[n] = tensorio.Tensor{DType: dt, Shape: x.Shape, Data: h}
			rounded[n] = tensorio.F32(x.Shape, r)
		}
		hd, rd := t.TempDir(), t.TempDir()
		writeCheckpoint(t, hd, half)
		writeCheckpoint(t, rd, rounded)
		a, _, err := build(t, hd, cfg, Options{})
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		b, _, err := build(t, rd, cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{TextModelFile, VisionModelFile} {
			if !bytes.Equal(readGraph(t, a, g), readGraph(t, b, g)) {
				t.Errorf("%s %s: the graph differs from the one of the same values in float32", dt, g)
			}
		}
	}
}

// TestExternalData writes every weight to external data and checks that
// the graphs still match torch's goldens, with the data in the data file.
func TestExternalData(t *testing.T) {
	orttest.Load(t)
	cfg := readConfig(t, filepath.Join(tinyDir, "config.json"))
	out, ws, err := build(t, tinyDir, cfg, Options{ExternalAbove: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		fi, err := os.Stat(w.External)
		if err != nil {
			t.Fatalf("%s: no external data: %v", w.Graph, err)
		}
		if w.Bytes > 64<<10 || fi.Size() < w.Weights*9/10 {
			t.Errorf("%s: graph %d bytes, data %d bytes, for %d bytes of weights", w.Graph, w.Bytes, fi.Size(), w.Weights)
		}
	}
	got := run(t, filepath.Join(out, filepath.FromSlash(VisionModelFile)), []string{"pixel_values"},
		[]tensorio.Tensor{readNPY(t, "vision_pixel_values")}, []string{"last_hidden_state", "image_embeds"})
	for i, g := range []string{"vision_last_hidden_state", "image_embeds"} {
		if d := relDiff(floats(t, readNPY(t, g)), got[i]); !(d <= 1e-5) {
			t.Errorf("external data: %s differs from torch by %.3g", g, d)
		}
	}
	got = run(t, filepath.Join(out, filepath.FromSlash(TextModelFile)), []string{"input_ids", "attention_mask"},
		[]tensorio.Tensor{readNPY(t, "text_input_ids"), readNPY(t, "text_attention_mask")}, []string{"text_embeds"})
	if d := relDiff(floats(t, readNPY(t, "text_embeds")), got[0]); !(d <= 1e-5) {
		t.Errorf("external data: text_embeds differs from torch by %.3g", d)
	}
}

// TestBadInputs: configs that disagree with the checkpoint, unknown model
// types and activations, damaged files and conflicting shards are errors
// that say what is wrong, and nothing is written.
func TestBadInputs(t *testing.T) {
	good := readConfig(t, filepath.Join(tinyDir, "config.json"))
	tiny, err := os.ReadFile(filepath.Join(tinyDir, SafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	hdrLen := int(binary.LittleEndian.Uint64(tiny))
	// lie rewrites the header's JSON with edit (the length prefix fixed up).
	lie := func(edit func(map[string]any)) []byte {
		var h map[string]any
		if err := json.Unmarshal(bytes.TrimRight(tiny[8:8+hdrLen], " "), &h); err != nil {
			t.Fatal(err)
		}
		edit(h)
		hb, _ := json.Marshal(h)
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
		return append(append(out, hb...), tiny[8+hdrLen:]...)
	}
	cases := []struct {
		name string
		cfg  func(*CLIPConfig)
		dir  func(t *testing.T, dir string) // writes the checkpoint; nil: tinyclip's
		want []string
	}{
		{name: "text width", cfg: func(c *CLIPConfig) { c.Text.HiddenSize = 48 },
			want: []string{"text_model.embeddings.token_embedding.weight has shape [562 32], the config gives [562 48]"}},
		{name: "vision layers", cfg: func(c *CLIPConfig) { c.Vision.Layers = 3 },
			want: []string{"tensor vision_model.encoder.layers.2.layer_norm1.weight is missing (expected shape [24])"}},
		{name: "projection", cfg: func(c *CLIPConfig) { c.ProjectionDim = 8 },
			want: []string{"text_projection.weight has shape [16 32], the config gives [8 32]"}},
		{name: "model type", cfg: func(c *CLIPConfig) { c.ModelType = "siglip" }, want: []string{`model_type "siglip"`}},
		{name: "activation", cfg: func(c *CLIPConfig) { c.Vision.HiddenAct = "silu" }, want: []string{`vision_config.hidden_act "silu"`}},
		{name: "heads", cfg: func(c *CLIPConfig) { c.Text.Heads = 5 }, want: []string{"text_config.hidden_size 32 is not a multiple of num_attention_heads 5"}},
		{name: "missing tensor", dir: func(t *testing.T, dir string) {
			ts := tinyTensors(t)
			delete(ts, "text_projection.weight")
			writeCheckpoint(t, dir, ts)
		}, want: []string{"tensor text_projection.weight is missing (expected shape [16 32])"}},
		{name: "integer weights", dir: func(t *testing.T, dir string) {
			ts := tinyTensors(t)
			ts["visual_projection.weight"] = tensorio.I64([]int{16, 24}, make([]int64, 16*24))
			writeCheckpoint(t, dir, ts)
		}, want: []string{"tensor visual_projection.weight is I64, expected a floating-point tensor"}},
		{name: "truncated", dir: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, SafetensorsFile), tiny[:len(tiny)-100], 0o644)
		}, want: []string{"model.safetensors", "past the end of the file"}},
		{name: "offsets past the end", dir: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, SafetensorsFile), lie(func(h map[string]any) {
				e := h["logit_scale"].(map[string]any)
				e["data_offsets"] = []int64{int64(len(tiny)), int64(len(tiny)) + 4}
			}), 0o644)
		}, want: []string{`tensor "logit_scale"`, "past the end of the file"}},
		{name: "offsets disagree with the shape", dir: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, SafetensorsFile), lie(func(h map[string]any) {
				e := h["text_projection.weight"].(map[string]any)
				e["shape"] = []int{16, 33}
			}), 0o644)
		}, want: []string{`tensor "text_projection.weight"`, "bytes for shape [16 33]"}},
		{name: "overlapping tensors", dir: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, SafetensorsFile), lie(func(h map[string]any) {
				a := h["text_projection.weight"].(map[string]any)
				b := h["visual_projection.weight"].(map[string]any)
				b["shape"], b["data_offsets"] = a["shape"], a["data_offsets"]
			}), 0o644)
		}, want: []string{"overlap"}},
		{name: "not safetensors", dir: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, SafetensorsFile), []byte("PK\x03\x04 a zip file"), 0o644)
		}, want: []string{"header length"}},
		{name: "no checkpoint", dir: func(t *testing.T, dir string) {}, want: []string{"has neither model.safetensors nor model.safetensors.index.json"}},
		{name: "tensor in two shards", dir: func(t *testing.T, dir string) {
			writeShards(t, dir, tinyTensors(t), func(n string) bool { return strings.HasPrefix(n, "vision_model.") }, "logit_scale")
		}, want: []string{`tensor "logit_scale" is in both`, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}},
		{name: "index names the wrong shard", dir: func(t *testing.T, dir string) {
			writeShards(t, dir, tinyTensors(t), func(n string) bool { return strings.HasPrefix(n, "vision_model.") }, "")
			b, _ := os.ReadFile(filepath.Join(dir, IndexFile))
			b = bytes.Replace(b, []byte(`"text_projection.weight":"model-00002-of-00002.safetensors"`), []byte(`"text_projection.weight":"model-00001-of-00002.safetensors"`), 1)
			os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
		}, want: []string{`lists tensor "text_projection.weight" in model-00001-of-00002.safetensors, which does not hold it`}},
		{name: "index outside the folder", dir: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map":{"a":"../model.safetensors"}}`), 0o644)
		}, want: []string{`"../model.safetensors", expected a file name inside the model's folder`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			dir := tinyDir
			if c.dir != nil {
				dir = t.TempDir()
				c.dir(t, dir)
			}
			out, _, err := build(t, dir, cfg, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			t.Log(err)
			if !strings.HasPrefix(err.Error(), "graphbuild: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			ents, _ := os.ReadDir(filepath.Join(out, "onnx"))
			if len(ents) != 0 {
				t.Errorf("files written despite the error: %v", ents)
			}
		})
	}
}

// FuzzCheckpoint opens arbitrary bytes as model.safetensors and builds from
// them: an error or graphs, never a panic, and never an allocation past the
// file's size for a tensor.
func FuzzCheckpoint(f *testing.F) {
	tiny, err := os.ReadFile(filepath.Join(tinyDir, SafetensorsFile))
	if err != nil {
		f.Fatal(err)
	}
	small, _ := tensorio.EncodeSafetensors(map[string]tensorio.Tensor{
		"a": tensorio.F32([]int{2, 2}, []float32{1, 2, 3, 4}),
		"b": {DType: tensorio.DTypeBF16, Shape: []int{3}, Data: []uint16{1, 2, 3}},
	}, nil)
	f.Add(small)
	f.Add(tiny[:4096])
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	cfg := readConfig(f, filepath.Join(tinyDir, "config.json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, SafetensorsFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		ck, err := OpenCheckpoint(dir)
		if err != nil {
			return
		}
		defer ck.Close()
		for _, name := range ck.headers[0].Names() {
			info, _ := ck.Info(name)
			if info.End-info.Begin > int64(len(b)) {
				t.Fatalf("tensor %s of %d bytes in a %d-byte file", name, info.End-info.Begin, len(b))
			}
			if isFloat(info.DType) {
				if _, err := ck.Float32(name); err != nil {
					t.Fatalf("tensor %s: header accepted, data unreadable: %v", name, err)
				}
			}
		}
		if _, err := BuildCLIP(ck, cfg, t.TempDir(), Options{}); err == nil && len(b) < len(tiny)/2 {
			t.Fatal("built graphs from a checkpoint too small to hold them")
		}
	})
}
