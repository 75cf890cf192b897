package tensorio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
)

// maxHeader bounds a safetensors header (the reference implementation uses
// 100 MB), so a corrupt length cannot make us allocate without limit.
const maxHeader = 100 << 20

// TensorInfo describes one tensor in a safetensors header. Begin and End
// are byte offsets relative to the start of the data section.
type TensorInfo struct {
	DType DType
	Shape []int
	Begin int64
	End   int64
}

// Header is a parsed safetensors header: the tensors by name, the
// __metadata__ strings and the offset of the data section in the file.
type Header struct {
	Tensors    map[string]TensorInfo
	Metadata   map[string]string
	DataOffset int64
}

// Names returns the tensor names in data order.
func (h *Header) Names() []string {
	names := make([]string, 0, len(h.Tensors))
	for n := range h.Tensors {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := h.Tensors[names[i]], h.Tensors[names[j]]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return names[i] < names[j]
	})
	return names
}

// ReadSafetensorsHeader reads and checks the header of a safetensors file of
// the given total size (size < 0: unknown, offsets not checked against it).
// It reads only the header, so it suits range requests on large files.
func ReadSafetensorsHeader(r io.ReaderAt, size int64) (*Header, error) {
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n == 0 || n > maxHeader || (size >= 0 && int64(n)+8 > size) {
		return nil, fmt.Errorf("safetensors: header length %d is invalid (file size %d)", n, size)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, 8); err != nil {
		return nil, fmt.Errorf("safetensors: read header: %w", err)
	}
	return parseHeader(buf, size)
}

func parseHeader(buf []byte, size int64) (*Header, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimRight(buf, " \x00"), &raw); err != nil {
		return nil, fmt.Errorf("safetensors: header is not JSON: %w", err)
	}
	h := &Header{Tensors: map[string]TensorInfo{}, DataOffset: 8 + int64(len(buf))}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		var e struct {
			DType   DType   `json:"dtype"`
			Shape   []int   `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		if e.DType.Size() == 0 {
			return nil, fmt.Errorf("safetensors: tensor %q: unsupported dtype %q", name, e.DType)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] {
			return nil, fmt.Errorf("safetensors: tensor %q: bad data_offsets %v", name, e.Offsets)
		}
		n := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && n > (1<<50)/int64(d)) {
				return nil, fmt.Errorf("safetensors: tensor %q: bad shape %v", name, e.Shape)
			}
			n *= int64(d)
		}
		if want := n * int64(e.DType.Size()); e.Offsets[1]-e.Offsets[0] != want {
			return nil, fmt.Errorf("safetensors: tensor %q: %d bytes for shape %v of %s (want %d)",
				name, e.Offsets[1]-e.Offsets[0], e.Shape, e.DType, want)
		}
		if size >= 0 && h.DataOffset+e.Offsets[1] > size {
			return nil, fmt.Errorf("safetensors: tensor %q: data ends at byte %d, past the end of the file (%d bytes)",
				name, h.DataOffset+e.Offsets[1], size)
		}
		if e.Shape == nil {
			e.Shape = []int{}
		}
		h.Tensors[name] = TensorInfo{DType: e.DType, Shape: e.Shape, Begin: e.Offsets[0], End: e.Offsets[1]}
	}
	// Tensors must not overlap.
	names := h.Names()
	for i := 1; i < len(names); i++ {
		if a, b := h.Tensors[names[i-1]], h.Tensors[names[i]]; b.Begin < a.End {
			return nil, fmt.Errorf("safetensors: tensors %q and %q overlap", names[i-1], names[i])
		}
	}
	return h, nil
}

// ReadTensor reads one tensor described by info from r (the whole file).
func (h *Header) ReadTensor(r io.ReaderAt, name string) (Tensor, error) {
	info, ok := h.Tensors[name]
	if !ok {
		return Tensor{}, fmt.Errorf("safetensors: no tensor %q", name)
	}
	b := make([]byte, info.End-info.Begin)
	if _, err := r.ReadAt(b, h.DataOffset+info.Begin); err != nil {
		return Tensor{}, fmt.Errorf("safetensors: read tensor %q: %w", name, err)
	}
	return decodeTensor(name, info, b)
}

func decodeTensor(name string, info TensorInfo, b []byte) (Tensor, error) {
	data, err := decodeLE(info.DType, b, numel(info.Shape))
	if err != nil {
		return Tensor{}, fmt.Errorf("safetensors: tensor %q: %w", name, err)
	}
	return Tensor{DType: info.DType, Shape: append(make([]int, 0, len(info.Shape)), info.Shape...), Data: data}, nil
}

// DecodeSafetensors decodes a whole safetensors file held in memory.
func DecodeSafetensors(b []byte) (map[string]Tensor, map[string]string, error) {
	h, err := ReadSafetensorsHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]Tensor, len(h.Tensors))
	for name, info := range h.Tensors {
		t, err := decodeTensor(name, info, b[h.DataOffset+info.Begin:h.DataOffset+info.End])
		if err != nil {
			return nil, nil, err
		}
		out[name] = t
	}
	return out, h.Metadata, nil
}

// ReadSafetensors reads every tensor and the __metadata__ of a safetensors file.
func ReadSafetensors(path string) (map[string]Tensor, map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	t, m, err := DecodeSafetensors(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (file %q)", err, path)
	}
	return t, m, nil
}

// ReadSafetensorsFunc reads the __metadata__ and only the tensors of a
// safetensors file for which keep returns true: the header first, then each
// kept tensor's bytes, so a few tensors of a multi-gigabyte checkpoint cost
// only their own size.
func ReadSafetensorsFunc(path string, keep func(name string) bool) (map[string]Tensor, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	h, err := ReadSafetensorsHeader(f, st.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("%w (file %q)", err, path)
	}
	out := map[string]Tensor{}
	for name := range h.Tensors {
		if !keep(name) {
			continue
		}
		t, err := h.ReadTensor(f, name)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (file %q)", err, path)
		}
		out[name] = t
	}
	return out, h.Metadata, nil
}

// EncodeSafetensors returns the safetensors encoding of tensors (in sorted
// name order, header padded to 8 bytes as the reference writer does).
func EncodeSafetensors(tensors map[string]Tensor, meta map[string]string) ([]byte, error) {
	return AppendSafetensors(nil, tensors, meta)
}

// AppendSafetensors appends the safetensors encoding of tensors (as
// EncodeSafetensors makes it) to dst and returns the extended buffer: a
// writer of many files reuses one buffer (AppendSafetensors(buf[:0], ...)).
func AppendSafetensors(dst []byte, tensors map[string]Tensor, meta map[string]string) ([]byte, error) {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		if n == "__metadata__" {
			return nil, fmt.Errorf("safetensors: %q is reserved", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	if len(meta) > 0 {
		mb, err := json.Marshal(meta)
		if err != nil {
			return nil, fmt.Errorf("safetensors: metadata: %w", err)
		}
		hdr.WriteString(`"__metadata__":`)
		hdr.Write(mb)
	}
	var off int64
	for i, n := range names {
		t := tensors[n]
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", n, err)
		}
		size := int64(t.NumElements() * t.DType.Size())
		nb, _ := json.Marshal(n)
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		sb, _ := json.Marshal(shape)
		if i > 0 || len(meta) > 0 {
			hdr.WriteByte(',')
		}
		fmt.Fprintf(&hdr, `%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, nb, t.DType, sb, off, off+size)
		off += size
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	out := slices.Grow(dst, 8+hdr.Len()+int(off))
	out = binary.LittleEndian.AppendUint64(out, uint64(hdr.Len()))
	out = append(out, hdr.Bytes()...)
	for _, n := range names {
		out = encodeLE(out, tensors[n])
	}
	return out, nil
}

// WriteSafetensors writes tensors and metadata to path atomically.
func WriteSafetensors(path string, tensors map[string]Tensor, meta map[string]string) error {
	b, err := EncodeSafetensors(tensors, meta)
	if err != nil {
		return fmt.Errorf("%w (writing %q)", err, path)
	}
	return WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
