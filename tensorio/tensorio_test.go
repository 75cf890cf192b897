package tensorio

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSafetensorsRoundTrip(t *testing.T) {
	in := map[string]Tensor{
		"a":      F32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		"b.ids":  I64([]int{4}, []int64{-1, 0, 1, 1 << 40}),
		"scalar": F32([]int{}, []float32{2.5}),
		"h":      {DType: DTypeF16, Shape: []int{2}, Data: []uint16{0x3c00, 0xc000}},
		"m":      {DType: DTypeBool, Shape: []int{3}, Data: []bool{true, false, true}},
	}
	meta := map[string]string{"model": "x", "prompt": "a \"red\" circle"}
	path := filepath.Join(t.TempDir(), "t.safetensors")
	if err := WriteSafetensors(path, in, meta); err != nil {
		t.Fatal(err)
	}
	out, gotMeta, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) || !reflect.DeepEqual(meta, gotMeta) {
		t.Fatalf("round trip:\n in %v %v\nout %v %v", in, meta, out, gotMeta)
	}
	h, _ := out["h"].Float32()
	if h[0] != 1 || h[1] != -2 {
		t.Fatalf("f16 conversion: %v", h)
	}
	raw, _ := os.ReadFile(path)
	if n := 8 + int(raw[0]) + int(raw[1])<<8; n%8 != 0 {
		t.Errorf("data section starts at %d, not 8-aligned", n)
	}
}

func TestReadSafetensorsFuncReadsOnlyKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.safetensors")
	in := map[string]Tensor{
		"a.to_q.weight": F32([]int{2}, []float32{1, 2}),
		"b.big":         F32([]int{3}, []float32{3, 4, 5}),
	}
	if err := WriteSafetensors(path, in, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	got, meta, err := ReadSafetensorsFunc(path, func(n string) bool { return strings.HasPrefix(n, "a.") })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got["a.to_q.weight"], in["a.to_q.weight"]) || meta["k"] != "v" {
		t.Fatalf("got %v %v", got, meta)
	}
	if _, _, err := ReadSafetensorsFunc(filepath.Join(t.TempDir(), "none"), func(string) bool { return true }); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestSafetensorsCorrupt(t *testing.T) {
	good, err := EncodeSafetensors(map[string]Tensor{"w": F32([]int{2, 2}, []float32{1, 2, 3, 4})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":       {},
		"short":       good[:5],
		"huge header": append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0}, good[8:]...),
		"truncated":   good[:len(good)-4],
		"not json":    append(append([]byte{}, good[:8]...), bytes.Repeat([]byte("x"), len(good)-8)...),
		"bad shape":   bytes.Replace(good, []byte("[2,2]"), []byte("[2,3]"), 1),
		"bad dtype":   bytes.Replace(good, []byte(`"F32"`), []byte(`"Q32"`), 1),
		"neg offsets": bytes.Replace(good, []byte("[0,16]"), []byte("[8,0] "), 1),
	}
	for name, b := range cases {
		if _, _, err := DecodeSafetensors(b); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "safetensors:") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	}
}

func TestNPYRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []Tensor{
		F32([]int{1, 3, 2, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, float32(math.Inf(1))}),
		I64([]int{3}, []int64{49406, 320, 49407}),
		{DType: DTypeU8, Shape: []int{2, 2}, Data: []uint8{0, 1, 254, 255}},
		F32([]int{}, []float32{7}),
	} {
		path := filepath.Join(dir, "x.npy")
		if err := WriteNPY(path, tc); err != nil {
			t.Fatal(err)
		}
		got, err := ReadNPY(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc) {
			t.Fatalf("round trip: got %v want %v", got, tc)
		}
		raw, _ := os.ReadFile(path)
		if hl := 10 + int(raw[8]) + int(raw[9])<<8; hl%64 != 0 {
			t.Errorf("data starts at %d, not 64-aligned", hl)
		}
	}
	if _, err := DecodeNPY([]byte("\x93NUMPY\x01\x00\x10\x00{'descr': '>f4'}")); err == nil {
		t.Error("big-endian accepted")
	}
}

// TestNumPyReadsOurFiles checks our files against numpy itself, the reference
// reader; it skips where python3 with numpy is not installed.
func TestNumPyReadsOurFiles(t *testing.T) {
	py := pythonWithNumPy()
	if py == "" {
		t.Skip("python3 with numpy not installed; the round-trip tests above still ran")
	}
	dir := t.TempDir()
	tens := map[string]Tensor{
		"x": F32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6.5}),
		"i": I64([]int{2}, []int64{7, -8}),
	}
	if err := WriteNPY(filepath.Join(dir, "x.npy"), tens["x"]); err != nil {
		t.Fatal(err)
	}
	if err := WriteNPZ(filepath.Join(dir, "all.npz"), tens); err != nil {
		t.Fatal(err)
	}
	script := `
import numpy as np, sys
d = sys.argv[1]
x = np.load(d + "/x.npy")
assert x.dtype == np.float32 and x.shape == (2, 3) and x[1, 2] == 6.5, x
z = np.load(d + "/all.npz")
assert (z["x"] == x).all() and z["i"].dtype == np.int64 and list(z["i"]) == [7, -8]
np.save(d + "/fromnp.npy", np.arange(6, dtype=np.float64).reshape(3, 2))
print("ok")
`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	got, err := ReadNPY(filepath.Join(dir, "fromnp.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if got.DType != DTypeF64 || !reflect.DeepEqual(got.Shape, []int{3, 2}) || got.Data.([]float64)[5] != 5 {
		t.Fatalf("reading numpy's file: %+v", got)
	}
}

func TestF16(t *testing.T) {
	for _, c := range []struct {
		h uint16
		f float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.9604645e-08}, {0x0400, 6.1035156e-05}, {0x7c00, float32(math.Inf(1))}, {0x3555, 0.33325195}} {
		if got := F16ToFloat32(c.h); got != c.f {
			t.Errorf("F16ToFloat32(%#x) = %v, want %v", c.h, got, c.f)
		}
		if got := Float32ToF16(c.f); got != c.h {
			t.Errorf("Float32ToF16(%v) = %#x, want %#x", c.f, got, c.h)
		}
	}
	// Every finite half round-trips.
	for h := 0; h < 0x10000; h++ {
		if (h>>10)&0x1f == 0x1f {
			continue
		}
		if got := Float32ToF16(F16ToFloat32(uint16(h))); got != uint16(h) && !(h == 0x8000 && got == 0x8000) {
			t.Fatalf("round trip of %#x gave %#x", h, got)
		}
	}
}

func TestWriteFileAtomicLeavesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.bin")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFileAtomic(path, func(w io.Writer) error {
		w.Write([]byte("half"))
		return errors.New("disk on fire")
	})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("old file changed to %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

// pythonWithNumPy returns a Python interpreter that has numpy (the first
// python3 on PATH, then the system's), or "".
func pythonWithNumPy() string {
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(c); err == nil && exec.Command(p, "-c", "import numpy").Run() == nil {
			return p
		}
	}
	return ""
}

// TestBulkBytesMatchPortable checks the bulk byte copies of little-endian
// machines against the element-by-element encoding and decoding, for every
// dtype, with values that use every byte.
func TestBulkBytesMatchPortable(t *testing.T) {
	if !nativeLE {
		t.Skip("big-endian machine: only the portable path runs here")
	}
	const n = 37
	data := map[DType]any{
		DTypeF64: make([]float64, n), DTypeF32: make([]float32, n), DTypeF16: make([]uint16, n),
		DTypeBF16: make([]uint16, n), DTypeI64: make([]int64, n), DTypeI32: make([]int32, n),
		DTypeI16: make([]int16, n), DTypeI8: make([]int8, n), DTypeU8: make([]uint8, n), DTypeBool: make([]bool, n),
	}
	for i := range n {
		x := uint64(i+1) * 0x9E3779B97F4A7C15
		data[DTypeF64].([]float64)[i] = math.Float64frombits(x)
		data[DTypeF32].([]float32)[i] = math.Float32frombits(uint32(x >> 7))
		data[DTypeF16].([]uint16)[i] = uint16(x >> 3)
		data[DTypeBF16].([]uint16)[i] = uint16(x >> 5)
		data[DTypeI64].([]int64)[i] = int64(x)
		data[DTypeI32].([]int32)[i] = int32(x >> 11)
		data[DTypeI16].([]int16)[i] = int16(x >> 13)
		data[DTypeI8].([]int8)[i] = int8(x >> 17)
		data[DTypeU8].([]uint8)[i] = uint8(x >> 19)
		data[DTypeBool].([]bool)[i] = x>>23&1 == 1
	}
	for dt, d := range data {
		tn := Tensor{DType: dt, Shape: []int{n}, Data: d}
		prefix := []byte("xyz")
		got := encodeLE(append([]byte(nil), prefix...), tn)
		want := encodeLEPortable(append([]byte(nil), prefix...), tn)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encodeLE differs from the portable encoding", dt)
			continue
		}
		back, err := decodeLE(dt, want[len(prefix):], n)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		ref, _ := decodeLEPortable(dt, want[len(prefix):], n)
		if !bytes.Equal(encodeLEPortable(nil, Tensor{DType: dt, Data: back}), encodeLEPortable(nil, Tensor{DType: dt, Data: ref})) {
			t.Errorf("%s: decodeLE differs from the portable decoding", dt)
		}
		if reflect.TypeOf(back) != reflect.TypeOf(ref) {
			t.Errorf("%s: decodeLE gives %T, portable %T", dt, back, ref)
		}
	}
}

// TestAppendSafetensors checks that appending to a used buffer gives the
// buffer's bytes followed by EncodeSafetensors' encoding, every time.
func TestAppendSafetensors(t *testing.T) {
	ts := map[string]Tensor{"b": F32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}), "a": I64([]int{1}, []int64{-7})}
	meta := map[string]string{"k": "v"}
	want, err := EncodeSafetensors(ts, meta)
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("prefix")
	for range 3 {
		got, err := AppendSafetensors(buf[:6], ts, meta)
		if err != nil {
			t.Fatal(err)
		}
		if string(got[:6]) != "prefix" || !bytes.Equal(got[6:], want) {
			t.Fatalf("AppendSafetensors gave %q, want prefix then %q", got, want)
		}
		back, m, err := DecodeSafetensors(got[6:])
		if err != nil || m["k"] != "v" || !reflect.DeepEqual(back["b"].Data, ts["b"].Data) {
			t.Fatalf("decoded %v %v %v", back, m, err)
		}
		buf = got
	}
}
