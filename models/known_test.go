package models

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models/hub"
)

// TestKnown checks the invariants of known.json: it parses with no unknown
// field, every entry says where its files were seen, its references parse as
// hub ids (the graphs repository, and the one to give Open), and what could
// not be verified says so rather than being left blank.
func TestKnown(t *testing.T) {
	if _, err := parseKnown(knownJSON); err != nil {
		t.Fatal(err)
	}
	known := Known()
	if len(known) < 3 {
		t.Fatalf("%d known models, want CLIP ViT-B/32, B/16 and L/14 at least", len(known))
	}
	seen := map[string]bool{}
	for _, k := range known {
		if seen[k.Ref] {
			t.Errorf("%s listed twice", k.Ref)
		}
		seen[k.Ref] = true
		if r, err := hub.ParseRef(k.Ref); err != nil || r.Revision != "" {
			t.Errorf("%s: Ref %v (want org/name)", k.Ref, err)
		}
		if !strings.Contains(k.Source, "https://") || len(k.Source) < 40 {
			t.Errorf("%s: Source %q does not say where the file list was seen", k.Ref, k.Source)
		}
		if !slices.Contains([]string{CLIP.String(), MetaCLIP2.String(), SigLIP.String(), SigLIP2.String(), Tipsv2.String()}, k.Family) {
			t.Errorf("%s: family %q (want CLIP, MetaCLIP 2, SigLIP, SigLIP 2 or TIPSv2)", k.Ref, k.Family)
		}
		if k.Arch == "" || k.Outputs == "" || k.Heads == "" {
			t.Errorf("%s: blank fields (write \"not verified\" instead): %+v", k.Ref, k)
		}
		graphs, weights, err := SplitRef(k.Use)
		if err != nil {
			t.Errorf("%s: Use %q: %v", k.Ref, k.Use, err)
			continue
		}
		if k.Build {
			// No ONNX graphs: built from the checkpoint, at the revision Use
			// names, whose model.safetensors holds the heads too.
			if r, err := hub.ParseRef(graphs); err != nil || r.Repo != k.Ref {
				t.Errorf("%s: Use %q builds another repository's checkpoint (%v)", k.Ref, k.Use, err)
			}
			if weights != "" || len(k.Variants) != 0 {
				t.Errorf("%s: built from its checkpoint, but Use %q / variants %q", k.Ref, k.Use, k.Variants)
			}
			if !strings.Contains(k.Source, "model.safetensors") && !strings.Contains(k.Source, ".safetensors") {
				t.Errorf("%s: built from its checkpoint, but Source lists no safetensors", k.Ref)
			}
			// Nothing was downloaded or run for these entries: their outputs
			// are what the builder writes, not what was seen.
			if !strings.Contains(k.Outputs, "not verified") && !strings.Contains(k.Outputs, "cannot be run yet") {
				t.Errorf("%s: built on first use, but Outputs %q says neither \"not verified\" nor \"cannot be run yet\"", k.Ref, k.Outputs)
			}
			continue
		}
		if graphs != k.Ref {
			t.Errorf("%s: Use %q takes its graphs from %q", k.Ref, k.Use, graphs)
		}
		if weights != "" {
			if r, err := ParseRef(weights); err != nil || r.Hub.Repo == "" {
				t.Errorf("%s: heads %q are not a hub id: %v", k.Ref, weights, err)
			}
		} else if !strings.Contains(k.Heads, "not verified") {
			t.Errorf("%s: no heads in Use, and Heads does not say \"not verified\": %q", k.Ref, k.Heads)
		}
		if len(k.Variants) == 0 || k.Variants[0] != "" {
			t.Errorf("%s: variants %q (the plain graphs first)", k.Ref, k.Variants)
			continue
		}
		for i, v := range k.Variants[1:] {
			if v == "" || slices.Contains(k.Variants[i+2:], v) {
				t.Errorf("%s: variants %q (one plain, each other once)", k.Ref, k.Variants)
			}
			if !strings.Contains(k.Source, "_"+v+".onnx") {
				t.Errorf("%s: variant %q not in the file list of Source", k.Ref, v)
			}
		}
	}
}

// TestKnownBuilt: the checkpoints people download most, which ship no ONNX
// graphs, are listed as built on first use, each once, of its family; the
// ViT-B/32 one at the branch that holds its model.safetensors.
func TestKnownBuilt(t *testing.T) {
	want := map[string]string{
		"openai/clip-vit-base-patch32":                 CLIP.String(),
		"openai/clip-vit-large-patch14":                CLIP.String(),
		"laion/CLIP-ViT-B-32-laion2B-s34B-b79K":        CLIP.String(),
		"google/siglip-base-patch16-224":               SigLIP.String(),
		"google/siglip2-base-patch16-224":              SigLIP2.String(),
		"google/siglip2-base-patch16-naflex":           SigLIP2.String(),
		"google/tipsv2-b14":                            Tipsv2.String(),
		"facebook/metaclip-2-worldwide-huge-quickgelu": MetaCLIP2.String(),
	}
	for _, k := range Known() {
		f, ok := want[k.Ref]
		if !ok {
			continue
		}
		delete(want, k.Ref)
		if !k.Build || k.Family != f {
			t.Errorf("%s: build %v, family %q; want built on first use, %s", k.Ref, k.Build, k.Family, f)
		}
		if k.Ref == "openai/clip-vit-base-patch32" && k.Use != k.Ref+"@refs/pr/66" {
			t.Errorf("%s: Use %q, want the pull-request branch with model.safetensors", k.Ref, k.Use)
		}
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v", want)
	}
}

// TestKnownCopy: what Known returns is the caller's to change.
func TestKnownCopy(t *testing.T) {
	a := Known()
	a[0].Ref = "changed"
	a[0].Variants[0] = "changed"
	b := Known()
	if b[0].Ref == "changed" || b[0].Variants[0] == "changed" {
		t.Errorf("Known shares its entries with an earlier result: %+v", b[0])
	}
}

// TestKnownJSON: the JSON of Known is known.json's, and a malformed list is
// an error naming the file.
func TestKnownJSON(t *testing.T) {
	b, err := json.Marshal(Known())
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(knownJSON, &want); err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("Known marshals as\n%s\nwant known.json's\n%s", g, w)
	}
	for _, bad := range []string{
		``,
		`{}`,
		`[{"ref": "a/b", "weights": "x"}]`,
		`[{"ref": 1}]`,
		`[] []`,
	} {
		if _, err := parseKnown([]byte(bad)); err == nil || !strings.Contains(err.Error(), "known.json") {
			t.Errorf("parseKnown(%q) = %v, want an error naming known.json", bad, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKnownPECore: the five PE-Core sizes OpenCLIP publishes are listed
// under their hub ids, in OpenCLIP's layout, built from a folder of their
// files, each naming a timm tower this program builds (peCoreTowers), and
// the names agree with the sizes (B/16 is vit_pe_core_base_patch16_224).
func TestKnownPECore(t *testing.T) {
	want := map[string]string{
		"timm/PE-Core-T-16-384":    "vit_pe_core_tiny_patch16_384",
		"timm/PE-Core-S-16-384":    "vit_pe_core_small_patch16_384",
		"timm/PE-Core-B-16":        "vit_pe_core_base_patch16_224",
		"timm/PE-Core-L-14-336":    "vit_pe_core_large_patch14_336",
		"timm/PE-Core-bigG-14-448": "vit_pe_core_gigantic_patch14_448",
	}
	for _, k := range Known() {
		tower, ok := want[k.Ref]
		if !ok {
			continue
		}
		delete(want, k.Ref)
		tw, built := peCoreTowers[tower]
		if !k.Build || k.Layout != LayoutOpenCLIP || k.Family != CLIP.String() || !built || !strings.Contains(k.Arch, tower) ||
			!strings.HasPrefix(k.Arch, "PE-Core ") || !strings.Contains(k.Arch, fmt.Sprintf("%d px", tw.ImgSize)) {
			t.Errorf("%s: build %v, layout %q, family %q, arch %q; want PE-Core in OpenCLIP's layout naming %s (%v)", k.Ref, k.Build, k.Layout, k.Family, k.Arch, tower, built)
		}
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v", want)
	}
}
