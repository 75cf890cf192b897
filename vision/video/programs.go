package video

import (
	"errors"
	"fmt"
	"os/exec"
)

// InstallHint is how to install FFmpeg's programs on Debian and Ubuntu.
const InstallHint = "apt-get install ffmpeg"

// ErrNoFFmpeg is wrapped by the errors of a decode that could not find
// ffmpeg or ffprobe.
var ErrNoFFmpeg = errors.New("ffmpeg not found")

// NotFoundError says that one of FFmpeg's programs is not installed.
type NotFoundError struct {
	Program string // "ffmpeg" or "ffprobe", or the path given for it
	Err     error  // exec.LookPath's
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s is not installed or not on PATH (install FFmpeg: %s): %v", e.Program, InstallHint, e.Err)
}

// Unwrap returns ErrNoFFmpeg.
func (e *NotFoundError) Unwrap() error { return ErrNoFFmpeg }

// Programs are the paths of ffmpeg and ffprobe.
type Programs struct {
	FFmpeg, FFprobe string
}

// Find looks up ffmpeg and ffprobe: the paths in o when set, else the
// names on PATH. The error is a *NotFoundError.
func Find(o Options) (Programs, error) {
	var p Programs
	for _, x := range []struct {
		name string
		dst  *string
	}{{orDefault(o.FFmpeg, "ffmpeg"), &p.FFmpeg}, {orDefault(o.FFprobe, "ffprobe"), &p.FFprobe}} {
		path, err := exec.LookPath(x.name)
		if err != nil {
			return Programs{}, &NotFoundError{Program: x.name, Err: err}
		}
		*x.dst = path
	}
	return p, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
