package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline/batch"
)

type mergeOptions struct {
	images []string
	lists  []string
	json   bool
	// the parts of a split dedup search
	out, keep, group, index string
}

func (o *mergeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.images, "images", nil, "the job's inputs (repeatable, brace patterns and URLs as in run): also report images that no shard recorded")
	fs.StringArrayVar(&o.lists, "list", nil, "the job's list files (repeatable), walked like --images")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.out, "out", "", "with the parts of a split dedup search, a new folder to write groups.jsonl, keep.txt and drop.txt into")
	fs.StringVar(&o.keep, "keep", "first", "with dedup parts, the image of a group kept (first or central, as dedup --keep)")
	fs.StringVar(&o.group, "group", "star", "with dedup parts, how pairs make groups (star or components, as dedup --group)")
	fs.StringVar(&o.index, "index", "", "with dedup parts, the index they were found over (default: where the first part says its share read it)")
}

func runMerge(ctx context.Context, e *env, args []string) error {
	var o mergeOptions
	fs := newFlagSet(e, "merge", "merge [--images PATH]... [--list FILE]... [--json] DIR|URL\n       merge PART_DIR... [--out DIR] [--keep first|central] [--group star|components] [--index INDEX] [--json]   (the parts of a split dedup search)")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 && isDedupPart(fs.Arg(0)) {
		return runMergeDedup(ctx, e, fs.Args(), o)
	}
	if fs.NArg() != 1 {
		return usagef("merge takes one output folder (or the parts of a split dedup search), got %d arguments", fs.NArg())
	}
	for _, name := range []string{"out", "keep", "group", "index"} {
		if fs.Changed(name) {
			return usagef("--%s is for the parts of a split dedup search; %s is not one", name, fs.Arg(0))
		}
	}
	if out := fs.Arg(0); batch.IsStoreURL(out) || batch.IsShardsOutput(ctx, out) {
		return verifyShards(ctx, e, out, o)
	}
	if len(o.lists) > 0 {
		return usagef("--list: give the inputs of a files-layout job with --images")
	}
	rep, err := batch.Merge(ctx, fs.Arg(0), o.images)
	if err != nil {
		return err
	}
	if rep.HasCollection() {
		if err := rep.CheckCollection(ctx, os.Getenv(weaviateKeyEnv)); err != nil {
			return err
		}
	}
	if o.json {
		if err := writeJSONIndent(e.Stdout, rep); err != nil {
			return err
		}
	} else {
		into := rep.Out
		if into == "" {
			into = "nothing (no manifest.jsonl until the job is complete)"
		}
		fmt.Fprintf(e.Stdout, "merged %d of %d shard manifests into %s: %d images (%d ok, %d failed)\n",
			len(rep.Shards), rep.ShardCount, into, rep.Images, rep.OK, rep.Failed)
		list := func(what string, xs []string) { printList(e, what, xs) }
		if len(rep.MissingShards) > 0 {
			fmt.Fprintf(e.Stdout, "missing shards: %v\n", rep.MissingShards)
		}
		list("duplicated", rep.Duplicated)
		list("missing", rep.Missing)
		list("unexpected", rep.Unexpected)
		if rep.Collection != "" {
			fmt.Fprintf(e.Stdout, "collection %s: %d objects, %d of them of no ok image of this job\n", rep.Collection, rep.CollectionObjects, rep.CollectionOthers)
			list("ok but not in the collection", rep.CollectionMissing)
		}
	}
	if len(rep.MissingShards) > 0 || len(rep.Missing) > 0 || rep.Failed > 0 || len(rep.CollectionMissing) > 0 {
		return exitError{code: exitFailed, msg: "incomplete: see the report above"}
	}
	return nil
}

// printList prints a report's list under what, its first 20 items, when
// it is not empty.
func printList(e *env, what string, xs []string) {
	if len(xs) > 0 {
		fmt.Fprintf(e.Stdout, "%s (%d): %s\n", what, len(xs), strings.Join(head(xs, 20), ", "))
	}
}

// head returns at most n items of xs, with a marker for the rest.
func head(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(append([]string(nil), xs[:n]...), fmt.Sprintf("… %d more", len(xs)-n))
}

// verifyShards reports on a shards-layout output.
func verifyShards(ctx context.Context, e *env, out string, o mergeOptions) error {
	rep, err := batch.VerifyShards(ctx, out, o.images, o.lists)
	if err != nil {
		return err
	}
	if rep.HasCollection() {
		if err := rep.CheckCollection(ctx, os.Getenv(weaviateKeyEnv)); err != nil {
			return err
		}
	}
	if o.json {
		if err := writeJSONIndent(e.Stdout, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.Stdout, "%d shards from %d of %d processes in %s: %d images (%d ok, %d failed)\n",
			rep.Shards, len(rep.ProcessSeen), rep.Processes, out, rep.Images, rep.OK, rep.Failed)
		list := func(what string, xs []string) { printList(e, what, xs) }
		list("broken shards", rep.Broken)
		list("duplicated", rep.Duplicated)
		list("assigned to another process", rep.Misassigned)
		list("missing", rep.Missing)
		list("unexpected", rep.Unexpected)
		if len(rep.Settings) > 1 {
			fmt.Fprintf(e.Stdout, "shards of %d different settings: %s\n", len(rep.Settings), strings.Join(rep.Settings, ", "))
		}
		if rep.Collection != "" {
			fmt.Fprintf(e.Stdout, "collection %s: %d objects, %d of them of no ok image of this job\n", rep.Collection, rep.CollectionObjects, rep.CollectionOthers)
			list("ok but not in the collection", rep.CollectionMissing)
		}
		switch {
		case !rep.Complete() || len(rep.CollectionMissing) > 0:
		case rep.Checked:
			fmt.Fprintln(e.Stdout, "complete: every input image is in exactly one whole shard")
		default:
			fmt.Fprintln(e.Stdout, "every shard is whole and no image is in two; give --images/--list to check against the inputs")
		}
	}
	if !rep.Complete() || len(rep.CollectionMissing) > 0 {
		return exitError{code: exitFailed, msg: "incomplete: see the report above"}
	}
	return nil
}
