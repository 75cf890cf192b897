//go:build linux || darwin

package ort

/*
#cgo linux LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int (*condition_malloc_trim_fn)(size_t);

// condition_malloc_trim calls the C library's malloc_trim(0) where it has
// one (glibc) and reports whether it did.
static int condition_malloc_trim(void) {
	condition_malloc_trim_fn f = (condition_malloc_trim_fn)dlsym(RTLD_DEFAULT, "malloc_trim");
	if (f == NULL) {
		return 0;
	}
	f(0);
	return 1;
}
*/
import "C"

// ReleaseFreed hands back to the system the memory that closed sessions
// freed and that the C allocator keeps for later allocations: glibc keeps
// most of a closed session's weights (hundreds of megabytes for a CLIP
// tower) in its heap, where only C allocations can reuse them. It calls
// malloc_trim where the C library has it (glibc) and reports whether it
// did; elsewhere it does nothing. It takes a few milliseconds; call it
// after closing sessions, when what comes next is not another session of
// the same size.
func ReleaseFreed() bool { return C.condition_malloc_trim() != 0 }
