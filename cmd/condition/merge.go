package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline"
)

func init() {
	register(command{name: "merge", summary: "join the shard manifests of a job's output folder into manifest.jsonl", run: runMerge})
}

type mergeOptions struct {
	images []string
	json   bool
}

func (o *mergeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.images, "images", nil, "the job's inputs (repeatable): also report images that no shard recorded")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
}

func runMerge(ctx context.Context, e *env, args []string) error {
	var o mergeOptions
	fs := newFlagSet(e, "merge", "merge [--images PATH]... [--json] DIR")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("merge takes one output folder, got %d arguments", fs.NArg())
	}
	rep, err := pipeline.Merge(ctx, fs.Arg(0), o.images)
	if err != nil {
		return err
	}
	if o.json {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.Stdout, string(b))
	} else {
		fmt.Fprintf(e.Stdout, "merged %d of %d shard manifests into %s: %d images (%d ok, %d failed)\n",
			len(rep.Shards), rep.ShardCount, rep.Out, rep.Images, rep.OK, rep.Failed)
		list := func(what string, xs []string) {
			if len(xs) > 0 {
				fmt.Fprintf(e.Stdout, "%s (%d): %s\n", what, len(xs), strings.Join(head(xs, 20), ", "))
			}
		}
		if len(rep.MissingShards) > 0 {
			fmt.Fprintf(e.Stdout, "missing shards: %v\n", rep.MissingShards)
		}
		list("duplicated", rep.Duplicated)
		list("missing", rep.Missing)
		list("unexpected", rep.Unexpected)
	}
	if len(rep.MissingShards) > 0 || len(rep.Missing) > 0 || rep.Failed > 0 {
		return exitError{code: exitFailed, msg: "incomplete: see the report above"}
	}
	return nil
}

// head returns at most n items of xs, with a marker for the rest.
func head(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(append([]string(nil), xs[:n]...), fmt.Sprintf("… %d more", len(xs)-n))
}
