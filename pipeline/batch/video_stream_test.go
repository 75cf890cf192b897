package batch

import (
	"bytes"
	"context"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/internal/s3test"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// videoClips writes into dir/clips an H.264 MP4 as ffmpeg writes it by
// default (its moov after its mdat: it is spooled when streamed) and a
// VP9 WebM (streamed), and returns the folder.
func videoClips(t *testing.T, dir string) string {
	t.Helper()
	clips := filepath.Join(dir, "clips")
	os.MkdirAll(clips, 0o755)
	frames := videotest.Frames(24, 96, 64)
	videotest.Make(t, clips, "k1.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "8")
	videotest.Make(t, clips, "k2.webm", frames[4:], 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8")
	return clips
}

// videoTar writes the clips as the shard dir/sh.tar: k1.mp4 with a caption
// member before it, k2.webm, and an image k3.png.
func videoTar(t *testing.T, dir, clips string) string {
	t.Helper()
	p := filepath.Join(dir, "sh.tar")
	writeTar(t, p, [][2]string{
		{"k1.json", `{"caption": "a moving square"}`},
		{"k1.mp4", string(mustRead(t, filepath.Join(clips, "k1.mp4")))},
		{"k2.webm", string(mustRead(t, filepath.Join(clips, "k2.webm")))},
		{"k3.png", string(pngBytes(t, color.RGBA{200, 40, 40, 255}))},
	})
	return p
}

// frameEntries returns a job's entries of video frames by name, checking
// that each names its video and time.
func frameEntries(t *testing.T, es []Entry) map[string]Entry {
	t.Helper()
	out := map[string]Entry{}
	for _, e := range es {
		if e.Status != StatusOK {
			t.Fatalf("entry %+v", e)
		}
		if e.Time == nil {
			continue
		}
		if e.Path != e.Video+"#t="+video.Seconds(*e.Time) {
			t.Fatalf("frame entry %+v", e)
		}
		out[e.Path] = e
	}
	return out
}

// sameArrays fails t unless the safetensors files a and b hold the same
// arrays, byte for byte.
func sameArrays(t *testing.T, a, b string) {
	t.Helper()
	ta, _, err := tensorio.ReadSafetensors(a)
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := tensorio.ReadSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ta) != len(tb) || len(ta) < 4 {
		t.Fatalf("%s: %d arrays, %s: %d", a, len(ta), b, len(tb))
	}
	for k, x := range ta {
		bx, _ := tensorio.AppendLE(nil, x)
		by, _ := tensorio.AppendLE(nil, tb[k])
		if !bytes.Equal(bx, by) {
			t.Fatalf("%s differs between %s and %s", k, a, b)
		}
	}
}

// checkSameFrames checks that the frames of the job at out (its entries
// es) are those of the folder job at ref (refs), named prefix+the folder's
// name, with byte-identical arrays.
func checkSameFrames(t *testing.T, ref string, refs map[string]Entry, out string, es map[string]Entry, prefix string) {
	t.Helper()
	if len(es) != len(refs) || len(refs) != 5 {
		t.Fatalf("%d frames, the folder's job %d (want 3 + 2)", len(es), len(refs))
	}
	for name, r := range refs {
		e, ok := es[prefix+name]
		if !ok || *e.Time != *r.Time || e.Video != prefix+r.Video {
			t.Fatalf("frame %s: %+v, want the folder's %s", prefix+name, e, name)
		}
		sameArrays(t, filepath.Join(ref, r.Outputs[0]), filepath.Join(out, e.Outputs[0]))
	}
}

// TestVideoInTarShard: a shard's video members are decoded from the shard
// as it is read (the MP4 whose header is at its end through a temporary
// file), into frames named SHARD/member#t=…, whose arrays are byte for
// byte those of the same videos read from a folder; a frame carries the
// caption read before its member. Listing the shard (VerifyShards) holds
// each video by its frames.
func TestVideoInTarShard(t *testing.T) {
	videotest.Need(t)
	dir := t.TempDir()
	clips := videoClips(t, dir)
	shard := videoTar(t, dir, clips)
	eng := tinyEngine(t, openTiny(t), pipeline.Options{})
	cfg := func(in, out string) Config {
		return Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a yellow square"}, Out: out, Batch: 2, Version: "test"}
	}
	ref := filepath.Join(dir, "ref")
	sum, err := Run(context.Background(), cfg(clips, ref))
	if err != nil {
		t.Fatal(err)
	}
	refs := frameEntries(t, readManifest(t, sum.Manifest))
	out := filepath.Join(dir, "out")
	sum, err = Run(context.Background(), cfg(shard, out))
	if err != nil || sum.Done != 6 || sum.Failed != 0 {
		t.Fatalf("tar job: %+v, %v; want 5 frames and an image", sum, err)
	}
	es := frameEntries(t, readManifest(t, sum.Manifest))
	checkSameFrames(t, ref, refs, out, es, "sh/")
	for _, e := range es {
		if e.Source != shard || (e.Video == "sh/k1.mp4") != (e.Caption == "a moving square") {
			t.Errorf("frame %s: source %q caption %q", e.Path, e.Source, e.Caption)
		}
	}

	outS := filepath.Join(dir, "shards")
	c := cfg(shard, outS)
	c.Layout, c.ShardSize = "shards", 4
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyShards(context.Background(), outS, []string{shard}, nil)
	if err != nil || !rep.Complete() || len(rep.Missing)+len(rep.Unexpected) != 0 {
		t.Fatalf("verify: %v, %+v", err, rep)
	}
}

// TestVideoInObjectStore: videos under a prefix of a real S3 server
// (SeaweedFS) and in a tar shard there are streamed from the store into
// frames whose arrays are byte for byte those of the same videos read
// from a folder.
func TestVideoInObjectStore(t *testing.T) {
	videotest.Need(t)
	srv := s3test.Start(t)
	srv.Setenv(t)
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, "vids"); err != nil {
		t.Fatal(err)
	}
	st := &objstore.Stores{}
	defer st.Close()
	dir := t.TempDir()
	clips := videoClips(t, dir)
	shards := filepath.Join(dir, "shards")
	os.MkdirAll(shards, 0o755)
	videoTar(t, shards, clips)
	putTree(t, st, clips, "s3://vids/clips/")
	putTree(t, st, shards, "s3://vids/shards/")

	eng := tinyEngine(t, openTiny(t), pipeline.Options{})
	job := func(in, out string) map[string]Entry {
		t.Helper()
		sum, err := Run(ctx, Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a yellow square"}, Out: out, Batch: 2, Version: "test"})
		if err != nil || sum.Failed != 0 {
			t.Fatalf("job over %s: %+v, %v", in, sum, err)
		}
		return frameEntries(t, readManifest(t, sum.Manifest))
	}
	ref := filepath.Join(dir, "ref")
	refs := job(clips, ref)
	out := filepath.Join(dir, "out-prefix")
	checkSameFrames(t, ref, refs, out, job("s3://vids/clips/", out), "")
	out = filepath.Join(dir, "out-tar")
	checkSameFrames(t, ref, refs, out, job("s3://vids/shards/sh.tar", out), "sh/")
	out = filepath.Join(dir, "out-object")
	es := job("s3://vids/clips/k1.mp4", out)
	if len(es) != 3 || es["k1.mp4#t=1.000000"].Source != "s3://vids/clips/k1.mp4" {
		t.Fatalf("one video object: %v", es)
	}
}

// TestVideoCancelLeavesNoFFmpeg: a job cancelled while it decodes a video
// from a tar shard returns with no FFmpeg process of its own left.
func TestVideoCancelLeavesNoFFmpeg(t *testing.T) {
	videotest.Need(t)
	dir := t.TempDir()
	long := filepath.Join(dir, "long.mkv")
	videotest.Run(t, "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "60", "-c:v", "libx264", "-pix_fmt", "yuv420p", long)
	shard := filepath.Join(dir, "sh.tar")
	writeTar(t, shard, [][2]string{{"a.mkv", string(mustRead(t, long))}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	sum, err := Run(ctx, Config{Engine: tinyEngine(t, openTiny(t), pipeline.Options{}), Inputs: []string{shard}, Prompts: []string{"x"},
		Out: filepath.Join(dir, "out"), Video: video.Options{Sampling: video.SampleAll}, Batch: 2,
		Progress: func(p Progress) {
			if p.Done > 0 {
				once.Do(cancel)
			}
		}})
	if err == nil && !sum.Interrupted {
		t.Fatalf("a cancelled job: %+v, not interrupted", sum)
	}
	if sum.Done >= 1500 {
		t.Fatalf("%d frames done: the decode was not stopped", sum.Done)
	}
	if kids := children(t, "ffmpeg", "ffprobe"); len(kids) != 0 {
		t.Fatalf("FFmpeg processes left after the job returned: %v", kids)
	}
}

// children returns the pids of this process's children whose command is
// one of names.
func children(t *testing.T, names ...string) []int {
	t.Helper()
	time.Sleep(100 * time.Millisecond)
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	var out []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		lo, hi := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if lo < 0 || hi < lo {
			continue
		}
		fields := strings.Fields(s[hi+1:])
		comm := s[lo+1 : hi]
		for _, n := range names {
			if comm == n && len(fields) > 1 && fields[1] == me {
				pid, _ := strconv.Atoi(strings.Fields(s)[0])
				out = append(out, pid)
			}
		}
	}
	return out
}
