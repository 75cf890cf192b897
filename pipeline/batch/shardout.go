package batch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"sort"

	"github.com/parquet-go/parquet-go"

	"github.com/conditionhq/condition/tensorio"
)

// The shards layout (Config.Layout "shards"): every ShardSize images, in
// the order the walk finds them, one output shard:
//
//	shards/<name>/<tensor>.npy      stacked arrays [N, ...] (numpy.load, no code of ours)
//	img_emb/img_emb_<name>.npy      image_embeds [N, d_p], as clip-retrieval names them
//	metadata/metadata_<name>.parquet one row per image: key, image_path, source, sha256,
//	                                status, error, width, height, row, scores (per prompt),
//	                                video and time (a video's frame; else null)
//
// Row r of every array is the image whose metadata row says r; a failed
// image's rows are zeros. Token axes have each prompt's own length T_k (its
// tokens BOS to EOS; the job's prompts are fixed, so no padding). A shard is
// written under a temporary folder and appears whole: its arrays folder is
// renamed into place, then img_emb, then the metadata file, written last,
// marks it complete (with the job's settings hash in its key-value
// metadata, which --resume compares).

// shardNPYHeader is the room kept before each array's rows for its .npy
// header, written once the number of rows is known.
const shardNPYHeader = 256

// shardRow is one image's row of a shard's metadata.
type shardRow struct {
	Key       string    `parquet:"key"`
	ImagePath string    `parquet:"image_path"`
	Source    string    `parquet:"source"`
	SHA256    string    `parquet:"sha256"`
	Status    string    `parquet:"status"`
	Error     string    `parquet:"error"`
	Width     int32     `parquet:"width"`
	Height    int32     `parquet:"height"`
	Row       int32     `parquet:"row"`
	Unit      string    `parquet:"unit"` // what sharding assigned: the tar shard, or key
	Scores    []float64 `parquet:"scores,list"`
	Video     string    `parquet:"video,optional"` // a video's frame: the video's relative path; else null
	Time      *float64  `parquet:"time,optional"`  // a video's frame: its presentation time in seconds; else null
}

// shardName names shard i of this process: i, or <process shard>_<i> when
// the job is one of several sharing the output folder.
func shardName(s Shard, i int) string {
	if s.Active() {
		return fmt.Sprintf("%05d_%06d", s.Index, i)
	}
	return fmt.Sprintf("%06d", i)
}

// shardSet writes a job's output shards.
type shardSet struct {
	partSet[shardFiles, shardRow]
	settings string
	embDim   int             // image_embeds' width, for the zeros of a shard with no image done
	dst      output          // where finished shards are published and earlier runs' read
	index    string          // the collection index's dtype, written in the metadata when the job writes one
	ctx      context.Context // for the uploads
}

// shardFiles is a shard's stacked arrays being written, by tensor name.
type shardFiles = map[string]*shardArray

// shardOut is one shard being written.
type shardOut = part[shardFiles, shardRow]

// shardArray is one stacked array being written: rows at fixed offsets.
type shardArray struct {
	f     *os.File
	shape []int // of one row
	dtype tensorio.DType
	size  int // bytes of one row
}

func newShardSet(out *outFolder, size int, proc Shard, settings string) *shardSet {
	s := &shardSet{settings: settings}
	s.partSet = partSet[shardFiles, shardRow]{out: out, size: size, proc: proc, what: "shard", tmp: ".tmp-shard-",
		start:  func(o *shardOut) error { o.files = shardFiles{}; return nil },
		finish: s.finish,
		close: func(o *shardOut) {
			for _, a := range o.files {
				a.f.Close()
			}
		}}
	return s
}

func (s *shardSet) metaName(i int) string {
	return "metadata/metadata_" + shardName(s.proc, i) + ".parquet"
}

// complete reports whether shard i was finished by an earlier run with the
// same settings.
func (s *shardSet) complete(i int) bool {
	b, err := readAll(s.ctx, s.dst, s.metaName(i))
	if err != nil {
		return false
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return false
	}
	v, ok := f.Lookup("settings")
	return ok && v == s.settings
}

// write puts image seq's tensors in their rows.
func (s *shardSet) write(seq int, ts map[string]tensorio.Tensor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.get(seq / s.size)
	if err != nil {
		return err
	}
	row := seq % s.size
	for name, t := range ts {
		b, err := tensorio.AppendLE(nil, t)
		if err != nil {
			return fmt.Errorf("batch: shard %s: %s: %w", o.name, name, err)
		}
		a := o.files[name]
		if a == nil {
			f, err := s.out.root.OpenFile(path.Join(o.tmp, name+".npy"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return fmt.Errorf("batch: shard %s: %w", o.name, err)
			}
			a = &shardArray{f: f, shape: append([]int(nil), t.Shape...), dtype: t.DType, size: len(b)}
			o.files[name] = a
		}
		if len(b) != a.size || t.DType != a.dtype || !slices.Equal(t.Shape, a.shape) {
			return fmt.Errorf("batch: shard %s: %s is %s%v, earlier rows %s%v", o.name, name, t.DType, t.Shape, a.dtype, a.shape)
		}
		if _, err := a.f.WriteAt(b, int64(shardNPYHeader+row*a.size)); err != nil {
			return fmt.Errorf("batch: shard %s: %w", o.name, err)
		}
	}
	return nil
}

// account records image seq's metadata row; it finishes the shard when it
// holds all its images: size of them, or, once the walk is over (total ≥
// 0), the rest.
func (s *shardSet) account(seq int, r shardRow, total int) error {
	r.Row = int32(seq % s.size)
	return s.add(seq, r, total)
}

// finish writes shard o of n rows: the arrays' headers, the arrays folder
// renamed into place, img_emb, then the metadata.
func (s *shardSet) finish(o *shardOut, n int) error {
	var emb []byte
	for name, a := range o.files {
		if err := s.seal(o, a.f, name, a.dtype, append([]int{n}, a.shape...), a.size, n); err != nil {
			return err
		}
		if name == "image_embeds" {
			var err error
			if emb, err = s.out.ReadFile(path.Join(o.tmp, name+".npy")); err != nil {
				return err
			}
		}
	}
	dst := "shards/" + o.name
	if err := s.out.root.MkdirAll("shards", 0o755); err != nil {
		return err
	}
	if err := s.out.root.RemoveAll(dst); err != nil {
		return err
	}
	if err := s.out.root.Rename(o.tmp, dst); err != nil {
		return fmt.Errorf("batch: shard %s: %w", o.name, err)
	}
	if emb == nil && s.embDim > 0 {
		// No image of this shard was done: img_emb still has its n rows
		// (zeros), so that clip-retrieval's readers, which pair the sorted
		// img_emb and metadata files, stay aligned.
		hdr, err := tensorio.NPYHeader(tensorio.DTypeF32, []int{n, s.embDim}, shardNPYHeader)
		if err != nil {
			return err
		}
		emb = append(hdr, make([]byte, n*s.embDim*4)...)
	}
	if emb != nil {
		if err := s.out.WriteFile("img_emb/img_emb_"+o.name+".npy", emb); err != nil {
			return err
		}
	}
	sort.Slice(o.rows, func(a, b int) bool { return o.rows[a].Row < o.rows[b].Row })
	var buf bytes.Buffer
	opts := []parquet.WriterOption{parquet.KeyValueMetadata("settings", s.settings),
		parquet.KeyValueMetadata("rows", fmt.Sprint(n)),
		parquet.KeyValueMetadata("process_shard", fmt.Sprintf("%d/%d", s.proc.Index, max(s.proc.Count, 1)))}
	if s.index != "" {
		// Only with an index: the metadata of other jobs stays as it was.
		opts = append(opts, parquet.KeyValueMetadata("index", s.index))
	}
	w := parquet.NewGenericWriter[shardRow](&buf, opts...)
	if _, err := w.Write(o.rows); err != nil {
		return fmt.Errorf("batch: shard %s: metadata: %w", o.name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("batch: shard %s: metadata: %w", o.name, err)
	}
	if err := s.out.WriteFile("metadata/metadata_"+o.name+".parquet", buf.Bytes()); err != nil {
		return err
	}
	return s.dst.publishShard(s.ctx, s.out, o.name)
}
