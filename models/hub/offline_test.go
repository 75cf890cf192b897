package hub_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models/hub"
)

// TestOfflineErrorsNameTheirCause: an error of offline mode names
// HF_HUB_OFFLINE only when it is set; offline mode the program chose
// (Client.Offline) is not blamed on the environment.
func TestOfflineErrorsNameTheirCause(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client().Download(ctx, "org/tiny", "main", "config.json"); err != nil {
		t.Fatal(err)
	}
	meta, err := f.client().Metadata(ctx, "org/tiny", "main", "onnx/text_model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"", "1"} {
		t.Setenv("HF_HUB_OFFLINE", env)
		c := f.client()
		c.Offline = true
		calls := map[string]error{}
		_, calls["Download, file not cached"] = c.Download(ctx, "org/tiny", "main", "onnx/text_model.onnx")
		_, calls["Download, repo not cached"] = c.Download(ctx, "org/other", "main", "config.json")
		_, calls["ListFiles"] = c.ListFiles(ctx, "org/other", "main")
		_, calls["Metadata"] = c.Metadata(ctx, "org/tiny", "main", "config.json")
		_, calls["Fetch"] = c.Fetch(ctx, meta)
		_, calls["OpenRemoteMeta"] = c.OpenRemoteMeta(ctx, meta)
		for name, err := range calls {
			if !errors.Is(err, hub.ErrOffline) {
				t.Errorf("HF_HUB_OFFLINE=%q: %s: %v, want ErrOffline", env, name, err)
				continue
			}
			if named := strings.Contains(err.Error(), "HF_HUB_OFFLINE"); named != (env != "") {
				t.Errorf("HF_HUB_OFFLINE=%q: %s: %q", env, name, err)
			}
		}
	}
}
