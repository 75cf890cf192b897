package ort

import (
	"testing"

	onnx "github.com/yalue/onnxruntime_go"
)

// WrapRunOptions makes Run call terminate and destroy, until the test ends,
// where it would terminate or destroy a run's options. Each is given the
// run's options, as an opaque key, and the call it replaces.
func WrapRunOptions(t testing.TB, terminate, destroy func(key any, call func() error) error) {
	oldTerminate, oldDestroy := terminateRunOptions, destroyRunOptions
	terminateRunOptions = func(ro *onnx.RunOptions) error {
		return terminate(ro, func() error { return oldTerminate(ro) })
	}
	destroyRunOptions = func(ro *onnx.RunOptions) error {
		return destroy(ro, func() error { return oldDestroy(ro) })
	}
	t.Cleanup(func() { terminateRunOptions, destroyRunOptions = oldTerminate, oldDestroy })
}
