package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
)

// heldShard is one output shard's metadata rows, as VerifyShards read
// them.
type heldShard struct {
	name string
	rows []shardRow
}

// indexHit is where an image is in the index.
type indexHit struct {
	part, sha, status string
}

// indexHeadBytes is how much of an index array VerifyShards reads for its
// .npy header.
const indexHeadBytes = 1024

// listIndexParts returns the files of every index part below index/, by
// part name.
func (r outReader) listIndexParts(ctx context.Context) (map[string][]outFile, error) {
	files, err := r.list(ctx, "index/")
	if err != nil {
		return nil, err
	}
	parts := map[string][]outFile{}
	for _, f := range files {
		name, file, ok := strings.Cut(strings.TrimPrefix(f.name, "index/"), "/")
		if ok && !strings.Contains(file, "/") {
			parts[name] = append(parts[name], f)
		}
	}
	return parts, nil
}

// checkIndexPart checks index part name (its files): index.json, then
// every array's .npy header and size against its rows, P and D (and the
// grids of a part of per-image grids). It
// returns the part's index.json, or why the part is not whole.
func (r outReader) checkIndexPart(ctx context.Context, name string, files []outFile) (*indexOutMeta, string) {
	dir := "index/" + name + "/"
	byName := map[string]outFile{}
	for _, f := range files {
		byName[strings.TrimPrefix(f.name, dir)] = f
	}
	if _, ok := byName["index.json"]; !ok {
		return nil, "no index.json (the part is incomplete)"
	}
	b, err := r.read(ctx, dir+"index.json")
	if err != nil {
		return nil, fmt.Sprintf("index.json: %v", err)
	}
	var m indexOutMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Sprintf("index.json: %v", err)
	}
	grids := m.Format == index.FormatGrids
	switch {
	case m.Format != indexOutFormat && !grids:
		return nil, fmt.Sprintf("index.json: format %q, want %q or %q", m.Format, indexOutFormat, index.FormatGrids)
	case !grids && (m.Dim <= 0 || m.Grid[0] <= 0 || m.Grid[1] <= 0 || m.MaxPatches != 0):
		return nil, fmt.Sprintf("index.json: dim %d, grid %v, max_patches %d", m.Dim, m.Grid, m.MaxPatches)
	case grids && (m.Dim <= 0 || m.Grid != [2]int{} || m.MaxPatches <= 0):
		return nil, fmt.Sprintf("index.json: format %q with dim %d, grid %v, max_patches %d; want no grid and a positive max_patches", m.Format, m.Dim, m.Grid, m.MaxPatches)
	case m.Rows != len(m.Items):
		return nil, fmt.Sprintf("index.json: rows %d, %d items", m.Rows, len(m.Items))
	}
	if _, err := checkIndexOutDType(m.DType); err != nil || m.DType == "" {
		return nil, fmt.Sprintf("index.json: dtype %q", m.DType)
	}
	for i, it := range m.Items {
		if it.Row != i {
			return nil, fmt.Sprintf("index.json: item %d says row %d", i, it.Row)
		}
	}
	n, p, d := m.Rows, m.Grid[0]*m.Grid[1], m.Dim
	if grids {
		p = m.MaxPatches
	}
	want := []indexArrayWant{{indexOutArrays[0], indexOutElem(m.DType), []int{n, d}}, {indexOutArrays[1], indexOutElem(m.DType), []int{n, p, d}}}
	if m.DType == indexOutInt8 {
		want = append(want, indexArrayWant{indexOutArrays[2], tensorio.DTypeF32, []int{n}}, indexArrayWant{indexOutArrays[3], tensorio.DTypeF32, []int{n, p}})
	}
	if grids {
		want = append(want, indexArrayWant{indexOutArrays[4], tensorio.DTypeI32, []int{n, 2}})
	}
	for _, w := range want {
		f, ok := byName[w.file]
		if !ok {
			return nil, "no " + w.file
		}
		h, err := readHead(ctx, r, f.name, indexHeadBytes)
		if err != nil {
			return nil, fmt.Sprintf("%s: %v", w.file, err)
		}
		dt, shape, off, err := tensorio.ParseNPYHeader(h)
		if err != nil {
			return nil, fmt.Sprintf("%s: %v", w.file, err)
		}
		if dt != w.dtype || !slices.Equal(shape, w.shape) {
			return nil, fmt.Sprintf("%s: %s %v, index.json says %s %v", w.file, dt, shape, w.dtype, w.shape)
		}
		size := int64(off) + int64(dt.Size())*int64(numelOf(shape))
		if f.size != size {
			return nil, fmt.Sprintf("%s: %d bytes, its header %v says %d", w.file, f.size, shape, size)
		}
	}
	return &m, ""
}

// indexArrayWant is what an index part's array should be.
type indexArrayWant struct {
	file  string
	dtype tensorio.DType
	shape []int
}

// numelOf returns the number of elements of an array of shape.
func numelOf(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// checkIndex checks the collection index of a shards-layout output, when
// it has one (a shard's metadata says so, or index/ holds parts): every
// part whole, and every image of the shards in exactly one whole part with
// its path, sha256 and status. What is wrong goes to rep.Broken, named by
// index/<part> (or the shard).
func (r outReader) checkIndex(ctx context.Context, rep *ShardsReport, shards []heldShard, indexed bool, settings map[string]bool) error {
	parts, err := r.listIndexParts(ctx)
	if err != nil {
		return err
	}
	if !indexed && len(parts) == 0 {
		return nil
	}
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Strings(names)
	broken := map[string]bool{}
	hits := map[string]indexHit{}
	held := map[string]bool{}
	for _, s := range shards {
		for _, row := range s.rows {
			held[row.Key] = true
		}
	}
	for _, name := range names {
		m, why := r.checkIndexPart(ctx, name, parts[name])
		if why == "" && !settings[m.Settings] {
			why = fmt.Sprintf("settings %s, not the shards' (%s)", m.Settings, strings.Join(sortedKeys(settings), ", "))
		}
		if why != "" {
			broken[name] = true
			rep.Broken = append(rep.Broken, "index/"+name+": "+why)
			continue
		}
		rep.IndexParts++
		var stray []string
		for _, it := range m.Items {
			if h, dup := hits[it.Path]; dup {
				rep.Broken = append(rep.Broken, fmt.Sprintf("index/%s: %s is in index part %s too", name, it.Path, h.part))
			}
			hits[it.Path] = indexHit{part: name, sha: it.SHA256, status: it.Status}
			if !held[it.Path] {
				stray = append(stray, it.Path)
			}
		}
		if len(stray) > 0 {
			rep.Broken = append(rep.Broken, fmt.Sprintf("index/%s: %d rows name images no shard holds: %s", name, len(stray), strings.Join(head5(stray), ", ")))
		}
	}
	for _, s := range shards {
		var missing, differ []string
		for _, row := range s.rows {
			h, ok := hits[row.Key]
			switch {
			case !ok:
				missing = append(missing, row.Key)
			case h.sha != row.SHA256 || h.status != row.Status:
				differ = append(differ, fmt.Sprintf("%s (index/%s: %s %.12s, shard: %s %.12s)", row.Key, h.part, h.status, h.sha, row.Status, row.SHA256))
			}
		}
		if len(missing) > 0 {
			_, there := parts[s.name]
			switch {
			case broken[s.name]:
				// Its part is named broken above.
			case !there:
				rep.Broken = append(rep.Broken, fmt.Sprintf("index/%s: missing (shard %s's %d images are in no index part)", s.name, s.name, len(missing)))
			default:
				rep.Broken = append(rep.Broken, fmt.Sprintf("shard %s: %d images in no whole index part: %s", s.name, len(missing), strings.Join(head5(missing), ", ")))
			}
		}
		if len(differ) > 0 {
			rep.Broken = append(rep.Broken, fmt.Sprintf("shard %s: %d images whose index rows are of other contents: %s", s.name, len(differ), strings.Join(head5(differ), ", ")))
		}
	}
	return nil
}

// sortedKeys returns m's keys, sorted.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// head5 returns at most 5 of xs, with a count of the rest.
func head5(xs []string) []string {
	if len(xs) <= 5 {
		return xs
	}
	return append(slices.Clone(xs[:5]), fmt.Sprintf("… %d more", len(xs)-5))
}

// mergeIndexMissing returns the index parts of a files-layout output in
// dir that are not whole: a folder under index/ without index.json, or a
// part the manifest's entries list that is not there.
func mergeIndexMissing(dir string, entries map[string]Entry) []string {
	missing := map[string]bool{}
	ents, err := os.ReadDir(filepath.Join(dir, "index"))
	if err == nil {
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				if _, err := os.Stat(filepath.Join(dir, "index", e.Name(), "index.json")); err != nil {
					missing["index/"+e.Name()] = true
				}
			}
		}
	}
	for _, e := range entries {
		for _, o := range e.Outputs {
			if strings.HasPrefix(o, "index/") && path.Base(o) == "index.json" {
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(o))); err != nil {
					missing[path.Dir(o)] = true
				}
			}
		}
	}
	return sortedKeys(missing)
}
