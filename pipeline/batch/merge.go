package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"github.com/conditionhq/condition/tensorio"
)

// MergeReport says what joining the shard manifests of a folder found.
type MergeReport struct {
	ShardCount    int      `json:"shard_count"`
	Shards        []int    `json:"shards"`         // shard indexes whose manifest was found
	MissingShards []int    `json:"missing_shards"` // shard indexes with no manifest
	Images        int      `json:"images"`         // distinct paths in the merged manifest
	OK            int      `json:"ok"`
	Failed        int      `json:"failed"`
	Duplicated    []string `json:"duplicated"`           // paths reported by more than one shard
	Missing       []string `json:"missing,omitempty"`    // inputs (when given) that no shard reported
	Unexpected    []string `json:"unexpected,omitempty"` // reported paths not among the inputs (when given)
	Out           string   `json:"out"`                  // the merged manifest's path ("" when not written: the job is incomplete)
	// IndexMissing names the collection index parts (index/<part>) that
	// are not whole: a folder without index.json, or a part the manifest
	// lists that is not there.
	IndexMissing []string `json:"index_missing,omitempty"`
	CollectionCheck

	objects map[string]string // ok images' object URLs → their paths
}

var shardManifest = regexp.MustCompile(`^manifest-(\d+)-of-(\d+)\.jsonl$`)

// Merge joins the manifest-<i>-of-<n>.jsonl files in dir into manifest.jsonl
// (written atomically, one line per image, sorted by path, the last entry of
// a path within a shard winning), once the job is complete: with a shard's
// manifest missing, or an input no shard reported, the report says so and
// no manifest.jsonl is written (Out is ""). A job of one process has only
// manifest.jsonl, which is read as it is. When inputs are given, they are
// walked with the same rules as the job and every image is checked for.
func Merge(ctx context.Context, dir string, inputs []string) (*MergeReport, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("batch: merge: %w", err)
	}
	rep := &MergeReport{Out: filepath.Join(dir, "manifest.jsonl")}
	byShard := map[int][]Entry{}
	for _, e := range ents {
		m := shardManifest.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		if rep.ShardCount != 0 && n != rep.ShardCount {
			return nil, fmt.Errorf("batch: merge: %s is from a %d-shard job, others from a %d-shard job", e.Name(), n, rep.ShardCount)
		}
		rep.ShardCount = n
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("batch: merge: %w", err)
		}
		list, err := ParseManifest(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("batch: merge: %s: %w", e.Name(), err)
		}
		byShard[i] = Latest(list)
		rep.Shards = append(rep.Shards, i)
	}
	single := false
	if rep.ShardCount == 0 {
		// A job of one process: its manifest.jsonl is the whole record;
		// it is checked, and left as it is.
		f, err := os.Open(rep.Out)
		if err != nil {
			return nil, fmt.Errorf("batch: merge: no manifest-<i>-of-<n>.jsonl files and no manifest.jsonl in %q", dir)
		}
		list, err := ParseManifest(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("batch: merge: manifest.jsonl: %w", err)
		}
		single, rep.ShardCount, rep.Shards, byShard[0] = true, 1, []int{0}, Latest(list)
	}
	sort.Ints(rep.Shards)
	for i := 0; i < rep.ShardCount; i++ {
		if _, ok := byShard[i]; !ok {
			rep.MissingShards = append(rep.MissingShards, i)
		}
	}
	merged := map[string]Entry{}
	for _, i := range rep.Shards {
		for _, e := range byShard[i] {
			if old, dup := merged[e.Path]; dup {
				rep.Duplicated = append(rep.Duplicated, e.Path)
				if old.Status == StatusOK && e.Status != StatusOK {
					continue
				}
			}
			merged[e.Path] = e
		}
	}
	paths := make([]string, 0, len(merged))
	for p := range merged {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	for _, p := range paths {
		e := merged[p]
		if e.Status == StatusOK {
			rep.OK++
			addObject(&rep.objects, e)
		} else {
			rep.Failed++
		}
		b, _ := json.Marshal(e)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	rep.Images = len(paths)
	sort.Strings(rep.Duplicated)
	rep.IndexMissing = mergeIndexMissing(dir, merged)
	if len(inputs) > 0 {
		if err := rep.checkInputs(ctx, inputs, merged, paths); err != nil {
			return nil, err
		}
	}
	if single {
		return rep, nil
	}
	if len(rep.MissingShards) > 0 || len(rep.Missing) > 0 {
		// No manifest.jsonl for an incomplete job: a reader would take
		// part of a job for all of it.
		rep.Out = ""
		return rep, nil
	}
	if err := tensorio.WriteFileAtomic(rep.Out, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	}); err != nil {
		return nil, fmt.Errorf("batch: merge: %w", err)
	}
	return rep, nil
}

// checkInputs walks inputs with the job's rules and lists in rep the
// inputs no shard reported and the reported paths that are not inputs. A
// video is one input, reported by its frames (entries whose Video is its
// path) or by its own failed entry; it is not decoded, so its frames are
// checked whatever sampling the job had.
func (rep *MergeReport) checkInputs(ctx context.Context, inputs []string, merged map[string]Entry, paths []string) error {
	videos := map[string]bool{}
	for _, e := range merged {
		if e.Video != "" {
			videos[e.Video] = true
		}
	}
	want := map[string]bool{}
	err := List(ctx, inputs, func(it Item) error {
		want[it.Rel] = true
		if _, ok := merged[it.Rel]; !ok && !videos[it.Rel] {
			rep.Missing = append(rep.Missing, it.Rel)
		}
		return nil
	}, func(string, error) error { return nil })
	if err != nil {
		return err
	}
	for _, p := range paths {
		if !want[p] && !want[merged[p].Video] {
			rep.Unexpected = append(rep.Unexpected, p)
		}
	}
	return nil
}

// HasCollection reports whether the job wrote a collection in Weaviate
// (its ok images name objects), for CheckCollection.
func (r *MergeReport) HasCollection() bool { return len(r.objects) > 0 }

// CheckCollection checks that the job's collection in Weaviate holds the
// object of every ok image of the merged manifest (see CollectionCheck);
// apiKey is Weaviate's API key ("": anonymous).
func (r *MergeReport) CheckCollection(ctx context.Context, apiKey string) error {
	return r.CollectionCheck.check(ctx, r.objects, apiKey)
}
