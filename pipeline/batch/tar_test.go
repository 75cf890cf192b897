package batch

import (
	"archive/tar"
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
)

func TestExpandBraces(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a.tar", []string{"a.tar"}},
		{"s/{000..002}.tar", []string{"s/000.tar", "s/001.tar", "s/002.tar"}},
		{"{train,val}/{8..10}.tar", []string{"train/8.tar", "train/9.tar", "train/10.tar", "val/8.tar", "val/9.tar", "val/10.tar"}},
		{"{08..10}", []string{"08", "09", "10"}},
	} {
		got, err := expandBraces(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("expandBraces(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"a{b", "a}b", "{2..1}", "{a{b}c}", "{x..3}", "{0..99999999}"} {
		if _, err := expandBraces(bad); err == nil {
			t.Errorf("expandBraces(%q): no error", bad)
		}
	}
}

func pngBytes(t *testing.T, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 20, 16))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, 255
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeTar writes members (name, bytes) to a tar file at p.
func writeTar(t *testing.T, p string, members [][2]string) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range members {
		if err := tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(m[1]))
	}
	tw.Close()
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunTarShards: WebDataset shards named by a brace pattern: samples
// grouped by key with their captions, a corrupt member, a member that
// would leave the shard and a truncated shard (cut in a member, or between
// two members) each recorded per sample;
// nothing is written outside the output folder.
func TestRunTarShards(t *testing.T) {
	m := openTiny(t)
	dir := t.TempDir()
	red, blue := string(pngBytes(t, color.RGBA{220, 30, 30, 255})), string(pngBytes(t, color.RGBA{30, 30, 220, 255}))
	writeTar(t, filepath.Join(dir, "shard-0.tar"), [][2]string{
		{"000000.png", red}, {"000000.txt", "a red square\n"},
		{"000001.jpg", "not a jpeg"}, {"000001.txt", "broken"},
		{"000002.txt", "a caption alone"},
		{"sub/000003.png", blue}, {"sub/000003.json", `{"caption": "a blue square", "width": 20}`},
	})
	writeTar(t, filepath.Join(dir, "shard-1.tar"), [][2]string{
		{"../evil.png", red},
		{"000010.png", blue},
	})
	var full bytes.Buffer
	tw := tar.NewWriter(&full)
	for _, n := range []string{"000020.png", "000021.png"} {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(red)), Typeflag: tar.TypeReg})
		tw.Write([]byte(red))
	}
	tw.Close()
	// Cut in the middle of the second member's data.
	padded := (len(red) + 511) / 512 * 512 // tar pads each member's data to 512-byte blocks
	if err := os.WriteFile(filepath.Join(dir, "shard-2.tar"), full.Bytes()[:512+padded+512+len(red)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	// Cut exactly after the first member: a valid-looking tar without its
	// end-of-archive blocks.
	if err := os.WriteFile(filepath.Join(dir, "shard-3.tar"), full.Bytes()[:512+padded], 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{}), Inputs: []string{filepath.Join(dir, "shard-{0..3}.tar")},
		Prompts: []string{"red"}, Out: out, Batch: 2, CaptionPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range readManifest(t, sum.Manifest) {
		got[e.Path] = e
	}
	want := map[string]string{ // path → status
		"shard-0/000000.png": StatusOK, "shard-0/000001.jpg": StatusError, "shard-0/sub/000003.png": StatusOK,
		"shard-1/evil": StatusError, "shard-1/000010.png": StatusOK,
		"shard-2/000020.png": StatusOK, "shard-2/000021.png": StatusError, "shard-2/(truncated)": StatusError,
		"shard-3/000020.png": StatusOK, "shard-3/(truncated)": StatusError,
	}
	for p, st := range want {
		if got[p].Status != st {
			t.Errorf("%s: %+v, want status %s", p, got[p], st)
		}
	}
	if len(got) != len(want) {
		t.Errorf("manifest has %d entries, want %d: %v", len(got), len(want), slices.Collect(maps.Keys(got)))
	}
	if got["shard-0/000000.png"].Caption != "a red square" || got["shard-0/sub/000003.png"].Caption != "a blue square" {
		t.Errorf("captions: %q, %q", got["shard-0/000000.png"].Caption, got["shard-0/sub/000003.png"].Caption)
	}
	if e := got["shard-1/evil"]; !strings.Contains(e.Error, "leaves the shard") {
		t.Errorf("../evil.png: %+v", e)
	}
	if e := got["shard-2/000021.png"]; !strings.Contains(e.Error, "cut short") {
		t.Errorf("truncated shard: %+v", e)
	}
	if e := got["shard-3/(truncated)"]; !strings.Contains(e.Error, "end-of-archive") {
		t.Errorf("shard cut between members: %+v", e)
	}
	// The caption is one more prompt for its image only.
	ts, meta, err := tensorio.ReadSafetensors(filepath.Join(out, "shard-0", "000000.png.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ts["prompt.1.text_to_image"]; !ok || meta["caption"] != "a red square" || meta["caption_prompt"] != "1" {
		t.Errorf("shard-0/000000.png: caption %q as prompt %q, tensors %d", meta["caption"], meta["caption_prompt"], len(ts))
	}
	ts, _, err = tensorio.ReadSafetensors(filepath.Join(out, "shard-1", "000010.png.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ts["prompt.1.text_to_image"]; ok {
		t.Error("an image without a caption got a caption prompt")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(out), "evil.png.safetensors")); err == nil {
		t.Error("a member wrote outside the output folder")
	}
}

// TestShardTakesWholeTars: a sharded job over tar inputs gives every member
// of one tar to the same process.
func TestShardTakesWholeTars(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for i := range 6 {
		p := filepath.Join(dir, "s"+string(rune('0'+i))+".tar")
		writeTar(t, p, [][2]string{{"a.png", "x"}, {"b.png", "y"}, {"c.png", "z"}})
		names = append(names, p)
	}
	owner := map[string]int{}
	sources, err := resolveInputs(names)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		s := Shard{Index: i, Count: 3}
		err := walk(context.Background(), sources, nil, walkOptions{listOnly: true}, func(it Item) error {
			if s.Takes(it.ShardKey()) {
				unit, _, _ := strings.Cut(it.Rel, "/")
				if o, ok := owner[unit]; ok && o != i {
					t.Errorf("%s: members in shards %d and %d", unit, o, i)
				}
				owner[unit] = i
			}
			return nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(owner) != 6 {
		t.Errorf("%d tar shards assigned, want 6", len(owner))
	}
}

func TestResolveShardSlurm(t *testing.T) {
	env := map[string]string{"SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1"}
	s, err := ResolveShard(-1, 0, func(k string) string { return env[k] })
	if err != nil || s != (Shard{Index: 2, Count: 4}) {
		t.Fatalf("sbatch --array=1-4, task 3: %+v, %v; want shard 2 of 4", s, err)
	}
	env["SLURM_ARRAY_TASK_COUNT"] = "x"
	if _, err := ResolveShard(-1, 0, func(k string) string { return env[k] }); err == nil {
		t.Error("a bad SLURM_ARRAY_TASK_COUNT: no error")
	}
}

// TestRunLists: images named by a text list, a CSV and a Parquet file
// (img2dataset's url column; a URL entry is a failure naming why).
func TestRunLists(t *testing.T) {
	m := openTiny(t)
	dir := t.TempDir()
	makeImages(t, filepath.Join(dir, "imgs"), 4)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("\ufeff# two images\nimgs/img-001.png\n\nimgs/img-002.png\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.csv"), []byte("id,path,caption\n1,imgs/sub/img-000.png,x\n"), 0o644)
	type row struct {
		URL     string `parquet:"url"`
		Caption string `parquet:"caption"`
	}
	if err := parquet.WriteFile(filepath.Join(dir, "c.parquet"), []row{{URL: filepath.Join(dir, "imgs", "sub", "img-003.png")}, {URL: "https://example.com/x.jpg"}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{}), Lists: []string{filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.csv"), filepath.Join(dir, "c.parquet")},
		Prompts: []string{"red"}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 4 || sum.Failed != 1 {
		t.Fatalf("summary %+v, want 4 done and the URL failed", sum)
	}
	for _, e := range readManifest(t, sum.Manifest) {
		if strings.Contains(e.Source, "example.com") && !strings.Contains(e.Error, "web URLs are not fetched") {
			t.Errorf("URL entry: %+v", e)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "imgs", "img-001.png.safetensors")); err != nil {
		t.Error(err)
	}
	if _, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{}), Lists: []string{filepath.Join(dir, "imgs", "img-001.png.csv")},
		Prompts: []string{"red"}, Out: filepath.Join(t.TempDir(), "o")}); err == nil {
		t.Error("a missing list: no error")
	}
}

// TestNameCheck: names are kept only where two images can share one, and
// a duplicate there is caught.
func TestNameCheck(t *testing.T) {
	c := newNameCheck([]string{"/data/photos"}, nil)
	for range 3 {
		if c.seen(Item{Rel: "a.jpg"}) {
			t.Fatal("one folder: a name flagged (a folder cannot hold two)")
		}
	}
	if len(c.names) != 0 {
		t.Errorf("one folder: %d names kept", len(c.names))
	}
	c = newNameCheck([]string{"s/0.tar", "s/1.tar"}, nil)
	if c.seen(Item{Rel: "0/k.jpg", Unit: "0", Member: true}) || !c.seen(Item{Rel: "0/k.jpg", Unit: "0", Member: true}) {
		t.Error("a key twice in one tar shard is not caught")
	}
	if c.seen(Item{Rel: "1/k.jpg", Unit: "1", Member: true}) || len(c.names) != 1 {
		t.Errorf("the next shard starts afresh: %d names kept", len(c.names))
	}
	c = newNameCheck([]string{"a/imgs", "b/imgs"}, nil)
	if c.seen(Item{Rel: "imgs/x.png"}) || !c.seen(Item{Rel: "imgs/x.png"}) {
		t.Error("two inputs of one name: the second image of one name is not caught")
	}
	if c = newNameCheck(nil, []string{"l.txt"}); c.seen(Item{Rel: "x"}) || !c.seen(Item{Rel: "x"}) {
		t.Error("a list naming one path twice is not caught")
	}
}

// TestTarMemberName: a sample's item names its image's member as the
// shard has it (a "./" prefix, an upper-case extension), which the index
// records and a query reads the original by.
func TestTarMemberName(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.tar")
	red := string(pngBytes(t, color.RGBA{220, 30, 30, 255}))
	writeTar(t, p, [][2]string{{"./000007.PNG", red}, {"./000007.txt", "red"}, {"sub/000008.png", red}})
	got := map[string]string{}
	if err := Walk(context.Background(), []string{p}, func(it Item) error {
		got[it.Rel] = it.MemberName
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"s/000007.png": "./000007.PNG", "s/sub/000008.png": "sub/000008.png"}
	if !maps.Equal(got, want) {
		t.Errorf("member names %v, want %v", got, want)
	}
}
