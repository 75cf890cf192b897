package tensorio

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var npyMagic = []byte("\x93NUMPY")

// npyDescr maps dtypes to NumPy's descr strings (little-endian).
var npyDescr = map[DType]string{
	DTypeF64: "<f8", DTypeF32: "<f4", DTypeF16: "<f2", DTypeI64: "<i8", DTypeI32: "<i4",
	DTypeI16: "<i2", DTypeI8: "|i1", DTypeU8: "|u1", DTypeBool: "|b1",
}

func descrDType(descr string) (DType, bool) {
	// Single-byte types may be written with any byte-order mark.
	switch descr {
	case "<i1", ">i1", "=i1", "i1":
		return DTypeI8, true
	case "<u1", ">u1", "=u1", "u1":
		return DTypeU8, true
	case "<b1", ">b1", "=b1", "b1", "?":
		return DTypeBool, true
	}
	for d, s := range npyDescr {
		if s == descr {
			return d, true
		}
	}
	return "", false
}

var (
	reDescr   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	reFortran = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	reShape   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// ParseNPYHeader parses the header at the start of a .npy file (format
// versions 1, 2 and 3, C order, little-endian): the dtype, the shape, and
// the offset of the data. b need hold only the header.
func ParseNPYHeader(b []byte) (DType, []int, int, error) {
	if len(b) < 10 || !bytes.Equal(b[:6], npyMagic) {
		return "", nil, 0, fmt.Errorf("npy: not a .npy file (bad magic)")
	}
	major := b[6]
	var hlen, start int
	switch major {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return "", nil, 0, fmt.Errorf("npy: truncated header")
		}
		hlen, start = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return "", nil, 0, fmt.Errorf("npy: unsupported format version %d", major)
	}
	if hlen < 0 || start+hlen > len(b) {
		return "", nil, 0, fmt.Errorf("npy: truncated header")
	}
	hdr := string(b[start : start+hlen])
	m := reDescr.FindStringSubmatch(hdr)
	if m == nil {
		return "", nil, 0, fmt.Errorf("npy: header has no descr: %q", hdr)
	}
	dt, ok := descrDType(m[1])
	if !ok {
		return "", nil, 0, fmt.Errorf("npy: unsupported dtype %q (want little-endian f2/f4/f8/i1/i2/i4/i8/u1/b1)", m[1])
	}
	if f := reFortran.FindStringSubmatch(hdr); f == nil || f[1] == "True" {
		return "", nil, 0, fmt.Errorf("npy: Fortran-order or unspecified order is not supported (save with C order)")
	}
	s := reShape.FindStringSubmatch(hdr)
	if s == nil {
		return "", nil, 0, fmt.Errorf("npy: header has no shape: %q", hdr)
	}
	shape := []int{}
	for _, p := range strings.Split(s[1], ",") {
		p = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(p), "L"))
		if p == "" {
			continue
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 1<<40 {
			return "", nil, 0, fmt.Errorf("npy: bad shape (%s)", s[1])
		}
		shape = append(shape, v)
	}
	return dt, shape, start + hlen, nil
}

// DecodeNPY decodes a .npy file held in memory (format versions 1, 2 and 3,
// C order, little-endian).
func DecodeNPY(b []byte) (Tensor, error) {
	dt, shape, off, err := ParseNPYHeader(b)
	if err != nil {
		return Tensor{}, err
	}
	n := 1
	for _, d := range shape {
		if d > 0 && n > len(b)/d {
			return Tensor{}, fmt.Errorf("npy: shape %v needs more data than the file holds", shape)
		}
		n *= d
	}
	data := b[off:]
	if want := n * dt.Size(); len(data) != want {
		return Tensor{}, fmt.Errorf("npy: %d data bytes for shape %v of %s (want %d)", len(data), shape, dt, want)
	}
	d, err := decodeLE(dt, data, n)
	if err != nil {
		return Tensor{}, fmt.Errorf("npy: %w", err)
	}
	return Tensor{DType: dt, Shape: shape, Data: d}, nil
}

// ReadNPY reads a .npy file.
func ReadNPY(path string) (Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Tensor{}, fmt.Errorf("npy: %w", err)
	}
	t, err := DecodeNPY(b)
	if err != nil {
		return Tensor{}, fmt.Errorf("%w (file %q)", err, path)
	}
	return t, nil
}

// NPYHeader returns the .npy (version 1.0) header of an array of dtype and
// shape: magic, version, length and the dict, padded with spaces to size
// bytes (a multiple of 64), or, with size 0, to the next 64-byte boundary
// as NumPy writes it. A header written ahead of rows whose count is known
// only later keeps a fixed size.
func NPYHeader(dtype DType, shape []int, size int) ([]byte, error) {
	descr, ok := npyDescr[dtype]
	if !ok {
		return nil, fmt.Errorf("npy: dtype %s has no NumPy equivalent", dtype)
	}
	var sh strings.Builder
	for i, d := range shape {
		if i > 0 {
			sh.WriteString(", ")
		}
		sh.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		sh.WriteString(",")
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, sh.String())
	total := 10 + len(hdr) + 1
	pad := (64 - total%64) % 64
	if size > 0 {
		if size%64 != 0 || total > size {
			return nil, fmt.Errorf("npy: a header of %d bytes does not fit in %d", total, size)
		}
		pad = size - total
	}
	hdr += strings.Repeat(" ", pad) + "\n"
	out := make([]byte, 0, 10+len(hdr))
	out = append(out, npyMagic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(hdr)))
	return append(out, hdr...), nil
}

// EncodeNPY returns the .npy (version 1.0) encoding of t.
func EncodeNPY(t Tensor) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	out, err := NPYHeader(t.DType, t.Shape, 0)
	if err != nil {
		return nil, err
	}
	return encodeLE(out, t), nil
}

// WriteNPY writes t to path as .npy atomically.
func WriteNPY(path string, t Tensor) error {
	b, err := EncodeNPY(t)
	if err != nil {
		return fmt.Errorf("%w (writing %q)", err, path)
	}
	return WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// EncodeNPZ returns an uncompressed .npz archive (as numpy.savez writes)
// holding one <name>.npy per tensor, in sorted name order.
func EncodeNPZ(tensors map[string]Tensor) ([]byte, error) {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		b, err := EncodeNPY(tensors[n])
		if err != nil {
			return nil, fmt.Errorf("%w (tensor %q)", err, n)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n + ".npy", Method: zip.Store})
		if err != nil {
			return nil, fmt.Errorf("npz: %w", err)
		}
		if _, err := w.Write(b); err != nil {
			return nil, fmt.Errorf("npz: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteNPZ writes tensors to path as an .npz archive atomically.
func WriteNPZ(path string, tensors map[string]Tensor) error {
	b, err := EncodeNPZ(tensors)
	if err != nil {
		return fmt.Errorf("%w (writing %q)", err, path)
	}
	return WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// ReadNPZ reads every array of an .npz archive (stored or deflated).
func ReadNPZ(path string) (map[string]Tensor, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	defer zr.Close()
	out := map[string]Tensor{}
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".npy") {
			continue
		}
		if f.UncompressedSize64 > 1<<36 {
			return nil, fmt.Errorf("npz: member %q too large (file %q)", f.Name, path)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("npz: %w (file %q)", err, path)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("npz: member %q: %w (file %q)", f.Name, err, path)
		}
		t, err := DecodeNPY(b)
		if err != nil {
			return nil, fmt.Errorf("%w (member %q of %q)", err, f.Name, path)
		}
		out[strings.TrimSuffix(f.Name, ".npy")] = t
	}
	return out, nil
}
