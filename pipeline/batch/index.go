package batch

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

// The collection index (Config.Index; package pipeline/index reads it and
// defines its files): every ShardSize images, in the order the walk assigns
// their seq numbers, one part named as shardName names output shards (in
// the files layout too):
//
//	index/<name>/embeds.npy         [N, D]    image_embeds, L2-normalised, in the index's dtype
//	index/<name>/patches.npy        [N, P, D] the joint-space patches (Engine.JointPatches)
//	index/<name>/embeds_scale.npy   [N]       float32, int8 only: value = int8 · scale
//	index/<name>/patches_scale.npy  [N, P]    float32, int8 only: one scale per patch vector
//	index/<name>/grids.npy          [N, 2]    int32, per-image grids only: each row's grid (H, W)
//	index/<name>/index.json         written last: the part is whole when it exists
//
// For a model whose images have their own patch grids (SigLIP 2 NaFlex)
// P is the model's patch budget (max_num_patches): a row's first H·W patch
// vectors are its image's, row-major over its grid, the rest zeros (their
// int8 scales too); grids.npy says each row's grid (0, 0 for a failed
// image), and index.json has format index.FormatGrids and max_patches P
// instead of grid. A model of one grid writes index.Format parts as
// before, byte for byte.
//
// A failed image's rows are zeros (and its scales), its item's status
// "error". A part is written under a temporary folder, renamed into place,
// then index.json is written (for an object-store output: the arrays are
// uploaded first, index.json last); --resume keeps the parts whose
// index.json holds the job's settings hash and redoes every image of the
// others, so that they are written whole again.

// indexOutFormat is index.json's format field (of a part of one grid;
// index.FormatGrids for per-image grids).
const indexOutFormat = index.Format

// Index dtypes.
const (
	indexOutF16  = index.DTypeF16
	indexOutF32  = index.DTypeF32
	indexOutInt8 = index.DTypeInt8
)

// indexOutArrays names a part's arrays: embeds, patches, for int8 their
// scales, and for per-image grids the rows' grids.
var indexOutArrays = [5]string{index.EmbedsFile, index.PatchesFile, index.EmbedsScaleFile, index.PatchesScaleFile, index.GridsFile}

// checkIndexOutDType returns the index dtype d names ("" is float16).
func checkIndexOutDType(d string) (string, error) {
	switch d {
	case "", indexOutF16:
		return indexOutF16, nil
	case indexOutF32, indexOutInt8:
		return d, nil
	}
	return "", fmt.Errorf("batch: index dtype %q: want float16, float32 or int8", d)
}

// indexOutElem returns the tensorio dtype of an index dtype's values.
func indexOutElem(dtype string) tensorio.DType {
	switch dtype {
	case indexOutF32:
		return tensorio.DTypeF32
	case indexOutInt8:
		return tensorio.DTypeI8
	}
	return tensorio.DTypeF16
}

// indexOutMeta is a part's index.json.
type indexOutMeta struct {
	Format     string         `json:"format"`
	Model      string         `json:"model"`
	Revision   string         `json:"revision"`
	Settings   string         `json:"settings"`
	DType      string         `json:"dtype"`
	Dim        int            `json:"dim"`
	Grid       [2]int         `json:"grid,omitzero"`         // absent with per-image grids
	MaxPatches int            `json:"max_patches,omitempty"` // the patch budget P of per-image grids
	LogitScale float64        `json:"logit_scale"`
	LogitBias  float64        `json:"logit_bias,omitempty"`
	Readout    string         `json:"readout,omitempty"` // the patches' readout; absent for raw
	Rows       int            `json:"rows"`
	Items      []indexOutItem `json:"items"`
}

// indexOutItem is one row of a part: the image it holds.
type indexOutItem struct {
	Row    int    `json:"row"`
	Path   string `json:"path"`   // the relative output path, as the manifest's path
	Source string `json:"source"` // what was read: a file, a tar shard's path or an object's URL
	Member string `json:"member"` // the tar member, or ""
	SHA256 string `json:"sha256"`
	Status string `json:"status"` // "ok" or "error"
	// Video and Time, for a video's frame: the video's relative path and
	// the frame's presentation time in seconds.
	Video string   `json:"video,omitempty"`
	Time  *float64 `json:"time,omitempty"`
}

// indexOutSet writes a job's index parts.
type indexOutSet struct {
	partSet[indexOutFiles, indexOutItem]
	settings string
	dtype    string
	elem     tensorio.DType
	dim      int         // D, the joint space's width
	grid     vision.Grid // the patch grid, P = H·W; zero with per-image grids
	maxP     int         // per-image grids: the patch budget P (each row padded to it); 0 for one grid
	model    string
	revision string
	readout  string  // "" for raw
	scale    float64 // exp(logit_scale)
	bias     float64 // logit_bias (SigLIP)
	dst      output
	ctx      context.Context

	kept sync.Map // part → whole from an earlier run with the same settings (bool)
}

// indexOutFiles is a part's arrays being written (nil: none), as
// indexOutArrays names them.
type indexOutFiles = [5]*os.File

// indexOutPart is one part being written.
type indexOutPart = part[indexOutFiles, indexOutItem]

// newIndexOutSet returns the index writer of a job of engine eng.
func newIndexOutSet(out *outFolder, eng *pipeline.Engine, size int, proc Shard, settings, dtype string) (*indexOutSet, error) {
	d := eng.JointDim()
	if d <= 0 {
		return nil, errors.New("batch: the collection index needs the engine in CLIP's joint space both ways (the default layer, both directions)")
	}
	m := eng.Model()
	g, maxP, err := jobGrids(eng)
	if err != nil {
		return nil, fmt.Errorf("batch: index: %w", err)
	}
	s := &indexOutSet{settings: settings, dtype: dtype, elem: indexOutElem(dtype),
		dim: d, grid: g, maxP: maxP, model: m.Name(), revision: m.Revision(), scale: eng.LogitScale(), bias: eng.LogitBias(),
		readout: indexReadout(eng.Options().Readout)}
	s.partSet = partSet[indexOutFiles, indexOutItem]{out: out, size: size, proc: proc, what: "index part", tmp: ".tmp-index-",
		start: s.openArrays, finish: s.finish, close: closeIndexOutPart}
	return s, nil
}

// jobGrids returns the patch grid of eng's images, or for a model whose
// images have their own grids (SigLIP 2 NaFlex) the zero Grid and its
// patch budget (max_num_patches).
func jobGrids(eng *pipeline.Engine) (vision.Grid, int, error) {
	m := eng.Model()
	if m.Config().NaFlex() {
		nf := eng.Preprocessor().NaFlex
		if nf == nil || nf.MaxNumPatches <= 0 {
			return vision.Grid{}, 0, fmt.Errorf("%s is SigLIP 2 NaFlex, but its preprocessor has no patch budget", m.Name())
		}
		return vision.Grid{}, nf.MaxNumPatches, nil
	}
	h, w := eng.InputSize()
	g, err := vision.GridFor(h, w, m.Config().VisionConfig.PatchSize)
	if err != nil {
		return vision.Grid{}, 0, fmt.Errorf("the model's patch grid: %w", err)
	}
	return g, 0, nil
}

// patchRows returns P, a row's patch vectors: the grid's, or the budget.
func (s *indexOutSet) patchRows() int {
	if s.maxP > 0 {
		return s.maxP
	}
	return s.grid.Patches()
}

// format returns index.json's format.
func (s *indexOutSet) format() string {
	if s.maxP > 0 {
		return index.FormatGrids
	}
	return indexOutFormat
}

// dir returns part i's folder, relative to the output.
func (s *indexOutSet) dir(i int) string { return "index/" + shardName(s.proc, i) }

// outputs returns the files of image seq's part, as the manifest lists
// them.
func (s *indexOutSet) outputs(seq int) []string {
	d := s.dir(seq / s.size)
	out := []string{d + "/" + indexOutArrays[0], d + "/" + indexOutArrays[1]}
	if s.dtype == indexOutInt8 {
		out = append(out, d+"/"+indexOutArrays[2], d+"/"+indexOutArrays[3])
	}
	if s.maxP > 0 {
		out = append(out, d+"/"+indexOutArrays[4])
	}
	return append(out, d+"/"+index.MetaFile)
}

// whole reports whether part i was finished by an earlier run with the
// same settings (read once per part).
func (s *indexOutSet) whole(i int) bool {
	if v, ok := s.kept.Load(i); ok {
		return v.(bool)
	}
	ok := s.readWhole(i)
	s.kept.Store(i, ok)
	return ok
}

func (s *indexOutSet) readWhole(i int) bool {
	rel := s.dir(i) + "/" + index.MetaFile
	b, err := readAll(s.ctx, s.dst, rel)
	if err != nil {
		return false
	}
	var m indexOutMeta
	return json.Unmarshal(b, &m) == nil && m.Format == s.format() && m.MaxPatches == s.maxP && m.Settings == s.settings && m.DType == s.dtype && m.Rows == len(m.Items)
}

// rowSizes returns the bytes of one row of each array (0: none).
func (s *indexOutSet) rowSizes() [5]int {
	es, p := s.elem.Size(), s.patchRows()
	r := [5]int{s.dim * es, p * s.dim * es}
	if s.dtype == indexOutInt8 {
		r[2], r[3] = 4, p*4
	}
	if s.maxP > 0 {
		r[4] = 8
	}
	return r
}

// shapes returns each array's shape for n rows.
func (s *indexOutSet) shapes(n int) [5][]int {
	p := s.patchRows()
	return [5][]int{{n, s.dim}, {n, p, s.dim}, {n}, {n, p}, {n, 2}}
}

// openArrays opens part o's arrays.
func (s *indexOutSet) openArrays(o *indexOutPart) error {
	sizes := s.rowSizes()
	for k, a := range indexOutArrays {
		if sizes[k] == 0 {
			continue
		}
		f, err := s.out.root.OpenFile(path.Join(o.tmp, a), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			closeIndexOutPart(o)
			return fmt.Errorf("batch: index part %s: %w", o.name, err)
		}
		o.files[k] = f
	}
	return nil
}

// closeIndexOutPart closes the part's arrays (those still open).
func closeIndexOutPart(o *indexOutPart) {
	for _, f := range o.files {
		if f != nil {
			f.Close()
		}
	}
}

// write puts image seq's rows in its part: embeds, its image_embeds [D]
// (normalised here), and patches, its joint-space patches [H·W, D] (unit
// vectors) over grid g (the index's, or with per-image grids the image's,
// its row padded with zeros to the budget).
func (s *indexOutSet) write(seq int, embeds, patches []float32, g vision.Grid) error {
	if s.maxP > 0 {
		if g.H <= 0 || g.W <= 0 || g.Patches() > s.maxP {
			return fmt.Errorf("batch: index: a %s patch grid; the model's images have their own grids of 1 to %d patches", g, s.maxP)
		}
	} else if g != s.grid {
		return fmt.Errorf("batch: index: a %s patch grid, the index's is %s", g, s.grid)
	}
	p := g.Patches()
	if len(embeds) != s.dim {
		return fmt.Errorf("batch: index: image_embeds of %d values, the joint space is %d wide", len(embeds), s.dim)
	}
	if len(patches) != p*s.dim {
		return fmt.Errorf("batch: index: %d joint-space patch values, want %d (%s grid of %d)", len(patches), p*s.dim, g, s.dim)
	}
	unit := make([]float32, s.dim)
	var ss float64
	for _, v := range embeds {
		ss += float64(v) * float64(v)
	}
	if ss > 0 {
		inv := 1 / math.Sqrt(ss)
		for k, v := range embeds {
			unit[k] = float32(float64(v) * inv)
		}
	}
	sizes := s.rowSizes()
	var rows [5][]byte
	switch s.dtype {
	case indexOutInt8:
		rows[0], rows[2] = make([]byte, sizes[0]), make([]byte, sizes[2])
		rows[1], rows[3] = make([]byte, sizes[1]), make([]byte, sizes[3])
		sc := indexOutQuantize(rows[0], unit)
		binary.LittleEndian.PutUint32(rows[2], math.Float32bits(sc))
		for k := range p {
			sc := indexOutQuantize(rows[1][k*s.dim:(k+1)*s.dim], patches[k*s.dim:(k+1)*s.dim])
			binary.LittleEndian.PutUint32(rows[3][4*k:], math.Float32bits(sc))
		}
	case indexOutF32:
		rows[0], rows[1] = indexOutAppendF32(make([]byte, 0, sizes[0]), unit), indexOutAppendF32(make([]byte, 0, sizes[1]), patches)
	default:
		rows[0], rows[1] = indexOutAppendF16(make([]byte, 0, sizes[0]), unit), indexOutAppendF16(make([]byte, 0, sizes[1]), patches)
	}
	rows[1] = rows[1][:sizes[1]] // the padding after a grid's patches: zeros
	if s.maxP > 0 {
		rows[4] = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(make([]byte, 0, 8), uint32(g.H)), uint32(g.W))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.get(seq / s.size)
	if err != nil {
		return err
	}
	row := int64(seq % s.size)
	for k, b := range rows {
		if b == nil {
			continue
		}
		if _, err := o.files[k].WriteAt(b, shardNPYHeader+row*int64(sizes[k])); err != nil {
			// The row stays zeros, as a failed image's should.
			for j := range k + 1 {
				if rows[j] != nil {
					o.files[j].WriteAt(make([]byte, sizes[j]), shardNPYHeader+row*int64(sizes[j]))
				}
			}
			return fmt.Errorf("batch: index part %s: %w", o.name, err)
		}
	}
	return nil
}

// account records image seq's item; it finishes the part when it holds
// all its images: size of them, or, once the walk is over (total ≥ 0), the
// rest.
func (s *indexOutSet) account(seq int, it indexOutItem, total int) error {
	it.Row = seq % s.size
	return s.add(seq, it, total)
}

// finish writes part o of n rows: the arrays' headers, the folder renamed
// into place, then index.json.
func (s *indexOutSet) finish(o *indexOutPart, n int) error {
	defer closeIndexOutPart(o)
	sizes, shapes := s.rowSizes(), s.shapes(n)
	for k, f := range o.files {
		if f == nil {
			continue
		}
		dt := s.elem
		switch k {
		case 2, 3:
			dt = tensorio.DTypeF32
		case 4:
			dt = tensorio.DTypeI32
		}
		err := s.seal(o, f, indexOutArrays[k], dt, shapes[k], sizes[k], n)
		o.files[k] = nil // closed
		if err != nil {
			return err
		}
	}
	sort.Slice(o.rows, func(a, b int) bool { return o.rows[a].Row < o.rows[b].Row })
	m := indexOutMeta{Format: s.format(), Model: s.model, Revision: s.revision, Settings: s.settings, DType: s.dtype,
		Dim: s.dim, Grid: [2]int{s.grid.H, s.grid.W}, MaxPatches: s.maxP, LogitScale: s.scale, LogitBias: s.bias, Readout: s.readout, Rows: n, Items: o.rows}
	js, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("batch: index part %s: index.json: %w", o.name, err)
	}
	js = append(js, '\n')
	dst := "index/" + o.name
	if err := s.out.root.MkdirAll("index", 0o755); err != nil {
		return fmt.Errorf("batch: index part %s: %w", o.name, err)
	}
	if err := s.out.root.RemoveAll(dst); err != nil {
		return fmt.Errorf("batch: index part %s: %w", o.name, err)
	}
	if err := s.out.root.Rename(o.tmp, dst); err != nil {
		return fmt.Errorf("batch: index part %s: %w", o.name, err)
	}
	if err := s.out.WriteFile(dst+"/"+index.MetaFile, js); err != nil {
		return err
	}
	return s.dst.publishIndexPart(s.ctx, s.out, o.name)
}

// indexOutItemOf is the item of an image's entry (its final status).
func indexOutItemOf(it Item, e Entry) indexOutItem {
	x := indexOutItem{Path: e.Path, Source: e.Source, SHA256: e.SHA256, Status: e.Status, Video: e.Video, Time: e.Time}
	if it.Member {
		if x.Member = it.MemberName; x.Member == "" {
			x.Member = strings.TrimPrefix(e.Path, it.Unit+"/")
		}
	}
	return x
}

// indexOutAppendF16 appends src as IEEE 754 half-precision values (rounded to
// nearest even), little-endian.
func indexOutAppendF16(dst []byte, src []float32) []byte {
	for _, v := range src {
		dst = binary.LittleEndian.AppendUint16(dst, tensorio.Float32ToF16(v))
	}
	return dst
}

// indexOutAppendF32 appends src as little-endian float32 values.
func indexOutAppendF32(dst []byte, src []float32) []byte {
	for _, v := range src {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	return dst
}

// indexOutQuantize writes x [n] into dst [n] as int8 values q with
// x ≈ q · scale, scale = max|x| / 127 (q rounded to nearest, ties to
// even), and returns scale (0 for a zero vector, whose q are 0).
func indexOutQuantize(dst []byte, x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	if m == 0 || math.IsInf(float64(m), 0) || math.IsNaN(float64(m)) {
		clear(dst)
		return 0
	}
	scale := m / 127
	inv := 1 / float64(scale)
	for k, v := range x {
		q := math.RoundToEven(float64(v) * inv)
		q = max(-127, min(127, q))
		dst[k] = byte(int8(q))
	}
	return scale
}

// indexReadout is what index.json records of readout r: "" for raw, whose
// indexes stay as they were.
func indexReadout(r clip.Readout) string {
	if r == pipeline.ReadoutRaw {
		return ""
	}
	return string(r)
}
