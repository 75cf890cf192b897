package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conditionhq/condition/internal/weaviate"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision"
)

// A collection in Weaviate (weaviate://HOST:PORT/Name) holds what index
// parts hold, one object per image: the L2-normalised image embedding as
// the named vector "pooled" (HNSW, cosine), the joint-space patches as the
// multi-vector "patches" (HNSW, MaxSim) and the properties below. The
// class's description is the collection's CollectionMeta (JSON). An
// object's id is CollectionID of the image's source and tar member, so
// that writing an image again (a retry, --resume, a job array's task run
// twice) replaces it. The property "grid" ("HxW") is the grid of the
// object's patches: the collection's, or for a model whose images have
// their own grids (SigLIP 2 NaFlex; CollectionMeta.MaxPatches) the image's,
// whose H·W vectors the multi-vector holds in row-major order.

// CollectionFormat is the CollectionMeta.Format of a collection whose
// images share one patch grid.
const CollectionFormat = "condition-collection/v1"

// CollectionFormatGrids is the CollectionMeta.Format of a collection whose
// images have their own grids (CollectionMeta.MaxPatches): a reader that
// knows only CollectionFormat refuses it instead of reading its objects as
// having no patches.
const CollectionFormatGrids = "condition-collection/v2"

// IsCollectionURL reports whether s names a collection in Weaviate
// (weaviate://HOST:PORT/Name).
func IsCollectionURL(s string) bool { return weaviate.IsURL(s) }

// CheckCollectionURL checks that s is weaviate://HOST:PORT/Name with a
// class name Weaviate takes.
func CheckCollectionURL(s string) error {
	_, err := weaviate.Parse(s)
	return err
}

// The properties of a collection's objects: text, and numbers. A video's
// frame has "video" (the video's relative path, as a file index's items
// have it) and "time" (seconds); an image has neither. A collection made
// before they were (its objects' paths VIDEO#t=SECONDS name their video
// alone) gains them when a job opens it to write: the frames written
// from then on have them, and only those make segments.
var (
	collectionProps       = []string{"path", "source", "member", "sha256", "grid", "model", "revision", "readout", "program_version", "video"}
	collectionNumberProps = []string{"time"}
)

// CollectionMeta is what made a collection's vectors: stored as its
// class's description, checked by every writer and reader.
type CollectionMeta struct {
	Format   string `json:"format"`
	Model    string `json:"model"`
	Revision string `json:"revision"`
	Readout  string `json:"readout,omitempty"` // absent: raw
	Dim      int    `json:"dim"`
	Grid     [2]int `json:"grid"` // [0, 0] with MaxPatches
	// MaxPatches is the patch budget of a collection whose images have
	// their own grids (SigLIP 2 NaFlex): each object's grid property says
	// its own, of at most this many patches; absent (0) for one grid.
	MaxPatches int     `json:"max_patches,omitempty"`
	LogitScale float64 `json:"logit_scale"`
	LogitBias  float64 `json:"logit_bias,omitempty"`
}

// CollectionOptions controls OpenCollection.
type CollectionOptions struct {
	// APIKey is Weaviate's API key ("": anonymous access).
	APIKey string
	// Consistency is the consistency level of writes and reads: ONE,
	// QUORUM (the default) or ALL.
	Consistency string
	// Create makes the collection with this metadata when it does not
	// exist; an existing one must have the same model, revision, readout,
	// width and grid (or patch budget). Nil: the collection must exist.
	Create *CollectionMeta
	// Replication is the replication factor of a collection created
	// (0: 1).
	Replication int
	// Muvera encodes the patches of a collection created with MUVERA (one
	// fixed-width vector per image in the graph instead of one per patch).
	Muvera bool
	// VectorIndex is how a collection created searches its image
	// embeddings: VectorIndexHNSW (the default, "") or VectorIndexFlat.
	// An existing collection keeps its own; naming another is an error.
	VectorIndex string
	// EF is the search list size of the image embeddings' HNSW graph of a
	// collection created (0: Weaviate's default, dynamic from 100).
	EF int
	// EFConstruction and MaxConnections are the construction settings of
	// the image embeddings' HNSW graph of a collection created (0:
	// Weaviate's defaults, 128 and 32). Larger ones build a graph in which
	// a search finds more of the exact nearest images, at a slower
	// ingestion and more memory; they are fixed when the collection is
	// made, and naming others for an existing one is an error.
	EFConstruction, MaxConnections int
	// Quantization compresses the image embeddings in the index of a
	// collection created: "" (none) or QuantizationRQ. A search ranks the
	// images by the codes, then the RescoreLimit best (0:
	// DefaultRescoreLimit) by their embeddings. Fixed when the collection
	// is made, as the index is.
	Quantization string
	RescoreLimit int
}

// QuantizationRQ is Weaviate's 8-bit rotational quantization of the image
// embeddings: a byte a value; with VectorIndexFlat the codes are scanned
// from the node's memory, several times faster than the embeddings read
// from its store.
const QuantizationRQ = weaviate.QuantizationRQ

// DefaultRescoreLimit is how many images a quantized index ranks again by
// their embeddings when CollectionOptions.RescoreLimit is 0.
const DefaultRescoreLimit = 256

// The ways a collection searches its image embeddings (stage 1).
const (
	// VectorIndexHNSW is Weaviate's HNSW graph: approximate (how close to
	// exact is set by ef and the construction settings), fast at any size.
	VectorIndexHNSW = weaviate.IndexHNSW
	// VectorIndexFlat compares the prompt with every embedding: exact, the
	// same top K as a file index, in a time linear in the images.
	VectorIndexFlat = weaviate.IndexFlat
)

// Collection is a collection of images in Weaviate, for writing (a batch
// job) and searching (Open).
type Collection struct {
	c           *weaviate.Client
	t           weaviate.Target
	meta        CollectionMeta
	consistency string
	replication int
	index       weaviate.VectorIndex // the image embeddings'
	settings    CollectionSettings
	frames      bool // the class has the video and time properties
}

// OpenCollection connects to the collection url names, creating it when
// o.Create says so, and checks it holds images of o.Create's model,
// readout, width and grid (or per-image grids of its patch budget): a
// collection of one grid and one of per-image grids refuse each other's
// jobs. A collection that does not exist, without o.Create, is an error
// wrapping ErrNoCollection; a setting of o that cannot be, a
// *SettingError.
func OpenCollection(ctx context.Context, url string, o CollectionOptions) (*Collection, error) {
	return openCollection(ctx, url, o, false)
}

// CreateCollection makes the collection url names, for images of meta
// (its Format is set here), with o's settings (o.Create is meta): an
// existing class of that name is an error wrapping ErrCollectionExists,
// whatever made it. A job's OpenCollection of the same model, readout,
// width and grid then writes into it.
func CreateCollection(ctx context.Context, url string, meta CollectionMeta, o CollectionOptions) (*Collection, error) {
	o.Create = &meta
	return openCollection(ctx, url, o, true)
}

// openCollection is OpenCollection, or with mustCreate CreateCollection.
func openCollection(ctx context.Context, url string, o CollectionOptions, mustCreate bool) (*Collection, error) {
	t, err := weaviate.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("index: collection %s: %w", t, err)
	}
	c, err := connect(ctx, t, o.APIKey)
	if err != nil {
		return nil, err
	}
	cl, err := c.GetClass(ctx, t.Collection)
	if err != nil {
		return nil, fmt.Errorf("index: collection %s: %w", t, err)
	}
	switch {
	case cl != nil && mustCreate:
		return nil, fmt.Errorf("index: collection %s: %w", t, ErrCollectionExists)
	case cl == nil && o.Create != nil:
		if cl, err = o.create(ctx, c, t); err != nil {
			return nil, err
		}
	case cl == nil:
		return nil, fmt.Errorf("index: collection %s: %w", t, ErrNoCollection)
	}
	var m CollectionMeta
	if err := json.Unmarshal([]byte(cl.Description), &m); err != nil || (m.Format != CollectionFormat && m.Format != CollectionFormatGrids) {
		return nil, fmt.Errorf("index: collection %s was not made by this program (its description is not a %s or %s record): choose another name", t, CollectionFormat, CollectionFormatGrids)
	}
	if w := o.Create; w != nil {
		if m.Model != w.Model || m.Revision != w.Revision || m.Readout != w.Readout || m.Dim != w.Dim || m.Grid != w.Grid || m.MaxPatches != w.MaxPatches {
			return nil, fmt.Errorf("index: collection %s holds %s; this job makes %s: one collection holds the vectors of one model, readout and kind of grid (choose another collection)",
				t, describeMeta(m), describeMeta(*w))
		}
	}
	if err := o.matchIndex(t, cl.Indexes[weaviate.VectorPooled]); err != nil {
		return nil, err
	}
	frames := hasFrameProps(cl)
	if !frames && o.Create != nil {
		if err := c.AddProperties(ctx, t.Collection, []string{"video"}, collectionNumberProps); err != nil {
			return nil, fmt.Errorf("index: collection %s: %w", t, err)
		}
		frames = true
	}
	cons := o.Consistency
	if cons == "" {
		cons = weaviate.Quorum
	}
	return &Collection{c: c, t: t, meta: m, consistency: cons, replication: cl.Replication, index: cl.Indexes[weaviate.VectorPooled],
		settings: classSettings(cl), frames: frames}, nil
}

// hasFrameProps reports whether cl's objects have the video and time
// properties.
func hasFrameProps(cl *weaviate.Class) bool {
	return slices.Contains(cl.Properties, "video") && slices.Contains(cl.Properties, "time")
}

// connect returns a client of t's node once it answers ready.
func connect(ctx context.Context, t weaviate.Target, apiKey string) (*weaviate.Client, error) {
	c := weaviate.New(t.Host, apiKey)
	c.Retries = 2 // connecting: fail fast on a wrong address
	err := c.Ready(ctx)
	if se := (*weaviate.StatusError)(nil); errors.As(err, &se) && se.Status == http.StatusServiceUnavailable {
		// The node answers but is not ready yet (starting, or the cluster
		// choosing a leader after a node went down): give it 15 s more.
		c.Retries = 6
		err = c.Ready(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("index: collection %s: %w", t, err)
	}
	c.Retries = 6
	return c, nil
}

// create makes t's class for o.Create's images with o's settings and
// returns it as the server describes it (another writer's, when one made
// it meanwhile: the caller compares).
func (o *CollectionOptions) create(ctx context.Context, c *weaviate.Client, t weaviate.Target) (*weaviate.Class, error) {
	m := *o.Create
	m.Format = CollectionFormat
	if m.MaxPatches > 0 {
		m.Format = CollectionFormatGrids
	}
	desc, _ := json.Marshal(m)
	spec := weaviate.ClassSpec{Name: t.Collection, Description: string(desc), Properties: collectionProps, NumberProperties: collectionNumberProps,
		Patches: m.hasPatches(), Muvera: o.Muvera, Replication: o.Replication,
		Index: o.VectorIndex, EF: o.EF, EFConstruction: o.EFConstruction, MaxConnections: o.MaxConnections,
		Quantization: o.Quantization, RescoreLimit: o.rescoreLimit()}
	if err := c.CreateClass(ctx, spec); err != nil {
		return nil, fmt.Errorf("index: collection %s: create: %w", t, err)
	}
	cl, err := c.GetClass(ctx, t.Collection)
	if err != nil {
		return nil, fmt.Errorf("index: collection %s: %w", t, err)
	}
	if cl == nil {
		return nil, fmt.Errorf("index: collection %s: made, but the server does not describe it: %w", t, ErrNoCollection)
	}
	return cl, nil
}

// rescoreLimit returns the rescore limit of a quantized collection
// created, 0 without quantization.
func (o *CollectionOptions) rescoreLimit() int {
	switch {
	case o.Quantization == "":
		return 0
	case o.RescoreLimit == 0:
		return DefaultRescoreLimit
	}
	return o.RescoreLimit
}

// matchIndex refuses index settings an existing collection was not made
// with: Weaviate cannot change them on a collection that holds objects.
func (o *CollectionOptions) matchIndex(t weaviate.Target, have weaviate.VectorIndex) error {
	if o.VectorIndex != "" && o.VectorIndex != have.Type {
		return fmt.Errorf("index: collection %s searches its image embeddings by %s, not %s: a collection's index is fixed when it is made (choose another collection)", t, have.Type, o.VectorIndex)
	}
	if o.Quantization != "" && o.Quantization != have.Quantization {
		q := have.Quantization
		if q == "" {
			q = "none"
		}
		return fmt.Errorf("index: collection %s holds its image embeddings with quantization %s, not %s: it is fixed when a collection is made (choose another collection)", t, q, o.Quantization)
	}
	var differ []string
	for _, f := range []struct {
		name       string
		want, have int
	}{{"efConstruction", o.EFConstruction, have.EFConstruction}, {"maxConnections", o.MaxConnections, have.MaxConnections}} {
		if f.want != 0 && f.want != f.have {
			differ = append(differ, fmt.Sprintf("%s %d, not %d", f.name, f.have, f.want))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("index: collection %s was built with %s: a graph's construction settings are fixed when its collection is made (choose another collection)", t, strings.Join(differ, " and "))
	}
	return nil
}

// VectorIndex returns how the collection searches its image embeddings
// (VectorIndexHNSW or VectorIndexFlat) and, for a graph, its construction
// settings.
func (c *Collection) VectorIndex() (kind string, efConstruction, maxConnections int) {
	return c.index.Type, c.index.EFConstruction, c.index.MaxConnections
}

// Quantization returns how the collection's index compresses the image
// embeddings ("" or QuantizationRQ) and how many images a search ranks
// again by their embeddings.
func (c *Collection) Quantization() (kind string, rescoreLimit int) {
	return c.index.Quantization, c.index.RescoreLimit
}

// describeMeta names what made a collection's vectors, for messages.
func describeMeta(m CollectionMeta) string {
	r := m.Readout
	if r == "" {
		r = string(pipeline.ReadoutRaw)
	}
	grid := fmt.Sprintf("a %dx%d grid", m.Grid[0], m.Grid[1])
	if m.MaxPatches > 0 {
		grid = fmt.Sprintf("each image's own grid of at most %d patches", m.MaxPatches)
	}
	return fmt.Sprintf("model %s, readout %s, %d-wide vectors on %s", modelName(m.Model, m.Revision), r, m.Dim, grid)
}

// hasPatches reports whether the collection's objects hold patches.
func (m *CollectionMeta) hasPatches() bool { return m.Grid[0]*m.Grid[1] > 0 || m.MaxPatches > 0 }

// String returns the collection's address.
func (c *Collection) String() string { return c.t.String() }

// Meta returns what made the collection's vectors.
func (c *Collection) Meta() CollectionMeta { return c.meta }

// CollectionID returns the object id of an image read from source (a
// file's path or an object's URL; for a tar member its shard's) and
// member (a tar member's name, else ""). A local path is made absolute.
func CollectionID(source, member string) string {
	if !strings.Contains(source, "://") {
		if abs, err := filepath.Abs(source); err == nil {
			source = abs
		}
	}
	return weaviate.ID(source + "\x00" + member)
}

// CollectionFrameID returns the object id of the frame at time t (in
// seconds) of a video read from source and member, as CollectionID: each
// frame of a video is an object of its own.
func CollectionFrameID(source, member string, t float64) string {
	return CollectionID(source, member+"\x00t="+strconv.FormatFloat(t, 'f', 6, 64))
}

// CollectionObject is one image to write.
type CollectionObject struct {
	Path, Source, Member, SHA256 string
	Embeds                       []float32 // [D], the image embedding (normalised here)
	Patches                      []float32 // [H·W·D], the joint-space patches, row-major over Grid
	// Grid is the patches' grid H×W: the collection's (the zero Grid
	// stands for it), or for a collection of per-image grids the image's
	// own, of at most MaxPatches patches.
	Grid           vision.Grid
	ProgramVersion string
	// Video and Time, for a video's frame: the video's relative path and
	// the frame's time in seconds (nil for an image).
	Video string
	Time  *float64
}

// ID returns the object's id (CollectionID, or for a video's frame
// CollectionFrameID).
func (o *CollectionObject) ID() string {
	if o.Time != nil {
		return CollectionFrameID(o.Source, o.Member, *o.Time)
	}
	return CollectionID(o.Source, o.Member)
}

// Upsert writes objs in one batch; an object of the same id is replaced.
// errs[i] is object i's own error; err is the batch's, when none was
// written.
func (c *Collection) Upsert(ctx context.Context, objs []CollectionObject) (errs []error, err error) {
	d := c.meta.Dim
	ws := make([]weaviate.Object, len(objs))
	readout := c.meta.Readout
	if readout == "" {
		readout = string(pipeline.ReadoutRaw)
	}
	for i := range objs {
		o := &objs[i]
		g := vision.Grid{H: c.meta.Grid[0], W: c.meta.Grid[1]}
		switch {
		case c.meta.MaxPatches > 0:
			if o.Grid.H <= 0 || o.Grid.W <= 0 || o.Grid.Patches() > c.meta.MaxPatches {
				return nil, fmt.Errorf("index: collection %s: %s: a %s grid; the collection's images have their own grids of 1 to %d patches", c.t, o.Path, o.Grid, c.meta.MaxPatches)
			}
			g = o.Grid
		case o.Grid != (vision.Grid{}) && o.Grid != g:
			return nil, fmt.Errorf("index: collection %s: %s: a %s grid, the collection's is %s", c.t, o.Path, o.Grid, g)
		}
		p := g.Patches()
		if len(o.Embeds) != d || len(o.Patches) != p*d {
			return nil, fmt.Errorf("index: collection %s: %s: %d embedding values and %d patch values; want %d and %d×%d (a %s grid)", c.t, o.Path, len(o.Embeds), len(o.Patches), d, p, d, g)
		}
		w := weaviate.Object{ID: o.ID(), Pooled: normalised(o.Embeds), Properties: map[string]any{
			"path": o.Path, "source": o.Source, "member": o.Member, "sha256": o.SHA256, "grid": g.String(),
			"model": c.meta.Model, "revision": c.meta.Revision, "readout": readout, "program_version": o.ProgramVersion}}
		if o.Time != nil {
			if !c.frames {
				return nil, fmt.Errorf("index: collection %s: %s: a video's frame, and the collection has no video and time properties (open it to write)", c.t, o.Path)
			}
			w.Properties["video"], w.Properties["time"] = o.Video, *o.Time
		}
		if p > 0 {
			w.Patches = make([][]float32, p)
			for k := range p {
				w.Patches[k] = o.Patches[k*d : (k+1)*d]
			}
		}
		ws[i] = w
	}
	errs, err = c.c.Upsert(ctx, c.t.Collection, c.consistency, ws)
	if err != nil {
		return nil, fmt.Errorf("index: collection %s: %w", c.t, err)
	}
	return errs, nil
}

// normalised returns x / ‖x‖ (x when it is zero).
func normalised(x []float32) []float32 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	if s == 0 {
		return x
	}
	f := 1 / math.Sqrt(s)
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(float64(v) * f)
	}
	return out
}

// Count returns the number of objects in the collection.
func (c *Collection) Count(ctx context.Context) (int, error) {
	n, err := c.c.Count(ctx, c.t.Collection)
	if err != nil {
		return 0, fmt.Errorf("index: collection %s: %w", c.t, err)
	}
	return n, nil
}

// Objects calls fn with the id and path of every object, in id order.
func (c *Collection) Objects(ctx context.Context, fn func(id, path string) error) error {
	err := c.c.IDs(ctx, c.t.Collection, c.consistency, 1000, func(id string, props map[string]any) error {
		p, _ := props["path"].(string)
		return fn(id, p)
	})
	if err != nil {
		return fmt.Errorf("index: collection %s: %w", c.t, err)
	}
	return nil
}

// SetEF sets the search list size of the image embeddings' HNSW graph
// (Weaviate's ef): larger finds more of the true nearest images, slower.
func (c *Collection) SetEF(ctx context.Context, ef int) error {
	if err := c.c.SetEF(ctx, c.t.Collection, weaviate.VectorPooled, ef); err != nil {
		return fmt.Errorf("index: collection %s: %w", c.t, err)
	}
	return nil
}

// Delete removes the collection and every object in it.
func (c *Collection) Delete(ctx context.Context) error {
	if err := c.c.DeleteClass(ctx, c.t.Collection); err != nil {
		return fmt.Errorf("index: collection %s: %w", c.t, err)
	}
	return nil
}

// near searches the collection with q ([D], normalised), by the pooled
// vectors or, with byPatches, by MaxSim over the patches; it returns the
// top hits with their scores (logits of the pooled vector) and, with
// patches, each hit's patches [P·D].
func (c *Collection) near(ctx context.Context, q []float32, top int, byPatches, patches bool) ([]Hit, [][]float32, error) {
	o := weaviate.NearOptions{Target: weaviate.VectorPooled, Limit: top, Properties: c.hitProps()}
	if c.replication > 1 {
		o.Consistency = c.consistency // GraphQL takes a level only on a replicated class
	}
	var query any = q
	if byPatches {
		if !c.meta.hasPatches() {
			return nil, nil, fmt.Errorf("index: collection %s holds no patches", c.t)
		}
		o.Target, query = weaviate.VectorPatches, [][]float32{q}
		o.Vectors = append(o.Vectors, weaviate.VectorPooled)
	}
	if patches {
		o.Vectors = append(o.Vectors, weaviate.VectorPatches)
	}
	got, err := c.c.Near(ctx, c.t.Collection, query, o)
	if err != nil {
		return nil, nil, fmt.Errorf("index: collection %s: %w", c.t, err)
	}
	hits := make([]Hit, len(got))
	var ps [][]float32
	if patches {
		ps = make([][]float32, len(got))
	}
	for i, s := range got {
		cos := 1 - float64(s.Distance)
		if byPatches {
			if cos, err = c.cosine(s, q); err != nil {
				return nil, nil, err
			}
		}
		if hits[i], err = c.objectHit(s, float32(c.meta.LogitScale*cos+c.meta.LogitBias)); err != nil {
			return nil, nil, err
		}
		if patches {
			if ps[i], err = c.flatPatches(s, hits[i]); err != nil {
				return nil, nil, err
			}
		}
	}
	return hits, ps, nil
}

// cosine is the cosine of s's pooled vector with q (both normalised).
func (c *Collection) cosine(s weaviate.Stored, q []float32) (float64, error) {
	if len(s.Pooled) != c.meta.Dim {
		return 0, fmt.Errorf("index: collection %s: object %s has a %d-wide pooled vector, want %d", c.t, s.ID, len(s.Pooled), c.meta.Dim)
	}
	var cos float64
	for k, v := range s.Pooled {
		cos += float64(v) * float64(q[k])
	}
	return cos, nil
}

// objectHit is the hit of the object s (read with hitProps) scoring score.
func (c *Collection) objectHit(s weaviate.Stored, score float32) (Hit, error) {
	str := func(k string) string { v, _ := s.Properties[k].(string); return v }
	g := vision.Grid{H: c.meta.Grid[0], W: c.meta.Grid[1]}
	if c.meta.MaxPatches > 0 {
		var err error
		if g, err = objectGrid(str("grid"), c.meta.MaxPatches); err != nil {
			return Hit{}, fmt.Errorf("index: collection %s: object %s (%s): %w", c.t, s.ID, str("path"), err)
		}
	}
	h := Hit{Path: str("path"), Source: str("source"), Member: str("member"), ID: s.ID, Part: c.t.Collection, Row: -1,
		Score: score, Grid: [2]int{g.H, g.W}}
	h.Video, h.Time = frameProps(s.Properties)
	return h, nil
}

// flatPatches returns s's patches [P·D], row-major over h's grid.
func (c *Collection) flatPatches(s weaviate.Stored, h Hit) ([]float32, error) {
	d := c.meta.Dim
	g := vision.Grid{H: h.Grid[0], W: h.Grid[1]}
	p := g.Patches()
	if len(s.Patches) != p {
		return nil, fmt.Errorf("index: collection %s: object %s (%s) has %d patch vectors, want %d (a %s grid)", c.t, s.ID, h.Path, len(s.Patches), p, g)
	}
	flat := make([]float32, 0, p*d)
	for _, row := range s.Patches {
		if len(row) != d {
			return nil, fmt.Errorf("index: collection %s: object %s (%s) has a %d-wide patch vector, want %d", c.t, s.ID, h.Path, len(row), d)
		}
		flat = append(flat, row...)
	}
	return flat, nil
}

// hitProps are the properties a search reads of each hit.
func (c *Collection) hitProps() []string {
	p := []string{"path", "source", "member", "grid"}
	if c.frames {
		p = append(p, "video", "time")
	}
	return p
}

// frameProps returns an object's video and time properties ("" and nil
// for an image).
func frameProps(props map[string]any) (string, *float64) {
	v, _ := props["video"].(string)
	t, ok := props["time"].(float64)
	if v == "" || !ok {
		return "", nil
	}
	return v, &t
}

// objectGrid parses an object's grid property ("HxW") in a collection of
// per-image grids of at most max patches.
func objectGrid(s string, max int) (vision.Grid, error) {
	hs, ws, ok := strings.Cut(s, "x")
	h, herr := strconv.Atoi(hs)
	w, werr := strconv.Atoi(ws)
	if !ok || herr != nil || werr != nil || h <= 0 || w <= 0 || h*w > max {
		return vision.Grid{}, fmt.Errorf("grid property %q: want HxW of 1 to %d patches", s, max)
	}
	return vision.Grid{H: h, W: w}, nil
}

// errCollectionPatches is Patches's error on a collection: its hits carry
// no row; their patches come with the search.
var errCollectionPatches = errors.New("index: a collection's patches are read by Search (SearchOptions.Words), not by part and row")

// openCollectionIndex opens the collection url names for search.
func openCollectionIndex(ctx context.Context, url string, opts Options) (*Index, error) {
	c, err := OpenCollection(ctx, url, CollectionOptions{APIKey: opts.APIKey, Consistency: opts.Consistency})
	if err != nil {
		return nil, err
	}
	n, err := c.Count(ctx)
	if err != nil {
		return nil, err
	}
	c.c.Retries = 2 // a search waits a second at most for a node to come back
	m := c.meta
	x := &Index{where: c.String(), coll: c, rows: n, store: opts.Store}
	x.count.Store(int64(n))
	x.countAt.Store(time.Now().UnixNano())
	x.meta = Meta{Format: m.Format, Model: m.Model, Revision: m.Revision, Settings: json.RawMessage("{}"), DType: DTypeF32,
		Dim: m.Dim, Grid: m.Grid, MaxPatches: m.MaxPatches, LogitScale: m.LogitScale, LogitBias: m.LogitBias, Readout: m.Readout}
	return x, nil
}

// collectionRowsFresh is how long a collection's object count is taken
// as it was read: after that, the next call of collectionRows reads it
// again.
var collectionRowsFresh = 5 * time.Second

// collectionRows returns the collection's object count as last read (at
// open, or since), and when that is older than collectionRowsFresh reads
// it again in the background, so that neither Rows nor a search waits
// for it (a failed read keeps the last count).
func (x *Index) collectionRows() int {
	if time.Since(time.Unix(0, x.countAt.Load())) > collectionRowsFresh && x.counting.CompareAndSwap(false, true) {
		go func() {
			defer x.counting.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if n, err := x.coll.Count(ctx); err == nil {
				x.count.Store(int64(n))
				x.countAt.Store(time.Now().UnixNano())
			}
		}()
	}
	return int(x.count.Load())
}

// collectionQuery checks q's width and returns it normalised.
func (x *Index) collectionQuery(q []float32) ([]float32, error) {
	if len(q) != x.meta.Dim {
		return nil, fmt.Errorf("index: search: a %d-wide query for the collection's %d-wide image embeddings", len(q), x.meta.Dim)
	}
	return normalised(q), nil
}

// searchCollection is Search on a collection in Weaviate: stage 1 there,
// stage 2 from the patches it returns with the hits.
func (x *Index) searchCollection(ctx context.Context, eng *pipeline.Engine, ps pipeline.Prompts, top int, box float32, opts SearchOptions) (*SearchResult, error) {
	q, err := x.collectionQuery(ps[0].Embeds)
	if err != nil {
		return nil, err
	}
	hits, patches, err := x.coll.near(ctx, q, top, opts.ByPatches, opts.Words)
	if err != nil {
		return nil, err
	}
	segs, err := x.coll.segments(ctx, q, hits)
	if err != nil {
		return nil, err
	}
	res := &SearchResult{Prompt: ps[0], Rows: x.collectionRows(), Hits: hits, Segments: segs}
	if opts.Words {
		if err := x.stage2(ctx, eng, ps, hits, patches, box); err != nil {
			return nil, err
		}
		if err := x.segmentWords(ctx, eng, ps, res, box); err != nil {
			return nil, err
		}
	}
	return res, nil
}
