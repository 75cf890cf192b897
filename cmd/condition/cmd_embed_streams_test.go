package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
)

// TestEmbedStreamsSameOutput: embed writes the same file and prints the
// same result whatever its streams, threads and batch, and its image
// tensors are what the engine's EncodeImages gives for the images, in the
// order embed lists them.
func TestEmbedStreamsSameOutput(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	writeImages(t, dir, 11)
	ins, err := embedInputs(context.Background(), []string{dir})
	var paths []string
	for _, in := range ins {
		paths = append(paths, in.path)
	}
	if err != nil {
		t.Fatal(err)
	}
	var ref []byte
	var refJSON embedResult
	for _, c := range [][]string{
		{"--streams", "1", "--threads", "1", "--batch", "3"},
		{"--streams", "3", "--threads", "1", "--batch", "2"},
		{"--streams", "2", "--batch", "1"},
		{"--batch", "4"},
		{"--streams", "1", "--threads", "2", "--batch", "16"},
	} {
		out := filepath.Join(t.TempDir(), "emb.safetensors")
		args := append([]string{"embed", "--model", "default", "-p", "a red circle", "-p", "two blue squares", "--json", "--out", out, dir}, c...)
		code, stdout, stderr := embedCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c, code, stderr)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var res embedResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		res.Out = ""
		if ref == nil {
			ref, refJSON = got, res
			continue
		}
		if !bytes.Equal(got, ref) {
			t.Errorf("%v: the safetensors file differs from the one written with %s", c, "--streams 1 --threads 1 --batch 3")
		}
		a, _ := json.Marshal(res)
		b, _ := json.Marshal(refJSON)
		if !bytes.Equal(a, b) {
			t.Errorf("%v: the --json result differs from the one with one stream", c)
		}
	}

	// The tensors are the engine's, image for image, in the listed order.
	eng, err := pipeline.Open(context.Background(), "default", pipeline.Options{Threads: 1, Batch: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	imgs := make([]image.Image, len(paths))
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if imgs[i], err = eng.DecodeImage(data); err != nil {
			t.Fatal(err)
		}
	}
	encs, err := eng.EncodeImages(context.Background(), imgs)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "ref.safetensors")
	if err := os.WriteFile(f, ref, 0o644); err != nil {
		t.Fatal(err)
	}
	ts, meta, err := tensorio.ReadSafetensors(f)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	if err := json.Unmarshal([]byte(meta["images"]), &listed); err != nil || strings.Join(listed, "\n") != strings.Join(paths, "\n") {
		t.Fatalf("metadata images %v (%v), want %v", listed, err, paths)
	}
	states, embeds := ts["patch_states"].Data.([]float32), ts["image_embeds"].Data.([]float32)
	for i, enc := range encs {
		ns, ne := len(enc.States), len(enc.Embeds)
		if (i+1)*ns > len(states) || (i+1)*ne > len(embeds) {
			t.Fatalf("image %d: the file holds %d states and %d embeds for %d images", i, len(states), len(embeds), len(encs))
		}
		for k, v := range enc.States {
			if states[i*ns+k] != v {
				t.Fatalf("image %d (%s): patch_states[%d] = %v, EncodeImages %v", i, paths[i], k, states[i*ns+k], v)
			}
		}
		for k, v := range enc.Embeds {
			if embeds[i*ne+k] != v {
				t.Fatalf("image %d (%s): image_embeds[%d] = %v, EncodeImages %v", i, paths[i], k, embeds[i*ne+k], v)
			}
		}
	}
	if len(states) != len(encs)*len(encs[0].States) {
		t.Errorf("patch_states holds %d values, want %d", len(states), len(encs)*len(encs[0].States))
	}
}

// TestEmbedStreamsBadImage: an image that cannot be decoded is reported,
// naming the file, and embed exits 1, however many streams run; the other
// images are embedded and written, as run does.
func TestEmbedStreamsBadImage(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	writeImages(t, dir, 7)
	bad := filepath.Join(dir, "d1", "bad.png")
	if err := os.WriteFile(bad, []byte("not a png"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, streams := range []string{"1", "3"} {
		out := filepath.Join(t.TempDir(), "emb.safetensors")
		code, _, stderr := embedCLI(t, "embed", "--model", "default", "--streams", streams, "--batch", "2", "--out", out, dir)
		if code != exitFailed || !strings.Contains(stderr, bad) || !strings.Contains(stderr, "1 of 8 images failed") {
			t.Errorf("--streams %s: exit %d, stderr %q; want %d naming %s", streams, code, stderr, exitFailed, bad)
		}
		ts, meta, err := tensorio.ReadSafetensors(out)
		if err != nil {
			t.Fatalf("--streams %s: %v", streams, err)
		}
		if n := ts["image_embeds"].Shape[0]; n != 7 || strings.Contains(meta["images"], "bad.png") {
			t.Errorf("--streams %s: %d images written, images %s; want the 7 good ones", streams, n, meta["images"])
		}
	}
	code, _, stderr := embedCLI(t, "embed", "--model", "default", "--streams", "-1", dir)
	if code != exitUsage || !strings.Contains(stderr, "--streams") {
		t.Errorf("--streams -1: exit %d, stderr %q", code, stderr)
	}
}
