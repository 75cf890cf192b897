package batch

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/tensorio"
)

// ShardsReport says what VerifyShards found in a shards-layout output.
type ShardsReport struct {
	Out         string   `json:"out"`
	Processes   int      `json:"processes"`        // the number of processes the job was split into
	ProcessSeen []int    `json:"processes_seen"`   // processes that wrote at least one shard
	Shards      int      `json:"shards"`           // output shards whose metadata was read
	Images      int      `json:"images"`           // rows over all shards
	OK          int      `json:"ok"`               // rows with status ok
	Failed      int      `json:"failed"`           // rows with another status
	Settings    []string `json:"settings"`         // distinct settings hashes (more than one: mixed jobs)
	Broken      []string `json:"broken,omitempty"` // shards whose arrays and metadata disagree, with why
	Duplicated  []string `json:"duplicated,omitempty"`
	Misassigned []string `json:"misassigned,omitempty"` // rows whose unit belongs to another process
	Missing     []string `json:"missing,omitempty"`     // inputs (when given) that no shard holds
	Unexpected  []string `json:"unexpected,omitempty"`  // rows not among the inputs (when given)
	Checked     bool     `json:"inputs_checked"`        // inputs were given and walked
	// IndexParts is the number of whole collection index parts read, when
	// the output has an index; its problems (parts missing, incomplete or
	// whose arrays disagree with their index.json, images in no part) are
	// in Broken, named by index/<part>.
	IndexParts int `json:"index_parts,omitempty"`
	CollectionCheck

	objects map[string]string // ok images' object URLs (the manifests') → their paths
}

// HasCollection reports whether the job wrote a collection in Weaviate
// (its manifests' ok images name objects), for CheckCollection.
func (r *ShardsReport) HasCollection() bool { return len(r.objects) > 0 }

// CheckCollection checks that the job's collection in Weaviate holds the
// object of every ok image of its manifests (see CollectionCheck); apiKey
// is Weaviate's API key ("": anonymous).
func (r *ShardsReport) CheckCollection(ctx context.Context, apiKey string) error {
	return r.CollectionCheck.check(ctx, r.objects, apiKey)
}

// Complete reports whether the output holds every image once, whole, from
// one job's settings (and, when inputs were given, exactly the inputs).
func (r *ShardsReport) Complete() bool {
	return r.Shards > 0 && len(r.Broken) == 0 && len(r.Duplicated) == 0 && len(r.Misassigned) == 0 &&
		len(r.Missing) == 0 && len(r.Unexpected) == 0 && len(r.Settings) == 1
}

// IsShardsOutput reports whether out (a folder or an object-store prefix)
// holds a shards-layout job's metadata.
func IsShardsOutput(ctx context.Context, out string) bool {
	stores := &objstore.Stores{Attempts: 2}
	defer stores.Close()
	o, err := resolveOutput(stores, out)
	if err != nil {
		return false
	}
	r := outReader{o}
	names, err := r.list(ctx, "metadata/")
	return err == nil && len(names) > 0
}

// VerifyShards proves a shards-layout output complete: every shard's
// metadata (all processes' of a split job) is read, its arrays' .npy
// headers and sizes checked against its row count, every row's unit
// checked against the process that wrote it (the same deterministic
// assignment the job made), and, when inputs or lists are given, they are
// walked as the job walked them and every image is looked for. out is a
// folder or an object-store prefix.
func VerifyShards(ctx context.Context, out string, inputs, lists []string) (*ShardsReport, error) {
	stores := &objstore.Stores{}
	defer stores.Close()
	o, err := resolveOutput(stores, out)
	if err != nil {
		return nil, err
	}
	r := outReader{o}
	rep := &ShardsReport{Out: out}
	metas, err := r.list(ctx, "metadata/")
	if err != nil {
		return nil, err
	}
	if err := r.readObjects(ctx, &rep.objects); err != nil {
		return nil, err
	}
	embs, err := r.list(ctx, "img_emb/")
	if err != nil {
		return nil, err
	}
	c := &shardsCheck{rep: rep, emb: map[string]outFile{}, seen: map[string]int{}, procs: map[int]bool{}, settings: map[string]bool{}}
	for _, e := range embs {
		c.emb[e.name] = e
	}
	for _, m := range metas {
		if err := r.checkShard(ctx, c, m); err != nil {
			return nil, err
		}
	}
	for p := range c.procs {
		rep.ProcessSeen = append(rep.ProcessSeen, p)
	}
	sort.Ints(rep.ProcessSeen)
	for s := range c.settings {
		rep.Settings = append(rep.Settings, s)
	}
	sort.Strings(rep.Settings)
	if err := r.checkIndex(ctx, rep, c.held, c.indexed, c.settings); err != nil {
		return nil, err
	}
	if len(inputs)+len(lists) > 0 {
		if err := c.checkInputs(ctx, stores, inputs, lists); err != nil {
			return nil, err
		}
	}
	for _, l := range [][]string{rep.Broken, rep.Duplicated, rep.Misassigned, rep.Missing, rep.Unexpected} {
		sort.Strings(l)
	}
	return rep, nil
}

// shardsCheck is what VerifyShards gathers from the shards' metadata.
type shardsCheck struct {
	rep      *ShardsReport
	emb      map[string]outFile // the img_emb folder's files by name
	seen     map[string]int     // key → process
	held     []heldShard        // every shard's rows, for the index check
	indexed  bool               // a shard says the job wrote an index
	procs    map[int]bool
	settings map[string]bool
}

// checkShard reads the metadata file m (skipping other files) and checks
// its shard: its rows against its arrays, its process and its keys.
func (r outReader) checkShard(ctx context.Context, c *shardsCheck, m outFile) error {
	rep := c.rep
	base := path.Base(m.name)
	if !strings.HasPrefix(base, "metadata_") || !strings.HasSuffix(base, ".parquet") {
		return nil
	}
	name := strings.TrimSuffix(strings.TrimPrefix(base, "metadata_"), ".parquet")
	b, err := r.read(ctx, m.name)
	if err != nil {
		return err
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		rep.Broken = append(rep.Broken, fmt.Sprintf("%s: metadata: %v", name, err))
		return nil
	}
	rows, err := parquet.Read[shardRow](bytes.NewReader(b), int64(len(b)))
	if err != nil {
		rep.Broken = append(rep.Broken, fmt.Sprintf("%s: metadata: %v", name, err))
		return nil
	}
	rep.Shards++
	if _, ok := f.Lookup("index"); ok {
		c.indexed = true
	}
	c.held = append(c.held, heldShard{name: name, rows: rows})
	s, _ := f.Lookup("settings")
	c.settings[s] = true
	proc, count := 0, 1
	if ps, ok := f.Lookup("process_shard"); ok {
		i, n, _ := strings.Cut(ps, "/")
		proc, _ = strconv.Atoi(i)
		count, _ = strconv.Atoi(n)
	}
	if rep.Processes != 0 && count != rep.Processes {
		rep.Broken = append(rep.Broken, fmt.Sprintf("%s: written by process %d of %d, others by a %d-process job", name, proc, count, rep.Processes))
	}
	rep.Processes = max(rep.Processes, count)
	c.procs[proc] = true
	n, _ := f.Lookup("rows")
	nrows, err := strconv.Atoi(n)
	if err != nil || nrows != len(rows) {
		rep.Broken = append(rep.Broken, fmt.Sprintf("%s: metadata holds %d rows, says %q", name, len(rows), n))
	}
	ok := 0
	for _, row := range rows {
		if row.Status == StatusOK {
			ok++
		}
	}
	if why := r.checkArrays(ctx, name, len(rows), ok > 0, c.emb); why != "" {
		rep.Broken = append(rep.Broken, name+": "+why)
	}
	c.checkRows(name, rows, proc, count)
	return nil
}

// checkRows checks shard name's rows, written by process proc of count:
// their row numbers, keys seen in no other row, and units assigned to
// proc.
func (c *shardsCheck) checkRows(name string, rows []shardRow, proc, count int) {
	rep := c.rep
	used := make([]bool, len(rows))
	for _, row := range rows {
		if int(row.Row) < 0 || int(row.Row) >= len(rows) || used[row.Row] {
			rep.Broken = append(rep.Broken, fmt.Sprintf("%s: row number %d repeated or out of range", name, row.Row))
			break
		}
		used[row.Row] = true
		if _, dup := c.seen[row.Key]; dup {
			rep.Duplicated = append(rep.Duplicated, row.Key)
		}
		c.seen[row.Key] = proc
		rep.Images++
		if row.Status == StatusOK {
			rep.OK++
		} else {
			rep.Failed++
		}
		if count > 1 && row.Unit != "" && ShardOf(row.Unit, count) != proc {
			rep.Misassigned = append(rep.Misassigned, row.Key)
		}
	}
}

// checkInputs walks inputs and lists as the job walked them, and reports
// the images no shard holds and the rows of no input.
func (c *shardsCheck) checkInputs(ctx context.Context, stores *objstore.Stores, inputs, lists []string) error {
	rep := c.rep
	rep.Checked = true
	ins, err := expandInputs(inputs)
	if err != nil {
		return &InputError{Path: strings.Join(inputs, ", "), Err: err}
	}
	sources, err := resolveInputs(ins)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	videos := map[string]bool{} // a video's rows are its frames (see video.go), or its failure
	err = walk(ctx, sources, lists, walkOptions{listOnly: true, stores: stores}, func(it Item) error {
		want[it.Rel] = true
		if isVideoInput(it) {
			videos[it.Rel] = true
			return nil
		}
		if _, ok := c.seen[it.Rel]; !ok {
			rep.Missing = append(rep.Missing, it.Rel)
		}
		return nil
	}, func(string, error) error { return nil })
	if err != nil {
		return err
	}
	held := map[string]bool{} // videos with a row
	for k := range c.seen {
		if v, _, ok := strings.Cut(k, "#t="); ok && videos[v] {
			held[v] = true
			continue
		}
		if videos[k] {
			held[k] = true
		}
		if !want[k] {
			rep.Unexpected = append(rep.Unexpected, k)
		}
	}
	for v := range videos {
		if !held[v] {
			rep.Missing = append(rep.Missing, v)
		}
	}
	return nil
}

// outReader is the checks VerifyShards makes of an output.
type outReader struct{ outputReader }

func (r outReader) read(ctx context.Context, name string) ([]byte, error) {
	return readAll(ctx, r.outputReader, name)
}

// checkArrays checks shard name's arrays and img_emb: each a .npy of n rows
// whose size is its header's shape (a shard of failed images only has
// none); emb holds the img_emb folder's files by name. It returns why
// not, or "".
func (r outReader) checkArrays(ctx context.Context, name string, n int, anyOK bool, emb map[string]outFile) string {
	files, err := r.list(ctx, "shards/"+name+"/")
	if err != nil {
		return err.Error()
	}
	e, hasEmb := emb["img_emb/img_emb_"+name+".npy"]
	if hasEmb {
		files = append(files, e)
	}
	if !hasEmb {
		return "no img_emb/img_emb_" + name + ".npy (clip-retrieval pairs img_emb and metadata files)"
	}
	if len(files) == 1 && anyOK {
		return "no arrays"
	}
	for _, f := range files {
		b, err := readHead(ctx, r, f.name, shardNPYHeader)
		if err != nil {
			return fmt.Sprintf("%s: %v", f.name, err)
		}
		dt, shape, off, err := tensorio.ParseNPYHeader(b)
		if err != nil {
			return fmt.Sprintf("%s: %v", f.name, err)
		}
		size := int64(dt.Size())
		for _, d := range shape {
			size *= int64(d)
		}
		if len(shape) == 0 || shape[0] != n {
			return fmt.Sprintf("%s: shape %v, want %d rows", f.name, shape, n)
		}
		if int64(off)+size != f.size {
			return fmt.Sprintf("%s: %d bytes, its header %v says %d", f.name, f.size, shape, int64(off)+size)
		}
	}
	return ""
}

// readObjects records the objects in a collection that the output's
// manifests name (Entry.Object), the last entry of a path winning.
func (r outReader) readObjects(ctx context.Context, objects *map[string]string) error {
	files, err := r.list(ctx, "")
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.name != "manifest.jsonl" && !shardManifest.MatchString(f.name) {
			continue
		}
		b, err := r.read(ctx, f.name)
		if err != nil {
			return err
		}
		list, err := ParseManifest(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("batch: %s: %w", f.name, err)
		}
		for _, e := range Latest(list) {
			addObject(objects, e)
		}
	}
	return nil
}
