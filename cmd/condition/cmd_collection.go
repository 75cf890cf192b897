package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
)

// collectionUsage is the help of the collection group, after its list.
const collectionUsage = `A collection in Weaviate (weaviate://HOST:PORT/Name; API key from $` + weaviateKeyEnv + `) holds one
object per image, written by run --index weaviate://HOST:PORT/Name. Its index settings are fixed
when it is made: create makes it with them, for the vectors of --model (and --readout); run
--index then writes into it (or makes one with the defaults when it does not exist). info
describes a collection as the database does, drop removes it and every object in it.`

// collectionFlags are the settings a collection in Weaviate is made with:
// flags of collection create (and, deprecated, of run --index weaviate://).
type collectionFlags struct {
	replication       int
	muvera            bool
	vectorIndex       string
	efBuild, maxConns int
	quantize          string
	rescore           int
}

// collectionFlagNames are the flags of collectionFlags.
var collectionFlagNames = []string{"replication", "muvera", "vector-index", "ef-construction", "max-connections", "quantization", "rescore-limit"}

// AddFlags binds the collection's settings to fs.
func (f *collectionFlags) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&f.replication, "replication", 1, "the collection's replication factor (nodes holding each object)")
	fs.BoolVar(&f.muvera, "muvera", false, "encode each image's patches with MUVERA (one vector per image in the search graph, less memory, approximate MaxSim)")
	fs.StringVar(&f.vectorIndex, "vector-index", "", "how the collection searches its image embeddings: hnsw (a graph, approximate; the default) or flat (every embedding compared: exact, time linear in the images)")
	fs.IntVar(&f.efBuild, "ef-construction", 0, "the search list size while building the hnsw graph (0: Weaviate's default, 128); larger finds more of the exact nearest images, ingestion slower")
	fs.IntVar(&f.maxConns, "max-connections", 0, "the links per image in the hnsw graph (0: Weaviate's default, 32); larger finds more of the exact nearest images, more memory")
	fs.StringVar(&f.quantize, "quantization", "none", "compress the image embeddings in the index: none, or rq (Weaviate's 8-bit rotational quantization; a search ranks by the codes, then --rescore-limit images by their embeddings)")
	fs.IntVar(&f.rescore, "rescore-limit", 0, fmt.Sprintf("with --quantization rq: how many images a search ranks again by their embeddings (0: %d)", index.DefaultRescoreLimit))
}

// options returns the library's options of the settings.
func (f *collectionFlags) options(apiKey, consistency string) index.CollectionOptions {
	q := f.quantize
	if q == "none" {
		q = ""
	}
	return index.CollectionOptions{APIKey: apiKey, Consistency: consistency, Replication: f.replication, Muvera: f.muvera,
		VectorIndex: f.vectorIndex, EFConstruction: f.efBuild, MaxConnections: f.maxConns, Quantization: q, RescoreLimit: f.rescore}
}

// settingFlags are the flags of index.SettingError's fields.
var settingFlags = map[string]string{"Consistency": "--consistency", "Replication": "--replication", "VectorIndex": "--vector-index",
	"EFConstruction": "--ef-construction", "MaxConnections": "--max-connections", "Quantization": "--quantization", "RescoreLimit": "--rescore-limit"}

// settingUsage returns err as a usage error naming the flag of the setting
// it refuses when it is an index.SettingError of one, else err.
func settingUsage(err error) error {
	var se *index.SettingError
	if !errors.As(err, &se) || settingFlags[se.Field] == "" {
		return err
	}
	v := fmt.Sprint(se.Value)
	if s, ok := se.Value.(string); ok {
		v = fmt.Sprintf("%q", s)
	}
	return usagef("%s %s: want %s", settingFlags[se.Field], v, se.Want)
}

// collectionAdvice adds to err what to do about a collection that is
// missing or exists already with this program's commands.
func collectionAdvice(err error, url string) error {
	switch {
	case errors.Is(err, index.ErrNoCollection):
		return fmt.Errorf("%w\n(make it with `condition collection create %s --model MODEL`, or write images into it with `condition run --index %s`)", err, url, url)
	case errors.Is(err, index.ErrCollectionExists):
		return fmt.Errorf("%w\n(`condition collection info %s` describes it; `condition collection drop %s --yes` removes it and its objects)", err, url, url)
	}
	return err
}

// collectionArg returns the one collection address of args.
func collectionArg(args []string) (string, error) {
	if len(args) != 1 {
		return "", usagef("want one collection, weaviate://HOST:PORT/Name; got %d arguments", len(args))
	}
	if err := index.CheckCollectionURL(args[0]); err != nil {
		return "", usageError{err}
	}
	return args[0], nil
}

// runCollectionCreate makes a collection for the vectors of --model.
func runCollectionCreate(ctx context.Context, e *env, args []string) error {
	var eng engineFlags
	var coll collectionFlags
	fs := newFlagSet(e, "collection create", "collection create weaviate://HOST:PORT/Name [--model MODEL] [--readout R] [flags]\n\n"+
		"The model (and readout) give the collection its vectors' width, patch grid and logit scale; only jobs of the same model and readout write into it.")
	coll.AddFlags(fs)
	eng.AddFlags(fs, withReadout)
	asJSON := fs.Bool("json", false, "print the collection made as JSON (as collection info --json)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	url, err := collectionArg(fs.Args())
	if err != nil {
		return err
	}
	co := coll.options(os.Getenv(weaviateKeyEnv), "")
	if err := co.Check(); err != nil {
		return settingUsage(err)
	}
	en, err := eng.open(ctx, e, pipeline.Options{})
	if err != nil {
		return err
	}
	defer en.Close()
	meta, err := batch.CollectionMeta(en)
	if err != nil {
		return err
	}
	c, err := index.CreateCollection(ctx, url, meta, co)
	if err != nil {
		return collectionAdvice(settingUsage(err), url)
	}
	e.Log.Info("collection created", "collection", url, "model", meta.Model)
	return printCollection(ctx, e, c, *asJSON)
}

// runCollectionInfo describes a collection as the database does.
func runCollectionInfo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "collection info", "collection info weaviate://HOST:PORT/Name [--json]")
	asJSON := fs.Bool("json", false, "print the description as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	url, err := collectionArg(fs.Args())
	if err != nil {
		return err
	}
	c, err := index.OpenCollection(ctx, url, index.CollectionOptions{APIKey: os.Getenv(weaviateKeyEnv)})
	if err != nil {
		return collectionAdvice(err, url)
	}
	return printCollection(ctx, e, c, *asJSON)
}

// runCollectionDrop removes a collection made by this program and every
// object in it.
func runCollectionDrop(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "collection drop", "collection drop weaviate://HOST:PORT/Name --yes")
	yes := fs.Bool("yes", false, "do remove the collection and every object in it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	url, err := collectionArg(fs.Args())
	if err != nil {
		return err
	}
	if !*yes {
		return usagef("drop removes %s and every object in it, for every job and search that uses it: add --yes to do so", url)
	}
	c, err := index.OpenCollection(ctx, url, index.CollectionOptions{APIKey: os.Getenv(weaviateKeyEnv)})
	if err != nil {
		return collectionAdvice(err, url)
	}
	n, err := c.Count(ctx)
	if err != nil {
		return err
	}
	if err := c.Delete(ctx); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "dropped %s (%d objects)\n", url, n)
	return nil
}

// collectionInfo is a collection's description (collection info --json):
// its address, its object count, its CollectionMeta (the model stamp,
// flattened) and its settings as the database reports them.
type collectionInfo struct {
	Collection string `json:"collection"`
	Objects    int    `json:"objects"`
	index.CollectionMeta
	Settings index.CollectionSettings `json:"settings"`
}

// printCollection prints c's description to stdout.
func printCollection(ctx context.Context, e *env, c *index.Collection, asJSON bool) error {
	n, err := c.Count(ctx)
	if err != nil {
		return err
	}
	info := collectionInfo{Collection: c.String(), Objects: n, CollectionMeta: c.Meta(), Settings: c.Settings()}
	if asJSON {
		b, _ := json.MarshalIndent(info, "", "  ")
		_, err := fmt.Fprintln(e.Stdout, string(b))
		return err
	}
	m, s := info.CollectionMeta, info.Settings
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("collection", "%s", info.Collection)
	row("objects", "%d", n)
	row("format", "%s", m.Format)
	row("model", "%s", m.Model)
	if m.Revision != "" {
		row("revision", "%s", m.Revision)
	}
	row("readout", "%s", cmp.Or(m.Readout, string(pipeline.ReadoutRaw)))
	row("width", "%d", m.Dim)
	if m.MaxPatches > 0 {
		row("grid", "each image's own, at most %d patches", m.MaxPatches)
	} else {
		row("grid", "%dx%d", m.Grid[0], m.Grid[1])
	}
	row("logit scale", "%.6g (bias %.6g)", m.LogitScale, m.LogitBias)
	idx := s.VectorIndex
	if s.VectorIndex == index.VectorIndexHNSW {
		idx += fmt.Sprintf(" (ef-construction %d, max-connections %d)", s.EFConstruction, s.MaxConnections)
	}
	row("vector index", "%s", idx)
	if s.Quantization != "" {
		row("quantization", "%s (rescore limit %d)", s.Quantization, s.RescoreLimit)
	} else {
		row("quantization", "none")
	}
	switch {
	case s.Patches && s.Muvera:
		row("patches", "multi-vector (MaxSim), MUVERA")
	case s.Patches:
		row("patches", "multi-vector (MaxSim)")
	default:
		row("patches", "none")
	}
	row("replication", "%d", s.Replication)
	return tw.Flush()
}
