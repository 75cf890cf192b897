package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
)

// weaviateResult is what `query --weaviate` measures on the same vectors
// as the file index: ingestion into a collection, stage-1 latency through
// Weaviate, its recall against the exact file index, and the node's
// memory and disk.
type weaviateResult struct {
	Collection   string  `json:"collection"`
	Images       int     `json:"images"`
	Patches      int     `json:"patches_per_image"`
	Muvera       bool    `json:"muvera"`
	Index        string  `json:"index"`
	EF           int     `json:"ef"`
	EFBuild      int     `json:"ef_construction,omitempty"`
	MaxConns     int     `json:"max_connections,omitempty"`
	Quantization string  `json:"quantization,omitempty"`
	RescoreLimit int     `json:"rescore_limit,omitempty"`
	Replication  int     `json:"replication"`
	IngestS      float64 `json:"ingest_s"`
	ImagesPerS   float64 `json:"images_per_s"`
	MedianMS     float64 `json:"median_ms_per_query"`
	MinMS        float64 `json:"min_ms_per_query"`
	RecallAt10   float64 `json:"recall_at_10"`
	NodeRSSMB    float64 `json:"node_rss_mb,omitempty"`
	DiskMB       float64 `json:"disk_mb,omitempty"`
	BytesPerImg  float64 `json:"disk_bytes_per_image,omitempty"`
	QueriesTimed int     `json:"queries"`
}

// benchWeaviate writes the benchmark's vectors (embeds: its float16 parts'
// rows, read back through the file index) into a new collection on the
// node at host, then times o.queries searches of qs and compares their
// top 10 with exact, the file index's.
func benchWeaviate(ctx context.Context, e *env, o queryBenchOptions, qs [][]float32, exact [][]int) (*weaviateResult, error) {
	name := fmt.Sprintf("Bench%d_%d_%d", o.n, o.dim, o.side)
	if o.muvera {
		name += "_muvera"
	}
	if o.vectorIndex == index.VectorIndexFlat {
		name += "_flat"
	}
	if o.efBuild != 0 || o.maxConns != 0 {
		name += fmt.Sprintf("_efc%d_m%d", o.efBuild, o.maxConns)
	}
	if o.quantize != "none" {
		name += fmt.Sprintf("_%s%d", o.quantize, o.rescore)
	}
	if o.weaviateName != "" {
		name = o.weaviateName
	}
	url := "weaviate://" + o.weaviate + "/" + name
	meta := &index.CollectionMeta{Model: "bench", Dim: o.dim, Grid: [2]int{o.side, o.side}, LogitScale: 100}
	key := os.Getenv("WEAVIATE_API_KEY")
	co := index.CollectionOptions{APIKey: key, Create: meta, Muvera: o.muvera, Replication: o.replication,
		VectorIndex: o.vectorIndex, EFConstruction: o.efBuild, MaxConnections: o.maxConns,
		Quantization: strings.TrimPrefix(o.quantize, "none"), RescoreLimit: o.rescore}
	c, err := index.OpenCollection(ctx, url, co)
	if err != nil {
		return nil, err
	}
	have, err := c.Count(ctx)
	if err != nil {
		return nil, err
	}
	ingest := have != o.n
	if ingest && have > 0 {
		// A collection left half-written: start again.
		if err := c.Delete(ctx); err != nil {
			return nil, err
		}
		if c, err = index.OpenCollection(ctx, url, co); err != nil {
			return nil, err
		}
	}
	if o.ef != 0 {
		if err := c.SetEF(ctx, o.ef); err != nil {
			return nil, err
		}
	}
	res := &weaviateResult{Collection: url, Images: o.n, Patches: o.side * o.side, Muvera: o.muvera, EF: o.ef, Replication: o.replication, QueriesTimed: len(qs)}
	res.Index, res.EFBuild, res.MaxConns = c.VectorIndex()
	res.Quantization, res.RescoreLimit = c.Quantization()
	if ingest {
		if err := ingestBench(ctx, e, o, c, res); err != nil {
			return nil, err
		}
	}
	wx, err := index.Open(ctx, url, index.Options{})
	if err != nil {
		return nil, err
	}
	defer wx.Close()
	if _, err := wx.SearchVector(ctx, qs[0], 10); err != nil {
		return nil, err
	}
	var times []float64
	found, want := 0, 0
	for i, q := range qs {
		t := time.Now()
		hits, err := wx.SearchVector(ctx, q, 10)
		if err != nil {
			return nil, err
		}
		times = append(times, ms(time.Since(t)))
		top := exact[i][:min(10, len(exact[i]))]
		want += len(top)
		for _, h := range hits {
			k, _ := strconv.Atoi(strings.TrimSuffix(h.Path, ".jpg"))
			if slices.Contains(top, k) {
				found++
			}
		}
	}
	res.MedianMS, res.MinMS = median(times), slices.Min(times)
	res.RecallAt10 = float64(found) / float64(want)
	if o.weaviatePID > 0 {
		res.NodeRSSMB = procRSSMB(o.weaviatePID)
	}
	if o.weaviateData != "" {
		res.DiskMB = float64(dirBytes(filepath.Join(o.weaviateData, strings.ToLower(name)))) / 1e6
		if res.DiskMB == 0 {
			res.DiskMB = float64(dirBytes(o.weaviateData)) / 1e6
		}
		res.BytesPerImg = res.DiskMB * 1e6 / float64(o.n)
	}
	return res, nil
}

// procRSSMB returns process pid's resident memory in MB (Linux).
func procRSSMB(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// dirBytes returns the bytes of the files below dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// ingestBench writes the benchmark's vectors into c and records the time.
func ingestBench(ctx context.Context, e *env, o queryBenchOptions, c *index.Collection, res *weaviateResult) error {
	p := o.side * o.side
	const batch = 512
	t0 := time.Now()
	objs := make([]index.CollectionObject, 0, batch)
	flush := func() error {
		if len(objs) == 0 {
			return nil
		}
		errs, err := c.Upsert(ctx, objs)
		if err != nil {
			return err
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		objs = objs[:0]
		return nil
	}
	// The vectors of writeBenchIndex, as its float16 parts hold them.
	f16 := func(v []float32) []float32 {
		for i, x := range v {
			v[i] = halfdot.ToFloat32(tensorio.Float32ToF16(x))
		}
		return v
	}
	for pi := range o.parts {
		lo, rows := partRows(o, pi)
		er := rand.New(rand.NewPCG(uint64(pi), 99))
		pr := rand.New(rand.NewPCG(uint64(pi), 99))
		for range rows {
			randomUnit(pr, o.dim) // the patches follow the part's embeddings
		}
		for r := range rows {
			emb := f16(randomUnit(er, o.dim))
			var pat []float32
			for range p {
				pat = append(pat, f16(randomUnit(pr, o.dim))...)
			}
			objs = append(objs, index.CollectionObject{Path: strconv.Itoa(lo+r) + ".jpg", Source: "bench/" + strconv.Itoa(lo+r), Embeds: emb, Patches: pat})
			if len(objs) == batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		e.Log.Info("ingested", "images", lo+rows, "per_s", float64(lo+rows)/time.Since(t0).Seconds())
	}
	if err := flush(); err != nil {
		return err
	}
	res.IngestS = time.Since(t0).Seconds()
	res.ImagesPerS = float64(o.n) / res.IngestS
	return nil
}
