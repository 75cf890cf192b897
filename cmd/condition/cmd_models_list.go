package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
)

type listOptions struct {
	modelFlags
	Known   bool
	Verbose bool
}

// knownGraphs says where a known model's graphs come from: an export in
// the repository, or built from its checkpoint on first use (when this
// version's graph builder writes the family).
func knownGraphs(k models.KnownModel) string {
	if !k.Build {
		return "ONNX export"
	}
	for _, f := range []models.Family{models.CLIP, models.MetaCLIP2, models.SigLIP, models.SigLIP2, models.Tipsv2} {
		if f.String() == k.Family && !models.BuildsFamily(f) {
			return "to be built (not by this version)"
		}
	}
	return "built on first use"
}

// knownUse is what to give --model for a known model: its reference (a
// repository in OpenCLIP's layout alone too: its tokenizer files or
// OpenCLIP's built-in CLIP BPE).
func knownUse(k models.KnownModel) string {
	return "--model " + k.Use
}

// printKnown prints the known models as a table, one line a model (its
// reference, family, architecture, where its graphs come from and the
// reference to give --model); verbose adds, for each, its variants,
// outputs, heads and where each fact was checked.
func printKnown(w io.Writer, known []models.KnownModel, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tFAMILY\tARCHITECTURE\tGRAPHS\tUSE")
	for _, k := range known {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Ref, k.Family, shortArch(k.Arch), knownGraphs(k), knownUse(k))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !verbose {
		fmt.Fprintln(w, "(--verbose: each model's variants, outputs, heads and where each was checked)")
		return nil
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
		fmt.Fprintf(w, "\n%s\n  %s\n  family:   %s\n  graphs:   %s\n  use:      %s\n  variants: %s\n  outputs:  %s\n  heads:    %s\n  checked:  %s\n",
			k.Ref, k.Arch, k.Family, knownGraphs(k), knownUse(k), variants, k.Outputs, k.Heads, k.Source)
	}
	return nil
}

// shortArch is the head of a known model's description, up to its first
// parenthesis, colon, semicolon or comma: its architecture and size
// ("ViT-B/32", "SigLIP ViT-B/16 at 224", "TIPSv2 B/14 at 448 px").
func shortArch(arch string) string {
	if i := strings.IndexAny(arch, "(:;,"); i > 0 {
		arch = arch[:i]
	}
	return strings.TrimSpace(arch)
}

func runModelsList(_ context.Context, e *env, args []string) error {
	var o listOptions
	fs := newFlagSet(e, "models list", "models list [--known [--verbose]] [--json] [--hub-cache DIR]")
	fs.BoolVar(&o.Known, "known", false, "list the models this program was checked against (CLIP, MetaCLIP 2, SigLIP, SigLIP 2, PE-Core in OpenCLIP's layout; no TIPSv2 checkpoint was checked; ONNX exports and checkpoints whose graphs are built on first use): a table, one line a model")
	fs.BoolVarP(&o.Verbose, "verbose", "v", false, "with --known: after the table, each model's variants, outputs, heads and where each fact was checked")
	fs.StringVar(&o.HubCache, "hub-cache", "", "Hugging Face hub cache folder")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("models list takes no arguments")
	}
	if o.Verbose && !o.Known {
		return usagef("--verbose adds the notes of --known: give both")
	}
	if o.Known {
		if o.JSON {
			return writeJSONIndent(e.Stdout, models.Known())
		}
		return printKnown(e.Stdout, models.Known(), o.Verbose)
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
