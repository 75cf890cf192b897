package onnxgraph

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// ExternalDataFiles returns the files holding the data of initializers
// stored outside an ONNX model (TensorProto data_location EXTERNAL, its
// external_data "location"), as written in the model: paths relative to the
// model file's folder. They are sorted and listed once each.
//
// It reads r without loading the model: only the protobuf framing of the
// ModelProto and its GraphProto, and the small fields of each initializer
// (name, external_data, data_location); nodes, tensor data and everything
// else are skipped over by offset. Checking a 600 MB graph costs a few
// thousand small reads, not 600 MB.
func ExternalDataFiles(r io.ReaderAt, size int64) ([]string, error) {
	s := skimmer{r: r}
	seen := map[string]bool{}
	haveGraph := false
	err := s.walk(0, size, func(f skimField) error {
		if f.num != 7 || f.wire != protowire.BytesType { // ModelProto.graph
			return nil
		}
		haveGraph = true
		return s.walk(f.off, f.end, func(g skimField) error {
			if g.num != 5 || g.wire != protowire.BytesType { // GraphProto.initializer
				return nil
			}
			loc, external, err := s.tensorLocation(g.off, g.end)
			if err != nil {
				return fmt.Errorf("initializer at byte %d: %w", g.off, err)
			}
			if external && loc != "" {
				seen[loc] = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("onnxgraph: not an ONNX model: %w", err)
	}
	if !haveGraph {
		return nil, errors.New("onnxgraph: not an ONNX model (no graph)")
	}
	out := make([]string, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Strings(out)
	return out, nil
}

// CheckLocation checks an external-data location as ONNX Runtime resolves
// it, relative to the model file's folder: a relative, slash-separated path
// inside that folder (no absolute path, no ".." element, no backslash).
func CheckLocation(loc string) error {
	if loc == "" || strings.HasPrefix(loc, "/") || strings.Contains(loc, `\`) || strings.Contains(loc, ":") {
		return fmt.Errorf("onnxgraph: external data location %q is not a relative path inside the model's folder", loc)
	}
	for _, el := range strings.Split(loc, "/") {
		if el == ".." {
			return fmt.Errorf("onnxgraph: external data location %q points outside the model's folder", loc)
		}
	}
	if path.Clean(loc) == "." {
		return fmt.Errorf("onnxgraph: external data location %q names the model's folder, not a file", loc)
	}
	return nil
}

// skimmer walks protobuf messages in an io.ReaderAt by offsets, reading only
// field headers and the fields asked for.
type skimmer struct {
	r   io.ReaderAt
	buf [20]byte // a tag and a length, 10 bytes each at most
}

// skimField is one field: a varint's value, or where a bytes field's payload is.
type skimField struct {
	num      protowire.Number
	wire     protowire.Type
	v        uint64
	off, end int64 // payload of a bytes field
	start    int64 // the field's tag
	next     int64 // the byte after the field
}

// maxSmallField bounds what the skimmer reads into memory (names, keys,
// locations).
const maxSmallField = 1 << 20

// walk calls fn for each field of the message in [off, end).
func (s *skimmer) walk(off, end int64, fn func(skimField) error) error {
	for off < end {
		want := min(int64(len(s.buf)), end-off)
		n, err := s.r.ReadAt(s.buf[:want], off)
		if int64(n) < want {
			if err == nil || errors.Is(err, io.EOF) {
				err = errTruncated
			}
			return err
		}
		b := s.buf[:n]
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return fmt.Errorf("field at byte %d: %w", off, wireError(k))
		}
		f := skimField{num: num, wire: typ, start: off}
		i := int64(k)
		switch typ {
		case protowire.VarintType:
			v, k := protowire.ConsumeVarint(b[i:])
			if k < 0 {
				return fmt.Errorf("field %d at byte %d: %w", num, off, wireError(k))
			}
			f.v, i = v, i+int64(k)
		case protowire.Fixed64Type:
			i += 8
		case protowire.Fixed32Type:
			i += 4
		case protowire.BytesType:
			l, k := protowire.ConsumeVarint(b[i:])
			if k < 0 {
				return fmt.Errorf("field %d at byte %d: %w", num, off, wireError(k))
			}
			i += int64(k)
			if l > uint64(end-off-i) {
				return errTruncated
			}
			f.off, f.end = off+i, off+i+int64(l)
			i += int64(l)
		default:
			return fmt.Errorf("unsupported protobuf wire type %d (field %d) at byte %d", typ, num, off)
		}
		if off+i > end {
			return errTruncated
		}
		f.next = off + i
		if err := fn(f); err != nil {
			return err
		}
		off += i
	}
	return nil
}

// read returns a bytes field's payload.
func (s *skimmer) read(f skimField) ([]byte, error) {
	if f.end-f.off > maxSmallField {
		return nil, fmt.Errorf("a %d-byte field where a short string was expected", f.end-f.off)
	}
	b := make([]byte, f.end-f.off)
	if n, err := s.r.ReadAt(b, f.off); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = errTruncated
		}
		return nil, err
	}
	return b, nil
}

// tensorLocation reads a TensorProto's external_data location and whether
// its data_location is EXTERNAL, skipping its data.
func (s *skimmer) tensorLocation(off, end int64) (loc string, external bool, err error) {
	err = s.walk(off, end, func(f skimField) error {
		switch {
		case f.num == 13 && f.wire == protowire.BytesType: // external_data: StringStringEntryProto
			b, err := s.read(f)
			if err != nil {
				return err
			}
			k, v, err := stringEntry(b)
			if err != nil {
				return err
			}
			if k == "location" {
				loc = v
			}
		case f.num == 14 && f.wire == protowire.VarintType: // data_location
			external = f.v == 1
		}
		return nil
	})
	return loc, external, err
}
