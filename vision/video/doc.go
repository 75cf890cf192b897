// Package video decodes videos into sampled RGB frames with their
// presentation times, through FFmpeg's own programs found at run time
// (ffprobe for the streams, ffmpeg for the frames), run as subprocesses.
//
// A frame's pixels are what `ffmpeg -i V -vf select=… -pix_fmt rgb24 f.png`
// writes for it (the same conversion to full-range RGB, and the display
// matrix applied as ffmpeg applies it by default), and its time is its
// presentation timestamp on the video's own clock: the pts and time base
// ffprobe -show_frames shows for it.
//
// Sampling (Options.Sampling): every frame; the key frames only; or, at F
// frames per second (the default, F = 1), for every k ≥ 0 the first frame
// at or after k/F seconds. With t a frame's time in seconds (a float64,
// pts × time base) and t' that of the frame decoded before it, a frame is
// kept when it is the first one or floor(t·F) > floor(t'·F); a frame that
// is the first after several k is kept once. Or by scene: the first frame
// and each frame whose scene score (ffmpeg's select filter's scene
// variable: how much its picture differs from the frame decoded before
// it, in [0, 1]) is over a threshold, 0.3 by default.
//
// A file sampled at a rate is decoded from the key frame before each
// sampled frame where that skips at least 15 frames: ffprobe lists its
// packets, and one ffmpeg reads the runs through its concat demuxer. The
// frames, pixels and times are those of the decode in order; videos with
// open GOPs, and streams, are decoded in order (Options.NoSeek always).
package video
