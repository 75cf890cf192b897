package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/tensorio"
	"github.com/spf13/pflag"
)

const modelsUsage = `REF is a directory, org/name[@revision], or <graphs>+<weights> (the ONNX graphs
of one, the projection heads from the model.safetensors of the other, read with
range requests: Xenova/clip-vit-base-patch32+org/pytorch-checkpoint).
The cache is the Hugging Face one (HF_HUB_CACHE, HF_HOME/hub,
~/.cache/huggingface/hub); HF_ENDPOINT, HF_TOKEN (or HF_HOME/token) and
HF_HUB_OFFLINE apply as in Python.`

// modelFlags are the model-opening flags of the models subcommands.
type modelFlags struct {
	Variant  string
	HubCache string
	Offline  bool
	Update   bool
	JSON     bool
}

func (o *modelFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Variant, "variant", "", "graph variant by suffix: fp16, quantized, ... (onnx/text_model_<variant>.onnx)")
	fs.StringVar(&o.HubCache, "hub-cache", "", "Hugging Face hub cache folder (default: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)")
	fs.BoolVar(&o.Offline, "offline", false, "never touch the network (as HF_HUB_OFFLINE=1)")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
}

// options returns models.Options with a progress bar on stderr.
func (o *modelFlags) options(e *env) models.Options {
	return models.Options{
		HubCache: o.HubCache,
		Offline:  o.Offline,
		Update:   o.Update,
		Variant:  o.Variant,
		Progress: progressBar(e.Stderr),
		Logger:   e.Log,
	}
}

func runModelsFetch(ctx context.Context, e *env, args []string) error {
	return runModelsRef(ctx, e, "fetch", args)
}

func runModelsInfo(ctx context.Context, e *env, args []string) error {
	return runModelsRef(ctx, e, "info", args)
}

func runModelsExpose(ctx context.Context, e *env, args []string) error {
	return runModelsRef(ctx, e, "expose", args)
}

func runModelsVerify(ctx context.Context, e *env, args []string) error {
	return runModelsRef(ctx, e, "verify", args)
}

type listOptions struct {
	modelFlags
	Known bool
}

// knownGraphs says where a known model's graphs come from: an export in
// the repository, or built from its checkpoint on first use (when this
// version's graph builder writes the family).
func knownGraphs(k models.KnownModel) string {
	if !k.Build {
		return "ONNX export"
	}
	for _, f := range []models.Family{models.CLIP, models.SigLIP, models.SigLIP2} {
		if f.String() == k.Family && !models.BuildsFamily(f) {
			return "to be built (not by this version)"
		}
	}
	return "built on first use"
}

func runModelsList(_ context.Context, e *env, args []string) error {
	var o listOptions
	fs := newFlagSet(e, "models list", "models list [--known] [--json] [--hub-cache DIR]")
	fs.BoolVar(&o.Known, "known", false, "list the models this program was checked against (CLIP, SigLIP, SigLIP 2; ONNX exports and checkpoints whose graphs are built on first use), with their family, variants and what was verified")
	fs.StringVar(&o.HubCache, "hub-cache", "", "Hugging Face hub cache folder")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("models list takes no arguments")
	}
	if o.Known {
		if o.JSON {
			return writeJSONIndent(e.Stdout, models.Known())
		}
		known := models.Known()
		// A table first, one line a model, then what was checked of each.
		tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tFAMILY\tGRAPHS\tUSE")
		for _, k := range known {
			fmt.Fprintf(tw, "%s\t%s\t%s\t--model %s\n", k.Ref, k.Family, knownGraphs(k), k.Use)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, k := range known {
			vs := make([]string, len(k.Variants))
			for i, v := range k.Variants {
				if v == "" {
					v = "(plain)"
				}
				vs[i] = v
			}
			variants := strings.Join(vs, ", ")
			if k.Build {
				variants = "none (the graphs are built from the checkpoint)"
			}
			fmt.Fprintf(e.Stdout, "\n%s\n  %s\n  family:   %s\n  graphs:   %s\n  use:      --model %s\n  variants: %s\n  outputs:  %s\n  heads:    %s\n  checked:  %s\n",
				k.Ref, k.Arch, k.Family, knownGraphs(k), k.Use, variants, k.Outputs, k.Heads, k.Source)
		}
		return nil
	}
	dir := o.HubCache
	if dir == "" {
		dir = hub.CacheDirFromEnv()
	}
	repos, err := hub.Cache{Dir: dir}.Repos()
	if err != nil {
		return err
	}
	type entry struct {
		hub.CachedRepo
		Usable   map[string]bool     `json:"usable"`   // commit → has config.json and a text and a vision graph (its own or built)
		Variants map[string][]string `json:"variants"` // commit → graph variants in the snapshot
		// commit → the graphs built from its checkpoint into this program's
		// derived cache, which a snapshot without graphs of its own is served
		Built map[string]models.BuiltGraphs `json:"built,omitempty"`
	}
	var out []entry
	for _, r := range repos {
		en := entry{CachedRepo: r, Usable: map[string]bool{}, Variants: map[string][]string{}}
		for _, s := range r.Snapshots {
			fsys := os.DirFS(filepath.Join(r.Dir, "snapshots", s.Commit))
			vs := models.Variants(fsys)
			en.Variants[s.Commit] = vs
			has := map[string]bool{}
			for _, f := range s.Files {
				has[f] = true
			}
			own := has[models.TextModelFile] || has[models.VisionModelFile]
			if b, ok := models.HubBuiltGraphs(r.Repo, s.Commit, models.Options{}); ok && !own {
				if en.Built == nil {
					en.Built = map[string]models.BuiltGraphs{}
				}
				en.Built[s.Commit] = b
			}
			_, built := en.Built[s.Commit]
			en.Usable[s.Commit] = has[models.ConfigFile] && (len(vs) > 0 || built)
		}
		out = append(out, en)
	}
	if o.JSON {
		if out == nil {
			out = []entry{}
		}
		return writeJSONIndent(e.Stdout, map[string]any{"cache": dir, "models": out})
	}
	fmt.Fprintf(e.Stdout, "cache: %s\n", dir)
	if len(out) == 0 {
		fmt.Fprintln(e.Stdout, "no models")
	}
	for _, en := range out {
		fmt.Fprintf(e.Stdout, "%s  %s\n", en.Repo, human(en.Size))
		refs := make([]string, 0, len(en.Refs))
		for k := range en.Refs {
			refs = append(refs, k)
		}
		sort.Strings(refs)
		for _, s := range en.Snapshots {
			var names []string
			for _, k := range refs {
				if en.Refs[k] == s.Commit {
					names = append(names, k)
				}
			}
			state := "no ONNX graphs"
			if b, ok := en.Built[s.Commit]; ok && en.Usable[s.Commit] {
				state = fmt.Sprintf("graphs: built from %s of %s (%s)", checkpointNames(b.Source), b.Commit[:min(12, len(b.Commit))],
					filepath.Dir(filepath.Dir(b.Text)))
			} else if en.Usable[s.Commit] {
				vs := make([]string, len(en.Variants[s.Commit]))
				for i, v := range en.Variants[s.Commit] {
					if v == "" {
						v = "plain"
					}
					vs[i] = v
				}
				state = "graphs: " + strings.Join(vs, ", ")
			}
			fmt.Fprintf(e.Stdout, "  %s %s  %d files; %s\n", s.Commit[:min(12, len(s.Commit))], strings.Join(names, ","), len(s.Files), state)
		}
	}
	return nil
}

// checkpointNames shortens the checkpoint files graphs were built from
// (models.BuiltGraphs.Source, paths joined by ", ") to their names:
// model.safetensors, or the first shard and how many there are.
func checkpointNames(source string) string {
	files := strings.Split(source, ", ")
	name := filepath.Base(files[0])
	if len(files) > 1 {
		return fmt.Sprintf("%s and %d more shards", name, len(files)-1)
	}
	return name
}

func runModelsRef(ctx context.Context, e *env, sub string, args []string) error {
	var o modelFlags
	fs := newFlagSet(e, "models "+sub, "models "+sub+" REF [flags]\n\n"+modelsUsage)
	o.AddFlags(fs)
	if sub == "fetch" {
		fs.BoolVar(&o.Update, "update", true, "ask the hub which commit the revision is at, even when the cache has the model")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("models %s takes one model reference (a directory, org/name[@revision], or <graphs>+<weights>)", sub)
	}
	ref := fs.Arg(0)
	if sub == "verify" {
		return verifyModel(e, ref, o)
	}
	cacheOnly := false
	if sub == "info" && !o.Offline {
		// info reads what is there; it fetches nothing unless asked (models
		// fetch), except the heads of a <graphs>+<weights> reference.
		if _, weights, err := models.SplitRef(ref); err == nil && weights == "" {
			o.Offline, cacheOnly = true, true
		}
	}
	opts := o.options(e)
	// info describes what is there: graphs built before are shown, none
	// are built for it.
	opts.NoBuild = sub == "info"
	m, err := models.OpenContext(ctx, ref, opts)
	if err != nil {
		if cacheOnly && !hub.OfflineFromEnv() && errors.Is(err, hub.ErrOffline) {
			return fmt.Errorf("info reads only the Hugging Face cache, fetching nothing (`condition models fetch %s` fetches): %w", ref, err)
		}
		return advise(err, ref)
	}
	switch sub {
	case "fetch", "info":
		return printModel(e, m, o.JSON)
	case "expose":
		res, err := m.Expose()
		if o.JSON {
			if jerr := writeJSONIndent(e.Stdout, res); jerr != nil {
				return jerr
			}
		} else {
			for _, r := range res {
				switch {
				case r.Missing:
					fmt.Fprintf(e.Stdout, "%s: not in the model\n", r.Graph)
				case r.Already:
					fmt.Fprintf(e.Stdout, "%s: already outputs last_hidden_state (%s)\n", r.Graph, r.Source)
				case r.Error != "":
					fmt.Fprintf(e.Stdout, "%s: not rewritten: %s\n", r.Graph, r.Error)
				default:
					fmt.Fprintf(e.Stdout, "%s: wrote %s\n", r.Graph, r.Written)
					for _, s := range r.Walk.Steps {
						fmt.Fprintf(e.Stdout, "  %s\n", s)
					}
				}
			}
		}
		return err
	}
	return nil
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
	var heads []string
	var headsErr string
	shapes := map[string][]int{}
	if m.Has(models.WeightsFile) {
		h, err := m.WeightsHeader() // parsed once for every head
		if err != nil {
			headsErr = err.Error()
			info["heads_error"] = headsErr
		} else {
			for _, n := range models.HeadNamesFor(m.Family()) {
				if t, ok := h.Tensors[n]; ok {
					heads = append(heads, n)
					shapes[n] = t.Shape
				}
			}
		}
	}
	info["heads"] = heads
	info["head_shapes"] = shapes
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
	fmt.Fprintf(out, "config:   projection %d, text width %d (≤%d tokens), vision width %d, %dx%d images in %dx%d patches\n",
		c.ProjectionDim, c.TextConfig.HiddenSize, c.TextConfig.MaxPositionEmbeddings, c.VisionConfig.HiddenSize,
		c.VisionConfig.ImageSize, c.VisionConfig.ImageSize, c.VisionConfig.PatchSize, c.VisionConfig.PatchSize)
	vs := make([]string, len(variants))
	for i, v := range variants {
		if v == "" {
			v = "plain"
		}
		vs[i] = v
	}
	fmt.Fprintf(out, "variants: %s\n", strings.Join(vs, ", "))
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		gi := graphs[g]
		if gi == nil {
			if m.CanBuild() == nil && (m.Has(models.WeightsFile) || m.Has("model.safetensors.index.json")) {
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
	if len(heads) > 0 {
		hs := make([]string, len(heads))
		for i, n := range heads {
			hs[i] = fmt.Sprintf("%s %v", n, shapes[n])
		}
		fmt.Fprintf(out, "heads:    %s\n", strings.Join(hs, ", "))
	} else if headsErr != "" {
		fmt.Fprintf(out, "heads:    unreadable: %s\n", headsErr)
	} else {
		fmt.Fprintf(out, "heads:    none (the joint space needs them: add +<model with model.safetensors> to the reference)\n")
	}
	return nil
}

// verifyModel re-hashes a cached hub model, or checks that the files of
// a model folder or of the built-in model parse (they have no hashes to be
// checked against).
func verifyModel(e *env, ref string, o modelFlags) error {
	type result struct {
		Ref    string      `json:"ref"`
		Commit string      `json:"commit,omitempty"`
		Checks []hub.Check `json:"checks"`
		OK     bool        `json:"ok"`
		Note   string      `json:"note,omitempty"` // what was checked, when not hashes
	}
	res := result{Ref: ref, OK: true}
	graphRef, _, err := models.SplitRef(ref)
	if err != nil {
		return err
	}
	mr, err := models.ParseRef(graphRef)
	if err != nil {
		return err
	}
	if r := mr.Hub; r.Repo != "" {
		dir := o.HubCache
		if dir == "" {
			dir = hub.CacheDirFromEnv()
		}
		cache := hub.Cache{Dir: dir}
		commit, err := cache.Commit(r.Repo, r.Rev())
		if err != nil {
			return fmt.Errorf("no folder %s; as a hub id: %w (fetch it with `condition models fetch %s`)", graphRef, err, graphRef)
		}
		res.Commit = commit
		bar := progressBar(e.Stderr)
		res.Checks, err = cache.Verify(r.Repo, commit, func(file string, done, total int64) {
			if total > 64<<20 {
				bar(hub.Progress{File: file, Done: done, Total: total})
			}
		})
		if err != nil {
			return fmt.Errorf("%w (fetch it with `condition models fetch %s`)", err, graphRef)
		}
	} else {
		m, err := models.Open(ref, models.Options{HubCache: o.HubCache, Offline: true, Variant: o.Variant, NoBuild: true})
		if err != nil {
			return advise(err, ref)
		}
		res.Checks = checkModelFiles(m)
		if m.Dir() == "" {
			res.Note = "built into the program: there are no hashes to check its files against; they parse"
		} else {
			res.Note = "a folder: there are no hashes to check its files against; they parse"
		}
	}
	for _, c := range res.Checks {
		res.OK = res.OK && c.OK
	}
	if o.JSON {
		if err := writeJSONIndent(e.Stdout, res); err != nil {
			return err
		}
	} else {
		for _, c := range res.Checks {
			status := "ok"
			if !c.OK {
				status = "FAILED: " + c.Reason
			} else if c.Kind == "" {
				status = "ok (" + c.Reason + ")"
			}
			fmt.Fprintf(e.Stdout, "%-40s %-11s %10s  %s\n", c.File, c.Kind, human(c.Size), status)
		}
	}
	if !res.OK {
		if res.Commit == "" {
			return exitError{code: exitFailed, msg: fmt.Sprintf("verify: some files of %s do not parse", ref)}
		}
		return exitError{code: exitFailed, msg: "verify: some files do not match their hashes (delete them from the cache and fetch again)"}
	}
	if res.Note != "" && !o.JSON {
		fmt.Fprintf(e.Stdout, "%s: %s\n", ref, res.Note)
	}
	return nil
}

// checkModelFiles checks that the graphs and model.safetensors of a model
// that is not a cached hub snapshot (a folder, the built-in model) parse.
// Files are read through the model, so the built-in one's too.
func checkModelFiles(m *models.Model) []hub.Check {
	var checks []hub.Check
	size := func(name string) int64 {
		if fi, err := fs.Stat(m.FS(), name); err == nil {
			return fi.Size()
		}
		return 0
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		ck := hub.Check{File: g, Kind: "onnx", Size: size(g)}
		if gi := m.DescribeGraph(g); gi == nil {
			ck.Reason = "missing"
		} else if gi.Error != "" {
			ck.Reason = gi.Error
		} else {
			ck.OK = true
		}
		checks = append(checks, ck)
	}
	if m.Has(models.WeightsFile) {
		ck := hub.Check{File: models.WeightsFile, Kind: "safetensors", Size: size(models.WeightsFile)}
		b, err := m.ReadFile(models.WeightsFile)
		if err == nil {
			_, _, err = tensorio.DecodeSafetensors(b)
		}
		if err != nil {
			ck.Reason = err.Error()
		} else {
			ck.OK = true
		}
		checks = append(checks, ck)
	}
	return checks
}
