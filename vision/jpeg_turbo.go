//go:build cgo && !libjpeg

package vision

/*
#cgo LDFLAGS: -ldl

#define _GNU_SOURCE // dladdr

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// The TurboJPEG API of libjpeg-turbo (libturbojpeg.so.0), declared here
// rather than taken from turbojpeg.h so that the build needs no headers:
// the library is found when the program runs, or not at all. The values
// are turbojpeg.h's, part of the library's stable ABI since libjpeg-turbo
// 1.4 (2.1.5 is the version tested here).
typedef void *tj_handle;
#define TJ_PF_GRAY 6
#define TJ_PF_RGBA 7
#define TJ_PF_CMYK 11
#define TJ_CS_RGB 0
#define TJ_CS_YCBCR 1
#define TJ_CS_GRAY 2
#define TJ_CS_CMYK 3
#define TJ_CS_YCCK 4
#define TJ_ERR_WARNING 0
// TJFLAG_LIMITSCANS: refuse progressive files of more than 500 scans.
#define TJ_FLAG_LIMITSCANS 32768

static struct {
	tj_handle (*init_decompress)(void);
	int (*decompress_header3)(tj_handle, const unsigned char *, unsigned long, int *, int *, int *, int *);
	int (*decompress2)(tj_handle, const unsigned char *, unsigned long, unsigned char *, int, int, int, int, int);
	int (*destroy)(tj_handle);
	char *(*error_str2)(tj_handle);
	int (*error_code)(tj_handle);
	char path[4096];
} tj;

// tj_load opens the library and finds its functions: NULL when it is
// usable, else why not (dlerror's words). Called once.
static const char *tj_load(const char *name) {
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	Dl_info info;
	if (lib == NULL) {
		return dlerror();
	}
#define TJ_SYM(field, sym) \
	*(void **)(&tj.field) = dlsym(lib, sym); \
	if (tj.field == NULL) { return "no " sym " in the library"; }
	TJ_SYM(init_decompress, "tjInitDecompress")
	TJ_SYM(decompress_header3, "tjDecompressHeader3")
	TJ_SYM(decompress2, "tjDecompress2")
	TJ_SYM(destroy, "tjDestroy")
	TJ_SYM(error_str2, "tjGetErrorStr2")
	TJ_SYM(error_code, "tjGetErrorCode")
#undef TJ_SYM
	if (dladdr(*(void **)(&tj.decompress2), &info) != 0 && info.dli_fname != NULL) {
		strncpy(tj.path, info.dli_fname, sizeof tj.path - 1);
	}
	return NULL;
}

// tj_path is the file the library was loaded from, or "".
static const char *tj_path(void) { return tj.path; }

// tj_result is one decode's outcome: the header's size and components, and
// the library's message for an error or the last warning.
typedef struct {
	int width, height, comps;
	int eof; // the error is the data ending early
	char msg[256];
} tj_result;

// The messages of libjpeg's warnings (jerror.h's JWRN_ codes): corrupt data
// it recovers from, as Pillow does.
static const char *tj_warnings[] = {
	"Corrupt JPEG data",
	"Unknown Adobe color transform code",
	"Warning: unknown JFIF revision number",
	"Invalid SOS parameters for sequential JPEG",
	"Inconsistent progression sequence",
	"Application transferred too many scanlines",
	NULL,
};
#define TJ_EOF_MSG "Premature end of JPEG file"

// tj_failed sorts out a call that returned -1: 0 when the library only
// warned (the output is whole), else -1 with msg set (and eof when the data
// ended early). tjGetErrorCode says TJERR_WARNING once any warning was
// emitted, even when a fatal error followed, so a warning is also known by
// its message, the last one the library formatted.
static int tj_failed(tj_handle h, tj_result *r) {
	const char *m = tj.error_str2(h);
	int i;
	strncpy(r->msg, m != NULL ? m : "unknown error", sizeof r->msg - 1);
	r->msg[sizeof r->msg - 1] = 0;
	if (tj.error_code(h) != TJ_ERR_WARNING) {
		return -1;
	}
	if (strncmp(r->msg, TJ_EOF_MSG, strlen(TJ_EOF_MSG)) == 0) {
		r->eof = 1;
		return -1;
	}
	for (i = 0; tj_warnings[i] != NULL; i++) {
		if (strncmp(r->msg, tj_warnings[i], strlen(tj_warnings[i])) == 0) {
			return 0;
		}
	}
	return -1;
}

static tj_handle tj_new(void) { return tj.init_decompress(); }
static void tj_free(tj_handle h) { if (h != NULL) tj.destroy(h); }

// tj_header reads data[:n]'s header: 0 with width, height and comps set
// (comps 0 for a colour space other than gray, RGB, YCbCr, CMYK and YCCK),
// or -1 when the library cannot say (msg set).
static int tj_header(tj_handle h, const unsigned char *data, unsigned long n, tj_result *r) {
	int subsamp, cs = -1;
	if (tj.decompress_header3(h, data, n, &r->width, &r->height, &subsamp, &cs) != 0 && tj_failed(h, r) != 0) {
		return -1;
	}
	switch (cs) {
	case TJ_CS_GRAY:
		r->comps = 1;
		break;
	case TJ_CS_RGB:
	case TJ_CS_YCBCR:
		r->comps = 3;
		break;
	case TJ_CS_CMYK:
	case TJ_CS_YCCK:
		r->comps = 4;
		break;
	default:
		r->comps = 0;
	}
	return 0;
}

// tj_decode decodes data[:n] into out (w×h, rows of pitch bytes) in the
// pixel format of r->comps (gray, RGBA with alpha 0xFF, or CMYK inverted
// as Pillow's "CMYK;I" raw mode): libjpeg's accurate integer IDCT and
// fancy upsampling, its defaults, which Pillow keeps. w and h are the
// header's sides divided by the DCT scale and rounded up, which makes the
// library pick that scale. It returns 0 (also when the library recovered
// from corrupt data), or -1 with msg set.
static int tj_decode(tj_handle h, const unsigned char *data, unsigned long n, unsigned char *out, int w, int pitch, int hgt, tj_result *r) {
	int pf;
	switch (r->comps) {
	case 1: pf = TJ_PF_GRAY; break;
	case 3: pf = TJ_PF_RGBA; break;
	case 4: pf = TJ_PF_CMYK; break;
	default: return -1;
	}
	if (tj.decompress2(h, data, n, out, w, pitch, hgt, pf, TJ_FLAG_LIMITSCANS) != 0 && tj_failed(h, r) != 0) {
		return -1;
	}
	if (r->comps == 4) {
		int y;
		for (y = 0; y < hgt; y++) {
			unsigned char *p = out + (size_t)y * pitch;
			size_t i, m = (size_t)w * 4;
			for (i = 0; i < m; i++) {
				p[i] = (unsigned char)~p[i];
			}
		}
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"image"
	"io"
	"path/filepath"
	"sync"
	"unsafe"
)

// turboNames are the names the TurboJPEG library is looked for under, in
// order: the library's soname (Debian's package libturbojpeg0, Ubuntu's
// libturbojpeg, Fedora's turbojpeg), then the development link.
var turboNames = []string{"libturbojpeg.so.0", "libturbojpeg.so"}

var (
	turboOnce sync.Once
	turboOK   bool
	turboName string

	// jpegGoOnly makes Decode do without the library, leaving every JPEG
	// to the Go decoders (jpegdec, image/jpeg); tests set it to check
	// both ways in one build.
	jpegGoOnly bool
)

// loadTurbo looks for the library once.
func loadTurbo() bool {
	turboOnce.Do(func() {
		for _, name := range turboNames {
			cname := C.CString(name)
			why := C.tj_load(cname)
			C.free(unsafe.Pointer(cname))
			if why == nil { // else dlerror's words: not installed, mostly
				turboOK = true
				path := C.GoString(C.tj_path())
				if real, err := filepath.EvalSymlinks(path); err == nil {
					path = real
				}
				// The file's name, not its folder: the name goes into the
				// settings a resumed job compares, across machines.
				turboName = "libjpeg-turbo (TurboJPEG API, " + filepath.Base(path) + ")"
				return
			}
		}
	})
	return turboOK && !jpegGoOnly
}

// jpegExact reports whether all of Decode's JPEG pixels are Pillow's bit
// for bit: yes where libjpeg-turbo's TurboJPEG library was found when the
// program ran (the same library and settings as Pillow's). Without it,
// baseline and progressive files still are, through jpegdec (see
// decodeGoJPEG), but CMYK and other files go to Go's image/jpeg, whose
// IDCT differs: they land within a few 8-bit levels.
func jpegExact() bool { return loadTurbo() }

// CanDraft reports whether Decode honours DecodeOptions.Draft: where
// libjpeg-turbo was found at run time, which scales JPEGs in the DCT; with
// image/jpeg JPEGs decode at full size.
func CanDraft() bool { return loadTurbo() }

// JPEGDecoder names the JPEG decoder Decode uses, for job metadata and the
// settings a resumed job must share: in this build libjpeg-turbo's
// TurboJPEG library where one is installed (libturbojpeg.so.0, Debian's
// package libturbojpeg0), named with the file it was loaded from, such as
// "libjpeg-turbo (TurboJPEG API, libturbojpeg.so.0.2.0)"; else Go code,
// "Go (libjpeg-exact baseline and progressive; image/jpeg for CMYK and
// others)": this package's decoder for baseline and progressive files,
// with libjpeg-turbo's arithmetic, and Go's image/jpeg for the rest.
func JPEGDecoder() string {
	if loadTurbo() {
		return turboName
	}
	return goJPEGName
}

// decodeLibjpeg decodes a JPEG with libjpeg-turbo as Pillow 9.4 does
// (JpegDecode.c: RGB for 3 components, gray for 1, inverted CMYK for 4;
// JDCT_ISLOW, fancy upsampling), through the TurboJPEG library found at run
// time. With draft > 0 it scales the image down in the DCT as Pillow's
// Image.draft("RGB", (draft, draft)) does before loading (see draftScale).
// It returns *image.RGBA (opaque), *image.Gray or *image.CMYK.
//
// A file that ends before its EOI marker is an error wrapping
// io.ErrUnexpectedEOF, as in Pillow ("image file is truncated"), although
// the library would finish it in gray. Corrupt data the library recovers
// from keeps its image, as in Pillow. Progressive files of more than 500
// scans are refused.
//
// It returns nil, nil to leave the file to image/jpeg: without the library,
// and when the library cannot read the header (12-bit and lossless files,
// which Pillow refuses too; subsamplings TurboJPEG does not name, such as
// 4:1:0) or the file has 2 or more than 4 components. An image over limit
// pixels (when limit > 0) is a *TooLargeError, found before any pixel
// buffer is allocated.
func decodeLibjpeg(data []byte, limit int64, draft int) (image.Image, error) {
	if len(data) == 0 || !loadTurbo() {
		return nil, nil
	}
	h := C.tj_new()
	if h == nil {
		return nil, fmt.Errorf("libjpeg-turbo: out of memory")
	}
	defer C.tj_free(h)
	src, n := (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data))
	var r C.tj_result
	if C.tj_header(h, src, n, &r) != 0 {
		return nil, nil
	}
	w, hgt := int(r.width), int(r.height)
	if w <= 0 || hgt <= 0 || r.comps == 0 {
		return nil, nil
	}
	if limit > 0 && int64(w)*int64(hgt) > limit {
		return nil, &TooLargeError{Format: "jpeg", Width: w, Height: hgt, Limit: limit}
	}
	if !jpegComplete(data) {
		return nil, fmt.Errorf("libjpeg-turbo: the data ends before the image's EOI marker: %w", io.ErrUnexpectedEOF)
	}
	scale := draftScale(w, hgt, draft)
	rect := image.Rect(0, 0, (w+scale-1)/scale, (hgt+scale-1)/scale)
	// Every byte of pix is written: rows of stride bytes with no gap.
	img, pix, stride := newDecoded(int(r.comps), rect)
	if C.tj_decode(h, src, n, (*C.uchar)(unsafe.Pointer(&pix[0])), C.int(rect.Dx()), C.int(stride), C.int(rect.Dy()), &r) != 0 {
		Release(img)
		if r.eof != 0 {
			return nil, fmt.Errorf("libjpeg-turbo: %s: %w", C.GoString(&r.msg[0]), io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("libjpeg-turbo: %s", C.GoString(&r.msg[0]))
	}
	return img, nil
}
