// Package install installs Microsoft's official ONNX Runtime build into the
// user cache folder, where models.LoadRuntime finds it. It is apart from
// package models so that programs that only load and run ONNX Runtime do
// not link a downloader.
package install

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/conditionhq/condition/internal/ortinstall"
)

// ReleaseURL is the base URL of the official release tarballs:
// <ReleaseURL>/v<version>/onnxruntime-<platform>-<version>.tgz.
const ReleaseURL = ortinstall.DefaultReleaseURL

// The sources of a library, as Result.Source names them.
const (
	FromNPM    = ortinstall.FromNPM
	FromGitHub = ortinstall.FromGitHub
)

// Options controls Runtime.
type Options struct {
	Version  string // default models.RuntimeInstallVersion
	CacheDir string // default the user cache folder
	Force    bool   // reinstall even when the version is already installed

	// NPM is the npm executable; empty means look it up on PATH. With
	// NoNPM, or when npm is not found, Runtime downloads the GitHub release.
	NPM   string
	NoNPM bool

	ReleaseURL string       // default ReleaseURL
	Client     *http.Client // default http.DefaultClient

	// Progress, when set, is called as a download advances (total is -1
	// when unknown). It is not called for npm, which reports nothing.
	Progress func(done, total int64)
	// Logger receives Info lines as the install advances and Warn lines
	// when it falls back or repairs a broken install. Nil means nothing is
	// logged.
	Logger *slog.Logger
}

// Result is what Runtime installed, or found installed.
type Result struct {
	Path             string `json:"path"`    // the installed library file
	Version          string `json:"version"` // as the library reports it
	Source           string `json:"source"`  // FromNPM or FromGitHub
	URL              string `json:"url"`     // the package spec or URL downloaded
	SHA256           string `json:"sha256"`
	Size             int64  `json:"size"`
	AlreadyInstalled bool   `json:"already_installed"`
}

// Runtime installs Microsoft's official ONNX Runtime build into the user
// cache folder: with `npm pack onnxruntime-node` where npm is on the PATH
// (no package scripts run), else from the release tarball. The download is
// verified (archive, binary for this machine, checksum, it loads and
// reports its version) and installed atomically.
func Runtime(ctx context.Context, opts Options) (*Result, error) {
	res, err := ortinstall.Install(ctx, ortinstall.InstallOptions(opts))
	if res == nil {
		return nil, err
	}
	r := Result(*res)
	return &r, err
}
