package models

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

// variantName returns the file of a graph variant: onnx/text_model.onnx with
// "fp16" → onnx/text_model_fp16.onnx.
func variantName(name, variant string) string {
	if variant == "" {
		return name
	}
	return strings.TrimSuffix(name, ".onnx") + "_" + variant + ".onnx"
}

// pickGraphs maps the canonical graph names to the variant asked for and to
// exposed rewrites, when there are: beside the originals in a model
// directory; in the derived cache for a hub model, never in its snapshot.
func (m *Model) pickGraphs() error {
	found := 0
	for _, g := range []string{TextModelFile, VisionModelFile} {
		name := variantName(g, m.variant)
		if !m.isHub() && fsHas(m.base, exposedName(name)) {
			m.alias[g] = exposedName(name)
			found++
			continue
		}
		if p, ok, err := m.derivedExposed(exposedName(name)); err != nil {
			return err
		} else if ok {
			m.alias[g], m.extra[g] = exposedName(name), p
			found++
			continue
		}
		if fsHas(m.base, name) {
			found++
			if name != g {
				m.alias[g] = name
			}
		} else if name != g {
			m.alias[g] = name // so that errors name the variant's file
		}
	}
	if m.variant != "" && found == 0 {
		vs := Variants(m.base)
		return fmt.Errorf("models: model %s has no %s variant (%s, %s); variants present: %s",
			m.where(), m.variant, variantName(TextModelFile, m.variant), variantName(VisionModelFile, m.variant), listOrNone(vs))
	}
	return nil
}

var variantRE = regexp.MustCompile(`^onnx/(?:text|vision)_model(?:_([A-Za-z0-9]+))?\.onnx$`)

// Variants lists the graph variants present in a model folder ("" for the
// plain onnx/text_model.onnx and onnx/vision_model.onnx), sorted.
func Variants(fsys fs.FS) []string {
	ents, err := fs.ReadDir(fsys, "onnx")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, "onnx/"+e.Name())
	}
	return variantsOf(names)
}

func variantsOf(files []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		if sm := variantRE.FindStringSubmatch(f); sm != nil && !seen[sm[1]] {
			seen[sm[1]] = true
			out = append(out, sm[1])
		}
	}
	sort.Strings(out)
	return out
}

func listOrNone(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		if v == "" {
			v = `"" (plain)`
		}
		q[i] = v
	}
	return strings.Join(q, ", ")
}

func fsHas(fsys fs.FS, name string) bool {
	if fsys == nil {
		return false
	}
	fi, err := fs.Stat(fsys, name)
	return err == nil && !fi.IsDir()
}
