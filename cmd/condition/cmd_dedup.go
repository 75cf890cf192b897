package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

type dedupOptions struct {
	threshold float32
	out       string
	keep      string
	group     string
	json      bool
	noPics    bool
	clusters  int
	probe     int
	recall    int
	blockRows int
	share     shareFlags
}

func (o *dedupOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Float32Var(&o.threshold, "threshold", dedup.DefaultThreshold, "the least cosine of two images' embeddings for them to be near-duplicates (above 0, at most 1)")
	fs.StringVar(&o.out, "out", "", "a new folder to write groups.jsonl, keep.txt and drop.txt into (refused if it exists); without it only the summary")
	fs.StringVar(&o.keep, "keep", "first", "which image of a group is kept: first (earliest in the index's order), central (highest mean cosine to its group) or largest (most pixels; needs sizes the index does not record)")
	fs.StringVar(&o.group, "group", "star", "how pairs make groups: star (each kept image takes its neighbours not yet taken: every duplicate within the threshold of the kept one) or components (every chain of pairs joins one group)")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON")
	fs.IntVar(&o.clusters, "clusters", 0, "approximate: group the images into this many clusters (spherical k-means) and compare only within them (0: every pair, exact)")
	fs.IntVar(&o.probe, "probe", dedup.DefaultProbe, "with --clusters: compare each image within its 1 or 2 nearest clusters")
	fs.IntVar(&o.recall, "check-recall", 0, "with --clusters: compare this many images with every other exactly and report the fraction of their pairs found")
	fs.IntVar(&o.blockRows, "block-rows", dedup.DefaultBlockRows, "rows compared as one block: memory per core, and the unit a split search deals out (every share of one search takes the same)")
	o.share.AddFlags(fs)
	fs.BoolVar(&o.noPics, "no-pictures", false, "with --out, write no nn-histogram.png/.json, groups.png or near-threshold.png (and search no pairs below the threshold for them)")
}

// dedupNearMargin is how far below the threshold dedup searches pairs for
// near-threshold.png.
const dedupNearMargin = 0.02

// dedupImage is one image of groups.jsonl: where the job read it and, for
// a duplicate, its cosine to the image kept.
type dedupImage struct {
	Source string   `json:"source"`
	Member string   `json:"member,omitempty"`
	Path   string   `json:"path"`
	Cosine *float32 `json:"cosine,omitempty"`
}

// dedupSummary is what dedup prints (--json: as JSON).
type dedupSummary struct {
	Index      string        `json:"index"`
	Rows       int           `json:"rows"`
	Images     int           `json:"images"`
	Pairs      int           `json:"pairs"`
	Groups     int           `json:"groups"`
	Duplicates int           `json:"duplicates"`
	Kept       int           `json:"kept"`
	Threshold  float32       `json:"threshold"`
	Group      string        `json:"group"`
	Keep       string        `json:"keep"`
	Out        string        `json:"out,omitempty"`
	Clusters   int           `json:"clusters,omitempty"`
	Recall     *dedup.Recall `json:"recall_check,omitempty"`
}

func runDedup(ctx context.Context, e *env, args []string) error {
	var o dedupOptions
	fs := newFlagSet(e, "dedup", "dedup INDEX [--threshold T] [--out DIR] [--keep first|central|largest] [--group star|components] [--clusters K [--probe 1|2] [--check-recall N]] [--no-pictures] [--json]\n       dedup INDEX --shard-index I --shard-count N --out PART_DIR [--threshold T] [--clusters K [--probe 1|2]]   (then: condition merge PART_DIR... --out DIR)\n\nINDEX is a job's output (run --index), its index folder or one part, a folder or an object-store prefix, or a collection weaviate://HOST:PORT/Name (API key from $`+weaviateKeyEnv+`)")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("dedup takes one index (a job's output folder or prefix), got %d arguments", fs.NArg())
	}
	opts, err := o.options()
	if err != nil {
		return err
	}
	if o.share.given(fs) {
		return runDedupShare(ctx, e, &o, opts, fs.Arg(0))
	}
	pictures := o.out != "" && !o.noPics
	opts.NoNearest = !pictures
	if pictures {
		opts.NearMargin = min(dedupNearMargin, opts.Threshold/2)
	}
	if o.out != "" {
		if _, err := os.Lstat(o.out); err == nil {
			return usagef("--out %s exists: give a new folder", o.out)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	where := fs.Arg(0)
	x, closeIndex, err := openDedupIndex(ctx, where)
	if err != nil {
		return err
	}
	defer closeIndex()
	e.Log.Info("dedup", "index", where, "rows", x.Rows(), "threshold", fmt.Sprint(opts.Threshold), "group", opts.Group, "keep", opts.Keep)
	line := newStatusLine(e.Stderr, o.json)
	opts.Progress = dedupProgress(line, opts.Clusters > 0)
	res, err := dedup.Run(ctx, x, opts)
	line.done()
	if err != nil {
		return err
	}
	sum := dedupSummary{Index: where, Rows: res.Rows, Images: res.Images, Pairs: len(res.Pairs), Groups: len(res.Groups), Duplicates: res.Duplicates(),
		Kept: res.Images - res.Duplicates(), Threshold: res.Threshold, Group: opts.Group.String(), Keep: opts.Keep.String(), Out: o.out, Clusters: res.Clusters, Recall: res.Recall}
	if o.out != "" {
		if err := writeDedup(ctx, x, res, o.out, pictures); err != nil {
			return err
		}
	}
	return printDedup(e, sum, o.json, pictures)
}

// printDedup prints the summary (as JSON with asJSON) and the files
// written.
func printDedup(e *env, sum dedupSummary, asJSON, pictures bool) error {
	if asJSON {
		return json.NewEncoder(e.Stdout).Encode(sum)
	}
	fmt.Fprintf(e.Stdout, "%d images (%d rows), %d pairs of cosine ≥ %g, %d groups (%s), %d duplicates, %d kept (%s)\n",
		sum.Images, sum.Rows, sum.Pairs, sum.Threshold, sum.Groups, sum.Group, sum.Duplicates, sum.Kept, sum.Keep)
	if r := sum.Recall; r != nil {
		fmt.Fprintf(e.Stdout, "approximate (%d clusters): recall %.4f (%d of the %d exact pairs of %d images drawn)\n", sum.Clusters, r.Ratio, r.Found, r.Exact, r.Sampled)
	}
	if sum.Out != "" {
		files := "{groups.jsonl,keep.txt,drop.txt}"
		if pictures {
			files = "{groups.jsonl,keep.txt,drop.txt,nn-histogram.png,nn-histogram.json,groups.png,near-threshold.png}"
		}
		fmt.Fprintf(e.Stdout, "wrote %s\n", filepath.Join(sum.Out, files))
	}
	return nil
}

// openDedupIndex opens the index at where (a folder, an object-store
// prefix or a collection in Weaviate) and checks that dedup can search
// it; close closes it and its stores.
func openDedupIndex(ctx context.Context, where string) (x *index.Index, close func(), err error) {
	if index.IsCollectionURL(where) {
		return openDedupCollection(ctx, where)
	}
	stores := objstore.NewURLReader()
	x, err = index.Open(ctx, where, index.Options{Store: stores})
	if err != nil {
		stores.Close()
		return nil, nil, err
	}
	if err := dedup.CheckIndex(x); err != nil {
		x.Close()
		stores.Close()
		return nil, nil, err
	}
	return x, func() { x.Close(); stores.Close() }, nil
}

// dedupProgress returns the progress callback that shows the comparison
// on line: block pairs, or clusters.
func dedupProgress(line *statusLine, clusters bool) func(done, total int) {
	start := time.Now()
	unit := "block pairs"
	if clusters {
		unit = "clusters"
	}
	return func(done, total int) {
		eta := time.Duration(float64(time.Since(start)) * float64(total-done) / float64(max(done, 1))).Round(time.Second)
		line.show(fmt.Sprintf("%scomparing: %d/%d %s, ETA %s", bar(done, total, 24), done, total, unit, eta), false)
	}
}

// options parses the flags into the library's options.
func (o *dedupOptions) options() (dedup.Options, error) {
	opts := dedup.Options{Threshold: o.threshold, Clusters: o.clusters, Probe: o.probe, CheckRecall: o.recall, BlockRows: o.blockRows}
	if o.blockRows < 1 {
		return opts, usagef("--block-rows %d: want 1 or more", o.blockRows)
	}
	if !(o.threshold > 0 && o.threshold <= 1) {
		return opts, usagef("--threshold %g: want a cosine above 0 and at most 1", o.threshold)
	}
	if o.clusters < 0 || o.probe < 1 || o.probe > 2 || o.recall < 0 {
		return opts, usagef("--clusters %d, --probe %d, --check-recall %d: want clusters and a recall sample of 0 or more, probe 1 or 2", o.clusters, o.probe, o.recall)
	}
	if o.recall > 0 && o.clusters == 0 {
		return opts, usagef("--check-recall measures the approximate search: give --clusters too")
	}
	switch o.keep {
	case "first":
		opts.Keep = dedup.KeepFirst
	case "central":
		opts.Keep = dedup.KeepCentral
	case "largest":
		return opts, usagef("--keep largest: %v", dedup.ErrNoSizes)
	default:
		return opts, usagef("--keep %q: want first, central or largest", o.keep)
	}
	switch o.group {
	case "star":
		opts.Group = dedup.Star
	case "components":
		opts.Group = dedup.Components
	default:
		return opts, usagef("--group %q: want star or components", o.group)
	}
	return opts, opts.Check()
}

// writeDedup writes groups.jsonl, keep.txt and drop.txt (and with
// pictures, the pictures of dedupPictures) into a temporary folder beside
// out, then renames it to out: a killed run leaves no out.
func writeDedup(ctx context.Context, x *index.Index, res *dedup.Result, out string, pictures bool) (err error) {
	parent, base := filepath.Dir(out), filepath.Base(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	image := func(r int) dedupImage {
		_, it, _ := x.RowItem(r)
		src := it.Source
		if src == "" {
			src = it.Path
		}
		return dedupImage{Source: src, Member: it.Member, Path: it.Path}
	}
	dropped := make(map[int]bool, res.Duplicates())
	if err := writeLines(filepath.Join(tmp, "groups.jsonl"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, g := range res.Groups {
			line := struct {
				Keep       dedupImage   `json:"keep"`
				Duplicates []dedupImage `json:"duplicates"`
			}{Keep: image(g.Keep)}
			for _, m := range g.Dups {
				im := image(m.Row)
				im.Cosine = &m.Cos
				line.Duplicates = append(line.Duplicates, im)
				dropped[m.Row] = true
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		drop bool
	}{{"keep.txt", false}, {"drop.txt", true}} {
		if err := writeLines(filepath.Join(tmp, f.name), func(w io.Writer) error {
			for r := range res.Rows {
				if _, _, ok := x.RowItem(r); ok && dropped[r] == f.drop {
					if _, err := fmt.Fprintln(w, listLine(image(r))); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if pictures {
		if err := writeDedupPictures(ctx, x, res, tmp); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("--out %s appeared while dedup ran: its results are left in %s", out, tmp)
	}
	return os.Rename(tmp, out)
}

// listLine is an image as a line of a list run --list reads: its file or
// URL; a tar shard's member as SHARD#MEMBER, which a list cannot name.
func listLine(im dedupImage) string {
	if im.Member != "" {
		return im.Source + "#" + im.Member
	}
	return im.Source
}

// writeLines writes a file through a buffer, syncing and closing it.
func writeLines(name string, write func(w io.Writer) error) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := write(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
