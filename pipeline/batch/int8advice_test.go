package batch

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/conditionhq/condition/pipeline"
)

// TestRunAdvisesInt8: a float32 job of int8AdviceAt images or more on a
// CPU with VNNI says once what precision int8 would do (the check's figures
// once the int8 variant is made); a smaller job, an int8 job or a CPU
// without VNNI says nothing of it.
func TestRunAdvisesInt8(t *testing.T) {
	openTiny(t) // loads ONNX Runtime, or skips
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	defer func(n int) { int8AdviceAt = n }(int8AdviceAt)
	int8AdviceAt = 5
	vnni := cpu.X86.HasAVX512VNNI || cpu.X86.HasAVXVNNI
	ctx := context.Background()
	run := func(n int, p pipeline.Precision) string {
		t.Helper()
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		eng, err := pipeline.Open(ctx, tinyModel, pipeline.Options{Precision: p, Threads: 1, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		in := filepath.Join(t.TempDir(), "in")
		makeImages(t, in, n)
		if _, err := Run(ctx, Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"red"}, Out: filepath.Join(t.TempDir(), "out"), Log: log}); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	says := func(logs string) int { return strings.Count(logs, "multiplies 8-bit weights with VNNI") }
	if logs := run(8, pipeline.PrecisionFP32); says(logs) != map[bool]int{true: 1, false: 0}[vnni] || (vnni && !strings.Contains(logs, "made once")) {
		t.Errorf("float32 job of 8 images before the int8 variant is made (VNNI %v):\n%s", vnni, logs)
	}
	if logs := run(4, pipeline.PrecisionFP32); says(logs) != 0 {
		t.Errorf("float32 job of 4 images:\n%s", logs)
	}
	if logs := run(8, pipeline.PrecisionInt8); says(logs) != 0 {
		t.Errorf("int8 job:\n%s", logs)
	}
	logs := run(8, pipeline.PrecisionFP32)
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "VNNI") {
			t.Log(l)
		}
	}
	if says(logs) != map[bool]int{true: 1, false: 0}[vnni] || (vnni && (!strings.Contains(logs, "ran the vision graph") || !strings.Contains(logs, "int8_ms="))) {
		t.Errorf("float32 job of 8 images after the int8 variant is made (VNNI %v):\n%s", vnni, logs)
	}
}
