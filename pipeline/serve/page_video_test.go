package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestPageVideoInBrowser drives the page's attend with a video in headless
// Chromium: a chosen video shows its name and the frames-a-second field
// (an image hides it again); Attend sends it as /v1/attend's multipart
// "video" part at the typed rate, and the page shows one strip per prompt,
// a figure per frame at the times the API answers for the same upload, in
// order, each with the frame's sheet (loaded) and per content word the
// argmax cell of the API's map for that frame. The page logs no CSP
// violation or error. It saves a screenshot.
func TestPageVideoInBrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary (install Debian's chromium, or set CHROMIUM to one)")
	}
	videotest.Need(t)
	const prompt = "a yellow square"
	_, ts, _ := newTestServer(t, false, Options{})
	v := videotest.Make(t, t.TempDir(), "v.mp4", videotest.Frames(12, 64, 64), 4, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	data, err := os.ReadFile(v)
	if err != nil {
		t.Fatal(err)
	}
	code, raw := upload(t, ts.URL+"/v1/attend", map[string][]byte{"video": data}, "prompts", prompt, "fps", "2")
	var want attendVideoResponse
	if code != 200 || json.Unmarshal(raw, &want) != nil || len(want.Frames) != 6 {
		t.Fatalf("the API: status %d, %d frames (want 6): %.300s", code, len(want.Frames), raw)
	}
	b := newBrowserPage(t, bin)
	b.open(ts.URL + "/")
	b.run("choose the video", chromedp.SetUploadFiles(chromedp.ID("image"), []string{v}))
	var shown struct {
		FPS  bool   `json:"fps"`
		Name string `json:"name"`
	}
	b.eval("the video chosen", `({ fps: !document.getElementById('fps-field').hidden && document.getElementById('fps').offsetWidth > 0,
		name: document.getElementById('video-name').textContent })`, &shown)
	if !shown.FPS || !strings.Contains(shown.Name, "v.mp4") {
		t.Errorf("after choosing v.mp4: fps field shown %v, name %q", shown.FPS, shown.Name)
	}
	b.run("type and attend",
		chromedp.SetValue(chromedp.ID("fps"), "2"),
		chromedp.SetValue(chromedp.ID("prompts"), prompt),
		chromedp.Click(chromedp.ID("attend")),
	)
	if st := b.poll("the answer", `(() => { const s = document.getElementById('status'); return (s.dataset.state === 'done' || s.dataset.state === 'error') && s.textContent; })()`); st != "done" {
		t.Fatalf("#status is %q, want done", st)
	}
	b.poll("the sheets", `Array.from(document.querySelectorAll('.strip img.sheet')).every((i) => i.complete && i.naturalWidth > 0)`)
	var frames []struct {
		Time   float64
		Prompt int
		Sheet  bool
		Text   string
		Words  []struct{ Word, Cell string }
	}
	b.eval("the strip", `Array.from(document.querySelectorAll('.strip figure.frame')).map((f) => ({
		Time: +f.dataset.time, Prompt: +f.dataset.prompt, Sheet: !!f.querySelector('img.sheet'), Text: f.textContent,
		Words: Array.from(f.querySelectorAll('li[data-word]')).map((l) => ({ Word: l.dataset.word, Cell: l.dataset.cell })) }))`, &frames)
	if len(frames) != len(want.Frames) {
		t.Fatalf("%d frames shown, the API answers %d", len(frames), len(want.Frames))
	}
	cols := want.Grid[1]
	for i, f := range frames {
		w := want.Frames[i]
		ovs := w.Prompts[0].Overlays
		if f.Time != w.Time || f.Prompt != 0 || !f.Sheet || len(f.Words) != len(ovs) {
			t.Errorf("frame %d shown: %+v; the API: time %v, %d words", i, f, w.Time, len(ovs))
			continue
		}
		for k, ov := range ovs {
			best := 0
			for j := range ov.Map {
				if ov.Map[j] > ov.Map[best] {
					best = j
				}
			}
			if cell := f.Words[k].Cell; f.Words[k].Word != ov.Word || cell != strings.Join([]string{strconv.Itoa(best / cols), strconv.Itoa(best % cols)}, ",") {
				t.Errorf("frame %d word %d: %s at %s; the API's map peaks at %d,%d (%s)", i, k, f.Words[k].Word, cell, best/cols, best%cols, ov.Word)
			}
		}
	}
	t.Logf("strip: %d frames at %v s", len(frames), func() (ts []float64) {
		for _, f := range frames {
			ts = append(ts, f.Time)
		}
		return
	}())
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shotPath := filepath.Join(artifactDir(t), "page-video.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shotPath)
	img, err := filepath.Abs(filepath.Join("..", "..", "testdata", "scenes", "images", "scene_000.png"))
	if err != nil {
		t.Fatal(err)
	}
	b.run("choose an image", chromedp.SetUploadFiles(chromedp.ID("image"), []string{img}))
	var hidden bool
	b.eval("the image chosen", `document.getElementById('fps-field').hidden && document.getElementById('video-name').hidden`, &hidden)
	if !hidden {
		t.Error("after choosing an image the fps field or the video's name is still shown")
	}
	for _, p := range b.problems() {
		t.Errorf("the page reported: %s", p)
	}
}
