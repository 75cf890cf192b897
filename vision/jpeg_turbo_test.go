//go:build cgo && !libjpeg

package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goJPEG makes Decode use the Go decoders (jpegdec, image/jpeg) for the
// rest of the test, as on a machine without libjpeg-turbo's TurboJPEG
// library.
func goJPEG(t *testing.T) {
	t.Helper()
	t.Cleanup(withoutLibjpeg())
}

// TestJPEGWithoutTurbo runs the JPEG tests again with the Go decoders of
// machines without the library: the planes they hand over, the golden
// images (bit-identical for baseline and progressive files, which jpegdec
// decodes; within their bound in 8-bit levels for those left to
// image/jpeg), truncated and corrupt files, pooled buffers. Then once more
// with image/jpeg alone.
func TestJPEGWithoutTurbo(t *testing.T) {
	if !loadTurbo() {
		t.Logf("already without libjpeg-turbo: %s", JPEGDecoder())
	}
	goJPEG(t)
	if jpegExact() || CanDraft() || JPEGDecoder() != goJPEGName {
		t.Fatalf("Go decoders forced: exact %v, draft %v, decoder %q", jpegExact(), CanDraft(), JPEGDecoder())
	}
	all := func(t *testing.T) {
		t.Run("decoder", TestJPEGDecoder)
		t.Run("rgb", TestGoldenRGB)
		t.Run("pixel_values", TestGoldenPixelValues)
		t.Run("truncated", TestDecodeJPEGTruncated)
		t.Run("corrupt", TestDecodeJPEGCorrupt)
		t.Run("limit", TestDecodeBomb)
		t.Run("release", TestReleaseReuse)
		t.Run("draft", TestDraftIsPillows)
	}
	t.Run("jpegdec", all)
	jpegStdlib = true
	defer func() { jpegStdlib = false }()
	t.Run("image-jpeg", all)
}

// TestTurboTruncatedAfterThumbnail cuts, inside its scan, a JPEG whose EXIF
// segment holds a thumbnail with its own EOI marker: TurboJPEG's memory
// source would finish the image in gray, and the marker walk must not take
// the thumbnail's EOI for the image's, so Decode fails as Pillow does.
func TestTurboTruncatedAfterThumbnail(t *testing.T) {
	if !loadTurbo() {
		t.Skipf("the TurboJPEG library is not installed here (%s): Debian package libturbojpeg0", JPEGDecoder())
	}
	full := withThumbnail(t, encode(t, testImage(64, 48), "jpeg"))
	img, err := Decode(full, DecodeOptions{})
	if err != nil || img.Bounds() != image.Rect(0, 0, 64, 48) {
		t.Fatalf("whole file: %v, %v", img, err)
	}
	sos := bytes.LastIndex(full, []byte{0xff, 0xda})
	for _, n := range []int{sos + 30, len(full) - 40, len(full) - 2, len(full) - 1} {
		img, err := Decode(full[:n], DecodeOptions{})
		if img != nil || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut to %d of %d bytes: %T, %v; want an error wrapping io.ErrUnexpectedEOF", n, len(full), img, err)
		}
	}
}

// withoutLibjpeg makes Decode do without the TurboJPEG library until the
// function it returns is called.
func withoutLibjpeg() (restore func()) {
	was := jpegGoOnly
	jpegGoOnly = true
	return func() { jpegGoOnly = was }
}

// canForceGo reports whether withoutLibjpeg works in this build.
func canForceGo() bool { return true }

// TestGoJPEGIsTurbo decodes baseline and progressive JPEGs with jpegdec,
// as Decode does without the library, and with TurboJPEG, the reference,
// and wants the same RGB bit for bit: the golden JPEG fixtures, the
// cjpeg-made files of testdata/images/jpegdec (every chroma sampling
// libjpeg-turbo writes, sizes that are not whole MCUs, restart intervals,
// non-interleaved scans, qualities 1 to 100, 16-bit tables, optimized
// Huffman tables; progressive files of every sampling and of scan scripts
// for spectral selection and successive approximation), image/jpeg-encoded
// 4:2:0 and gray images of many sizes and qualities; and the benchmark
// photos where they are (CONDITION_BENCH_PHOTOS, else
// /tmp/condition-photos: scripts/bench_photos/make_photos.py), as they
// are and made progressive (jpegtran -progressive, where it is installed).
// Only CMYK files, and progressive ones whose first AC coefficients are not
// fully coded (which libjpeg smooths), may be left to image/jpeg.
func TestGoJPEGIsTurbo(t *testing.T) {
	if !loadTurbo() {
		t.Skipf("the TurboJPEG library, the reference, is not installed here (%s): Debian package libturbojpeg0", JPEGDecoder())
	}
	type file struct {
		name string
		data []byte
	}
	var files []file
	photos := os.Getenv("CONDITION_BENCH_PHOTOS")
	if photos == "" {
		photos = "/tmp/condition-photos"
	}
	pats := []string{filepath.Join(goldenDir, "src/jpeg_*.jpg"), filepath.Join(goldenDir, "jpegdec/*.jpg"), filepath.Join(photos, "*.jpg")}
	for i, pat := range pats {
		optional := i == len(pats)-1 // the photos
		names, _ := filepath.Glob(pat)
		if len(names) == 0 && !optional {
			t.Fatalf("committed test data missing: no %s (testdata/images/jpegdec/make.py makes the jpegdec files)", pat)
		}
		for j, n := range names {
			data, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, file{filepath.Base(n), data})
			if optional && j < 20 {
				if prog := progressiveCopy(t, data); prog != nil {
					files = append(files, file{"progressive " + filepath.Base(n), prog})
				}
			}
		}
	}
	for _, sz := range [][2]int{{1, 1}, {2, 3}, {7, 9}, {8, 8}, {9, 17}, {16, 16}, {17, 33}, {31, 15}, {33, 65}, {100, 75}} {
		for _, q := range []int{1, 10, 50, 90, 100} {
			for _, gray := range []bool{false, true} {
				var img image.Image = testImage(sz[0], sz[1])
				if gray {
					g := image.NewGray(img.Bounds())
					draw.Draw(g, g.Rect, img, image.Point{}, draw.Src)
					img = g
				}
				var b bytes.Buffer
				if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: q}); err != nil {
					t.Fatal(err)
				}
				files = append(files, file{fmt.Sprintf("image/jpeg %dx%d q%d gray %v", sz[0], sz[1], q, gray), b.Bytes()})
			}
		}
	}
	same, progressive, fallback := 0, 0, 0
	for _, f := range files {
		ref, err := decodeLibjpeg(f.data, 0, 0)
		if err != nil || ref == nil {
			t.Logf("%s: TurboJPEG does not decode it (%v): no reference", f.name, err)
			continue
		}
		got, err := decodeGoJPEG(f.data, 0)
		if err != nil {
			t.Errorf("%s: %v", f.name, err)
			continue
		}
		if got == nil {
			fallback++
			// Progressive files whose first AC coefficients are not fully
			// coded, which libjpeg smooths, are left to image/jpeg.
			smoothed := strings.HasPrefix(f.name, "prog_unfinished_")
			if kind := jpegKind(f.data); kind == 0xc0 || kind == 0xc1 || kind == 0xc2 && !smoothed {
				if _, isCMYK := ref.(*image.CMYK); !isCMYK {
					t.Errorf("%s: baseline or progressive (SOF 0x%02x, %T from TurboJPEG), left to image/jpeg", f.name, kind, ref)
				}
			}
			continue
		}
		want, w, h := toRGB(nil, ref, nil)
		rgb, gw, gh := toRGB(nil, got, nil)
		if gw != w || gh != h {
			t.Errorf("%s: %dx%d (%T), TurboJPEG %dx%d", f.name, gw, gh, got, w, h)
			continue
		}
		var d diffStats
		for i := range want {
			d.add(float64(rgb[i]), float64(want[i]))
		}
		if d.differ != 0 {
			t.Errorf("%s (%T): %v", f.name, got, d)
			continue
		}
		same++
		if jpegKind(f.data) == 0xc2 {
			progressive++
		}
	}
	t.Logf("%d of %d files bit-identical to TurboJPEG (%d of them progressive), %d left to image/jpeg (CMYK, smoothed progressive)",
		same, len(files), progressive, fallback)
}

// progressiveCopy is data made progressive, losslessly, by jpegtran
// (Debian: libjpeg-turbo-progs), or nil where it is not installed.
func progressiveCopy(t *testing.T, data []byte) []byte {
	path, err := exec.LookPath("jpegtran")
	if err != nil {
		return nil
	}
	cmd := exec.Command(path, "-progressive", "-copy", "none")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jpegtran: %v", err)
	}
	return out
}

// jpegKind is the marker of data's frame header (SOF), or 0.
func jpegKind(data []byte) byte {
	for i := 2; i+4 <= len(data) && data[i] == 0xff; {
		m := data[i+1]
		if m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc {
			return m
		}
		i += 2 + (int(data[i+2])<<8 | int(data[i+3]))
	}
	return 0
}

// TestBogusHuffmanTable checks that the Go decoder judges a Huffman table
// as libjpeg does, when a scan uses it and not before: a table whose
// codes take the all-ones code of a length. The gray JPEG's own DC table
// with one more code of its longest length is such a table, which decodes
// the scan as before (the new code is never used). TurboJPEG, the
// reference, decodes the file with that table defined as table 1, which no
// scan uses, and refuses it as table 0, which the scan uses.
func TestBogusHuffmanTable(t *testing.T) {
	if !loadTurbo() {
		t.Skipf("the TurboJPEG library, the reference, is not installed here (%s): Debian package libturbojpeg0", JPEGDecoder())
	}
	data, err := os.ReadFile(filepath.Join(goldenDir, "src/jpeg_gray_40x30.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	// The DC table 0 of the file's first DHT segment that holds one.
	var counts []byte
	var vals []byte
	for i := 2; i+4 <= len(data) && data[i] == 0xff && counts == nil; {
		n := int(data[i+2])<<8 | int(data[i+3])
		if data[i+1] == 0xc4 {
			seg := data[i+4 : i+2+n]
			for len(seg) >= 17 && counts == nil {
				total := 0
				for _, c := range seg[1:17] {
					total += int(c)
				}
				if seg[0] == 0x00 {
					counts, vals = bytes.Clone(seg[1:17]), bytes.Clone(seg[17:17+total])
				}
				seg = seg[17+total:]
			}
		}
		i += 2 + n
	}
	if counts == nil {
		t.Fatal("no DC table 0 in the gray fixture")
	}
	longest := 15
	for counts[longest] == 0 {
		longest--
	}
	counts[longest]++
	vals = append(vals, vals[len(vals)-1])
	code := 0
	for l := range 16 {
		code = (code + int(counts[l])) << 1
	}
	if code>>(16-longest) != 1<<(longest+1) {
		t.Fatalf("the table with one more %d-bit code does not take its all-ones code (counts %v)", longest+1, counts)
	}
	sos := bytes.Index(data, []byte{0xff, 0xda})
	for _, c := range []struct {
		id   byte
		used bool
	}{{1, false}, {0, true}} {
		seg := []byte{0xff, 0xc4, 0, byte(2 + 17 + len(vals)), c.id}
		seg = slices.Concat(seg, counts, vals)
		file := slices.Concat(data[:sos], seg, data[sos:])
		ref, refErr := decodeLibjpeg(file, 0, 0)
		got, err := decodeGoJPEG(file, 0)
		if err != nil {
			t.Fatalf("table %d: %v", c.id, err)
		}
		if c.used {
			if refErr == nil || ref != nil || got != nil {
				t.Errorf("DC table %d, used: TurboJPEG %T, %v; Go decoder %T (want both to refuse it)", c.id, ref, refErr, got)
			}
			continue
		}
		if refErr != nil || got == nil {
			t.Fatalf("DC table %d, unused: TurboJPEG %v; Go decoder %T (want both to decode it)", c.id, refErr, got)
		}
		want, _, _ := toRGB(nil, ref, nil)
		rgb, _, _ := toRGB(nil, got, nil)
		if !bytes.Equal(rgb, want) {
			t.Errorf("DC table %d, unused: pixels differ from TurboJPEG's", c.id)
		}
	}
}
