package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/install"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video"
)

// runtimeOptions are the flags of `condition runtime`.
type runtimeOptions struct {
	rt   engineFlags // --ort-lib (and --threads)
	JSON bool
}

func (o *runtimeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	o.rt.AddFlags(fs, runtimeOnly)
}

// installOptions are the flags of `condition runtime install`.
type installOptions struct {
	Force      bool
	JSON       bool
	NoNPM      bool
	ReleaseURL string
	Version    string
}

func (o *installOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Force, "force", false, "download and install again even if already installed")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	fs.BoolVar(&o.NoNPM, "no-npm", false, "do not use npm; download the GitHub release tarball")
	fs.StringVar(&o.ReleaseURL, "release-url", install.ReleaseURL, "base URL of the release tarballs (<url>/v<version>/onnxruntime-<platform>-<version>.tgz)")
	fs.StringVar(&o.Version, "version", models.RuntimeInstallVersion, "ONNX Runtime version to install")
	_ = fs.MarkHidden("version")
}

const runtimeUsage = `runtime [--json] [--ort-lib PATH]
       condition runtime install [--force] [--no-npm] [--json]

Without a subcommand: finds ONNX Runtime the way every command does, loads it
and prints its version, its path and where it was found. The search order is
--ort-lib; ` + models.RuntimeEnv + `; beside the executable and in ../lib;
the user cache folder (where 'runtime install' puts it); the system library
folders; the bare soname. When none works, every place tried is listed. It
also names the JPEG decoder: libjpeg-turbo, as Pillow's, where its TurboJPEG
library is installed (Debian: libturbojpeg0, Ubuntu: libturbojpeg), else Go's:
Pillow's pixels for baseline and progressive JPEGs, a few 8-bit levels off for
CMYK ones.

install: installs the official ONNX Runtime ` + models.RuntimeInstallVersion + ` build into the user
cache folder, with 'npm pack onnxruntime-node@` + models.RuntimeInstallVersion + `' when npm is on the
PATH (npm's package scripts are not run), else (or when npm fails) from the
GitHub release tarball. The download is verified (archive, binary for this
machine, checksum, it loads and reports its version) and installed
atomically. Already installed: says so.`

func runRuntime(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "install" {
		return runRuntimeInstall(ctx, e, args[1:])
	}
	var o runtimeOptions
	fs := newFlagSet(e, "runtime", runtimeUsage)
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if fs.Arg(0) == "install" {
			return usagef("put the flags of 'runtime install' after 'install'")
		}
		return usagef("unexpected argument %q (the only subcommand is 'install')", fs.Arg(0))
	}
	rt, err := o.rt.loadRuntime(e)
	if err != nil {
		var nf *models.RuntimeNotFoundError
		if o.JSON && errors.As(err, &nf) {
			_ = writeJSONIndent(e.Stdout, map[string]any{"found": false, "min_version": models.RuntimeMinVersion, "tried": nf.Tried})
		}
		return err
	}
	if o.JSON {
		return writeJSONIndent(e.Stdout, map[string]any{"found": true, "version": rt.Version, "path": rt.Path,
			"source": rt.Source, "min_version": models.RuntimeMinVersion, "tried": rt.Tried,
			"jpeg_decoder": vision.JPEGDecoder(), "ffmpeg": ffmpegFound()})
	}
	fmt.Fprintf(e.Stdout, "onnxruntime %s\npath:   %s\nsource: %s\njpeg:   %s\nffmpeg: %s\n", rt.Version, rt.Path, rt.Source, vision.JPEGDecoder(), ffmpegText())
	// Candidates that exist but were not used (too old, not loadable) are worth a word.
	for _, a := range rt.Tried[:len(rt.Tried)-1] {
		if a.Result != "not found" {
			fmt.Fprintf(e.Stdout, "skipped %-10s %s: %s\n", a.Source, a.Path, a.Result)
		}
	}
	return nil
}

func runRuntimeInstall(ctx context.Context, e *env, args []string) error {
	var o installOptions
	fs := newFlagSet(e, "runtime install", "runtime install [--force] [--no-npm] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	last := int64(-1)
	res, err := install.Runtime(ctx, install.Options{
		Version:    o.Version,
		Force:      o.Force,
		NoNPM:      o.NoNPM,
		ReleaseURL: o.ReleaseURL,
		Logger:     e.Log,
		Progress: func(done, total int64) {
			if total <= 0 {
				return
			}
			if q := done * 4 / total; q != last {
				last = q
				e.Log.Info("onnxruntime: download", "percent", q*25, "bytes", done, "total", total)
			}
		},
	})
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSONIndent(e.Stdout, res)
	}
	if res.AlreadyInstalled {
		fmt.Fprintf(e.Stdout, "onnxruntime %s is already installed: %s\n", res.Version, res.Path)
		return nil
	}
	fmt.Fprintf(e.Stdout, "installed onnxruntime %s (%s %s)\npath:   %s\nsha256: %s\n", res.Version, res.Source, res.URL, res.Path, res.SHA256)
	return nil
}

// writeJSONIndent writes v as indented JSON and a newline.
// ffmpegFound returns the paths of ffmpeg and ffprobe (videos are decoded
// with them), or why they are not to be had.
func ffmpegFound() map[string]any {
	p, err := video.Find(video.Options{})
	if err != nil {
		return map[string]any{"found": false, "error": err.Error()}
	}
	return map[string]any{"found": true, "ffmpeg": p.FFmpeg, "ffprobe": p.FFprobe}
}

// ffmpegText is ffmpegFound for a person.
func ffmpegText() string {
	p, err := video.Find(video.Options{})
	if err != nil {
		return "not found, videos cannot be read (" + err.Error() + ")"
	}
	return p.FFmpeg + " (ffprobe " + p.FFprobe + ")"
}

func writeJSONIndent(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
