package tensorio

import "testing"

// FuzzDecode feeds arbitrary bytes to the safetensors and npy decoders: they
// must return a tensor or an error, never panic or allocate without bound.
func FuzzDecode(f *testing.F) {
	st, _ := EncodeSafetensors(map[string]Tensor{"w": F32([]int{2}, []float32{1, 2}), "i": I64([]int{1}, []int64{3})}, map[string]string{"k": "v"})
	np, _ := EncodeNPY(F32([]int{2, 1}, []float32{1, 2}))
	f.Add(st)
	f.Add(np)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if ts, _, err := DecodeSafetensors(b); err == nil {
			for _, x := range ts {
				if err := x.Validate(); err != nil {
					t.Fatalf("decoded an invalid tensor: %v", err)
				}
			}
		}
		if x, err := DecodeNPY(b); err == nil {
			if err := x.Validate(); err != nil {
				t.Fatalf("decoded an invalid tensor: %v", err)
			}
		}
	})
}
