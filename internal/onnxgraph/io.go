package onnxgraph

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// GraphIO returns the inputs a caller feeds (graph inputs that are not
// initializers, as ONNX Runtime lists them) and the outputs of the ONNX
// model in r, with the types and shapes the model declares.
//
// Like ExternalDataFiles it reads only the protobuf framing, the inputs'
// and outputs' value infos and the initializers' names: opening a 600 MB
// graph this way costs a few thousand small reads where ONNX Runtime would
// load and optimise the whole model. Shapes are the declared ones; ONNX
// Runtime may report more of an output's shape after inferring it.
func GraphIO(r io.ReaderAt, size int64) (inputs, outputs []ValueInfo, err error) {
	s := skimmer{r: r}
	haveGraph := false
	var all []ValueInfo
	inits := map[string]bool{}
	err = s.walk(0, size, func(f skimField) error {
		if f.num != 7 || f.wire != protowire.BytesType { // ModelProto.graph
			return nil
		}
		haveGraph = true
		return s.walk(f.off, f.end, func(g skimField) error {
			if g.wire != protowire.BytesType {
				return nil
			}
			switch g.num {
			case 11, 12: // GraphProto.input, output
				b, err := s.read(g)
				if err != nil {
					return fmt.Errorf("value info at byte %d: %w", g.off, err)
				}
				v, err := parseValueInfo(b)
				if err != nil {
					return err
				}
				if g.num == 11 {
					all = append(all, v)
				} else {
					outputs = append(outputs, v)
				}
			case 5: // GraphProto.initializer
				name, err := s.tensorName(g.off, g.end)
				if err != nil {
					return fmt.Errorf("initializer at byte %d: %w", g.off, err)
				}
				inits[name] = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("onnxgraph: not an ONNX model: %w", err)
	}
	if !haveGraph {
		return nil, nil, errors.New("onnxgraph: not an ONNX model (no graph)")
	}
	for _, v := range all {
		if !inits[v.Name] {
			inputs = append(inputs, v)
		}
	}
	return inputs, outputs, nil
}

// tensorName reads a TensorProto's name, skipping its data.
func (s *skimmer) tensorName(off, end int64) (name string, err error) {
	err = s.walk(off, end, func(f skimField) error {
		if f.num == 8 && f.wire == protowire.BytesType { // TensorProto.name
			b, err := s.read(f)
			if err != nil {
				return err
			}
			name = string(b)
		}
		return nil
	})
	return name, err
}
