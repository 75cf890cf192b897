package models

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/tensorio"
)

// DefaultDerivedDir returns os.UserCacheDir()/condition/derived (on Linux
// $XDG_CACHE_HOME/condition/derived, else ~/.cache/condition/derived): the
// folder where the files this program makes from hub models are kept, the
// projection heads read by ranges (HeadsFile) and the graphs rewritten by
// Expose, one folder per repository and commit:
//
//	<dir>/models--org--name/<commit>/condition-heads.safetensors
//	<dir>/models--org--name/<commit>/onnx/vision_model.exposed.onnx
//	<dir>/models--org--name/<commit>/onnx/vision_model.onnx_data   (the snapshot's file, linked)
//
// The Hugging Face cache stays a mirror of the hub: nothing is written into
// its snapshots but what the hub serves.
func DefaultDerivedDir() (string, error) {
	d, err := userDerivedDir()
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	return d, nil
}

func userDerivedDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("the user cache folder, for the files derived from hub models: %w", err)
	}
	return filepath.Join(d, "condition", "derived"), nil
}

// derivedCache is the folder of files derived from hub models. Its errors
// are not prefixed: its callers say what they were doing.
type derivedCache struct {
	root string
	err  error // why there is no root
}

// newDerivedCache returns the derived cache opts ask for: opts.DerivedCache,
// else DefaultDerivedDir().
func newDerivedCache(opts Options) derivedCache {
	if opts.DerivedCache != "" {
		return derivedCache{root: opts.DerivedCache}
	}
	root, err := userDerivedDir()
	return derivedCache{root: root, err: err}
}

// dir returns <root>/models--org--name/<commit>.
func (d derivedCache) dir(repo, commit string) (string, error) {
	if d.root == "" {
		if d.err != nil {
			return "", d.err
		}
		return "", errors.New("no folder for the files derived from hub models")
	}
	if !hub.IsCommit(commit) {
		return "", fmt.Errorf("derived files of %s: %q is not a commit hash", repo, commit)
	}
	return filepath.Join(d.root, hub.RepoFolder(repo), commit), nil
}

// path returns where the derived file name (slash-separated) of repo@commit
// is kept.
func (d derivedCache) path(repo, commit, name string) (string, error) {
	if !fs.ValidPath(name) || name == "." {
		return "", fmt.Errorf("derived file %q of %s@%s: expected a relative path inside the repository", name, repo, commit)
	}
	dir, err := d.dir(repo, commit)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.FromSlash(name)), nil
}

// file returns the derived file name of repo@commit when it is there.
func (d derivedCache) file(repo, commit, name string) (string, bool) {
	p, err := d.path(repo, commit, name)
	if err != nil {
		return "", false
	}
	fi, err := os.Stat(p)
	return p, err == nil && fi.Mode().IsRegular()
}

// write stores the derived file name of repo@commit atomically (a temporary
// file in the same folder, then a rename): write is called once with the
// destination. It returns the file's path.
func (d derivedCache) write(repo, commit, name string, write func(w io.Writer) error) (string, error) {
	p, err := d.path(repo, commit, name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("derived file %s: %w", p, err)
	}
	if err := tensorio.WriteFileAtomic(p, write); err != nil {
		return "", err // names p
	}
	return p, nil
}

// linkFile makes newname a hard link to oldname; tests replace it to see
// the copy taken when links cannot be made.
var linkFile = os.Link

// place puts the upstream file src (a snapshot file, usually a symbolic
// link into blobs/) at the derived name of repo@commit, so that a derived
// graph finds its external data beside it. It makes a hard link to the
// file src resolves to, and copies it where a link cannot be made (another
// file system, a file system without links, a file owned by another user),
// as huggingface_hub copies where it cannot make symbolic links. Not a
// symbolic link: ONNX Runtime 1.30 refuses external data whose real path
// is outside the graph's folder. Either way the result appears atomically,
// and a file already in place is kept.
func (d derivedCache) place(repo, commit, name, src string) (string, error) {
	p, err := d.path(repo, commit, name)
	if err != nil {
		return "", err
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		return p, nil
	}
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", fmt.Errorf("derived file %s: the upstream file %s: %w", p, src, err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("derived file %s: %w", p, err)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := p + ".tmp-" + hex.EncodeToString(rnd[:])
	if err := linkFile(real, tmp); err == nil {
		if err := os.Rename(tmp, p); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("derived file %s: %w", p, err)
		}
		return p, nil
	}
	if err := copyFileAtomic(real, p); err != nil {
		return "", fmt.Errorf("derived file %s: copy of %s: %w", p, src, err)
	}
	return p, nil
}

// copyFileAtomic copies the file src to dst through a temporary file.
func copyFileAtomic(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return tensorio.WriteFileAtomic(dst, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
}
