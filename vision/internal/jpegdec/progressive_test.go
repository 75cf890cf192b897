package jpegdec

import (
	"bytes"
	"errors"
	"testing"
)

// scanSegments returns where each scan of data starts (its SOS marker)
// and ends (the marker after its entropy-coded data).
func scanSegments(t *testing.T, data []byte) [][2]int {
	t.Helper()
	var out [][2]int
	for i := 2; i+4 <= len(data) && data[i+1] != markEOI; {
		j := i + 2 + (int(data[i+2])<<8 | int(data[i+3]))
		if data[i+1] == markSOS {
			for j+1 < len(data) && (data[j] != 0xff || data[j+1] == 0 || data[j+1] >= markRST0 && data[j+1] <= markRST7) {
				j++
			}
			out = append(out, [2]int{i, j})
		}
		i = j
	}
	if len(out) == 0 {
		t.Fatal("no scans")
	}
	return out
}

// TestProgressiveInconsistent edits the scans of a progressive file (DC
// first at Al 1, then AC bands at Al 3 and 4, refined in several passes)
// into sequences T.81 G.1.1.1 forbids: each must be an error, not
// ErrUnsupported, so that the file goes to image/jpeg as a corrupt one.
func TestProgressiveInconsistent(t *testing.T) {
	data := readFile(t, "jpegdec/prog_successive_1x1_21x13.jpg")
	if _, err := Decode(data, Options{}); err != nil {
		t.Fatalf("as it is: %v", err)
	}
	scans := scanSegments(t, data)
	// header returns the index of the scan's Ss byte, then Se, Ah|Al.
	header := func(s [2]int) int { return s[0] + 5 + 2*int(data[s[0]+4]) }
	edit := func(scan int, f func(b []byte, ss int)) []byte {
		b := bytes.Clone(data)
		f(b, header(scans[scan]))
		return b
	}
	without := func(scan int) []byte {
		s := scans[scan]
		return append(bytes.Clone(data[:s[0]]), data[s[1]:]...)
	}
	twice := func(scan int) []byte {
		s := scans[scan]
		return append(bytes.Clone(data[:s[1]]), data[s[0]:]...)
	}
	cases := map[string][]byte{
		"DC scan with Se 5":            edit(0, func(b []byte, i int) { b[i+1] = 5 }),
		"AC band from 0":               edit(1, func(b []byte, i int) { b[i] = 0 }),
		"AC band 6..5":                 edit(1, func(b []byte, i int) { b[i] = 6 }),
		"AC band to 64":                edit(2, func(b []byte, i int) { b[i+1] = 64 }),
		"Al 14":                        edit(0, func(b []byte, i int) { b[i+2] = 14 }),
		"refinement Al not Ah-1":       edit(5, func(b []byte, i int) { b[i+2] = 0x42 }),
		"refinement of an uncoded Ah":  edit(5, func(b []byte, i int) { b[i+2] = 0x32 }),
		"first scan of coded band":     edit(5, func(b []byte, i int) { b[i+2] = 0x03 }),
		"AC scan before the DC scan":   without(0),
		"refinement without its first": without(2),
		"first scan twice":             twice(1),
		"refinement twice":             twice(5),
	}
	for name, b := range cases {
		img, err := Decode(b, Options{})
		var fe formatError
		if img != nil || !errors.As(err, &fe) {
			t.Errorf("%s: %T, %v; want a format error", name, img, err)
		}
	}
}

// TestProgressiveLimit checks the pixel limit of a progressive file, met
// before the planes and coefficients are allocated.
func TestProgressiveLimit(t *testing.T) {
	data := readFile(t, "jpegdec/prog_s420_45x31.jpg")
	alloc := func(n int) []byte { t.Fatal("allocated"); return nil }
	var tl *TooLargeError
	if _, err := Decode(data, Options{MaxPixels: 45*31 - 1, Alloc: alloc}); !errors.As(err, &tl) {
		t.Fatalf("%v; want a *TooLargeError", err)
	}
}

// TestProgressiveTruncated cuts progressive files at every length: all
// errors, none panics.
func TestProgressiveTruncated(t *testing.T) {
	for _, name := range []string{"jpegdec/prog_successive_restart_2B_1x1_30x20.jpg", "jpegdec/prog_dc_each_2x2_37x29.jpg"} {
		data := readFile(t, name)
		for n := range len(data) {
			if img, err := Decode(data[:n], Options{}); err == nil || img != nil {
				t.Fatalf("%s cut to %d of %d bytes: %T, %v", name, n, len(data), img, err)
			}
		}
	}
}

// TestProgressiveRestartSampled checks that restart intervals in the
// one-component scans of a component with several blocks an MCU are left
// to another decoder, as in baseline files: image/jpeg counts them
// differently.
func TestProgressiveRestartSampled(t *testing.T) {
	data := readFile(t, "jpegdec/prog_s420_45x31.jpg")
	// A restart interval from the second scan on, the first AC scan.
	at := scanSegments(t, data)[1][0]
	dri := append(append(bytes.Clone(data[:at]), 0xff, markDRI, 0, 4, 0, 1), data[at:]...)
	if _, err := Decode(dri, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("%v; want ErrUnsupported", err)
	}
}
