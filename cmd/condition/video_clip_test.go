package main

import (
	"image"
	"testing"

	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// circleClip writes dir/name, an H.264 video at 4 frames a second of
// generated scenes, each shown 0.5 s: a green square (0 to 1 s), a red
// circle moving right beside it (1 to 2.5 s), then a cut to a blue
// triangle (2.5 to 3.5 s). It returns the scenes, one per half second.
func circleClip(t *testing.T, dir, name string) []scenes.Scene {
	grey := scenes.Background{Kind: scenes.Plain, A: [3]float64{128, 128, 128}}
	square := scenes.Object{Colour: "green", Shape: "square", RGB: [3]float64{30, 170, 50}, X: 0.25, Y: 0.75, R: 0.15}
	var ss []scenes.Scene
	for range 2 {
		ss = append(ss, scenes.Scene{Background: grey, Objects: []scenes.Object{square}})
	}
	for k := range 3 {
		circle := scenes.Object{Colour: "red", Shape: "circle", RGB: [3]float64{220, 30, 30}, X: 0.3 + 0.15*float64(k), Y: 0.3, R: 0.2}
		ss = append(ss, scenes.Scene{Background: grey, Objects: []scenes.Object{square, circle}})
	}
	for range 2 {
		ss = append(ss, scenes.Scene{Background: scenes.Background{Kind: scenes.Plain, A: [3]float64{200, 190, 150}},
			Objects: []scenes.Object{{Colour: "blue", Shape: "triangle", RGB: [3]float64{30, 70, 225}, X: 0.5, Y: 0.5, R: 0.25}}})
	}
	var frames []image.Image
	for _, s := range ss {
		img := s.Render(64)
		frames = append(frames, img, img)
	}
	videotest.Make(t, dir, name, frames, 4, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "12", "-movflags", "+faststart")
	return ss
}
