package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// shareFlags are dedup's flags of a split search.
type shareFlags struct {
	index, count int
}

func (f *shareFlags) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&f.index, "shard-index", -1, "this process's share of a split search (default: from the scheduler's environment, as run takes its shard); --out is then the share's part, which condition merge joins")
	fs.IntVar(&f.count, "shard-count", 0, "split the search into this many shares (default: SLURM_ARRAY_TASK_COUNT, with --shard-index)")
}

// given reports whether the search is split: --shard-index or
// --shard-count given.
func (f *shareFlags) given(fs *pflag.FlagSet) bool {
	return fs.Changed("shard-index") || fs.Changed("shard-count")
}

// dedupShareSummary is what a share prints (--json: as JSON).
type dedupShareSummary struct {
	Index     string  `json:"index"`
	Share     int     `json:"share"`
	Shares    int     `json:"shares"`
	Rows      int     `json:"rows"`
	RowsFrom  int     `json:"rows_from"`
	RowsTo    int     `json:"rows_to"`
	Clusters  []int   `json:"clusters,omitempty"`
	Pairs     int     `json:"pairs"`
	Threshold float32 `json:"threshold"`
	Out       string  `json:"out"`
}

// runDedupShare runs one share of a split search of the index at where
// and writes its part into --out.
func runDedupShare(ctx context.Context, e *env, o *dedupOptions, opts dedup.Options, where string) error {
	share, err := batch.ResolveShard(o.share.index, o.share.count, os.Getenv)
	if err != nil {
		return usageError{err}
	}
	share.Count = max(share.Count, 1)
	if o.out == "" {
		return usagef("--shard-index/--shard-count: give --out, the new folder of this share's part (condition merge joins the parts)")
	}
	if o.recall > 0 {
		return usagef("--check-recall compares its sample with every image: run it without --shard-index/--shard-count")
	}
	if _, err := os.Lstat(o.out); err == nil {
		return usagef("--out %s exists: give a new folder", o.out)
	}
	x, closeIndex, err := openDedupIndex(ctx, where)
	if err != nil {
		return err
	}
	defer closeIndex()
	recorded := where
	if !batch.IsStoreURL(where) && !index.IsCollectionURL(where) {
		if abs, err := filepath.Abs(where); err == nil {
			recorded = abs
		}
	}
	opts.NoNearest = o.noPics
	if !o.noPics {
		opts.NearMargin = min(dedupNearMargin, opts.Threshold/2)
	}
	e.Log.Info("dedup share", "index", where, "share", share.Index, "shares", share.Count, "rows", x.Rows(), "threshold", fmt.Sprint(opts.Threshold))
	line := newStatusLine(e.Stderr, o.json)
	opts.Progress = dedupProgress(line, opts.Clusters > 0)
	part, err := dedup.RunShare(ctx, x, recorded, opts, dedup.Share{Index: share.Index, Count: share.Count})
	line.done()
	if err != nil {
		return err
	}
	if err := part.Write(o.out); err != nil {
		return err
	}
	sum := dedupShareSummary{Index: where, Share: part.Share, Shares: part.Shares, Rows: part.Rows, RowsFrom: part.RowsFrom, RowsTo: part.RowsTo,
		Clusters: part.ClusterList, Pairs: part.NumPairs, Threshold: part.Threshold, Out: o.out}
	if o.json {
		return json.NewEncoder(e.Stdout).Encode(sum)
	}
	what := fmt.Sprintf("rows %d to %d of %d, each with every later row", part.RowsFrom, part.RowsTo, part.Rows)
	if part.Clusters > 0 {
		what = fmt.Sprintf("%d of %d clusters", len(part.ClusterList), part.Clusters)
	}
	files := dedup.PartFile + "," + dedup.PairsFile + "," + dedup.CosinesFile
	if part.Nearest {
		files += "," + dedup.NearestFile
	}
	fmt.Fprintf(e.Stdout, "share %d of %d (%s): %d pairs of cosine ≥ %g\nwrote %s\n", part.Share, part.Shares, what, part.NumPairs, part.Threshold-part.NearMargin,
		filepath.Join(o.out, "{"+files+"}"))
	return nil
}

// runMergeDedup joins the parts of a split dedup search (condition merge
// PART_DIR...) into the groups, keep.txt and drop.txt of a whole search.
func runMergeDedup(ctx context.Context, e *env, dirs []string, o mergeOptions) error {
	if len(o.images) > 0 || len(o.lists) > 0 {
		return usagef("--images and --list check a job's outputs, not the parts of a dedup search")
	}
	var parts []*dedup.Part
	for _, d := range dirs {
		p, err := dedup.ReadPart(d)
		if err != nil {
			return err
		}
		parts = append(parts, p)
	}
	do := dedupOptions{threshold: parts[0].Threshold, keep: o.keep, group: o.group, probe: 1, blockRows: 1}
	opts, err := do.options()
	if err != nil {
		return err
	}
	if o.out != "" {
		if _, err := os.Lstat(o.out); err == nil {
			return usagef("--out %s exists: give a new folder", o.out)
		}
	}
	where := o.index
	if where == "" {
		where = parts[0].Index
	}
	x, closeIndex, err := openDedupIndex(ctx, where)
	if err != nil {
		return err
	}
	defer closeIndex()
	res, err := dedup.Merge(ctx, x, parts, opts.Group, opts.Keep)
	if err != nil {
		return err
	}
	sum := dedupSummary{Index: where, Rows: res.Rows, Images: res.Images, Pairs: len(res.Pairs), Groups: len(res.Groups), Duplicates: res.Duplicates(),
		Kept: res.Images - res.Duplicates(), Threshold: res.Threshold, Group: opts.Group.String(), Keep: opts.Keep.String(), Out: o.out, Clusters: res.Clusters}
	pictures := o.out != "" && parts[0].Nearest
	if o.out != "" {
		if err := writeDedup(ctx, x, res, o.out, pictures); err != nil {
			return err
		}
	}
	return printDedup(e, sum, o.json, pictures)
}

// isDedupPart reports whether dir is the part of a split dedup search
// (not a job's output).
func isDedupPart(dir string) bool {
	return !batch.IsStoreURL(dir) && !index.IsCollectionURL(dir) && dedup.IsPart(dir)
}
