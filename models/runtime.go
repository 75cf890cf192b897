package models

import (
	"context"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/ortinstall"
)

// The ONNX Runtime this program runs on: at least RuntimeMinVersion, looked
// for in this order: RuntimeOptions.LibPath; the RuntimeEnv variable;
// beside the executable and in ../lib; the user cache folder, where
// InstallRuntime puts it; the system library folders; the bare soname.
const (
	RuntimeMinVersion     = ort.MinVersion
	RuntimeInstallVersion = ort.InstallVersion // the version InstallRuntime installs
	RuntimeEnv            = ort.EnvLibraryPath
	RuntimeReleaseURL     = ortinstall.DefaultReleaseURL // base URL of the official release tarballs
)

// RuntimeOptions controls LoadRuntime: LibPath names the library file (the
// only candidate then), Logger hears which one was used and why others
// were skipped.
type RuntimeOptions = ort.LoadOptions

// Runtime is the ONNX Runtime library loaded in this process: its version,
// path, where it was found (Source) and every place tried before it.
type Runtime = ort.Runtime

// RuntimeNotFoundError is LoadRuntime's error when no usable library was
// found; Tried lists every place looked at and what was there.
type RuntimeNotFoundError = ort.NotFoundError

// LoadRuntime finds and loads ONNX Runtime. Later calls return the library
// already loaded (one process holds one ONNX Runtime); asking then for
// another LibPath is an error. Opening a model's encoders loads it with the
// default search when nothing is loaded yet.
func LoadRuntime(opts RuntimeOptions) (*Runtime, error) { return ort.Load(opts) }

// InstallOptions controls InstallRuntime (version, npm or the release
// tarball, a progress callback, a logger).
type InstallOptions = ortinstall.InstallOptions

// InstallResult is what InstallRuntime installed, or found installed.
type InstallResult = ortinstall.InstallResult

// InstallRuntime installs Microsoft's official ONNX Runtime build into the
// user cache folder: with `npm pack onnxruntime-node` where npm is on the
// PATH (no package scripts run), else from the release tarball. The
// download is verified (archive, binary for this machine, checksum, it
// loads and reports its version) and installed atomically.
func InstallRuntime(ctx context.Context, opts InstallOptions) (*InstallResult, error) {
	return ortinstall.Install(ctx, opts)
}
