package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelsInfoSaysWhatFailed: info reads only the cache; for a model not
// in it, the error says so and names HF_HUB_OFFLINE only when it is set.
func TestModelsInfoSaysWhatFailed(t *testing.T) {
	fakeModelHub(t)
	for _, env := range []string{"", "1"} {
		t.Setenv("HF_HUB_OFFLINE", env)
		code, _, errs := modelsRun(t, "models", "info", "org/tinyclip")
		if code != exitFailed || !strings.Contains(errs, "org/tinyclip@main is not in the Hugging Face cache") ||
			!strings.Contains(errs, "condition models fetch org/tinyclip") {
			t.Errorf("HF_HUB_OFFLINE=%q: exit %d, %s", env, code, errs)
		}
		if named := strings.Contains(errs, "HF_HUB_OFFLINE"); named != (env != "") {
			t.Errorf("HF_HUB_OFFLINE=%q: %s", env, errs)
		}
	}
}

// TestModelsVerifyBuiltin: the built-in model verifies (its files parse;
// there are no hashes to check), and no message sends anyone to a cache.
func TestModelsVerifyBuiltin(t *testing.T) {
	code, out, errs := modelsRun(t, "models", "verify", "default")
	if code != exitOK || strings.Count(out, " ok") != 3 || !strings.Contains(out, "built into the program") ||
		strings.Contains(out+errs, "cache") || strings.Contains(out+errs, "default:model.safetensors") {
		t.Errorf("verify default: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = modelsRun(t, "models", "verify", "default", "--json")
	var res struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Size int64 `json:"size"`
		} `json:"checks"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || !res.OK || len(res.Checks) != 3 || res.Checks[2].Size == 0 {
		t.Errorf("verify default --json: exit %d\n%s", code, out)
	}
	// A folder whose weights do not parse fails without advice about a cache.
	dir := t.TempDir()
	for _, f := range []string{"config.json", "onnx/text_model.onnx", "onnx/vision_model.onnx"} {
		b, err := os.ReadFile(filepath.Join(tinyDir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("not safetensors"), 0o644)
	code, out, errs = modelsRun(t, "models", "verify", dir)
	if code != exitFailed || !strings.Contains(out, "FAILED") || !strings.Contains(errs, "do not parse") || strings.Contains(errs, "cache") {
		t.Errorf("verify a folder with bad weights: exit %d\n%s%s", code, out, errs)
	}
}

// TestMistypedFolderReadings: a mistyped folder is not reported as a
// network error alone.
func TestMistypedFolderReadings(t *testing.T) {
	fakeModelHub(t)
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1") // no network
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "mymodels"), 0o755)
	t.Chdir(dir)
	code, _, errs := runCLI(t, "tokenize", "--model", "mymodels/clip", "a red circle")
	if code != exitFailed || !strings.Contains(errs, "no folder mymodels/clip (mymodels has no clip); as a hub id: ") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// TestModelsVerifyNotCached: verify of a reference that is neither a folder
// nor a cached hub model gives both readings.
func TestModelsVerifyNotCached(t *testing.T) {
	fakeModelHub(t)
	code, _, errs := modelsRun(t, "models", "verify", "mymodels/clip")
	if code != exitFailed || !strings.Contains(errs, "no folder mymodels/clip; as a hub id: ") || !strings.Contains(errs, "condition models fetch mymodels/clip") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
