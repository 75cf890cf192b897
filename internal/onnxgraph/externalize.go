package onnxgraph

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// ExternalAlign is the alignment of each tensor's data in the file
// Externalize writes: a page, so that ONNX Runtime can map every tensor
// straight from the file.
const ExternalAlign = 4096

// Externalized says what Externalize moved.
type Externalized struct {
	Tensors int   `json:"tensors"` // initializers moved to the data file
	Bytes   int64 `json:"bytes"`   // their data
	Kept    int   `json:"kept"`    // initializers left in the graph
}

// Externalize copies the ONNX model in r (size bytes) to graph with the
// raw_data of every top-level initializer of at least minBytes moved to
// data, each tensor at an ExternalAlign-aligned offset, the TensorProto
// pointing there (data_location EXTERNAL, external_data location, offset
// and length; location is the data file's path relative to the graph's
// folder). Everything else is copied as it is, field by field; tensors
// already external, or holding their values in typed fields, stay as they
// are. ONNX Runtime maps such a data file into memory instead of copying
// the weights out of the model, which makes a session start several times
// faster and shares the weights between processes through the page cache.
//
// The model is read by offsets, never whole: memory stays near the size of
// the graph without its weights.
func Externalize(r io.ReaderAt, size int64, graph, data io.Writer, location string, minBytes int64) (Externalized, error) {
	var res Externalized
	if err := CheckLocation(location); err != nil {
		return res, err
	}
	s := skimmer{r: r}
	var model []byte
	var offset int64 // in data
	haveGraph := false
	err := s.walk(0, size, func(f skimField) error {
		if f.num != 7 || f.wire != protowire.BytesType { // ModelProto.graph
			return s.appendRaw(&model, f)
		}
		haveGraph = true
		var g []byte
		err := s.walk(f.off, f.end, func(gf skimField) error {
			if gf.num != 5 || gf.wire != protowire.BytesType { // GraphProto.initializer
				return s.appendRaw(&g, gf)
			}
			t, moved, err := s.externalTensor(gf, data, &offset, location, minBytes)
			if err != nil {
				return fmt.Errorf("initializer at byte %d: %w", gf.off, err)
			}
			if moved > 0 {
				res.Tensors++
				res.Bytes += moved
			} else {
				res.Kept++
			}
			g = protowire.AppendTag(g, 5, protowire.BytesType)
			g = protowire.AppendBytes(g, t)
			return nil
		})
		if err != nil {
			return err
		}
		model = protowire.AppendTag(model, 7, protowire.BytesType)
		model = protowire.AppendBytes(model, g)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("onnxgraph: externalize: %w", err)
	}
	if !haveGraph {
		return res, errors.New("onnxgraph: externalize: not an ONNX model (no graph)")
	}
	if _, err := graph.Write(model); err != nil {
		return res, fmt.Errorf("onnxgraph: externalize: %w", err)
	}
	return res, nil
}

// appendRaw appends field f's bytes, tag included, as they are in r.
func (s *skimmer) appendRaw(dst *[]byte, f skimField) error {
	n := f.next - f.start
	at := len(*dst)
	*dst = append(*dst, make([]byte, n)...)
	if k, err := s.r.ReadAt((*dst)[at:], f.start); int64(k) < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = errTruncated
		}
		return err
	}
	return nil
}

// externalTensor returns the TensorProto of field f with its raw_data of
// at least minBytes written to data at the next aligned offset (moved: its
// length), or as it is (moved 0).
func (s *skimmer) externalTensor(f skimField, data io.Writer, offset *int64, location string, minBytes int64) (t []byte, moved int64, err error) {
	var raw skimField
	haveRaw, external := false, false
	err = s.walk(f.off, f.end, func(tf skimField) error {
		switch {
		case tf.num == 9 && tf.wire == protowire.BytesType: // raw_data
			raw, haveRaw = tf, true
		case tf.num == 14 && tf.wire == protowire.VarintType: // data_location
			external = tf.v == 1
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	n := raw.end - raw.off
	if !haveRaw || external || n < minBytes {
		err := s.appendRaw(&t, skimField{start: f.off, next: f.end})
		return t, 0, err
	}
	err = s.walk(f.off, f.end, func(tf skimField) error {
		if tf.num == 9 && tf.wire == protowire.BytesType {
			return nil
		}
		return s.appendRaw(&t, tf)
	})
	if err != nil {
		return nil, 0, err
	}
	if pad := (ExternalAlign - *offset%ExternalAlign) % ExternalAlign; pad > 0 {
		if _, err := data.Write(make([]byte, pad)); err != nil {
			return nil, 0, err
		}
		*offset += pad
	}
	if k, err := io.Copy(data, io.NewSectionReader(s.r, raw.off, n)); k < n {
		if err == nil {
			err = errTruncated
		}
		return nil, 0, err
	}
	for _, kv := range [][2]string{{"location", location}, {"offset", strconv.FormatInt(*offset, 10)}, {"length", strconv.FormatInt(n, 10)}} {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, kv[0])
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, kv[1])
		t = protowire.AppendTag(t, 13, protowire.BytesType)
		t = protowire.AppendBytes(t, e)
	}
	t = protowire.AppendTag(t, 14, protowire.VarintType)
	t = protowire.AppendVarint(t, 1)
	*offset += n
	return t, n, nil
}
