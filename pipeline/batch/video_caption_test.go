package batch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestVideoTarCaptionOrder: with --caption-prompt, a tar sample's caption
// reaches its video's frames whether its .txt member comes before or after
// the video member: two shards holding the same samples with their members
// in both orders (an MP4 spooled as ffmpeg writes it, a WebM streamed)
// give every frame its key's caption and byte for byte the same arrays
// (the caption's prompt among them), and leave no temporary file. A
// video over the spool limit is streamed, its frames with the caption read
// before it (none here).
func TestVideoTarCaptionOrder(t *testing.T) {
	videotest.Need(t)
	dir := t.TempDir()
	clips := videoClips(t, dir)
	mp4, webm := string(mustRead(t, filepath.Join(clips, "k1.mp4"))), string(mustRead(t, filepath.Join(clips, "k2.webm")))
	captions := map[string]string{"k1.mp4": "a moving square", "k2.webm": "a square on a gradient"}
	before, after := filepath.Join(dir, "before", "sh.tar"), filepath.Join(dir, "after", "sh.tar")
	os.MkdirAll(filepath.Dir(before), 0o755)
	os.MkdirAll(filepath.Dir(after), 0o755)
	writeTar(t, before, [][2]string{{"k1.txt", captions["k1.mp4"]}, {"k1.mp4", mp4}, {"k2.txt", captions["k2.webm"]}, {"k2.webm", webm}})
	writeTar(t, after, [][2]string{{"k1.mp4", mp4}, {"k1.txt", captions["k1.mp4"]}, {"k2.webm", webm}, {"k2.txt", captions["k2.webm"]}})
	eng := tinyEngine(t, openTiny(t), pipeline.Options{})
	tmp := t.TempDir()
	job := func(shard, out string, maxSpool int64, failed int) (map[string]Entry, []Entry) {
		t.Helper()
		cfg := Config{Engine: eng, Inputs: []string{shard}, Prompts: []string{"a yellow square"}, Out: out, Batch: 2, Version: "test", CaptionPrompt: true}
		cfg.Video.TempDir, cfg.Video.MaxSpool = tmp, maxSpool
		sum, err := Run(context.Background(), cfg)
		if err != nil || sum.Failed != failed {
			t.Fatalf("%s: %+v, %v; want %d failed", shard, sum, err, failed)
		}
		var ok, bad []Entry
		for _, e := range readManifest(t, sum.Manifest) {
			if e.Status == StatusOK {
				ok = append(ok, e)
			} else {
				bad = append(bad, e)
			}
		}
		return frameEntries(t, ok), bad
	}
	refOut, out := filepath.Join(dir, "ref"), filepath.Join(dir, "out")
	refs, _ := job(before, refOut, 0, 0)
	es, _ := job(after, out, 0, 0)
	if len(refs) != 5 || len(es) != len(refs) {
		t.Fatalf("%d frames with the captions before, %d after; want 5", len(refs), len(es))
	}
	for name, r := range refs {
		e, ok := es[name]
		if !ok || *e.Time != *r.Time {
			t.Fatalf("frame %s: %+v with the captions after, want %+v", name, e, r)
		}
		want := captions[filepath.Base(e.Video)]
		if r.Caption != want || e.Caption != want {
			t.Errorf("frame %s: caption %q (before) and %q (after); want %q", name, r.Caption, e.Caption, want)
		}
		sameArrays(t, filepath.Join(refOut, r.Outputs[0]), filepath.Join(out, e.Outputs[0]))
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("%d files left in the spool folder: %v", len(left), left[0].Name())
	}
	// A spool limit under both videos' sizes: the WebM is streamed, its
	// frames before its caption; the MP4, whose header is at its end,
	// cannot be, and is refused.
	small, bad := job(after, filepath.Join(dir, "small"), int64(min(len(mp4), len(webm))-1), 1)
	for name, e := range small {
		if filepath.Base(e.Video) != "k2.webm" || e.Caption != "" {
			t.Errorf("with a small spool limit: frame %s caption %q; want only k2.webm's frames, without a caption", name, e.Caption)
		}
	}
	if len(small) != 2 || len(bad) != 1 || bad[0].Path != "sh/k1.mp4" || !strings.Contains(bad[0].Error, "+faststart") {
		t.Errorf("with a small spool limit: %d frames, failed %+v; want k2.webm's 2 and k1.mp4 refused naming +faststart", len(small), bad)
	}
}
