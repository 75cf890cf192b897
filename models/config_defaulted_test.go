package models

import "testing"

// TestVisionDefaulted: a config.json with no vision_config (nor its older
// or flat TIPSv2 spellings) says its vision fields are defaults; one with
// any of them does not, nor does a Config made in code.
func TestVisionDefaulted(t *testing.T) {
	for _, c := range []struct {
		json string
		want bool
	}{
		{`{}`, true},
		{`{"text_config": {"hidden_size": 512}}`, true},
		{`{"vision_config": {"image_size": 32, "patch_size": 8}}`, false},
		{`{"vision_config_dict": {"image_size": 32, "patch_size": 8}}`, false},
		{`{"model_type": "tipsv2", "img_size": 448, "patch_size": 14}`, false},
	} {
		cfg, err := ParseConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		if got := cfg.VisionDefaulted(); got != c.want {
			t.Errorf("%s: VisionDefaulted %v, want %v", c.json, got, c.want)
		}
	}
	if DefaultConfig().VisionDefaulted() {
		t.Error("DefaultConfig says it was defaulted from a file")
	}
}
