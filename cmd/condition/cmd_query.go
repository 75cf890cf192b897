package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
)

type queryOptions struct {
	eng      engineFlags
	prompts  []string
	top      int
	heatmaps string
	json     bool
	partial  bool
	box      float32
}

func (o *queryOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&o.prompts, "prompt", "p", nil, "prompt text; repeatable (each is searched on its own)")
	fs.IntVar(&o.top, "top", index.DefaultSearchTop, fmt.Sprintf("how many images to return per prompt, best first (1 to %d)", index.MaxSearchTop))
	fs.StringVar(&o.heatmaps, "heatmap-dir", "", "folder to write each hit's heatmap sheet to (PNG, over the original image when it can be read)")
	fs.StringVar(&o.heatmaps, "heatmaps", "", "the old name of --heatmap-dir")
	fs.MarkDeprecated("heatmaps", "use --heatmap-dir DIR (--heatmaps of run is a switch)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per hit (words' maps included)")
	fs.BoolVar(&o.partial, "partial", false, "search the complete parts of an index some of whose parts are unfinished or truncated (they are named on stderr)")
	fs.Float32Var(&o.box, "box", index.DefaultSearchBox, "a word's box holds the cells, connected to its peak, of at least this fraction of the peak (0 to 1)")
	o.eng.AddFlags(fs, withImages|withPrompts|withReadout)
	if f := fs.Lookup("model"); f != nil {
		f.Usage, f.DefValue = "model: the index's when not given; else a directory in the Hugging Face layout, a hub id org/name[@revision], or default (built in)", ""
	}
}

// querySegment is one segment of a video as --json prints it (after
// the prompt's hits).
type querySegment struct {
	Prompt      string `json:"prompt"`
	SegmentRank int    `json:"segment"` // its rank among the prompt's segments
	Heatmap     string `json:"heatmap,omitempty"`
	index.Segment
}

// queryHit is one hit as --json prints it.
type queryHit struct {
	Prompt  string `json:"prompt"`
	Rank    int    `json:"rank"`
	Heatmap string `json:"heatmap,omitempty"`
	index.Hit
}

func runQuery(ctx context.Context, e *env, args []string) error {
	var o queryOptions
	fs := newFlagSet(e, "query", "query INDEX --prompt TEXT [--prompt TEXT]... [flags]\n\nINDEX is a job's output (run --index), its index folder or one part, a folder or an object-store prefix, or a collection in Weaviate (weaviate://HOST:PORT/Name, run --index weaviate://...; API key from $"+weaviateKeyEnv+")")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("query takes one index (a job's output folder or prefix), got %d arguments", fs.NArg())
	}
	if len(o.prompts) == 0 {
		return usagef("no prompt: give --prompt TEXT")
	}
	if o.top < 1 || o.top > index.MaxSearchTop {
		return usagef("--top must be 1 to %d, got %d", index.MaxSearchTop, o.top)
	}
	if !(o.box > 0 && o.box <= 1) {
		return usagef("--box must be a fraction of the peak above 0 and at most 1, got %g", o.box)
	}
	for i, p := range o.prompts {
		if strings.TrimSpace(p) == "" {
			return usagef("prompt %d is empty", i)
		}
	}
	where := fs.Arg(0)
	stores := objstore.NewURLReader()
	defer stores.Close()
	x, err := index.Open(ctx, where, index.Options{Partial: o.partial, Store: stores, APIKey: os.Getenv(weaviateKeyEnv)})
	var inc *index.IncompletePartError
	if errors.As(err, &inc) {
		return fmt.Errorf("%w\n(add --partial to search the other parts)", err)
	}
	if err != nil {
		return collectionAdvice(err, where)
	}
	defer x.Close()
	for _, s := range x.Skipped() {
		e.Log.Warn("index part left out", "part", s.Name, "why", s.Err)
	}
	meta := x.Meta()
	if !fs.Changed("model") {
		o.eng.model = meta.Model
	}
	if err := o.eng.indexReadout("index", where, meta); err != nil {
		return err
	}
	eng, err := o.eng.open(ctx, e, pipeline.Options{})
	if err != nil {
		return err
	}
	defer eng.Close()
	if o.heatmaps != "" {
		if err := os.MkdirAll(o.heatmaps, 0o755); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(e.Stdout)
	for k, prompt := range o.prompts {
		res, err := x.Search(ctx, eng, prompt, index.SearchOptions{Top: o.top, Words: true, Box: o.box})
		if err != nil {
			return o.eng.advise(err)
		}
		warnAllUnknown(e, eng, res.Prompt)
		sheets := make([]string, len(res.Hits))
		segSheets := make([]string, len(res.Segments))
		if o.heatmaps != "" {
			if err := writeQuerySheets(ctx, e, eng, x, o.heatmaps, k, res, sheets, segSheets); err != nil {
				return err
			}
		}
		if o.json {
			if err := printQueryJSON(enc, prompt, res, sheets, segSheets); err != nil {
				return err
			}
			continue
		}
		printQueryTable(e.Stdout, prompt, res, meta.Rows, sheets, o.box)
		printSegments(e.Stdout, res.Segments, segSheets)
	}
	return nil
}

// printQueryJSON prints one prompt's hits, then its segments, one JSON
// object a line.
func printQueryJSON(enc *json.Encoder, prompt string, res *index.SearchResult, sheets, segSheets []string) error {
	for i, h := range res.Hits {
		if err := enc.Encode(queryHit{Prompt: prompt, Rank: i + 1, Heatmap: sheets[i], Hit: h}); err != nil {
			return err
		}
	}
	for i, sg := range res.Segments {
		if err := enc.Encode(querySegment{Prompt: prompt, SegmentRank: i + 1, Heatmap: segSheets[i], Segment: sg}); err != nil {
			return err
		}
	}
	return nil
}

// printSegments prints a prompt's segments of videos (nothing when it
// has none): rank, the best frame's score, the video, the run's first and
// last frames' times, and per word its peak on the best frame.
func printSegments(w io.Writer, segs []index.Segment, sheets []string) {
	if len(segs) == 0 {
		return
	}
	fmt.Fprintf(w, "segments: runs of consecutive frames of a video in its top quarter of scores, with a hit among them\n")
	fmt.Fprintf(w, "%4s  %7s  %s\n", "rank", "score", "video  start-end s (frames)  best frame's time, per word: peak cell  box  peak cosine")
	for i, sg := range segs {
		fmt.Fprintf(w, "%4d  %7.3f  %s  %.2f-%.2f s (%d)  best %.2f s", i+1, sg.Best.Score, sg.Video, sg.Start, sg.End, sg.Frames, *sg.Best.Time)
		for _, wh := range sg.Best.Words {
			fmt.Fprintf(w, "  %s %d,%d [%d,%d-%d,%d] %.3f", wh.Word, wh.Cell[0], wh.Cell[1], wh.Box[0], wh.Box[1], wh.Box[2], wh.Box[3], wh.Peak)
		}
		if sheets[i] != "" {
			fmt.Fprintf(w, "  → %s", sheets[i])
		}
		fmt.Fprintln(w)
	}
}

// printQueryTable prints one prompt's hits: rank, score, path and, per
// content word, its peak cell, its box and the peak's cosine.
func printQueryTable(w io.Writer, prompt string, res *index.SearchResult, rows int, sheets []string, box float32) {
	fmt.Fprintf(w, "%s  (%d images searched; per word: peak cell row,col  box row0,col0-row1,col1 of the cells ≥ %.2g·peak connected to it  peak cosine)\n",
		quotePrompt(prompt), rows, box)
	fmt.Fprintf(w, "%4s  %7s  %s\n", "rank", "score", "path")
	for i, h := range res.Hits {
		var words []string
		for _, wh := range h.Words {
			words = append(words, fmt.Sprintf("%s %d,%d [%d,%d-%d,%d] %.3f", wh.Word, wh.Cell[0], wh.Cell[1], wh.Box[0], wh.Box[1], wh.Box[2], wh.Box[3], wh.Peak))
		}
		fmt.Fprintf(w, "%4d  %7.3f  %s", i+1, h.Score, h.Path)
		if len(words) > 0 {
			fmt.Fprintf(w, "  %s", strings.Join(words, "  "))
		}
		if sheets[i] != "" {
			fmt.Fprintf(w, "  → %s", sheets[i])
		}
		fmt.Fprintln(w)
	}
}

// warnAllUnknown warns when every content word of the prompt is one the
// model spells out letter by letter: the ranking then means little (the
// engine has named the words already).
func warnAllUnknown(e *env, eng *pipeline.Engine, p *pipeline.Prompt) {
	ids := make([]int, len(p.IDs))
	for i, id := range p.IDs {
		ids[i] = int(id)
	}
	unknown, err := eng.Tokenizer().Unknown(ids)
	if err != nil {
		return
	}
	if content := len(p.Content); len(unknown) > 0 && len(unknown) >= content {
		e.Log.Warn("the prompt has no word the model knows: its ranking means little", "prompt", quotePrompt(p.Text))
	}
}

// writeQuerySheets writes the heatmap sheets of prompt k's hits and of
// its segments' best frames (labelled with their times) into dir (drawn
// over each original, or a grey panel when it cannot be read) and names
// them in sheets and segSheets.
func writeQuerySheets(ctx context.Context, e *env, eng *pipeline.Engine, x *index.Index, dir string, k int, res *index.SearchResult, sheets, segSheets []string) error {
	hits := slices.Clone(res.Hits)
	for _, sg := range res.Segments {
		hits = append(hits, sg.Best)
	}
	pngs, unread, err := x.Sheets(ctx, eng, hits)
	if err != nil {
		return err
	}
	for i, png := range pngs {
		if png == nil {
			continue
		}
		if unread[i] != nil {
			e.Log.Warn("heatmap drawn over a plain panel: the original image cannot be read", "path", hits[i].Path, "error", unread[i])
		}
		name := filepath.Join(dir, fmt.Sprintf("%d-%03d-%s.png", k, i+1, sheetName(hits[i].Path)))
		if i >= len(sheets) {
			name = filepath.Join(dir, fmt.Sprintf("%d-segment-%03d-%s.png", k, i-len(sheets)+1, sheetName(hits[i].Path)))
		}
		if err := tensorio.WriteFileAtomic(name, func(w io.Writer) error {
			_, err := w.Write(png)
			return err
		}); err != nil {
			return err
		}
		if i < len(sheets) {
			sheets[i] = name
		} else {
			segSheets[i-len(sheets)] = name
		}
	}
	return nil
}

// sheetName makes a hit's relative path one file name.
func sheetName(p string) string {
	p = strings.TrimSuffix(p, path.Ext(p))
	return strings.NewReplacer("/", "_", "\\", "_", "..", "_").Replace(p)
}
