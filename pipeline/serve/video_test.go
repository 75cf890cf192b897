package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// testVideo writes a 2 s H.264 MP4 at 10 frames a second, as ffmpeg
// writes it by default (its header at its end), and returns its path and
// bytes.
func testVideo(t *testing.T) (string, []byte) {
	t.Helper()
	v := videotest.Make(t, t.TempDir(), "v.mp4", videotest.Frames(20, 96, 64), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "10")
	b, err := os.ReadFile(v)
	if err != nil {
		t.Fatal(err)
	}
	return v, b
}

// framePNGs returns ffmpeg's PNG of each frame n of video, as bytes.
func framePNGs(t *testing.T, v string, ns ...int) [][]byte {
	t.Helper()
	var out [][]byte
	for _, n := range ns {
		p := filepath.Join(t.TempDir(), fmt.Sprintf("%d.png", n))
		videotest.PNG(t, v, n, p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func videoURI(b []byte) string {
	return "data:video/mp4;base64," + base64.StdEncoding.EncodeToString(b)
}

// upload posts a multipart form: file parts (name → bytes) and fields.
func upload(t *testing.T, url string, files map[string][]byte, fields ...string) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, b := range files {
		fw, _ := mw.CreateFormFile(name, name+".bin")
		fw.Write(b)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	mw.Close()
	resp, err := http.Post(url, mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestAttendVideo: /v1/attend takes an uploaded video (multipart "video",
// or a data:video/... URI in JSON) and answers per sampled frame, with its
// time, what it answers for ffmpeg's PNG of that frame sent as an image.
// Too many frames, a broken video, and windows are refused, each with a
// JSON error naming why.
func TestAttendVideo(t *testing.T) {
	v, data := testVideo(t)
	_, ts, _ := newTestServer(t, false, Options{MaxVideoFrames: 4})
	code, raw := upload(t, ts.URL+"/v1/attend", map[string][]byte{"video": data}, "prompts", "a yellow square", "fps", "2", "heatmaps", "true")
	var res attendVideoResponse
	if code != 200 || json.Unmarshal(raw, &res) != nil {
		t.Fatalf("upload: status %d: %s", code, raw)
	}
	var times []string
	for _, f := range res.Frames {
		times = append(times, video.Seconds(f.Time))
	}
	if strings.Join(times, " ") != "0.000000 0.500000 1.000000 1.500000" || res.Grid != [2]int{8, 8} || res.Size != [2]int{96, 64} {
		t.Fatalf("frames at %v, grid %v, size %v", times, res.Grid, res.Size)
	}
	t.Logf("grid %v, frame_size %v, crop %v, frames at %v", res.Grid, res.Size, res.Crop, times)
	for k, png := range framePNGs(t, v, 0, 5, 10, 15) {
		var a attendResponse
		if code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(png), "prompts": []string{"a yellow square"}, "heatmaps": true}, &a); code != 200 {
			t.Fatalf("frame %d as an image: status %d: %s", k, code, raw)
		}
		got := res.Frames[k].Prompts
		if !reflect.DeepEqual(got, a.Prompts) || got[0].Heatmap == "" || a.Crop != res.Crop {
			t.Fatalf("frame at %s s: the video's answer differs from its PNG's", times[k])
		}
	}
	// JSON, key frames only (one every 10 frames: 0 and 1 s).
	var kf attendVideoResponse
	code, _, raw = post(t, ts.URL, "/v1/attend", map[string]any{"video": videoURI(data), "prompt": "a yellow square", "frames": "keyframes"}, &kf)
	if code != 200 || len(kf.Frames) != 2 || kf.Frames[1].Time != 1 {
		t.Fatalf("JSON video, key frames: status %d, %d frames: %s", code, len(kf.Frames), raw)
	}
	for _, c := range []struct {
		body     map[string]any
		code     string
		contains string
	}{
		{map[string]any{"video": videoURI(data), "prompt": "x", "fps": 5}, "too_many_frames", "more than 4 frames"},
		{map[string]any{"video": videoURI([]byte("not a video")), "prompt": "x"}, "invalid_video", "cannot be decoded"},
		{map[string]any{"video": videoURI(data), "prompt": "x", "windows": true}, "invalid_field", "windows"},
		{map[string]any{"video": videoURI(data), "prompt": "x", "frames": "scene:7"}, "invalid_field", "frames"},
		{map[string]any{"video": "data:image/png;base64,AAAA", "prompt": "x"}, "invalid_video", "not a video"},
	} {
		code, _, raw := post(t, ts.URL, "/v1/attend", c.body, nil)
		var e struct{ Error apiError }
		json.Unmarshal(raw, &e)
		if code != 400 || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.contains) {
			t.Errorf("%v: status %d %s, want 400 %s naming %q", c.body["fps"], code, raw, c.code, c.contains)
		}
	}
}

// TestEmbeddingsVideo: a data:video/... input of /v1/embeddings gives one
// entry per sampled frame, each with the input's index and the frame's
// time, whose vector is that of ffmpeg's PNG of the frame sent as an
// image; the inputs around it keep their order.
func TestEmbeddingsVideo(t *testing.T) {
	v, data := testVideo(t)
	_, ts, _ := newTestServer(t, false, Options{})
	pngs := framePNGs(t, v, 0, 10)
	var res, ref embeddingsResponse
	code, _, raw := post(t, ts.URL, "/v1/embeddings", map[string]any{"input": []string{"a yellow square", videoURI(data), dataURI(pngs[1])}, "fps": 1}, &res)
	if code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
	code, _, raw = post(t, ts.URL, "/v1/embeddings", map[string]any{"input": []string{dataURI(pngs[0]), dataURI(pngs[1])}}, &ref)
	if code != 200 {
		t.Fatalf("PNGs: status %d: %s", code, raw)
	}
	var shape []string
	for _, e := range res.Data {
		s := fmt.Sprint(e.Index)
		if e.Time != nil {
			s += "@" + video.Seconds(*e.Time)
		}
		shape = append(shape, s)
	}
	if strings.Join(shape, " ") != "0 1@0.000000 1@1.000000 2" {
		t.Fatalf("entries %v, want the text, the video's 2 frames, the image", shape)
	}
	for k := range 2 {
		if !reflect.DeepEqual(res.Data[1+k].Embedding, ref.Data[k].Embedding) {
			t.Fatalf("frame %d: its vector differs from its PNG's", k)
		}
	}
	if res.Usage.PromptTokens <= ref.Usage.PromptTokens {
		t.Errorf("usage %d tokens, the two PNGs alone %d", res.Usage.PromptTokens, ref.Usage.PromptTokens)
	}
}
