package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/conditionhq/condition/models"
)

// runModelsInfo describes a model from what is already on disk.
func runModelsInfo(ctx context.Context, e *env, args []string) error {
	m, o, err := openModelRef(ctx, e, "info", args)
	if err != nil {
		return err
	}
	return printModel(e, m, o.JSON)
}

func printModel(e *env, m *models.Model, asJSON bool) error {
	c := m.Config()
	info := map[string]any{
		"ref":      m.Name(),
		"family":   m.Family().String(),
		"repo":     m.Repo(),
		"revision": m.Revision(),
		"dir":      m.Dir(),
		"variant":  m.Variant(),
		"weights":  m.WeightsSource(),
		"files":    m.Files(),
		"built":    m.Built(),
		"config": map[string]any{
			"projection_dim": c.ProjectionDim, "text_hidden_size": c.TextConfig.HiddenSize,
			"vision_hidden_size": c.VisionConfig.HiddenSize, "image_size": c.VisionConfig.ImageSize,
			"patch_size": c.VisionConfig.PatchSize, "max_position_embeddings": c.TextConfig.MaxPositionEmbeddings,
		},
	}
	if c.NaFlex() {
		info["config"].(map[string]any)["num_patches"] = c.VisionConfig.NumPatches
		info["naflex"] = true
	}
	var variants []string
	if m.Dir() != "" {
		variants = models.Variants(os.DirFS(m.Dir()))
	}
	info["variants"] = variants
	graphs := map[string]*models.GraphInfo{}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		if gi := m.DescribeGraph(g); gi != nil {
			graphs[g] = gi
		}
	}
	info["graphs"] = graphs
	heads, shapes, headsErr := modelHeads(m)
	if headsErr != "" {
		info["heads_error"] = headsErr
	}
	info["heads"] = heads
	info["head_shapes"] = shapes
	derived := m.DerivedGraphs()
	info["derived"] = derived
	if asJSON {
		return writeJSONIndent(e.Stdout, info)
	}
	out := e.Stdout
	fmt.Fprintf(out, "model:    %s\n", m.Name())
	if m.Repo() != "" {
		fmt.Fprintf(out, "repo:     %s @ %s\n", m.Repo(), m.Revision())
	}
	if m.Dir() != "" {
		fmt.Fprintf(out, "folder:   %s\n", m.Dir())
	}
	if m.Variant() != "" {
		fmt.Fprintf(out, "variant:  %s\n", m.Variant())
	}
	if m.WeightsSource() != "" {
		fmt.Fprintf(out, "weights:  %s (%s)\n", m.WeightsSource(), m.Path(models.WeightsFile))
	}
	fmt.Fprintf(out, "family:   %s (%s scores)\n", m.Family(), map[bool]string{true: "sigmoid", false: "softmax"}[m.Family().Sigmoid()])
	images := fmt.Sprintf("%dx%d images", c.VisionConfig.ImageSize, c.VisionConfig.ImageSize)
	if c.NaFlex() {
		images = fmt.Sprintf("NaFlex: each image on its own grid (positions learned on %d patches)", c.VisionConfig.NumPatches)
	}
	registers := ""
	if m.Family() == models.Tipsv2 {
		registers = fmt.Sprintf(", %d register tokens", c.VisionConfig.NumRegisterTokens)
	}
	fmt.Fprintf(out, "config:   projection %d, text width %d (≤%d tokens), vision width %d, %s in %dx%d patches%s\n",
		c.ProjectionDim, c.TextConfig.HiddenSize, c.TextConfig.MaxPositionEmbeddings, c.VisionConfig.HiddenSize,
		images, c.VisionConfig.PatchSize, c.VisionConfig.PatchSize, registers)
	if c.VisionDefaulted() {
		fmt.Fprintf(out, "          (config.json gives no vision_config: these are the defaults, which the graph may not match)\n")
	}
	vs := make([]string, len(variants))
	for i, v := range variants {
		if v == "" {
			v = "plain"
		}
		vs[i] = v
	}
	fmt.Fprintf(out, "variants: %s\n", strings.Join(vs, ", "))
	printDerived(out, derived)
	printGraphs(out, m, graphs)
	if len(heads) > 0 {
		hs := make([]string, len(heads))
		for i, n := range heads {
			hs[i] = fmt.Sprintf("%s %v", n, shapes[n])
		}
		fmt.Fprintf(out, "heads:    %s\n", strings.Join(hs, ", "))
	} else if headsErr != "" {
		fmt.Fprintf(out, "heads:    unreadable: %s\n", headsErr)
	} else if m.Family() == models.Tipsv2 {
		fmt.Fprintf(out, "heads:    none (TIPSv2 has none: its joint space is the towers' own rows; temperature %g from config.json)\n", c.Temperature)
	} else {
		fmt.Fprintf(out, "heads:    none (the joint space needs them: add +<model with model.safetensors> to the reference)\n")
	}
	return nil
}

// modelHeads lists the projection heads m has, with their shapes, from
// model.safetensors (or, in OpenCLIP's layout, open_clip_model.safetensors
// read under CLIP's names); headsErr says why the file could not be read.
func modelHeads(m *models.Model) (heads []string, shapes map[string][]int, headsErr string) {
	shapes = map[string][]int{}
	if m.Has(models.WeightsFile) {
		h, err := m.WeightsHeader() // parsed once for every head
		if err != nil {
			headsErr = err.Error()
		} else {
			for _, n := range models.HeadNamesFor(m.Family()) {
				if t, ok := h.Tensors[n]; ok {
					heads = append(heads, n)
					shapes[n] = t.Shape
				}
			}
		}
	}
	if m.OpenCLIP() && m.Has(models.OpenCLIPWeightsFile) {
		// OpenCLIP's projections, read under CLIP's names.
		for _, n := range models.HeadNamesFor(m.Family()) {
			if t, err := m.ReadWeights(n); err == nil {
				heads = append(heads, n)
				shapes[n] = t[n].Shape
			}
		}
	}
	return heads, shapes, headsErr
}

// printDerived prints the derived variants in this program's cache, one
// graph a line, with an int8 graph's scheme and why one is not used.
func printDerived(out io.Writer, derived []models.DerivedGraph) {
	for _, d := range derived {
		fmt.Fprintf(out, "derived:  %s %s: %s", d.Variant, d.Graph, d.Path)
		if d.Scheme != "" {
			fmt.Fprintf(out, " (int8 scheme %s)", d.Scheme)
		}
		if !d.Usable {
			fmt.Fprintf(out, "; not used: %s", d.Why)
		}
		fmt.Fprintln(out)
	}
}

// printGraphs prints each graph's file, inputs and outputs, or why it is
// missing or unreadable.
func printGraphs(out io.Writer, m *models.Model, graphs map[string]*models.GraphInfo) {
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		gi := graphs[g]
		if gi == nil {
			checkpoint := m.Has(models.WeightsFile) || m.Has("model.safetensors.index.json") || m.OpenCLIP() && m.Has(models.OpenCLIPWeightsFile)
			if m.CanBuild() == nil && checkpoint {
				fmt.Fprintf(out, "%s: missing (built from the safetensors on first use, or with `condition models build %s`)\n", g, m.Name())
			} else {
				fmt.Fprintf(out, "%s: missing\n", g)
			}
			continue
		}
		if m.Built() {
			fmt.Fprintf(out, "%s: %s (built from the model's safetensors)\n", g, gi.File)
		} else {
			fmt.Fprintf(out, "%s: %s\n", g, gi.File)
		}
		if gi.Error != "" {
			fmt.Fprintf(out, "  error: %s\n", gi.Error)
			continue
		}
		fmt.Fprintf(out, "  inputs:  %s\n  outputs: %s\n", strings.Join(gi.Inputs, ", "), strings.Join(gi.Outputs, ", "))
		if gi.PooledOnly {
			fmt.Fprintf(out, "  pooled embeddings only: run `condition models expose %s` to add last_hidden_state\n", m.Name())
		}
	}
}
