package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/conditionhq/condition/internal/objstore"
)

// remoteOut is a shards-layout output under an object-store prefix. A
// shard is finished in a local staging folder as for a local output, then
// uploaded: its arrays, img_emb, and its metadata last, so that, as on a
// disk, a shard whose metadata can be read is whole (each object appears
// only when its upload completes). The staged files are removed once
// uploaded. The manifest is uploaded when the job ends; the shards'
// metadata, which lists every image with its status, is the record that
// resume and merge read.
type remoteOut struct {
	stores *objstore.Stores
	loc    objstore.Location // the prefix
	stage  string            // the local staging folder, made by start and removed by close
}

// newRemoteOut resolves the object-store output out.
func newRemoteOut(stores *objstore.Stores, out string) (*remoteOut, error) {
	l, err := objstore.Parse(out)
	if err != nil {
		return nil, err
	}
	l.Key = l.Dir()
	return &remoteOut{stores: stores, loc: l}, nil
}

func (r *remoteOut) String() string { return r.loc.String() }

func (r *remoteOut) path(rel string) string { return r.at(rel).String() }

// at returns the location of rel below the prefix.
func (r *remoteOut) at(rel string) objstore.Location { return r.loc.Child(rel) }

func (r *remoteOut) list(ctx context.Context, dir string) ([]outFile, error) {
	var out []outFile
	err := r.stores.List(ctx, r.at(dir), func(o objstore.Object) error {
		rel := strings.TrimPrefix(o.Key, r.loc.Dir())
		if !hiddenName(rel) {
			out = append(out, outFile{name: rel, size: o.Size})
		}
		return nil
	})
	return out, err
}

// hiddenName reports whether an element of the slash-separated name rel
// starts with ".".
func hiddenName(rel string) bool {
	return strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.")
}

func (r *remoteOut) open(ctx context.Context, rel string) (io.ReadCloser, error) {
	return r.stores.Open(ctx, r.at(rel))
}

// start takes the shards layout only (one object per image is what that
// layout avoids).
func (r *remoteOut) start(ctx context.Context, cfg Config, manifest string, _ *slog.Logger) (_ *outFolder, err error) {
	if cfg.Layout != "shards" {
		return nil, errors.New("batch: an object-store output takes the shards layout (one object per image is what that layout avoids)")
	}
	if r.stage, err = os.MkdirTemp("", "condition-stage-"); err != nil {
		return nil, fmt.Errorf("batch: staging folder: %w", err)
	}
	out, err := openOutFolder(r.stage)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			out.Close()
		}
	}()
	if !cfg.Resume && !cfg.Overwrite {
		if err := r.checkFree(ctx, manifest, cfg.Shard.Active()); err != nil {
			return nil, err
		}
	}
	if cfg.Overwrite && !cfg.Resume {
		if err := r.clear(ctx, cfg.Shard, manifest); err != nil {
			return nil, err
		}
	}
	if cfg.Resume {
		if err := r.fetchManifest(ctx, out, manifest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *remoteOut) close() {
	if r.stage != "" {
		os.RemoveAll(r.stage)
		r.stage = ""
	}
}

// upload uploads the staged files rels in order, each removed once it is
// in the store.
func (r *remoteOut) upload(ctx context.Context, out *outFolder, rels ...string) error {
	for _, rel := range rels {
		f, err := out.root.Open(rel)
		if err != nil {
			return fmt.Errorf("batch: upload %s: %w", rel, err)
		}
		err = r.stores.Upload(ctx, r.at(rel), f)
		f.Close()
		if err != nil {
			return fmt.Errorf("batch: upload %s: %w", rel, err)
		}
		if err := out.root.Remove(rel); err != nil {
			return fmt.Errorf("batch: upload %s: %w", rel, err)
		}
	}
	return nil
}

// publishShard uploads finished shard name from the staging folder.
func (r *remoteOut) publishShard(ctx context.Context, out *outFolder, name string) error {
	dir := "shards/" + name
	ents, err := fs.ReadDir(out.root.FS(), dir)
	if err != nil {
		return fmt.Errorf("batch: upload shard %s: %w", name, err)
	}
	var rels []string
	for _, e := range ents {
		rels = append(rels, dir+"/"+e.Name())
	}
	sort.Strings(rels)
	if out.Exists("img_emb/img_emb_" + name + ".npy") {
		rels = append(rels, "img_emb/img_emb_"+name+".npy")
	}
	rels = append(rels, "metadata/metadata_"+name+".parquet")
	if err := r.upload(ctx, out, rels...); err != nil {
		return err
	}
	return out.root.Remove(dir)
}

// publishIndexPart uploads finished index part name from the staging
// folder: its arrays, then index.json last.
func (r *remoteOut) publishIndexPart(ctx context.Context, out *outFolder, name string) error {
	dir := "index/" + name
	ents, err := fs.ReadDir(out.root.FS(), dir)
	if err != nil {
		return fmt.Errorf("batch: upload index part %s: %w", name, err)
	}
	var rels []string
	for _, e := range ents {
		if e.Name() != "index.json" {
			rels = append(rels, dir+"/"+e.Name())
		}
	}
	sort.Strings(rels)
	rels = append(rels, dir+"/index.json")
	if err := r.upload(ctx, out, rels...); err != nil {
		return err
	}
	return out.root.Remove(dir)
}

// publishManifest uploads the manifest name, a copy kept in the staging
// folder for the rest of the job. It is given a minute even when ctx is
// done (an interrupted job still leaves its record).
func (r *remoteOut) publishManifest(ctx context.Context, out *outFolder, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	f, err := out.root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("batch: upload manifest: %w", err)
	}
	defer f.Close()
	return r.stores.Upload(ctx, r.at(name), f)
}

// fetchManifest copies the store's manifest name into the staging folder,
// for a resumed job to append to; none in the store is not an error.
func (r *remoteOut) fetchManifest(ctx context.Context, out *outFolder, name string) error {
	b, err := r.stores.ReadAll(ctx, r.at(name), 0)
	if objstore.NotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return out.WriteFile(name, b)
}

// layoutName matches the objects a shards-layout job writes below its
// prefix and its index parts: the shard name is one of the groups.
var layoutName = regexp.MustCompile(`^(?:shards/([^/]+)/[^/]+\.npy|img_emb/img_emb_([^/]+)\.npy|metadata/metadata_([^/]+)\.parquet|index/([^/]+)/(?:[^/]+\.npy|index\.json))$`)

// checkFree refuses a prefix holding an earlier job's results (its
// manifest), or, unless this job is one of several sharing it, anything.
func (r *remoteOut) checkFree(ctx context.Context, manifest string, sharded bool) error {
	errFull := errors.New("full")
	var found error
	err := r.stores.List(ctx, r.loc, func(o objstore.Object) error {
		rel := o.Key[len(r.loc.Dir()):]
		if rel == manifest {
			found = &OutputExistsError{Dir: r.loc.String(), Manifest: manifest}
			return errFull
		}
		if !sharded && found == nil {
			found = &OutputExistsError{Dir: r.loc.String()}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return fmt.Errorf("batch: output %s: %w", r.loc, err)
	}
	return found
}

// clear removes what an earlier job of this process's shard names wrote
// below the prefix (its shards, img_emb and metadata objects, its index
// parts and its manifest); other objects are left alone.
func (r *remoteOut) clear(ctx context.Context, proc Shard, manifest string) error {
	own := ownShardNames(proc)
	var names []objstore.Location
	err := r.stores.List(ctx, r.loc, func(o objstore.Object) error {
		rel := o.Key[len(r.loc.Dir()):]
		if rel == manifest {
			names = append(names, r.at(rel))
			return nil
		}
		m := layoutName.FindStringSubmatch(rel)
		if m == nil {
			return nil
		}
		if own.MatchString(m[1] + m[2] + m[3] + m[4]) {
			names = append(names, r.at(rel))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("batch: output %s: %w", r.loc, err)
	}
	for _, l := range names {
		if err := r.stores.Delete(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// ownShardNames matches the shard names process proc writes (see
// shardName).
func ownShardNames(proc Shard) *regexp.Regexp {
	if proc.Active() {
		return regexp.MustCompile(fmt.Sprintf(`^%05d_\d{6}$`, proc.Index))
	}
	return regexp.MustCompile(`^\d{6}$`)
}
