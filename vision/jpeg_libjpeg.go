//go:build cgo && libjpeg

package vision

/*
#cgo LDFLAGS: -ljpeg

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

// JCS_EXT_RGBA (RGB with alpha 0xFF, straight into an *image.RGBA) is a
// libjpeg-turbo extension.
#ifndef JCS_ALPHA_EXTENSIONS
#error "the libjpeg build tag needs libjpeg-turbo's jpeglib.h (Debian: libjpeg62-turbo-dev)"
#endif

#define CJ_STR2(x) #x
#define CJ_STR(x) CJ_STR2(x)

// Progressive files with more scans than this are refused: real encoders
// write a few dozen at most, and each scan is a pass over the whole image.
#define CJ_MAX_SCANS 1000

// cj_state is one decompression: libjpeg's object, an error manager that
// longjmps back into the cj_* function that called libjpeg, a source
// manager over memory that the Go side keeps pinned, and a scan limit.
typedef struct {
	struct jpeg_decompress_struct cinfo;
	struct jpeg_error_mgr jerr;
	struct jpeg_source_mgr src;
	struct jpeg_progress_mgr progress;
	jmp_buf jump;
	int created;   // jpeg_create_decompress has run
	int eof;       // the error was the data ending early
	int width, height, comps;
	char msg[JMSG_LENGTH_MAX];
} cj_state;

// cj_error_exit replaces libjpeg's, which would print and exit(): it keeps
// the message and longjmps to the setjmp of the cj_* function under way,
// never through a Go frame. cinfo is the first member of cj_state, so the
// state is found from it.
static void cj_error_exit(j_common_ptr c) {
	cj_state *s = (cj_state *)c;
	s->eof = c->err->msg_code == JERR_INPUT_EOF;
	c->err->format_message(c, s->msg);
	longjmp(s->jump, 1);
}

// Warnings (corrupt data that libjpeg recovers from) are not printed:
// Pillow silences them too and keeps the image.
static void cj_output_message(j_common_ptr c) { (void)c; }

static void cj_init_source(j_decompress_ptr c) { (void)c; }
static void cj_term_source(j_decompress_ptr c) { (void)c; }

// All the data is in the buffer from the start: being asked for more means
// the file ended early. Pillow's decoder fails then ("image file is
// truncated"); libjpeg's own memory source would invent an EOI instead.
static boolean cj_fill_input_buffer(j_decompress_ptr c) {
	ERREXIT(c, JERR_INPUT_EOF);
	return FALSE;
}

static void cj_skip_input_data(j_decompress_ptr c, long n) {
	struct jpeg_source_mgr *src = c->src;
	if (n <= 0) {
		return;
	}
	if ((size_t)n > src->bytes_in_buffer) {
		src->next_input_byte += src->bytes_in_buffer;
		src->bytes_in_buffer = 0;
		ERREXIT(c, JERR_INPUT_EOF);
	}
	src->next_input_byte += n;
	src->bytes_in_buffer -= (size_t)n;
}

static void cj_progress(j_common_ptr c) {
	cj_state *s = (cj_state *)c;
	if (s->cinfo.input_scan_number > CJ_MAX_SCANS) {
		snprintf(s->msg, sizeof s->msg, "more than %d progressive scans", CJ_MAX_SCANS);
		s->eof = 0;
		longjmp(s->jump, 1);
	}
}

static cj_state *cj_new(void) {
	return calloc(1, sizeof(cj_state));
}

// cj_free releases everything libjpeg holds; s may be NULL.
static void cj_free(cj_state *s) {
	if (s == NULL) {
		return;
	}
	if (s->created) {
		jpeg_destroy_decompress(&s->cinfo);
	}
	free(s);
}

// cj_header reads the markers up to the first scan of data[:n], which must
// stay where it is until cj_free. It returns 0 with width, height and comps
// set, or -1 with msg set. Only 8-bit files get this far (the library is
// built for 8 bits and refuses others in jpeg_read_header).
static int cj_header(cj_state *s, const unsigned char *data, size_t n) {
	struct jpeg_decompress_struct *c = &s->cinfo;
	int r;
	if (setjmp(s->jump)) {
		return -1;
	}
	c->err = jpeg_std_error(&s->jerr);
	s->jerr.error_exit = cj_error_exit;
	s->jerr.output_message = cj_output_message;
	jpeg_create_decompress(c);
	s->created = 1;

	s->src.init_source = cj_init_source;
	s->src.fill_input_buffer = cj_fill_input_buffer;
	s->src.skip_input_data = cj_skip_input_data;
	s->src.resync_to_restart = jpeg_resync_to_restart;
	s->src.term_source = cj_term_source;
	s->src.next_input_byte = data;
	s->src.bytes_in_buffer = n;
	c->src = &s->src;

	s->progress.progress_monitor = cj_progress;
	c->progress = &s->progress;

	// As Pillow: skip table-only datastreams before the image.
	do {
		r = jpeg_read_header(c, FALSE);
	} while (r == JPEG_HEADER_TABLES_ONLY);
	if (r != JPEG_HEADER_OK) {
		snprintf(s->msg, sizeof s->msg, "no image in the data");
		return -1;
	}
	s->width = (int)c->image_width;
	s->height = (int)c->image_height;
	s->comps = c->num_components;
	return 0;
}

// cj_decode decodes the image whose header cj_header read into out (rows of
// stride bytes): gray for 1 component, RGBA (alpha 0xFF) for 3, CMYK
// inverted (Pillow's "CMYK;I" raw mode) for 4, scaled by 1/scale in the
// DCT (scale 1, 2, 4 or 8; each side rounded up, as Pillow's draft sizes
// them). It returns 0, or -1 with msg set.
static int cj_decode(cj_state *s, unsigned char *out, size_t stride, int scale) {
	int w = (s->width + scale - 1) / scale, h = (s->height + scale - 1) / scale;
	struct jpeg_decompress_struct *c = &s->cinfo;
	int bpp;
	if (setjmp(s->jump)) {
		return -1;
	}
	switch (s->comps) {
	case 1:
		c->out_color_space = JCS_GRAYSCALE;
		bpp = 1;
		break;
	case 3:
		c->out_color_space = JCS_EXT_RGBA;
		bpp = 4;
		break;
	case 4:
		c->out_color_space = JCS_CMYK;
		bpp = 4;
		break;
	default:
		snprintf(s->msg, sizeof s->msg, "%d components", s->comps);
		return -1;
	}
	// libjpeg's defaults, which Pillow keeps, draft() or not: its draft
	// (decoderconfig (scale, 0)) only sets scale_denom.
	c->dct_method = JDCT_ISLOW;
	c->do_fancy_upsampling = TRUE;
	c->scale_num = 1;
	c->scale_denom = (unsigned int)scale;

	jpeg_start_decompress(c);
	if ((int)c->output_width != w || (int)c->output_height != h ||
		c->output_components != bpp) {
		snprintf(s->msg, sizeof s->msg, "decoder output %ux%u with %d components, want %dx%d with %d",
			c->output_width, c->output_height, c->output_components, w, h, bpp);
		return -1;
	}
	while (c->output_scanline < c->output_height) {
		JSAMPROW rows[16];
		JDIMENSION y0 = c->output_scanline, k, got;
		JDIMENSION want = c->output_height - y0;
		if (want > 16) {
			want = 16;
		}
		for (k = 0; k < want; k++) {
			rows[k] = out + (size_t)(y0 + k) * stride;
		}
		got = jpeg_read_scanlines(c, rows, want);
		if (got == 0) { // only a suspending source returns no rows
			snprintf(s->msg, sizeof s->msg, "no rows decoded at row %u", y0);
			return -1;
		}
		if (s->comps == 4) {
			for (k = 0; k < got; k++) {
				unsigned char *p = rows[k];
				size_t i, m = (size_t)w * 4;
				for (i = 0; i < m; i++) {
					p[i] = (unsigned char)~p[i];
				}
			}
		}
	}
	jpeg_finish_decompress(c);
	return 0;
}

// cj_name names the library from the version macros of its headers.
static const char *cj_name(void) {
#ifdef LIBJPEG_TURBO_VERSION
	return "libjpeg-turbo " CJ_STR(LIBJPEG_TURBO_VERSION) " (libjpeg API " CJ_STR(JPEG_LIB_VERSION) ")";
#else
	return "libjpeg (API " CJ_STR(JPEG_LIB_VERSION) ")";
#endif
}
*/
import "C"

import (
	"fmt"
	"image"
	"io"
	"runtime"
	"unsafe"
)

// jpegExact reports whether Decode's JPEG pixels are Pillow's bit for bit:
// with the libjpeg build tag they come from the same libjpeg(-turbo), with
// the settings Pillow's JpegDecode.c uses.
func jpegExact() bool { return true }

// CanDraft reports whether Decode honours DecodeOptions.Draft: yes in this
// build, whose libjpeg scales JPEGs in the DCT.
func CanDraft() bool { return true }

// JPEGDecoder names the JPEG decoder this build of Decode uses, for job
// metadata: here libjpeg through cgo, named from the version macros of the
// headers it was built with, such as "libjpeg-turbo 2.1.5 (libjpeg API 62)".
func JPEGDecoder() string { return jpegDecoderName }

var jpegDecoderName = C.GoString(C.cj_name())

// decodeLibjpeg decodes a JPEG with libjpeg as Pillow 9.4 does (JpegDecode.c:
// output RGB for 3 components, gray for 1, inverted CMYK for 4; JDCT_ISLOW,
// fancy upsampling). With draft > 0 it scales the image down in the DCT as
// Pillow's Image.draft("RGB", (draft, draft)) does before loading (see
// draftScale); with 0, no scaling. It returns *image.RGBA (opaque),
// *image.Gray or *image.CMYK.
//
// It returns nil, nil to leave the file to image/jpeg: when libjpeg cannot
// read the header (12-bit and lossless files, which Pillow refuses too, and
// broken headers, whose errors image/jpeg words as before) or the file has
// 2 or more than 4 components. An image over limit pixels (when limit > 0)
// is a *TooLargeError, found before any pixel buffer is allocated.
//
// Decode calls it only once image/jpeg has read the header, so files that
// image/jpeg refuses there (arithmetic coding, unusual chroma subsampling)
// stay refused, although libjpeg, and so Pillow, would decode them.
func decodeLibjpeg(data []byte, limit int64, draft int) (image.Image, error) {
	if len(data) == 0 {
		return nil, nil
	}
	s := C.cj_new()
	if s == nil {
		return nil, fmt.Errorf("libjpeg: out of memory")
	}
	defer C.cj_free(s)
	// libjpeg reads data across calls: it stays pinned until cj_free.
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&data[0])

	if C.cj_header(s, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data))) != 0 {
		return nil, nil
	}
	w, h := int(s.width), int(s.height)
	if w <= 0 || h <= 0 {
		return nil, nil
	}
	if limit > 0 && int64(w)*int64(h) > limit {
		return nil, &TooLargeError{Format: "jpeg", Width: w, Height: h, Limit: limit}
	}
	if s.comps != 1 && s.comps != 3 && s.comps != 4 {
		return nil, nil
	}
	scale := draftScale(w, h, draft)
	r := image.Rect(0, 0, (w+scale-1)/scale, (h+scale-1)/scale)
	// Every byte of pix is written: rows of stride bytes with no gap.
	img, pix, stride := newDecoded(int(s.comps), r)
	if C.cj_decode(s, (*C.uchar)(unsafe.Pointer(&pix[0])), C.size_t(stride), C.int(scale)) != 0 {
		Release(img)
		msg := C.GoString(&s.msg[0])
		if s.eof != 0 {
			return nil, fmt.Errorf("libjpeg: %s: %w", msg, io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("libjpeg: %s", msg)
	}
	return img, nil
}
