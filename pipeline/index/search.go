package index

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision"
)

// Search limits.
const (
	DefaultSearchTop = 10    // SearchOptions.Top's default
	MaxSearchTop     = 10000 // the most hits one search returns
	DefaultSearchBox = 0.5   // SearchOptions.Box's default
)

// SearchOptions controls Index.Search.
type SearchOptions struct {
	// Top is how many images to return, best first (0: DefaultSearchTop;
	// at most MaxSearchTop).
	Top int
	// Words also finds where in each hit each content word of the prompt
	// is (stage 2): its stored patches attended with the prompt.
	Words bool
	// Box is the fraction of a word's peak its box takes in (0:
	// DefaultSearchBox).
	Box float32
	// ByPatches ranks the images of a collection in Weaviate by the
	// prompt's best patch (MaxSim over the patches multi-vector) instead
	// of their image embedding; Score stays the embedding's logit. An
	// index of parts always ranks by the embedding.
	ByPatches bool
}

// SearchResult is one prompt searched over an index.
type SearchResult struct {
	Hits []Hit
	// Segments groups the hits that are frames of videos into runs of
	// consecutive frames (see Segment), best first; nil when no hit is a
	// video's frame.
	Segments []Segment
	Prompt   *pipeline.Prompt // the prompt prepared by the engine
	Rows     int              // the rows scored (every part's)
}

// Hit is one image found: where the job read it, its score and, with
// SearchOptions.Words, where each content word of the prompt is in it.
type Hit struct {
	Path   string `json:"path"`
	Source string `json:"source,omitempty"`
	Member string `json:"member,omitempty"`
	// Video and Time, for a video's frame: the video's relative path
	// and the frame's time in seconds (absent for an image).
	Video string   `json:"video,omitempty"`
	Time  *float64 `json:"time,omitempty"`
	// Score is the logit exp(logit_scale)·cos(image_embeds,
	// text_embeds) (+ logit_bias for SigLIP), as `condition embed` gives it, from the stored
	// (rounded) image embedding.
	Score float32 `json:"score"`
	Part  string  `json:"part"` // the index part and row of its vectors (a collection in Weaviate: its name, row -1)
	Row   int     `json:"row"`
	// ID is the hit's object id in a collection in Weaviate.
	ID string `json:"id,omitempty"`
	// Grid is the patch grid [H, W] of the hit's stored patches, which
	// its Words' maps cover: the index's, or for a model whose images have
	// their own grids (SigLIP 2 NaFlex) the image's.
	Grid [2]int `json:"grid,omitzero"`
	// Words (SearchOptions.Words) holds one entry per content word of the
	// prompt, in order.
	Words []WordHit `json:"words,omitempty"`
	// Attention (SearchOptions.Words) is the prompt attended to the
	// image's stored patches: Similarity [T, P] and TextToImage [T, P],
	// for Overlays, TopPatches and Heatmap.
	Attention *pipeline.Attention `json:"-"`
}

// WordHit is where one content word of a prompt is in a hit: its map over
// the patch grid (the mean cosine of its tokens with each patch) and the
// peak and box of that map.
type WordHit struct {
	Word   string `json:"word"`
	Tokens [2]int `json:"tokens"` // [start, end) in the prompt's tokens
	// Peak is the map's largest value, at Cell [row, col].
	Peak float32 `json:"peak"`
	Cell [2]int  `json:"cell"`
	// Box is [row0, col0, row1, col1] (inclusive, in grid cells): the
	// bounding box of the cells whose value is at least SearchOptions.Box
	// times the peak and which are connected to the peak's cell through
	// such cells (side by side, not corner to corner). A peak ≤ 0 has the
	// box of its own cell.
	Box [4]int    `json:"box"`
	Map []float32 `json:"map"` // [H·W], row-major over the hit's grid
}

// candidate is one scored row.
type candidate struct {
	score     float32
	part, row int32
}

// better orders candidates: higher score first, then lower part and row,
// so that the top is the same however the rows were split.
func better(a, b candidate) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.part != b.part {
		return a.part < b.part
	}
	return a.row < b.row
}

// topK keeps the k best candidates seen: a min-heap by better, its root
// the worst kept.
type topK struct {
	k int
	h []candidate
}

func (t *topK) push(c candidate) {
	if len(t.h) < t.k {
		t.h = append(t.h, c)
		t.up(len(t.h) - 1)
		return
	}
	if !better(c, t.h[0]) {
		return
	}
	t.h[0] = c
	t.down(0)
}

// worse says whether h[i] is worse than h[j] (the heap order).
func (t *topK) worse(i, j int) bool { return better(t.h[j], t.h[i]) }

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.worse(i, p) {
			return
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *topK) down(i int) {
	n := len(t.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.worse(r, l) {
			m = r
		}
		if !t.worse(m, i) {
			return
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

// searchChunk is how many rows one task of stage 1 scores.
const searchChunk = 16384

// Search finds the images of the index most like prompt: every image's
// CLIP logit with the prompt's text embedding (stage 1, exact, over all
// parts), the opts.Top best and, with opts.Words, where each content word
// of the prompt is in each of them (stage 2). When hits are frames of
// videos, the result's Segments group them into runs of each video's
// consecutive frames (Segment), with the best frame's words under
// opts.Words. eng must be of the index's model (name and revision); stage
// 2 needs it in CLIP's joint space both ways (the default layer).
func (x *Index) Search(ctx context.Context, eng *pipeline.Engine, prompt string, opts SearchOptions) (*SearchResult, error) {
	top := opts.Top
	if top == 0 {
		top = DefaultSearchTop
	}
	if top < 0 || top > MaxSearchTop {
		return nil, fmt.Errorf("index: search: top %d: want 1 to %d", opts.Top, MaxSearchTop)
	}
	box := opts.Box
	if box == 0 {
		box = DefaultSearchBox
	}
	if !(box > 0 && box <= 1) {
		return nil, fmt.Errorf("index: search: box %g: want a fraction of the peak in (0, 1]", opts.Box)
	}
	if eng == nil {
		return nil, errors.New("index: search: no engine")
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, ErrClosed
	}
	if m := eng.Model(); m.Name() != x.meta.Model || m.Revision() != x.meta.Revision {
		return nil, fmt.Errorf("index: search: the engine's model is %s, the index %s was made with %s: its vectors compare only with its own model's",
			modelName(m.Name(), m.Revision()), x.where, modelName(x.meta.Model, x.meta.Revision))
	}
	if want, have := x.meta.ReadoutName(), eng.Options().Readout; want != have {
		return nil, fmt.Errorf("index: search: the index %s holds patches of readout %s; the engine reads readout %s (open it with Options.Readout %s)", x.where, want, have, want)
	}
	ps, err := eng.Prepare(ctx, prompt)
	if err != nil {
		return nil, fmt.Errorf("index: search: %w", err)
	}
	pr := ps[0]
	if x.coll != nil {
		return x.searchCollection(ctx, eng, ps, top, box, opts)
	}
	q, err := x.query(pr.Embeds)
	if err != nil {
		return nil, err
	}
	hits, err := x.searchVector(ctx, q, top)
	if err != nil {
		return nil, err
	}
	res := &SearchResult{Prompt: pr, Rows: x.rows, Hits: hits, Segments: x.segments(q, hits)}
	if opts.Words {
		if err := x.stage2(ctx, eng, ps, res.Hits, nil, box); err != nil {
			return nil, err
		}
		if err := x.segmentWords(ctx, eng, ps, res, box); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// segmentWords fills in the Words and Attention of each segment's best
// frame: a hit's when it is one, else attended here (a collection's
// frame with its patches read by id).
func (x *Index) segmentWords(ctx context.Context, eng *pipeline.Engine, ps pipeline.Prompts, res *SearchResult, box float32) error {
	var todo []Hit
	var at []int
	for i := range res.Segments {
		b := &res.Segments[i].Best
		k := slices.IndexFunc(res.Hits, func(h Hit) bool { return h.Part == b.Part && h.Row == b.Row && h.ID == b.ID })
		if k >= 0 {
			*b = res.Hits[k]
			continue
		}
		todo, at = append(todo, *b), append(at, i)
	}
	if len(todo) == 0 {
		return nil
	}
	var patches [][]float32
	if x.coll != nil {
		var err error
		if patches, err = x.coll.patches(ctx, todo); err != nil {
			return err
		}
	}
	if err := x.stage2(ctx, eng, ps, todo, patches, box); err != nil {
		return err
	}
	for j, i := range at {
		res.Segments[i].Best = todo[j]
	}
	return nil
}

// SearchVector finds the top images (1 to MaxSearchTop) of the index most
// like the embedding q ([D], in the joint space, normalised here): stage 1
// of Search for a query known by its vector (a text or an image
// embedding of the index's model). Scores are logits, exp(logit_scale)·cos.
func (x *Index) SearchVector(ctx context.Context, q []float32, top int) ([]Hit, error) {
	if top < 1 || top > MaxSearchTop {
		return nil, fmt.Errorf("index: search: top %d: want 1 to %d", top, MaxSearchTop)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, ErrClosed
	}
	if x.coll != nil {
		q, err := x.collectionQuery(q)
		if err != nil {
			return nil, err
		}
		hits, _, err := x.coll.near(ctx, q, top, false, false)
		return hits, err
	}
	sq, err := x.query(q)
	if err != nil {
		return nil, err
	}
	return x.searchVector(ctx, sq, top)
}

// query returns the query of embeds: logit_scale · embeds/‖embeds‖, whose
// dot with a row is its logit.
func (x *Index) query(embeds []float32) ([]float32, error) {
	d := x.meta.Dim
	if len(embeds) != d {
		return nil, fmt.Errorf("index: search: a %d-wide query for the index's %d-wide image embeddings", len(embeds), d)
	}
	// q = logit_scale · embeds/‖embeds‖: a row's dot with it is its logit.
	var norm float64
	for _, v := range embeds {
		norm += float64(v) * float64(v)
	}
	q := make([]float32, d)
	if norm > 0 {
		f := x.meta.LogitScale / math.Sqrt(norm)
		for i, v := range embeds {
			q[i] = float32(float64(v) * f)
		}
	}
	return q, nil
}

// searchVector is SearchVector under the read lock, for the query q.
func (x *Index) searchVector(ctx context.Context, q []float32, top int) ([]Hit, error) {
	best, err := x.stage1(ctx, q, top)
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, len(best))
	for i, c := range best {
		hits[i] = x.parts[c.part].hit(int(c.row), c.score+float32(x.meta.LogitBias))
	}
	return hits, nil
}

// hit is the Hit of row (an ok one) scoring score.
func (p *indexPart) hit(row int, score float32) Hit {
	path, source, member := p.names.get(int(p.items[row]))
	g := p.rowGrid(row)
	h := Hit{Path: path, Source: source, Member: member, Score: score, Part: p.name, Row: row, Grid: [2]int{g.H, g.W}}
	if v, t, ok := p.frameOf(row); ok {
		h.Video, h.Time = v, &t
	}
	return h
}

// stage1 scores every ok row of every part with q and returns the top
// best, best first. The rows are split into chunks that up to GOMAXPROCS
// goroutines take in turn, each keeping its own top; memory stays that of
// the tops, whatever the index's size.
func (x *Index) stage1(ctx context.Context, q []float32, top int) ([]candidate, error) {
	type chunk struct{ part, r0, r1 int }
	var chunks []chunk
	for pi, p := range x.parts {
		for r := 0; r < p.meta.Rows; r += searchChunk {
			chunks = append(chunks, chunk{pi, r, min(r+searchChunk, p.meta.Rows)})
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(chunks))
	tops := make([]topK, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		tops[w].k = top
		wg.Go(func() {
			t := &tops[w]
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) || ctx.Err() != nil {
					return
				}
				c := chunks[i]
				x.parts[c.part].score(t, int32(c.part), c.r0, c.r1, q)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var all []candidate
	for _, t := range tops {
		all = append(all, t.h...)
	}
	slices.SortFunc(all, func(a, b candidate) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	if len(all) > top {
		all = all[:top]
	}
	return all, nil
}

// score pushes the logit of rows [r0, r1) of p (the ok ones) into t.
func (p *indexPart) score(t *topK, part int32, r0, r1 int, q []float32) {
	d := p.meta.Dim
	switch p.dtype {
	case "float16":
		e := halves(p.embeds)
		for r := r0; r < r1; r++ {
			if p.items[r] < 0 {
				continue
			}
			s := halfdot.Dot(e[r*d:(r+1)*d], q)
			if len(t.h) < t.k || s >= t.h[0].score {
				t.push(candidate{s, part, int32(r)})
			}
		}
	case "float32":
		e := floats(p.embeds)
		for r := r0; r < r1; r++ {
			if p.items[r] >= 0 {
				t.push(candidate{halfdot.DotFloat32(e[r*d:(r+1)*d], q), part, int32(r)})
			}
		}
	case "int8":
		e := int8s(p.embeds)
		for r := r0; r < r1; r++ {
			if p.items[r] >= 0 {
				t.push(candidate{halfdot.DotInt8(e[r*d:(r+1)*d], q) * p.embScale[r], part, int32(r)})
			}
		}
	}
}

// Patches returns the stored joint-space patches of row of part, [H·W, D]
// float32 (dequantised), and the grid H×W they cover: the index's, or for
// a model whose images have their own grids the row's (without its
// padding). A failed image's row is zeros on the index's grid, or with
// grids of their own no patches on a 0x0 grid.
func (x *Index) Patches(part string, row int) ([]float32, vision.Grid, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, vision.Grid{}, ErrClosed
	}
	if x.coll != nil {
		return nil, vision.Grid{}, errCollectionPatches
	}
	for _, p := range x.parts {
		if p.name == part {
			if row < 0 || row >= p.meta.Rows {
				return nil, vision.Grid{}, fmt.Errorf("index: index part %s: row %d of %d", p.where, row, p.meta.Rows)
			}
			return p.rowPatches(row), p.rowGrid(row), nil
		}
	}
	return nil, vision.Grid{}, fmt.Errorf("index: index %s: no part %q", x.where, part)
}

// rowPatches dequantises row's patches: [H·W, D] float32 over its grid
// (rowGrid), the padding after them left out.
func (p *indexPart) rowPatches(row int) []float32 {
	n := p.p * p.meta.Dim                      // a row's values
	k := p.rowGrid(row).Patches() * p.meta.Dim // its grid's
	out := make([]float32, k)
	switch p.dtype {
	case "float16":
		for i, h := range halves(p.patches)[row*n : row*n+k] {
			out[i] = halfdot.ToFloat32(h)
		}
	case "float32":
		copy(out, floats(p.patches)[row*n:row*n+k])
	case "int8":
		d := p.meta.Dim
		src := int8s(p.patches)[row*n : row*n+k]
		for j := range k / d {
			s := p.patScale[row*p.p+j]
			for i, v := range src[j*d : (j+1)*d] {
				out[j*d+i] = float32(v) * s
			}
		}
	}
	return out
}

// stage2 attends the prompt to each hit's stored patches (patches[i], or
// its part's row when patches is nil) on the hit's grid and fills in its
// Words and Attention.
func (x *Index) stage2(ctx context.Context, eng *pipeline.Engine, ps pipeline.Prompts, hits []Hit, patches [][]float32, box float32) error {
	if g := x.Grid(); g.Patches() == 0 && !x.meta.PerImageGrids() {
		return fmt.Errorf("index: search: index %s holds no patches (a %s grid): it finds images, not where words are in them", x.where, g)
	}
	if jd := eng.JointDim(); jd != x.meta.Dim {
		return fmt.Errorf("index: search: where words are needs the engine in CLIP's joint space both ways (the default layer), %d wide like the index; the engine's is %d", x.meta.Dim, jd)
	}
	partOf := map[string]*indexPart{}
	for _, p := range x.parts {
		partOf[p.name] = p
	}
	for i := range hits {
		h := &hits[i]
		g := vision.Grid{H: h.Grid[0], W: h.Grid[1]}
		if g.Patches() == 0 {
			return fmt.Errorf("index: search: %s (part %s, row %d) has no patch grid", h.Path, h.Part, h.Row)
		}
		var ps1 []float32
		if patches != nil {
			ps1 = patches[i]
		} else {
			ps1 = partOf[h.Part].rowPatches(h.Row)
		}
		atts, err := eng.AttendJoint(ctx, ps1, g, ps)
		if err != nil {
			return fmt.Errorf("index: search: %s (part %s, row %d): %w", h.Path, h.Part, h.Row, err)
		}
		a := &atts[0]
		h.Attention = a
		for _, ov := range a.Overlays() {
			r, c := ov.PeakCell()
			peak := ov.Map[r*g.W+c]
			h.Words = append(h.Words, WordHit{Word: ov.Label, Tokens: [2]int{ov.Start, ov.End}, Peak: peak,
				Cell: [2]int{r, c}, Box: WordBox(ov.Map, g, r, c, box*peak), Map: ov.Map})
		}
	}
	return nil
}

// WordBox returns [row0, col0, row1, col1] (inclusive): the bounding box of
// the cells of m ([P] over grid g) whose value is at least thresh and which
// are connected (side by side) to the cell (row, col) through such cells.
// The cell itself is always in the box, and alone in it when its value or
// thresh is not positive.
func WordBox(m []float32, g vision.Grid, row, col int, thresh float32) [4]int {
	b := [4]int{row, col, row, col}
	if m[row*g.W+col] <= 0 || thresh <= 0 {
		return b
	}
	seen := make([]bool, len(m))
	stack := []int{row*g.W + col}
	seen[stack[0]] = true
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		r, c := j/g.W, j%g.W
		b[0], b[1], b[2], b[3] = min(b[0], r), min(b[1], c), max(b[2], r), max(b[3], c)
		for _, n := range [4][2]int{{r - 1, c}, {r + 1, c}, {r, c - 1}, {r, c + 1}} {
			if n[0] < 0 || n[0] >= g.H || n[1] < 0 || n[1] >= g.W {
				continue
			}
			k := n[0]*g.W + n[1]
			if !seen[k] && m[k] >= thresh {
				seen[k] = true
				stack = append(stack, k)
			}
		}
	}
	return b
}

// ReadImage reads the file of a hit's image from where the job read it: a
// file, an object in a store (Options.Store), or a member of a tar shard
// (either).
func (x *Index) ReadImage(ctx context.Context, h *Hit) ([]byte, error) {
	if h.Source == "" {
		return nil, errors.New("the index does not say where the image was read")
	}
	var data []byte
	var err error
	switch {
	case h.Member != "":
		data, err = x.readTarMember(ctx, h.Source, h.Member)
	case isURL(x.store, h.Source):
		if x.store == nil {
			return nil, errNoStore("read", h.Source)
		}
		data, err = x.store.ReadAll(ctx, h.Source, 256<<20)
	default:
		data, err = os.ReadFile(h.Source)
	}
	return data, err
}

// readTarMember reads member of the tar shard src (a file or an object):
// the member of that name, or the image of that sample key (as the job
// names a shard's samples, key.ext).
func (x *Index) readTarMember(ctx context.Context, src, member string) ([]byte, error) {
	var r io.ReadCloser
	if isURL(x.store, src) {
		if x.store == nil {
			return nil, errNoStore("read", src)
		}
		var err error
		if r, err = x.store.Open(ctx, src, false); err != nil {
			return nil, err
		}
	} else {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		r = f
	}
	defer r.Close()
	member = strings.TrimPrefix(member, "./")
	key := strings.TrimSuffix(member, path.Ext(member))
	tr := tar.NewReader(r)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("tar shard %s has no member %s", src, member)
		}
		if err != nil {
			return nil, fmt.Errorf("tar shard %s: %w", src, err)
		}
		if hd.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(hd.Name, "./")
		dir, base := path.Split(name)
		k, ext, _ := strings.Cut(base, ".")
		if name == member || (dir+k == key && vision.IsImageName("x."+ext)) {
			if hd.Size > 256<<20 {
				return nil, fmt.Errorf("tar shard %s: member %s of %d bytes", src, name, hd.Size)
			}
			return io.ReadAll(tr)
		}
	}
}
