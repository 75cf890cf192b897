package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
)

func init() {
	addSubcommand(subcommand{name: "query", summary: "stage 1 of a search over a job's index (synthetic float16 parts): ms per top-K query, RSS, against faiss IndexFlatIP", run: runBenchQuery})
}

// queryBenchOptions are the flags of `condition-bench query`.
type queryBenchOptions struct {
	n, dim, side, parts int
	queries, top        int
	dir                 string
	faiss               bool
	python              string
	json                bool
	weaviate            string // HOST:PORT of a Weaviate node, or ""
	weaviatePID         int
	weaviateData        string
	weaviateName        string
	replication         int
	muvera              bool
	ef                  int
	vectorIndex         string // --weaviate-index
	efBuild, maxConns   int    // --ef-construction, --max-connections
	quantize            string // --weaviate-quantization
	rescore             int    // --rescore-limit
}

func (o *queryBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.n, "n", 1_000_000, "images in the index")
	fs.IntVar(&o.dim, "dim", 512, "width D of the vectors")
	fs.IntVar(&o.side, "grid", 0, "side of the patch grid stored per image (P = side², 0: no patches, a stage-1-only index)")
	fs.IntVar(&o.parts, "parts", 4, "index parts the images are split into")
	fs.IntVar(&o.queries, "queries", 20, "timed queries (random unit vectors); the median is reported")
	fs.IntVar(&o.top, "top", 100, "hits per query")
	fs.StringVar(&o.dir, "dir", "", "folder to write the index into and keep (default: a temporary folder, removed)")
	fs.BoolVar(&o.faiss, "faiss", true, "also run faiss IndexFlatIP (python3 with faiss and numpy) on the same vectors as float32")
	fs.StringVar(&o.python, "python", "", "the Python interpreter for faiss (default: the first of python3 and /usr/bin/python3 that imports faiss and numpy, as Debian's python3-faiss installs them)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.StringVar(&o.weaviate, "weaviate", "", "also write the same vectors into a new collection on the Weaviate node at HOST:PORT and time stage 1 there, with its recall@10 against the file index (API key from $WEAVIATE_API_KEY)")
	fs.StringVar(&o.weaviateName, "weaviate-collection", "", "the collection's name (default Bench<n>_<dim>_<grid>); one that already holds --n images is searched as it is, without writing it again")
	fs.IntVar(&o.replication, "weaviate-replication", 1, "the replication factor of the collection created (a cluster's nodes each hold a copy)")
	fs.IntVar(&o.weaviatePID, "weaviate-pid", 0, "the Weaviate node's process id, to report its resident memory")
	fs.StringVar(&o.weaviateData, "weaviate-data", "", "the Weaviate node's data folder (PERSISTENCE_DATA_PATH), to report the collection's bytes on disk")
	fs.IntVar(&o.ef, "ef", 0, "with --weaviate: the search list size of the collection's HNSW graph of image embeddings (0: Weaviate's default)")
	fs.StringVar(&o.vectorIndex, "weaviate-index", "hnsw", "with --weaviate: the collection's index of image embeddings, hnsw (a graph, approximate) or flat (every embedding compared, exact)")
	fs.IntVar(&o.efBuild, "ef-construction", 0, "with --weaviate: the search list size while building the collection's hnsw graph (0: Weaviate's default, 128)")
	fs.IntVar(&o.maxConns, "max-connections", 0, "with --weaviate: the links per image in the collection's hnsw graph (0: Weaviate's default, 32)")
	fs.StringVar(&o.quantize, "weaviate-quantization", "none", "with --weaviate: the collection's index compresses the image embeddings, none or rq (8-bit rotational quantization, then --rescore-limit images ranked again)")
	fs.IntVar(&o.rescore, "rescore-limit", 0, fmt.Sprintf("with --weaviate-quantization rq: how many images a search ranks again by their embeddings (0: %d)", index.DefaultRescoreLimit))
	fs.BoolVar(&o.muvera, "muvera", false, "with --weaviate and --grid: the collection encodes the patches with MUVERA")
}

// queryBenchResult is the benchmark's report.
type queryBenchResult struct {
	N, Dim, P, Parts, Top, Queries int
	Kernel                         string  `json:"kernel"`
	Threads                        int     `json:"threads"`
	WriteS                         float64 `json:"write_s"`
	OpenMS                         float64 `json:"open_ms"`
	MedianMS                       float64 `json:"median_ms_per_query"`
	MinMS                          float64 `json:"min_ms_per_query"`
	GBPerS                         float64 `json:"gb_per_s"` // embeddings read per second at the median
	// RSS after the queries: the anonymous memory (beyond the mapped
	// files) and the mapped files' resident pages.
	RSSAnonMB     float64 `json:"rss_anon_mb"`
	RSSFileMB     float64 `json:"rss_file_mb"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Faiss         *faissResult
	FaissError    string          `json:"faiss_error,omitempty"`
	Weaviate      *weaviateResult `json:"weaviate,omitempty"`
	WeaviateError string          `json:"weaviate_error,omitempty"`
}

// faissResult is what the faiss script reports, and the comparison.
type faissResult struct {
	Version     string    `json:"version"`
	Threads     int       `json:"threads"`
	AddS        float64   `json:"add_s"`
	Times       []float64 `json:"times"`
	BatchS      float64   `json:"batch_s"`
	IDs         [][]int   `json:"ids"`
	RSSMB       float64   `json:"rss_mb"`
	MedianMS    float64   `json:"median_ms_per_query"`
	BatchMS     float64   `json:"batch_ms_per_query"`
	SameTop     int       `json:"same_top"` // queries whose top-K (ids, in order) equal ours
	SameSet     int       `json:"same_set"` // queries whose top-K sets equal ours
	Differences []string  `json:"differences,omitempty"`
}

func runBenchQuery(ctx context.Context, e *env, args []string) error {
	var o queryBenchOptions
	fs := newFlagSet(e, "query", "query [flags]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "condition-bench-query-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := queryBenchResult{N: o.n, Dim: o.dim, P: o.side * o.side, Parts: o.parts, Top: o.top, Queries: o.queries,
		Kernel: halfdot.Impl(), Threads: runtime.GOMAXPROCS(0)}
	e.Log.Info("writing the index", "dir", dir, "images", o.n, "dim", o.dim, "parts", o.parts)
	t0 := time.Now()
	embeds, err := writeBenchIndex(dir, o)
	if err != nil {
		return err
	}
	res.WriteS = time.Since(t0).Seconds()

	t0 = time.Now()
	stores := objstore.NewURLReader()
	defer stores.Close()
	x, err := index.Open(ctx, dir, index.Options{Store: stores})
	if err != nil {
		return err
	}
	defer x.Close()
	res.OpenMS = ms(time.Since(t0))
	rng := rand.New(rand.NewPCG(7, 8))
	qs := make([][]float32, o.queries)
	for i := range qs {
		qs[i] = randomUnit(rng, o.dim)
	}
	if _, err := x.SearchVector(ctx, qs[0], o.top); err != nil { // warm the pages
		return err
	}
	var times []float64
	ours := make([][]int, len(qs))
	for i, q := range qs {
		t := time.Now()
		hits, err := x.SearchVector(ctx, q, o.top)
		if err != nil {
			return err
		}
		times = append(times, ms(time.Since(t)))
		for _, h := range hits {
			ours[i] = append(ours[i], globalRow(h, o))
		}
	}
	res.MedianMS, res.MinMS = median(times), slices.Min(times)
	res.GBPerS = float64(o.n*o.dim*2) / (res.MedianMS / 1000) / 1e9
	res.RSSAnonMB, res.RSSFileMB, res.PeakRSSMB = rssFigures()

	if o.faiss {
		f, err := runFaiss(ctx, o, embeds, qs)
		if err != nil {
			res.FaissError = err.Error()
		} else {
			f.compare(ours)
			f.IDs, f.Times = nil, nil
			res.Faiss = f
		}
	}
	if o.weaviate != "" {
		wr, err := benchWeaviate(ctx, e, o, qs, ours)
		if err != nil {
			res.WeaviateError = err.Error()
		}
		res.Weaviate = wr
	}
	if o.json {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printQueryBench(e.Stdout, o, res, len(qs))
	return nil
}

// check validates the flags of `condition-bench query`.
func (o *queryBenchOptions) check() error {
	if o.n < 1 || o.dim < 1 || o.parts < 1 || o.parts > o.n || o.side < 0 || o.queries < 1 || o.top < 1 || o.top > index.MaxSearchTop || o.top > o.n {
		return usagef("--n, --dim, --parts (at most --n), --queries and --top (at most --n and %d) must be positive, --grid 0 or more", index.MaxSearchTop)
	}
	switch o.vectorIndex {
	case index.VectorIndexHNSW:
	case index.VectorIndexFlat:
		if o.ef != 0 || o.efBuild != 0 || o.maxConns != 0 {
			return usagef("--ef, --ef-construction and --max-connections set an hnsw graph; --weaviate-index flat has none")
		}
	default:
		return usagef("--weaviate-index %q: want %s or %s", o.vectorIndex, index.VectorIndexHNSW, index.VectorIndexFlat)
	}
	if o.quantize != "none" && o.quantize != index.QuantizationRQ {
		return usagef("--weaviate-quantization %q: want none or %s", o.quantize, index.QuantizationRQ)
	}
	if o.ef < 0 || o.efBuild < 0 || o.maxConns < 0 || o.rescore < 0 {
		return usagef("--ef, --ef-construction, --max-connections and --rescore-limit: want 0 (the default) or more")
	}
	return nil
}

// compare fills f's medians and its agreement with ours, the top-K rows
// of each query.
func (f *faissResult) compare(ours [][]int) {
	f.MedianMS, f.BatchMS = median(f.Times)*1000, f.BatchS*1000/float64(len(ours))
	for i := range ours {
		if slices.Equal(f.IDs[i], ours[i]) {
			f.SameTop++
		}
		a, b := slices.Clone(f.IDs[i]), slices.Clone(ours[i])
		slices.Sort(a)
		slices.Sort(b)
		if slices.Equal(a, b) {
			f.SameSet++
		} else if len(f.Differences) < 3 {
			f.Differences = append(f.Differences, fmt.Sprintf("query %d: ours %v…, faiss %v…", i, ours[i][:min(5, len(ours[i]))], f.IDs[i][:min(5, len(f.IDs[i]))]))
		}
	}
}

// printQueryBench prints res as text; nq is the number of queries.
func printQueryBench(w io.Writer, o queryBenchOptions, res queryBenchResult, nq int) {
	fmt.Fprintf(w, "index: %d images × %d (float16) in %d parts, P=%d; written in %.1f s, opened in %.0f ms\n", o.n, o.dim, o.parts, res.P, res.WriteS, res.OpenMS)
	fmt.Fprintf(w, "condition stage 1 (top %d, kernel %s, %d threads): median %.1f ms per query (min %.1f; %.1f GB/s of embeddings)\n",
		o.top, res.Kernel, res.Threads, res.MedianMS, res.MinMS, res.GBPerS)
	fmt.Fprintf(w, "RSS after the queries: %.0f MB anonymous (beyond mapped files), %.0f MB of mapped files resident, peak %.0f MB\n", res.RSSAnonMB, res.RSSFileMB, res.PeakRSSMB)
	if f := res.Faiss; f != nil {
		fmt.Fprintf(w, "faiss %s IndexFlatIP (float32, %d threads): median %.1f ms per query one at a time, %.1f ms per query in one batch of %d; add %.1f s; its RSS %.0f MB\n",
			f.Version, f.Threads, f.MedianMS, f.BatchMS, nq, f.AddS, f.RSSMB)
		fmt.Fprintf(w, "top-%d equal to faiss's: %d/%d queries in order, %d/%d as sets\n", o.top, f.SameTop, nq, f.SameSet, nq)
		for _, d := range f.Differences {
			fmt.Fprintf(w, "  %s\n", d)
		}
	} else if res.FaissError != "" {
		fmt.Fprintf(w, "faiss: not run: %s\n", res.FaissError)
	}
	if r := res.Weaviate; r != nil {
		ingest := fmt.Sprintf("ingested %d images in %.1f s (%.0f images/s)", r.Images, r.IngestS, r.ImagesPerS)
		if r.IngestS == 0 {
			ingest = fmt.Sprintf("an existing collection of %d images", r.Images)
		}
		how := r.Index
		if r.Index == index.VectorIndexHNSW {
			how = fmt.Sprintf("hnsw efConstruction %d maxConnections %d ef %d", r.EFBuild, r.MaxConns, r.EF)
		}
		if r.Quantization != "" {
			how += fmt.Sprintf(", quantization %s rescoring %d", r.Quantization, r.RescoreLimit)
		}
		fmt.Fprintf(w, "weaviate %s (P=%d, muvera %v, %s, replication %d): %s; stage 1 median %.1f ms per query (min %.1f), recall@10 %.3f against the file index\n",
			r.Collection, r.Patches, r.Muvera, how, r.Replication, ingest, r.MedianMS, r.MinMS, r.RecallAt10)
		if r.NodeRSSMB > 0 || r.DiskMB > 0 {
			fmt.Fprintf(w, "weaviate node RSS %.0f MB; collection on disk %.1f MB (%.0f bytes per image)\n", r.NodeRSSMB, r.DiskMB, r.BytesPerImg)
		}
	} else if res.WeaviateError != "" {
		fmt.Fprintf(w, "weaviate: %s\n", res.WeaviateError)
	}
}

func randomUnit(rng *rand.Rand, d int) []float32 {
	v := make([]float32, d)
	var s float64
	for i := range v {
		x := rng.NormFloat64()
		v[i], s = float32(x), s+x*x
	}
	f := 1 / math.Sqrt(s)
	for i := range v {
		v[i] = float32(float64(v[i]) * f)
	}
	return v
}

// partRows returns the first row and the rows of part i.
func partRows(o queryBenchOptions, i int) (int, int) {
	lo, hi := o.n*i/o.parts, o.n*(i+1)/o.parts
	return lo, hi - lo
}

// globalRow is a hit's row over all the parts (parts are named by number).
func globalRow(h index.Hit, o queryBenchOptions) int {
	i, _ := strconv.Atoi(h.Part)
	lo, _ := partRows(o, i)
	return lo + h.Row
}

// writeBenchIndex writes o.parts index parts of random unit vectors in
// float16 under dir/index, in the layout of a job's --index, and returns
// the embeddings files.
func writeBenchIndex(dir string, o queryBenchOptions) ([]string, error) {
	var files []string
	p := o.side * o.side
	for i := range o.parts {
		lo, n := partRows(o, i)
		pd := filepath.Join(dir, "index", fmt.Sprintf("%06d", i))
		if err := os.MkdirAll(pd, 0o755); err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		write := func(name string, shape []int, rows int) error {
			f, err := os.Create(filepath.Join(pd, name))
			if err != nil {
				return err
			}
			hdr, err := tensorio.NPYHeader(tensorio.DTypeF16, shape, 0)
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(f, 1<<20)
			w.Write(hdr)
			buf := make([]byte, 2*o.dim)
			for range rows {
				for k, v := range randomUnit(rng, o.dim) {
					binary.LittleEndian.PutUint16(buf[2*k:], tensorio.Float32ToF16(v))
				}
				w.Write(buf)
			}
			if err := w.Flush(); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}
		if err := write("embeds.npy", []int{n, o.dim}, n); err != nil {
			return nil, err
		}
		if err := write("patches.npy", []int{n, p, o.dim}, n*p); err != nil {
			return nil, err
		}
		files = append(files, filepath.Join(pd, "embeds.npy"))
		var js bytes.Buffer
		fmt.Fprintf(&js, `{"format": %q, "model": "bench", "revision": "", "settings": "bench", "dtype": "float16", "dim": %d, "grid": [%d, %d], "logit_scale": 100, "rows": %d, "items": [`,
			index.Format, o.dim, o.side, o.side, n)
		for r := range n {
			if r > 0 {
				js.WriteByte(',')
			}
			fmt.Fprintf(&js, `{"row":%d,"path":"%d.jpg","status":"ok"}`, r, lo+r)
		}
		js.WriteString("]}\n")
		if err := os.WriteFile(filepath.Join(pd, "index.json"), js.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// rssFigures returns this process's anonymous and file-backed resident
// memory and its peak RSS, in MB (Linux; zeros elsewhere).
func rssFigures() (anon, file, peak float64) {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "RssAnon:":
			anon = kb / 1024
		case "RssFile:":
			file = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return anon, file, peak
}

// faissScript searches the same float16 vectors, as float32, with faiss's
// exact inner-product index, one query at a time and in one batch.
const faissScript = `
import json, sys, time, resource
import numpy as np, faiss
cfg = json.load(sys.stdin)
faiss.omp_set_num_threads(cfg["threads"])
index = faiss.IndexFlatIP(cfg["dim"])
t = time.perf_counter()
for p in cfg["files"]:
    x = np.load(p, mmap_mode="r")
    for i in range(0, x.shape[0], 65536):
        index.add(np.ascontiguousarray(x[i:i+65536], dtype=np.float32))
add_s = time.perf_counter() - t
q = np.array(cfg["queries"], dtype=np.float32)
k = cfg["top"]
index.search(q[:1], k)
times, ids = [], []
for i in range(q.shape[0]):
    t = time.perf_counter()
    D, I = index.search(q[i:i+1], k)
    times.append(time.perf_counter() - t)
    ids.append([int(v) for v in I[0]])
t = time.perf_counter()
index.search(q, k)
batch_s = time.perf_counter() - t
json.dump({"version": faiss.__version__, "threads": faiss.omp_get_max_threads(), "add_s": add_s, "times": times,
           "batch_s": batch_s, "ids": ids, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, sys.stdout)
`

func runFaiss(ctx context.Context, o queryBenchOptions, files []string, qs [][]float32) (*faissResult, error) {
	in, err := json.Marshal(map[string]any{"files": files, "dim": o.dim, "top": o.top, "queries": qs, "threads": runtime.GOMAXPROCS(0)})
	if err != nil {
		return nil, err
	}
	out, err := runFaissScript(ctx, o.python, faissScript, in)
	if err != nil {
		return nil, err
	}
	var f faissResult
	if err := json.Unmarshal(out, &f); err != nil {
		return nil, fmt.Errorf("faiss script output: %w", err)
	}
	return &f, nil
}

// runFaissScript runs the Python script with its JSON input on stdin and
// returns what it prints: with py, or (empty) the first of python3 and
// /usr/bin/python3 that imports faiss and numpy. Its error names the
// interpreter, the script's last line of stderr and how to install faiss.
func runFaissScript(ctx context.Context, py, script string, in []byte) ([]byte, error) {
	if py == "" {
		py = "python3"
		for _, c := range []string{"python3", "/usr/bin/python3"} {
			if exec.CommandContext(ctx, c, "-c", "import faiss, numpy").Run() == nil {
				py = c
				break
			}
		}
	}
	cmd := exec.CommandContext(ctx, py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s (install faiss: apt-get install python3-faiss)", py, err, strings.TrimSpace(lastLine(errb.String())))
	}
	return out.Bytes(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
