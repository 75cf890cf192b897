package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/internal/objstore"
)

// outputReader reads a job's output, wherever it is: what VerifyShards,
// merge and a resumed job read. Names are slash-separated and relative to
// the output.
type outputReader interface {
	// String names the output as given.
	String() string
	// path names the file rel of the output (a path, or a URL).
	path(rel string) string
	// list returns the regular files below the folder dir (ending in "/"),
	// at any depth, leaving out hidden ones (a name starting with "."); a
	// folder that does not exist holds none.
	list(ctx context.Context, dir string) ([]outFile, error)
	// open opens the file rel for reading.
	open(ctx context.Context, rel string) (io.ReadCloser, error)
}

// output is where a job writes, resolved once from the name given (see
// resolveOutput): a local folder (localOut), or an object-store prefix
// (remoteOut) whose files the job finishes in a local staging folder and
// uploads when whole. Nothing after resolveOutput asks which one it is.
type output interface {
	outputReader
	// start readies the output for a job whose manifest is manifest and
	// returns the local folder the job writes in. Unless cfg resumes or
	// overwrites, an output that holds an earlier job's results is refused
	// (*OutputExistsError); on overwrite, what the earlier job of this
	// manifest wrote is removed; on resume, its manifest is made ready to
	// append to.
	start(ctx context.Context, cfg Config, manifest string, log *slog.Logger) (*outFolder, error)
	// publishShard makes finished shard name, staged in out, visible.
	publishShard(ctx context.Context, out *outFolder, name string) error
	// publishIndexPart makes finished index part name, staged in out,
	// visible.
	publishIndexPart(ctx context.Context, out *outFolder, name string) error
	// publishManifest makes the manifest name, closed in out, visible.
	publishManifest(ctx context.Context, out *outFolder, name string) error
	// close releases what start made (a staging folder). It is safe to
	// call more than once, and before start.
	close()
}

type outFile struct {
	name string // relative to the output, slash-separated
	size int64
}

// resolveOutput resolves out, a folder or an object-store URL (s3://,
// gs://, azblob://), once; stores opens the latter.
func resolveOutput(stores *objstore.Stores, out string) (output, error) {
	if objstore.IsURL(out) {
		return newRemoteOut(stores, out)
	}
	return &localOut{dir: out}, nil
}

// readAll reads the file rel of o.
func readAll(ctx context.Context, o outputReader, rel string) ([]byte, error) {
	rc, err := o.open(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// readHead reads the first n bytes of the file rel of o (fewer if it is
// shorter).
func readHead(ctx context.Context, o outputReader, rel string, n int) ([]byte, error) {
	rc, err := o.open(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(rc, b)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return b[:k], err
}

// localOut is an output folder on a local file system.
type localOut struct{ dir string }

func (l *localOut) String() string { return l.dir }

func (l *localOut) path(rel string) string { return filepath.Join(l.dir, filepath.FromSlash(rel)) }

func (l *localOut) list(ctx context.Context, dir string) ([]outFile, error) {
	if st, err := os.Stat(l.dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("batch: output folder %s: not a folder", l.dir)
	}
	var out []outFile
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := os.ReadDir(l.path(dir))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if e.IsDir() {
				if err := walk(dir + e.Name() + "/"); err != nil {
					return err
				}
				continue
			}
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				out = append(out, outFile{name: dir + e.Name(), size: info.Size()})
			}
		}
		return nil
	}
	return out, walk(dir)
}

func (l *localOut) open(_ context.Context, rel string) (io.ReadCloser, error) {
	f, err := os.Open(l.path(rel))
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	return f, nil
}

func (l *localOut) start(_ context.Context, cfg Config, manifest string, log *slog.Logger) (*outFolder, error) {
	if !cfg.Resume && !cfg.Overwrite {
		if err := checkOutputFree(l.dir, manifest, cfg.Shard.Active()); err != nil {
			return nil, err
		}
	}
	out, err := openOutFolder(l.dir)
	if err != nil {
		return nil, err
	}
	if cfg.Overwrite && !cfg.Resume {
		if err := clearEarlier(out, manifest); err != nil {
			out.Close()
			return nil, err
		}
	}
	if cfg.Resume {
		if err := out.CleanTemps(); err != nil {
			log.Warn("could not remove temporary files", "err", err)
		}
	}
	return out, nil
}

// A local folder's files are visible as they are written (each
// atomically): publishing is nothing.

func (l *localOut) publishShard(context.Context, *outFolder, string) error     { return nil }
func (l *localOut) publishIndexPart(context.Context, *outFolder, string) error { return nil }
func (l *localOut) publishManifest(context.Context, *outFolder, string) error  { return nil }
func (l *localOut) close()                                                     {}

// OutputExistsError is an output folder that holds an earlier job's
// results, which a job neither resumes nor overwrites.
type OutputExistsError struct {
	Dir      string
	Manifest string // the earlier job's manifest, "" when the folder holds other files
}

func (e *OutputExistsError) Error() string {
	if e.Manifest != "" {
		return fmt.Sprintf("batch: output folder %s holds an earlier job's results (%s): resume that job, or overwrite what it wrote", e.Dir, e.Manifest)
	}
	return fmt.Sprintf("batch: output folder %s is not empty: give an empty or new folder, or overwrite", e.Dir)
}

// checkOutputFree refuses an output folder where a job would mix its files
// with an earlier job's: one that holds the manifest name, or (unless the
// job is one shard of several, whose siblings share the folder) anything.
func checkOutputFree(dir, manifest string, sharded bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("batch: output folder: %w", err)
	}
	for _, e := range ents {
		if e.Name() == manifest {
			return &OutputExistsError{Dir: dir, Manifest: manifest}
		}
	}
	if len(ents) > 0 && !sharded {
		return &OutputExistsError{Dir: dir}
	}
	return nil
}
