//go:build linux || darwin

package ort

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The first two members of OrtApiBase, unchanged since ONNX Runtime 1.0.
typedef struct {
	const void *(*GetApi)(uint32_t version);
	const char *(*GetVersionString)(void);
} condition_ort_api_base;

typedef const condition_ort_api_base *(*condition_get_api_base)(void);

// condition_ort_probe loads path, asks it for its version string and unloads
// it. It returns a malloc'd version, or NULL with *err set (malloc'd).
static char *condition_ort_probe(const char *path, char **err) {
	*err = NULL;
	dlerror();
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		*err = strdup(e ? e : "dlopen failed");
		return NULL;
	}
	condition_get_api_base f = (condition_get_api_base)dlsym(h, "OrtGetApiBase");
	if (f == NULL) {
		*err = strdup("no OrtGetApiBase symbol: not an ONNX Runtime library");
		dlclose(h);
		return NULL;
	}
	const condition_ort_api_base *b = f();
	const char *v = (b != NULL && b->GetVersionString != NULL) ? b->GetVersionString() : NULL;
	char *out = strdup(v != NULL ? v : "");
	dlclose(h);
	return out;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Probe loads the ONNX Runtime library at path (a file, or a bare soname that
// the dynamic loader resolves), reads its version string and unloads it. It
// does not initialise anything, so it works for libraries of any version and
// leaves the process-wide runtime alone.
func Probe(path string) (string, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	v := C.condition_ort_probe(cpath, &cerr)
	if v == nil {
		msg := "cannot load"
		if cerr != nil {
			msg = C.GoString(cerr)
			C.free(unsafe.Pointer(cerr))
		}
		return "", errors.New(msg)
	}
	defer C.free(unsafe.Pointer(v))
	return C.GoString(v), nil
}
