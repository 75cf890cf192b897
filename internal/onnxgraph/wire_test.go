package onnxgraph

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestFields round-trips the field helpers through fields, packed and
// unpacked repeated fields included, and checks that malformed messages
// are errors.
func TestFields(t *testing.T) {
	var b []byte
	b = appendVarintField(b, 1, 300)
	b = appendStringField(b, 2, "name")
	b = appendVarintField(b, 7, 5)
	b = appendBytesField(b, 7, protowire.AppendVarint(protowire.AppendVarint(nil, 6), 1<<40))
	b = protowire.AppendTag(b, 4, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 0x3f800000) // 1.0
	var ints []int64
	var floats []float32
	var name string
	var first uint64
	err := fields(b, func(f field) error {
		var err error
		switch f.num {
		case 1:
			first = f.v
		case 2:
			name = string(f.bytes)
		case 4:
			floats, err = appendFloats(floats, f)
		case 7:
			ints, err = appendInts(ints, f)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if first != 300 || name != "name" || len(ints) != 3 || ints[0] != 5 || ints[1] != 6 || ints[2] != 1<<40 || len(floats) != 1 || floats[0] != 1 {
		t.Errorf("decoded %d %q %v %v", first, name, ints, floats)
	}
	for what, bad := range map[string][]byte{
		"field number 0":  {0x00, 0x01},
		"truncated bytes": appendBytesField(nil, 1, []byte("abc"))[:3],
		"truncated tag":   {0x80},
		"a group":         protowire.AppendTag(nil, 1, protowire.StartGroupType),
	} {
		if err := fields(bad, func(field) error { return nil }); err == nil {
			t.Errorf("%s: no error", what)
		}
	}
}
