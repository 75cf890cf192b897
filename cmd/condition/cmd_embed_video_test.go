package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestEmbedVideo: embed VIDEO gives one embedding per sampled frame, named
// VIDEO#t=SECONDS with its video and time, in input order with the images
// given after it; each frame's image_embeds equal, exactly, those of
// ffmpeg's PNG of that frame embedded as an image. A video that cannot be
// read fails alone (exit 1, the others embedded); --frames with a bad
// threshold, and --fps without a video, are usage errors.
func TestEmbedVideo(t *testing.T) {
	videotest.Need(t)
	dir := t.TempDir()
	v := videotest.Make(t, dir, "v.mp4", videotest.Frames(20, 64, 48), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	img := filepath.Join(dir, "still.png")
	writePNG(t, img, videotest.Frames(1, 40, 40)[0])
	code, out, errs := runCLI(t, "embed", "--json", "--fps", "2", "--batch", "3", v, img)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res embedResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, im := range res.Images {
		names = append(names, im.Path)
	}
	want := []string{v + "#t=0.000000", v + "#t=0.500000", v + "#t=1.000000", v + "#t=1.500000", img}
	if !slices.Equal(names, want) {
		t.Fatalf("images %v, want %v", names, want)
	}
	// ffmpeg's PNG of each sampled frame (frame n is at n/10 s), embedded
	// as images.
	var pngs []string
	for k, im := range res.Images[:4] {
		if im.Video != v || im.Time == nil || video.Seconds(*im.Time) != video.Seconds(0.5*float64(k)) {
			t.Fatalf("frame %d: video %q time %v", k, im.Video, im.Time)
		}
		p := filepath.Join(dir, fmt.Sprintf("f%d.png", k))
		videotest.PNG(t, v, 5*k, p)
		pngs = append(pngs, p)
	}
	if res.Images[4].Video != "" || res.Images[4].Time != nil {
		t.Fatalf("the image has a video or time: %+v", res.Images[4])
	}
	code, out, errs = runCLI(t, append([]string{"embed", "--json"}, pngs...)...)
	var ref embedResult
	if code != 0 || json.Unmarshal([]byte(out), &ref) != nil {
		t.Fatalf("embed PNGs: exit %d\n%s", code, errs)
	}
	for k := range pngs {
		if !slices.Equal(res.Images[k].ImageEmbeds, ref.Images[k].ImageEmbeds) {
			t.Fatalf("%s: image_embeds differ from those of ffmpeg's PNG of the frame", res.Images[k].Path)
		}
	}

	bad := filepath.Join(dir, "bad.webm")
	os.WriteFile(bad, []byte("not a video"), 0o644)
	code, out, errs = runCLI(t, "embed", "--json", bad, img)
	if code != 1 || !strings.Contains(errs, "bad.webm") || !strings.Contains(out, "still.png") {
		t.Fatalf("a broken video: exit %d\n%s\n%s", code, out, errs)
	}
	for _, args := range [][]string{{"embed", "--frames", "scene:2", v}, {"embed", "--fps", "2", img}} {
		code, _, errs := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, args[1]) {
			t.Errorf("%v: exit %d, want 2 naming %s\n%s", args, code, args[1], errs)
		}
	}
}

func writePNG(t *testing.T, p string, img image.Image) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}
