package pipeline

import (
	"context"
	"github.com/conditionhq/condition/models/clip"
	"strings"
	"testing"
)

// TestParseOptions: ParsePrecision and ParseReadout read each valid name
// into its constant ("" is fp32; a readout has no empty name), and their
// errors name the value given and every valid one.
func TestParseOptions(t *testing.T) {
	for s, want := range map[string]Precision{"": PrecisionFP32, "fp32": PrecisionFP32, "int8": PrecisionInt8} {
		if p, err := ParsePrecision(s); err != nil || p != want {
			t.Errorf("ParsePrecision(%q) = %q, %v; want %q", s, p, err, want)
		}
	}
	for _, s := range []string{"int4", "FP32", "fp16", " int8"} {
		_, err := ParsePrecision(s)
		if err == nil || !strings.Contains(err.Error(), `precision "`+s+`"`) || !strings.Contains(err.Error(), "want one of fp32, int8") {
			t.Errorf("ParsePrecision(%q): %v, want an error naming it and fp32, int8", s, err)
		}
	}
	for _, want := range []clip.Readout{ReadoutRaw, ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP} {
		if r, err := clip.ParseReadout(string(want)); err != nil || r != want {
			t.Errorf("clip.ParseReadout(%q) = %q, %v", want, r, err)
		}
	}
	for _, s := range []string{"", "dense", "ClearCLIP", "raw "} {
		_, err := clip.ParseReadout(s)
		if err == nil || !strings.Contains(err.Error(), `readout "`+s+`"`) || !strings.Contains(err.Error(), "want one of clearclip, naclip, maskclip, raw") {
			t.Errorf("clip.ParseReadout(%q): %v, want an error naming it and the four readouts", s, err)
		}
	}
}

// TestOpenRefusesPrecision: a Precision no parser made is refused by Open,
// OpenModel and New before any work, naming the valid ones.
func TestOpenRefusesPrecision(t *testing.T) {
	m := openTiny(t)
	ctx := context.Background()
	bad := Options{Precision: "int4"}
	_, err1 := Open(ctx, "no such model", bad)
	_, err2 := OpenModel(ctx, "no such model", bad)
	_, err3 := New(ctx, m, bad)
	for i, err := range []error{err1, err2, err3} {
		if err == nil || !strings.Contains(err.Error(), `pipeline: precision "int4": want one of fp32, int8`) {
			t.Errorf("call %d: %v", i+1, err)
		}
	}
}
