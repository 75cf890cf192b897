package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

// Format is the format of a job's index parts (index.json "format") whose
// images share one patch grid (Meta.Grid).
const Format = "condition-index/v1"

// FormatGrids is the format of the index parts of a model whose images
// have their own patch grids (SigLIP 2 NaFlex): Format's files, the
// patches padded to the model's patch budget (Meta.MaxPatches), and
// GridsFile saying each row's grid. A reader that knows only Format
// refuses such a part by its format instead of misreading its rows; parts
// of one grid keep Format, byte for byte.
const FormatGrids = "condition-index/v2"

// The dtypes of a part's arrays (index.json "dtype"; "" is float16).
const (
	DTypeF16  = "float16"
	DTypeF32  = "float32"
	DTypeInt8 = "int8" // value = int8 · the row's (or patch's) float32 scale
)

// statusOK is the status of an item whose image was read and encoded.
const statusOK = "ok"

// The files of one index part, <out>/index/<name>/.
const (
	MetaFile         = "index.json"        // written last: a part without it is incomplete
	EmbedsFile       = "embeds.npy"        // [N, D] image_embeds, L2-normalised
	PatchesFile      = "patches.npy"       // [N, P, D] joint-space patches
	EmbedsScaleFile  = "embeds_scale.npy"  // [N] float32, int8 parts only
	PatchesScaleFile = "patches_scale.npy" // [N, P] float32, int8 parts only
	// GridsFile is [N, 2] int32, FormatGrids parts only: each row's grid
	// (H, W), whose H·W patches are the first of its P rows of patches
	// (row-major over the grid; the rest zeros); 0, 0 for a failed image.
	GridsFile = "grids.npy"
)

// partFiles are the files a part may hold.
var partFiles = []string{MetaFile, EmbedsFile, PatchesFile, EmbedsScaleFile, PatchesScaleFile, GridsFile}

// Meta is one part's index.json: what made its vectors and how they
// are stored.
type Meta struct {
	Format   string          `json:"format"`
	Model    string          `json:"model"`
	Revision string          `json:"revision"`
	Settings json.RawMessage `json:"settings"`
	// DType is how the arrays store values: float16 (default), float32 or
	// int8 (value = int8 · the row's scale).
	DType string `json:"dtype"`
	Dim   int    `json:"dim"`  // D, the joint space's width
	Grid  [2]int `json:"grid"` // the patch grid [H, W], P = H·W; [0, 0] with MaxPatches
	// MaxPatches is P of a part whose images have their own grids
	// (FormatGrids, SigLIP 2 NaFlex): the model's patch budget, which every
	// row's grid (GridsFile) fits in; absent (0) for a part of one grid.
	MaxPatches int `json:"max_patches,omitempty"`
	// LogitScale is exp(logit_scale), the factor of the CLIP logit.
	LogitScale float64 `json:"logit_scale"`
	// LogitBias is SigLIP's logit_bias, added to every logit (absent: 0).
	LogitBias float64 `json:"logit_bias,omitempty"`
	// Readout is how the job read the patches' vectors (see
	// pipeline.Options.Readout); absent: raw.
	Readout string `json:"readout,omitempty"`
	Rows    int    `json:"rows"` // N
	Items   []Item `json:"items"`
}

// PerImageGrids reports whether the images have their own patch grids
// (MaxPatches > 0) rather than Grid.
func (m *Meta) PerImageGrids() bool { return m.MaxPatches > 0 }

// gridText is the grids of m's patches, as messages name them.
func (m *Meta) gridText() string {
	if m.PerImageGrids() {
		return fmt.Sprintf("each image's own grid of at most %d patches", m.MaxPatches)
	}
	return fmt.Sprintf("a %dx%d grid", m.Grid[0], m.Grid[1])
}

// ReadoutName returns Readout, pipeline.ReadoutRaw when absent.
func (m *Meta) ReadoutName() clip.Readout {
	if m.Readout == "" {
		return pipeline.ReadoutRaw
	}
	return clip.Readout(m.Readout)
}

// Item is one image of a part: its row in the arrays and where the
// job read it.
type Item struct {
	Row    int    `json:"row"`
	Path   string `json:"path"`             // the job's relative path (its output name)
	Source string `json:"source,omitempty"` // the file or URL read (for a tar member, its shard)
	Member string `json:"member,omitempty"` // a tar shard's member
	SHA256 string `json:"sha256,omitempty"`
	Status string `json:"status"` // "ok" or "error"
	// Video and Time, for a video's frame: the video's relative path and
	// the frame's presentation time in seconds (absent for an image).
	Video string   `json:"video,omitempty"`
	Time  *float64 `json:"time,omitempty"`
}

// Options controls Open.
type Options struct {
	// Partial opens an index some of whose parts are missing files,
	// truncated or without index.json (a job still running, or killed):
	// those parts are left out (Index.Skipped says which and why) instead
	// of refusing the index.
	Partial bool
	// TempDir is where the parts of an index in an object store are
	// downloaded to ("" is the system's temporary folder); the copies are
	// removed by Close.
	TempDir string
	// Store reads the parts of an index in an object store and the images
	// of hits read from one (ReadImage, Sheets). Without it such a URL is
	// refused. The Index does not close it.
	Store Store
	// APIKey is the API key of a collection in Weaviate
	// (weaviate://HOST:PORT/Name; "": anonymous access).
	APIKey string
	// Consistency is the read consistency level of a collection in
	// Weaviate: ONE, QUORUM (the default) or ALL.
	Consistency string
}

// SkippedPart is a part Open left out (Options.Partial).
type SkippedPart struct {
	Name string // the part's folder name
	Err  error  // why
}

// Index is a job's index opened for search: every part's arrays, memory
// mapped. One Index serves any number of goroutines; Close unmaps it.
type Index struct {
	meta    Meta // the first part's, Items and Rows aside
	parts   []*indexPart
	skipped []SkippedPart
	rows    int
	where   string

	store Store       // nil: no object-store URLs
	tmp   string      // the download folder of a store index
	coll  *Collection // a collection in Weaviate, instead of parts
	// frames holds each video's frames in time order (nil: no videos).
	frames map[string][]frameRef
	// A collection's object count (rows above is the count at open) and
	// when it was read (collectionRows).
	count    atomic.Int64
	countAt  atomic.Int64 // unix nanoseconds
	counting atomic.Bool

	mu     sync.RWMutex
	closed bool
}

// indexPart is one part: its metadata and arrays.
type indexPart struct {
	name, where string
	meta        Meta
	dtype       string  // float16, float32 or int8
	p           int     // patches per row (with per-image grids: the budget, each row padded to it)
	items       []int32 // row → its ok item in names, or -1
	grids       []int32 // [N, 2], each row's grid (per-image grids only)
	names       itemTable
	// A video's frames (nil when the part holds none): row → its video
	// in videos (-1 for an image) and its time.
	vid    []int32
	times  []float64
	videos []string

	embeds, patches    []byte // the arrays' data, [N, D] and [N, P, D] values of dtype
	embScale, patScale []float32
	maps               [][]byte // the mappings to unmap
	// The embeddings' file, kept open, and where its data starts: the
	// bulk readers (ReadEmbeds) copy rows from it, not from the mapping.
	embFile *os.File
	embOff  int64
	norms   rowNorms // each row's 1/‖embedding‖, made by the first Neighbours
}

// itemTable holds the names of a part's ok items packed: item k's path,
// source and member are strs[offs[3k+j]:offs[3k+j+1]] for j = 0, 1, 2.
type itemTable struct {
	strs []byte
	offs []uint32
}

// add appends an item and returns its number.
func (t *itemTable) add(path, source, member string) (int, error) {
	if len(t.offs) == 0 {
		t.offs = append(t.offs, 0)
	}
	if len(t.strs)+len(path)+len(source)+len(member) > math.MaxUint32 {
		return 0, errors.New("more than 4 GB of item names in one part")
	}
	for _, s := range [3]string{path, source, member} {
		t.strs = append(t.strs, s...)
		t.offs = append(t.offs, uint32(len(t.strs)))
	}
	return (len(t.offs)-1)/3 - 1, nil
}

// get returns item k's path, source and member.
func (t *itemTable) get(k int) (path, source, member string) {
	o := t.offs[3*k : 3*k+4]
	return string(t.strs[o[0]:o[1]]), string(t.strs[o[1]:o[2]]), string(t.strs[o[2]:o[3]])
}

// ErrClosed is the error of searching a closed Index.
var ErrClosed = errors.New("index: index closed")

// Open opens the index a job wrote with --index: dir is its output
// (a folder or an object-store prefix), its index folder, or one part's
// folder. Every part must be of the model, revision and settings of the
// first (in name order), of the same width and grid (or, for a model
// whose images have their own grids, the same patch budget); a part that is
// incomplete (no index.json) or whose arrays are missing or shorter than
// its rows say is refused, or with opts.Partial left out.
func Open(ctx context.Context, dir string, opts Options) (_ *Index, err error) {
	if IsCollectionURL(dir) {
		return openCollectionIndex(ctx, dir, opts)
	}
	x := &Index{where: dir, store: opts.Store}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	var partDirs []string // local folders, one per part
	var names []string
	if isURL(x.store, dir) {
		if x.store == nil {
			return nil, errNoStore("open", dir)
		}
		if names, partDirs, err = x.download(ctx, dir, opts.TempDir); err != nil {
			return nil, err
		}
	} else if names, partDirs, err = localParts(dir); err != nil {
		return nil, err
	}
	if len(partDirs) == 0 {
		return nil, fmt.Errorf("index: index %s: no index parts (want %s or index/<name>/%s below it)", dir, MetaFile, MetaFile)
	}
	for i, pd := range partDirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		where := pd
		if x.tmp != "" {
			where = strings.TrimSuffix(dir, "/") + "/…/" + names[i]
		}
		p, err := openPart(names[i], where, pd)
		if err != nil {
			var inc *IncompletePartError
			if errors.As(err, &inc) && opts.Partial {
				x.skipped = append(x.skipped, SkippedPart{Name: names[i], Err: err})
				continue
			}
			return nil, err
		}
		if err := x.add(p); err != nil {
			p.unmap()
			return nil, err
		}
	}
	if len(x.parts) == 0 {
		return nil, fmt.Errorf("index: index %s: no complete part (%d skipped; first: %v)", dir, len(x.skipped), x.skipped[0].Err)
	}
	x.frames = videoFrames(x.parts)
	return x, nil
}

// add checks p against the first part and adds it.
func (x *Index) add(p *indexPart) error {
	if len(x.parts) == 0 {
		x.meta = p.meta
		x.meta.Rows = 0
	} else {
		f, m := x.parts[0], p.meta
		if m.PerImageGrids() != x.meta.PerImageGrids() {
			return fmt.Errorf("index: index part %s holds %s vectors on %s, part %s %s vectors on %s: one index holds images of one kind of grid",
				p.where, modelName(m.Model, m.Revision), m.gridText(), f.where, modelName(x.meta.Model, x.meta.Revision), x.meta.gridText())
		}
		if m.Model != x.meta.Model || m.Revision != x.meta.Revision || !sameJSON(m.Settings, x.meta.Settings) {
			return fmt.Errorf("index: index part %s is of model %s (settings %s), part %s of model %s (settings %s): one index holds the vectors of one model and settings",
				p.where, modelName(m.Model, m.Revision), short(m.Settings), f.where, modelName(x.meta.Model, x.meta.Revision), short(x.meta.Settings))
		}
		if m.Dim != x.meta.Dim || m.Grid != x.meta.Grid || m.MaxPatches != x.meta.MaxPatches {
			return fmt.Errorf("index: index part %s has %d-wide vectors on %s, part %s %d-wide on %s",
				p.where, m.Dim, m.gridText(), f.where, x.meta.Dim, x.meta.gridText())
		}
	}
	x.parts = append(x.parts, p)
	x.rows += p.meta.Rows
	return nil
}

// modelName is a model and revision as messages name them.
func modelName(model, rev string) string {
	if rev == "" {
		return model
	}
	return model + "@" + rev
}

// short is a settings value as messages show it.
func short(s json.RawMessage) string {
	v := string(bytes.TrimSpace(s))
	if v == "" {
		return "none"
	}
	if len(v) > 80 {
		v = v[:77] + "..."
	}
	return v
}

// sameJSON reports whether a and b are the same JSON value, spacing aside.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// localParts finds the parts of a local index: dir itself when it holds
// index.json, else the folders of dir/index, else the folders of dir (in
// name order).
func localParts(dir string) (names, dirs []string, err error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("index: index: %w", err)
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("index: index %s: not a folder", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaFile)); err == nil {
		return []string{filepath.Base(filepath.Clean(dir))}, []string{dir}, nil
	}
	root := dir
	if st, err := os.Stat(filepath.Join(dir, "index")); err == nil && st.IsDir() {
		root = filepath.Join(dir, "index")
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, fmt.Errorf("index: index: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(root, e.Name())
		if st, err := os.Stat(p); err != nil || !st.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if root == dir && !holdsIndexFile(p) {
			continue // a job's other outputs beside its parts
		}
		names, dirs = append(names, e.Name()), append(dirs, p)
	}
	return names, dirs, nil
}

// holdsIndexFile reports whether folder p holds one of a part's files.
func holdsIndexFile(p string) bool {
	for _, f := range partFiles {
		if _, err := os.Stat(filepath.Join(p, f)); err == nil {
			return true
		}
	}
	return false
}

// download copies the parts of an index in an object store (url: the
// job's output prefix, its index prefix or one part's) to a new temporary
// folder, one folder per part, and returns their names and folders.
func (x *Index) download(ctx context.Context, url, tmpRoot string) (names, dirs []string, err error) {
	u, err := x.store.Parse(url)
	if err != nil {
		return nil, nil, fmt.Errorf("index: index %s: %w", url, err)
	}
	key := storeKey(u)
	baseKey := keyDir(key)
	known := map[string]bool{}
	for _, f := range partFiles {
		known[f] = true
	}
	parts := map[string][]string{} // part prefix (relative to the base) → files
	err = x.store.List(ctx, withKey(u, baseKey), func(k string, _ int64) error {
		rel := strings.TrimPrefix(k, baseKey)
		d, f := path.Split(rel)
		if !known[f] {
			return nil
		}
		d = strings.TrimSuffix(d, "/")
		switch {
		case d == "":
		case !strings.Contains(d, "/"):
		case strings.HasPrefix(d, "index/") && !strings.Contains(d[len("index/"):], "/"):
		default:
			return nil // deeper: not a part of this index
		}
		parts[d] = append(parts[d], f)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("index: index %s: %w", url, err)
	}
	if _, ok := parts[""]; ok {
		parts = map[string][]string{"": parts[""]} // the prefix is one part
	} else {
		var hasIndex bool
		for d := range parts {
			hasIndex = hasIndex || strings.HasPrefix(d, "index/")
		}
		if hasIndex {
			for d := range parts {
				if !strings.HasPrefix(d, "index/") {
					delete(parts, d)
				}
			}
		}
	}
	if len(parts) == 0 {
		return nil, nil, nil
	}
	if x.tmp, err = os.MkdirTemp(tmpRoot, "condition-index-"); err != nil {
		return nil, nil, fmt.Errorf("index: index %s: download folder: %w", url, err)
	}
	keys := make([]string, 0, len(parts))
	for d := range parts {
		keys = append(keys, d)
	}
	sort.Strings(keys)
	for i, d := range keys {
		name := path.Base(d)
		if d == "" {
			name = path.Base(strings.TrimSuffix(key, "/"))
		}
		local := filepath.Join(x.tmp, fmt.Sprint(i))
		if err := os.Mkdir(local, 0o700); err != nil {
			return nil, nil, fmt.Errorf("index: index %s: %w", url, err)
		}
		for _, f := range parts[d] {
			k := path.Join(baseKey, d, f)
			if err := x.fetchObject(ctx, withKey(u, k), filepath.Join(local, f)); err != nil {
				return nil, nil, fmt.Errorf("index: index part %s: %w", shownURL(u, k), err)
			}
		}
		names, dirs = append(names, name), append(dirs, local)
	}
	return names, dirs, nil
}

// fetchObject streams the object url names to the file dst (the store's
// reads retry and resume as they break off).
func (x *Index) fetchObject(ctx context.Context, url, dst string) error {
	r, err := x.store.Open(ctx, url, true)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// IncompletePartError is a part that is not whole: no index.json (the job
// has not finished it), an array missing or shorter than its rows.
// Open refuses it, or with Options.Partial leaves it out.
type IncompletePartError struct {
	Part string // the part's folder (or URL)
	Why  string
}

func (e *IncompletePartError) Error() string {
	return fmt.Sprintf("index: index part %s is incomplete: %s", e.Part, e.Why)
}

// openPart reads the part in folder dir (where names it in messages) and
// maps its arrays.
func openPart(name, where, dir string) (_ *indexPart, err error) {
	p := &indexPart{name: name, where: where}
	defer func() {
		if err != nil {
			p.unmap()
		}
	}()
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &IncompletePartError{where, "no " + MetaFile + " (the job has not finished it)"}
	}
	if err != nil {
		return nil, fmt.Errorf("index: index part %s: %w", where, err)
	}
	var head struct {
		Meta
		Items json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("index: index part %s: %s: %w", where, MetaFile, err)
	}
	b = nil
	p.meta = head.Meta
	m := &p.meta
	switch {
	case m.Format != Format && m.Format != FormatGrids:
		return nil, fmt.Errorf("index: index part %s: format %q, want %q or %q", where, m.Format, Format, FormatGrids)
	case m.Format == Format && m.MaxPatches != 0:
		return nil, fmt.Errorf("index: index part %s: %s says format %q with max_patches %d; a part of one grid has none", where, MetaFile, m.Format, m.MaxPatches)
	case m.Format == FormatGrids && (m.MaxPatches <= 0 || m.Grid != [2]int{}):
		return nil, fmt.Errorf("index: index part %s: %s says format %q with max_patches %d and grid %v; want a positive max_patches and no grid", where, MetaFile, m.Format, m.MaxPatches, m.Grid)
	}
	if p.dtype, err = indexDType(m.DType); err != nil {
		return nil, fmt.Errorf("index: index part %s: %w", where, err)
	}
	if m.Dim <= 0 || m.Rows < 0 || m.Grid[0] < 0 || m.Grid[1] < 0 || m.LogitScale <= 0 {
		return nil, fmt.Errorf("index: index part %s: %s says dim %d, rows %d, grid %v, logit_scale %g", where, MetaFile, m.Dim, m.Rows, m.Grid, m.LogitScale)
	}
	p.p = m.Grid[0] * m.Grid[1]
	if m.PerImageGrids() {
		p.p = m.MaxPatches
	}
	p.items = make([]int32, m.Rows)
	for i := range p.items {
		p.items[i] = -1
	}
	// The items are read one at a time into a packed table: an index of
	// millions of images keeps its names in a few large arrays.
	if len(head.Items) > 0 && string(head.Items) != "null" {
		dec := json.NewDecoder(bytes.NewReader(head.Items))
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("index: index part %s: %s: items: %w", where, MetaFile, err)
		}
		for dec.More() {
			var it Item
			if err := dec.Decode(&it); err != nil {
				return nil, fmt.Errorf("index: index part %s: %s: items: %w", where, MetaFile, err)
			}
			if it.Status != statusOK {
				continue
			}
			if it.Row < 0 || it.Row >= m.Rows {
				return nil, fmt.Errorf("index: index part %s: item %s has row %d of %d", where, it.Path, it.Row, m.Rows)
			}
			if k := p.items[it.Row]; k >= 0 {
				prev, _, _ := p.names.get(int(k))
				return nil, fmt.Errorf("index: index part %s: items %s and %s share row %d", where, prev, it.Path, it.Row)
			}
			k, err := p.names.add(it.Path, it.Source, it.Member)
			if err != nil {
				return nil, fmt.Errorf("index: index part %s: %w", where, err)
			}
			p.items[it.Row] = int32(k)
			if it.Video != "" && it.Time != nil {
				p.addFrame(it.Row, it.Video, *it.Time)
			}
		}
	}
	n, d := m.Rows, m.Dim
	if p.embeds, err = p.mapArray(dir, EmbedsFile, p.dtype, []int{n, d}); err != nil {
		return nil, err
	}
	if p.patches, err = p.mapArray(dir, PatchesFile, p.dtype, []int{n, p.p, d}); err != nil {
		return nil, err
	}
	if p.dtype == "int8" {
		s, err := p.mapArray(dir, EmbedsScaleFile, "float32", []int{n})
		if err != nil {
			return nil, err
		}
		p.embScale = floats(s)
		if s, err = p.mapArray(dir, PatchesScaleFile, "float32", []int{n, p.p}); err != nil {
			return nil, err
		}
		p.patScale = floats(s)
	}
	if m.PerImageGrids() {
		g, err := p.mapArray(dir, GridsFile, "int32", []int{n, 2})
		if err != nil {
			return nil, err
		}
		p.grids = int32s(g)
		for r := range n {
			h, w := int(p.grids[2*r]), int(p.grids[2*r+1])
			switch {
			case p.items[r] < 0 && h == 0 && w == 0:
			case h <= 0 || w <= 0 || h*w > p.p:
				path := "a failed image"
				if k := p.items[r]; k >= 0 {
					path, _, _ = p.names.get(int(k))
				}
				return nil, fmt.Errorf("index: index part %s: %s row %d (%s) is a %dx%d grid; want at least one patch and at most max_patches %d", where, GridsFile, r, path, h, w, p.p)
			}
		}
	}
	return p, nil
}

// rowGrid returns row's patch grid: the part's, or its own.
func (p *indexPart) rowGrid(row int) vision.Grid {
	if p.grids != nil {
		return vision.Grid{H: int(p.grids[2*row]), W: int(p.grids[2*row+1])}
	}
	return vision.Grid{H: p.meta.Grid[0], W: p.meta.Grid[1]}
}

// indexDType checks index.json's dtype and returns its canonical name.
func indexDType(s string) (string, error) {
	switch strings.ToLower(s) {
	case "", DTypeF16, "f16", "fp16", "<f2", "half":
		return DTypeF16, nil
	case DTypeF32, "f32", "fp32", "<f4":
		return DTypeF32, nil
	case DTypeInt8, "i8", "|i1":
		return DTypeInt8, nil
	}
	return "", fmt.Errorf("dtype %q: want float16, float32 or int8", s)
}

// npyDTypes are the .npy element types of index.json's dtypes.
var npyDTypes = map[string]tensorio.DType{"float16": tensorio.DTypeF16, "float32": tensorio.DTypeF32, "int8": tensorio.DTypeI8, "int32": tensorio.DTypeI32}

// mapArray maps the .npy file name of folder dir, checks that it holds a
// C-order array of dtype and shape, and returns its data (nil for an empty
// array).
func (p *indexPart) mapArray(dir, name, dtype string, shape []int) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &IncompletePartError{p.where, name + " is missing"}
	}
	if err != nil {
		return nil, fmt.Errorf("index: index part %s: %w", p.where, err)
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("index: index part %s: %w", p.where, err)
	}
	size := st.Size()
	if size == 0 {
		return nil, &IncompletePartError{p.where, name + " is empty"}
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("index: index part %s: map %s: %w", p.where, name, err)
	}
	p.maps = append(p.maps, b)
	dt, got, off, err := tensorio.ParseNPYHeader(b)
	if err != nil {
		return nil, &IncompletePartError{p.where, fmt.Sprintf("%s: %v", name, err)}
	}
	if dt != npyDTypes[dtype] {
		return nil, fmt.Errorf("index: index part %s: %s holds %s values, %s says %s", p.where, name, dt, MetaFile, dtype)
	}
	if !slices.Equal(got, shape) {
		return nil, &IncompletePartError{p.where, fmt.Sprintf("%s is %v, %s says %v", name, got, MetaFile, shape)}
	}
	want := int64(dt.Size())
	for _, s := range shape {
		want *= int64(s)
	}
	if have := size - int64(off); have < want {
		return nil, &IncompletePartError{p.where, fmt.Sprintf("%s holds %d bytes of data, its %v %s values need %d (truncated)", name, have, shape, dtype, want)}
	}
	if want == 0 {
		return nil, nil
	}
	if off%4 != 0 {
		return nil, fmt.Errorf("index: index part %s: %s: data at offset %d, not aligned", p.where, name, off)
	}
	if name == EmbedsFile {
		keep, p.embFile, p.embOff = true, f, int64(off)
	}
	return b[off : int64(off)+want : int64(off)+want], nil
}

// floats views mapped little-endian float32 data.
func floats(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// halves views mapped float16 data as raw bits.
func halves(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// int32s views mapped little-endian int32 data.
func int32s(b []byte) []int32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// int8s views mapped int8 data.
func int8s(b []byte) []int8 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int8)(unsafe.Pointer(&b[0])), len(b))
}

func (p *indexPart) unmap() error {
	var errs []error
	for _, m := range p.maps {
		if err := unix.Munmap(m); err != nil {
			errs = append(errs, fmt.Errorf("index: index part %s: unmap: %w", p.where, err))
		}
	}
	if p.embFile != nil {
		if err := p.embFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("index: index part %s: %w", p.where, err))
		}
	}
	p.maps, p.embeds, p.patches, p.embScale, p.patScale, p.grids, p.embFile = nil, nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

// Close unmaps the index's arrays and removes downloaded copies. It waits
// for searches running; searches after it fail with ErrClosed. It is
// safe to call more than once.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	var errs []error
	for _, p := range x.parts {
		errs = append(errs, p.unmap())
	}
	if x.tmp != "" {
		errs = append(errs, os.RemoveAll(x.tmp))
	}
	return errors.Join(errs...)
}

// Meta returns the index's metadata (the first part's index.json without
// its items; Rows is the total over the parts).
func (x *Index) Meta() Meta {
	m := x.meta
	m.Rows = x.Rows()
	return m
}

// Grid returns the patch grid of the index's images; the zero Grid when
// they have their own (Meta.PerImageGrids: each Hit and Patches says its
// image's).
func (x *Index) Grid() vision.Grid { return vision.Grid{H: x.meta.Grid[0], W: x.meta.Grid[1]} }

// Rows returns the rows of every part searched (images, failed ones
// included); for a collection in Weaviate, its objects, as counted at most
// a few seconds before (a job may be writing into it).
func (x *Index) Rows() int {
	if x.coll != nil {
		return x.collectionRows()
	}
	return x.rows
}

// Parts returns the names of the parts searched, in order.
func (x *Index) Parts() []string {
	out := make([]string, len(x.parts))
	for i, p := range x.parts {
		out[i] = p.name
	}
	if x.coll != nil {
		out = []string{x.coll.t.Collection}
	}
	return out
}

// Skipped returns the parts left out (Options.Partial) and why.
func (x *Index) Skipped() []SkippedPart { return append([]SkippedPart(nil), x.skipped...) }
