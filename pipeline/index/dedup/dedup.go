// Package dedup finds the near-duplicate images of a job's collection
// index: every pair of images whose pooled joint-space embeddings (the
// index's image embeddings, as stored: float16, float32 or int8) have a
// cosine of at least a threshold, grouped, with one image of each group
// kept and the others marked as duplicates.
//
// The pairs are exact: every image against every other, in blocks of rows
// read from the index (never the N×N matrix), on one goroutine per core.
// Where the CPU has AVX-512 or AVX2 with FMA (halfdot.HasTileKernel), an
// outer block of 32·BlockRows rows is converted to float32, normalised
// and packed once, and every later block of BlockRows rows likewise, then
// compared twelve rows by 32 at a time (halfdot.Tile); elsewhere a block of rows is dotted with every later
// block as stored (halfdot.Dot4x2). Where the CPU also has AVX512-VNNI
// and no nearest cosines are kept for every row, every row is quantized to int8 once
// and the tiles are first scored in int8 (halfdot.TileInt8) against the
// threshold less a proven bound of the quantization and rounding errors;
// only the tiles that reach it are compared in float32, so the pairs are
// the float32 search's, bit for bit (docs/dedup.md derives the bound).
// Memory is the blocks of each goroutine (Options.BlockRows), the
// quantized rows (N·D bytes, with the int8 filter) and the pairs found
// (at most Options.MaxPairs).
//
// With Options.Clusters the search is approximate (SemDeDup's way): a
// spherical k-means of the images, then the exact pairs within each
// cluster (and with the images whose second nearest cluster it is), with
// every row in memory; Options.CheckRecall measures the pairs it misses.
//
// Result.NN is each image's nearest-neighbour cosine (over the pairs
// compared; above 50,000 images, a fixed sample's, Result.Sampled), for a
// histogram to choose the threshold by (Result.Histogram, Histogram.PNG);
// GroupsSheet and NearSheet draw the largest groups and the pairs closest
// to the threshold.
//
// Two groupings: Star (the default) visits the images in keep order and
// lets each image not yet in a group take every neighbour not yet in one,
// so that every duplicate is within the threshold of the image kept;
// Components joins every chain of pairs, so that two unlike images join
// through a run of like ones.
package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/conditionhq/condition/pipeline/index"
)

// DefaultThreshold is the cosine at and above which two images are taken
// as near-duplicates when Options.Threshold is 0. It was chosen on the
// built-in model between the planted near-duplicates (byte copies, JPEG
// quality 40, half size, 5% brighter: cosines 0.974 and above) and
// distinct photo-like pictures (at most 0.943); see docs/dedup.md.
const DefaultThreshold = 0.96

// DefaultBlockRows is Options.BlockRows when 0.
const DefaultBlockRows = 256

// DefaultNearPairs is Options.NearPairs when 0.
const DefaultNearPairs = 8

// DefaultMaxPairs is Options.MaxPairs when 0.
const DefaultMaxPairs = 20_000_000

// Grouping is how pairs become groups.
type Grouping int

const (
	// Star visits the images in keep order; each image not yet in a group
	// takes every neighbour (cosine ≥ the threshold) not yet in one. Every
	// duplicate is within the threshold of its group's kept image.
	Star Grouping = iota
	// Components makes a group of every connected component of the pairs:
	// chains join, so a duplicate may be far from the image kept.
	Components
)

// String returns the grouping's name: star or components.
func (g Grouping) String() string {
	if g == Components {
		return "components"
	}
	return "star"
}

// Keep is which image of a group is kept.
type Keep int

const (
	// KeepFirst keeps the image first in index order (its parts in name
	// order, each part's rows in the order the job read them).
	KeepFirst Keep = iota
	// KeepCentral keeps the image with the highest mean cosine to the
	// others of its group (with Star: the image whose neighbours' cosines
	// sum highest is visited first).
	KeepCentral
	// KeepLargest keeps the image of most pixels; the index records no
	// image sizes, so Run refuses it (ErrNoSizes).
	KeepLargest
)

// String returns the rule's name: first, central or largest.
func (k Keep) String() string {
	switch k {
	case KeepCentral:
		return "central"
	case KeepLargest:
		return "largest"
	}
	return "first"
}

// ErrNoSizes is the error of KeepLargest over an index that records no
// image sizes.
var ErrNoSizes = errors.New("dedup: keeping the largest image needs each image's size, which the index does not record; keep the first or the central one")

// Options controls Run.
type Options struct {
	// Threshold is the least cosine of a pair, in (0, 1]; 0 is
	// DefaultThreshold.
	Threshold float32
	Group     Grouping
	Keep      Keep
	// BlockRows is the rows of a block (0: DefaultBlockRows): each
	// goroutine holds about 34·BlockRows·D·4 bytes where the CPU has
	// AVX-512 or AVX2 (an outer block of 32 blocks), 17·BlockRows·D·4 with the
	// int8 filter, BlockRows·D·(4+4) elsewhere.
	BlockRows int
	// Workers is how many goroutines compare blocks (0: GOMAXPROCS).
	Workers int
	// MaxPairs bounds the pairs found (0: DefaultMaxPairs): more is an
	// error naming the threshold, rather than memory without bound.
	MaxPairs int
	// Clusters, when above 0, makes the search approximate: a spherical
	// k-means of the images into Clusters clusters, then the exact pairs
	// of each cluster's images only (approx.go). 0 compares every pair.
	Clusters int
	// Probe is in how many of its nearest clusters an image is compared
	// (1 or 2; 0: DefaultProbe), with Clusters.
	Probe int
	// Iterations is the k-means rounds (0: DefaultIterations), with
	// Clusters.
	Iterations int
	// CheckRecall, with Clusters, compares this many images drawn with a
	// fixed seed with every other exactly and reports the fraction of
	// their pairs the approximate search found (Result.Recall).
	CheckRecall int
	// NoNearest skips keeping each image's nearest-neighbour cosine
	// (Result.NN nil, Result.Histogram empty): a few percent less time.
	NoNearest bool
	// NoFilter compares every pair in float32 where the int8 filter would
	// run first (a CPU with AVX512-VNNI, NoNearest set): the same pairs,
	// more time; for measuring the filter by.
	NoFilter bool
	// NearMargin, when above 0, also searches the pairs of cosine in
	// [Threshold − NearMargin, Threshold) and keeps the NearPairs closest
	// of them in Result.Near (they count towards MaxPairs).
	NearMargin float32
	// NearPairs is how many pairs below the threshold Result.Near keeps
	// (0: DefaultNearPairs).
	NearPairs int
	// Progress, when not nil, is called as blocks are compared with the
	// block pairs done and their total, from one goroutine at a time.
	Progress func(done, total int)
}

// Pair is two images whose cosine is at least the threshold: rows A < B,
// numbered as index.Index.ReadEmbeds numbers them.
type Pair struct {
	A, B int
	Cos  float32
}

// Member is a duplicate of a group: its row and its cosine to the image
// kept.
type Member struct {
	Row int
	Cos float32
}

// Group is a kept image and its duplicates, by row, in row order.
type Group struct {
	Keep int
	Dups []Member
}

// Result is the near-duplicates of an index.
type Result struct {
	Threshold float32
	Rows      int // the index's rows
	Images    int // its images read and encoded (the rows compared)
	Pairs     []Pair
	Groups    []Group // by kept row
	// NN is each row's best cosine to any other row (its nearest
	// neighbour's), NaN for a failed image or an image alone; with Sampled
	// above 0, only the rows of the sample have one (NaN elsewhere).
	NN []float32
	// Sampled is, when above 0, how many images NN holds: above 50,000
	// images the exact search with nearest cosines runs the fast searcher
	// (where the CPU has AVX-512 or AVX2) and measures the nearest cosines of a
	// sample of 20,000 images drawn with DefaultSeed, each exactly against
	// every image. 0: every image's (over the pairs compared).
	Sampled int
	// Clusters is the clusters of the approximate search (0: exact).
	Clusters int
	// Recall is the approximate search's measured recall
	// (Options.CheckRecall), nil when not asked for.
	Recall *Recall
	// Near is the pairs closest below the threshold, closest first
	// (Options.NearMargin), for deciding where the threshold goes.
	Near []Pair
	// Rescored is the pairs the int8 filter passed on to be compared in
	// float32 (those of its tiles that reached the bound), 0 where it did
	// not run.
	Rescored int64
}

// Duplicates returns how many images the groups drop.
func (r *Result) Duplicates() int {
	n := 0
	for _, g := range r.Groups {
		n += len(g.Dups)
	}
	return n
}

// Check returns an error naming what is wrong with o, before any work.
func (o *Options) Check() error {
	if !(o.Threshold >= 0 && o.Threshold <= 1) {
		return fmt.Errorf("dedup: threshold %g: want a cosine above 0 and at most 1", o.Threshold)
	}
	if o.Group != Star && o.Group != Components {
		return fmt.Errorf("dedup: grouping %d: want star or components", o.Group)
	}
	switch o.Keep {
	case KeepFirst, KeepCentral:
	case KeepLargest:
		return ErrNoSizes
	default:
		return fmt.Errorf("dedup: keep rule %d: want first or central", o.Keep)
	}
	if o.BlockRows < 0 || o.Workers < 0 || o.MaxPairs < 0 || o.NearPairs < 0 {
		return fmt.Errorf("dedup: block rows %d, workers %d, max pairs %d, near pairs %d: want 0 (the default) or more", o.BlockRows, o.Workers, o.MaxPairs, o.NearPairs)
	}
	if o.Clusters < 0 || o.Probe < 0 || o.Probe > 2 || o.Iterations < 0 || o.CheckRecall < 0 {
		return fmt.Errorf("dedup: clusters %d, probe %d, iterations %d, recall sample %d: want 0 or more (probe: 0, 1 or 2)", o.Clusters, o.Probe, o.Iterations, o.CheckRecall)
	}
	if !(o.NearMargin >= 0 && o.NearMargin < 1) {
		return fmt.Errorf("dedup: near margin %g: want 0 (none) or more, below 1", o.NearMargin)
	}
	return nil
}

// CheckIndex returns an error when x cannot be searched for duplicates:
// a collection in a vector database (no stored arrays), parts of mixed
// dtypes, or no image read and encoded.
func CheckIndex(x *index.Index) error {
	if x.EmbedsDType() == "" {
		return fmt.Errorf("dedup: index %v: no stored image embeddings of one dtype to compare (a collection in a vector database, or parts of different dtypes)", x.Parts())
	}
	if x.Rows() == 0 {
		return errors.New("dedup: the index has no rows: no image to compare")
	}
	return nil
}

// Run finds the near-duplicates of x: its pairs at the threshold, their
// groups and the image kept of each.
func Run(ctx context.Context, x *index.Index, o Options) (*Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if err := CheckIndex(x); err != nil {
		return nil, err
	}
	o.defaults()
	v, m, err := load(x, o.Clusters > 0)
	if err != nil {
		return nil, err
	}
	if v.images == 0 {
		return nil, errors.New("dedup: the index holds no image read and encoded (every row is a failed image)")
	}
	sampled := sampleNearest(v, o)
	var nn *nearest
	if !o.NoNearest && !sampled {
		nn = newNearest(v.n)
	}
	search := o
	search.Threshold = o.Threshold - o.NearMargin
	var pairs []Pair
	var rescored int64
	var ap *approx
	if o.Clusters > 0 {
		pairs, ap, err = approxPairs(ctx, m, v, search, nn)
	} else {
		pairs, rescored, err = findPairs(ctx, x, v, search, nn)
	}
	if err != nil {
		return nil, err
	}
	res := &Result{Threshold: o.Threshold, Rows: v.n, Images: v.images, NN: nn.values(), Clusters: o.Clusters, Rescored: rescored}
	if sampled {
		if res.NN, res.Sampled, err = nearestOfSample(ctx, x, v, defaultWorkers(o.Workers)); err != nil {
			return nil, err
		}
	}
	if ap != nil && o.CheckRecall > 0 {
		res.Recall = ap.checkRecall(v, o.CheckRecall, o.Threshold, pairs)
	}
	res.Pairs, res.Near = splitNear(pairs, o.Threshold, o.NearPairs)
	if res.Groups, err = group(x, v, res.Pairs, o); err != nil {
		return nil, err
	}
	return res, nil
}

// defaults fills in o's zero values.
func (o *Options) defaults() {
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.BlockRows == 0 {
		o.BlockRows = DefaultBlockRows
	}
	if o.MaxPairs == 0 {
		o.MaxPairs = DefaultMaxPairs
	}
	if o.Probe == 0 {
		o.Probe = DefaultProbe
	}
	if o.Iterations == 0 {
		o.Iterations = DefaultIterations
	}
	if o.NearPairs == 0 {
		o.NearPairs = DefaultNearPairs
	}
}
