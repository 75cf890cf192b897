package hub

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/conditionhq/condition/tensorio"
)

// Cache is a Hugging Face hub cache folder.
type Cache struct {
	Dir string
}

// RepoFolder returns the folder name of a model repository in the cache:
// "models--org--name".
func RepoFolder(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// RepoDir returns <cache>/models--org--name.
func (c Cache) RepoDir(repo string) string { return filepath.Join(c.Dir, RepoFolder(repo)) }

// SnapshotDir returns <cache>/models--org--name/snapshots/<commit>.
func (c Cache) SnapshotDir(repo, commit string) string {
	return filepath.Join(c.RepoDir(repo), "snapshots", commit)
}

// BlobPath returns <cache>/models--org--name/blobs/<etag>.
func (c Cache) BlobPath(repo, etag string) string {
	return filepath.Join(c.RepoDir(repo), "blobs", etag)
}

// LockPath returns <cache>/.locks/models--org--name/<etag>.lock, the lock
// huggingface_hub takes while it writes that blob.
func (c Cache) LockPath(repo, etag string) string {
	return filepath.Join(c.Dir, ".locks", RepoFolder(repo), etag+".lock")
}

// ReadRef returns the commit refs/<revision> holds.
func (c Cache) ReadRef(repo, revision string) (string, error) {
	if err := checkFile(revision); err != nil {
		return "", fmt.Errorf("hub: bad revision %q", revision)
	}
	p := filepath.Join(c.RepoDir(repo), "refs", filepath.FromSlash(revision))
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("hub: %s: no refs/%s in the cache (%s): %w", repo, revision, c.RepoDir(repo), err)
	}
	commit := strings.TrimSpace(string(b))
	if !IsCommit(commit) {
		return "", fmt.Errorf("hub: %s: refs/%s holds %q, not a commit hash", repo, revision, commit)
	}
	return commit, nil
}

// WriteRef records that revision points at commit (nothing to do when
// revision is that commit, or the ref already says so).
func (c Cache) WriteRef(repo, revision, commit string) error {
	if revision == commit || revision == "" {
		return nil
	}
	if err := checkFile(revision); err != nil {
		return fmt.Errorf("hub: bad revision %q", revision)
	}
	if old, err := c.ReadRef(repo, revision); err == nil && old == commit {
		return nil
	}
	p := filepath.Join(c.RepoDir(repo), "refs", filepath.FromSlash(revision))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := tensorio.WriteFileAtomic(p, func(w io.Writer) error {
		_, err := io.WriteString(w, commit)
		return err
	}); err != nil {
		return fmt.Errorf("hub: write refs/%s: %w", revision, err)
	}
	return nil
}

// Commit resolves a revision in the cache alone: a commit hash is itself,
// anything else is read from refs/.
func (c Cache) Commit(repo, revision string) (string, error) {
	if revision == "" {
		revision = DefaultRevision
	}
	if IsCommit(revision) {
		return revision, nil
	}
	return c.ReadRef(repo, revision)
}

// File returns the snapshot path of file at commit when it is in the cache
// and its blob is present.
func (c Cache) File(repo, commit, file string) (string, bool) {
	if checkFile(file) != nil || !IsCommit(commit) {
		return "", false
	}
	p := filepath.Join(c.SnapshotDir(repo, commit), filepath.FromSlash(file))
	fi, err := os.Stat(p) // follows the symlink: a dangling one does not count
	return p, err == nil && fi.Mode().IsRegular()
}

// NoExist reports whether the cache records that file does not exist at commit.
func (c Cache) NoExist(repo, commit, file string) bool {
	if checkFile(file) != nil || !IsCommit(commit) {
		return false
	}
	_, err := os.Stat(filepath.Join(c.RepoDir(repo), ".no_exist", commit, filepath.FromSlash(file)))
	return err == nil
}

// MarkNoExist records that file does not exist at commit, as huggingface_hub
// does after a 404, so that later lookups need not ask the hub.
func (c Cache) MarkNoExist(repo, commit, file string) { c.markNoExist(repo, commit, file) }

func (c Cache) markNoExist(repo, commit, file string) {
	if checkFile(file) != nil || !IsCommit(commit) {
		return
	}
	p := filepath.Join(c.RepoDir(repo), ".no_exist", commit, filepath.FromSlash(file))
	if os.MkdirAll(filepath.Dir(p), 0o755) == nil {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
	}
}

// link makes snapshots/<commit>/<file> a relative symlink to blobs/<etag>.
func (c Cache) link(repo, commit, file, etag string) (string, error) {
	p := filepath.Join(c.SnapshotDir(repo, commit), filepath.FromSlash(file))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(p), c.BlobPath(repo, etag))
	if err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	if cur, err := os.Readlink(p); err == nil && cur == rel {
		return p, nil
	}
	// Replace atomically: a new link under a temporary name, then rename.
	// The temporary name is unique per call, not per process: goroutines of
	// one process may link the same file at once.
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := p + ".tmp-" + hex.EncodeToString(rnd[:])
	if err := os.Symlink(rel, tmp); err != nil {
		return "", fmt.Errorf("hub: link %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("hub: link %s: %w", p, err)
	}
	return p, nil
}

// CachedRepo describes one model repository in the cache.
type CachedRepo struct {
	Repo      string            `json:"repo"`
	Dir       string            `json:"dir"`
	Refs      map[string]string `json:"refs"` // revision → commit
	Snapshots []CachedSnapshot  `json:"snapshots"`
	Size      int64             `json:"size"` // bytes in blobs/
}

// CachedSnapshot is one commit's folder.
type CachedSnapshot struct {
	Commit string   `json:"commit"`
	Files  []string `json:"files"` // slash-separated, sorted
}

// Repos lists the model repositories in the cache, sorted by name.
func (c Cache) Repos() ([]CachedRepo, error) {
	ents, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	var out []CachedRepo
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), "models--")
		if !ok || !e.IsDir() {
			continue
		}
		org, n, ok := strings.Cut(name, "--")
		if !ok {
			continue
		}
		r, err := c.Repo(org + "/" + n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Repo < out[j].Repo })
	return out, nil
}

// Repo describes one repository's cache folder.
func (c Cache) Repo(repo string) (CachedRepo, error) {
	dir := c.RepoDir(repo)
	r := CachedRepo{Repo: repo, Dir: dir, Refs: map[string]string{}}
	refs := filepath.Join(dir, "refs")
	filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(refs, p)
		if b, err := os.ReadFile(p); err == nil {
			r.Refs[filepath.ToSlash(rel)] = strings.TrimSpace(string(b))
		}
		return nil
	})
	snaps, _ := os.ReadDir(filepath.Join(dir, "snapshots"))
	for _, s := range snaps {
		if !s.IsDir() {
			continue
		}
		root := filepath.Join(dir, "snapshots", s.Name())
		cs := CachedSnapshot{Commit: s.Name()}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			cs.Files = append(cs.Files, filepath.ToSlash(rel))
			return nil
		})
		sort.Strings(cs.Files)
		r.Snapshots = append(r.Snapshots, cs)
	}
	blobs, _ := os.ReadDir(filepath.Join(dir, "blobs"))
	for _, b := range blobs {
		if fi, err := b.Info(); err == nil && fi.Mode().IsRegular() {
			r.Size += fi.Size()
		}
	}
	return r, nil
}

// Check is the result of verifying one cached file.
type Check struct {
	File   string `json:"file"`
	Blob   string `json:"blob,omitempty"`
	Kind   string `json:"kind,omitempty"` // "sha256" or "git-sha1"; "" when the blob name is neither
	Size   int64  `json:"size"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Verify re-hashes every file of a snapshot and compares it with its blob's
// name: blobs of LFS files are named by their sha256, others by their git
// blob sha1 (sha1 of "blob <size>\x00" + contents), as the hub's etags are.
// Files not named by a hash (copied in by hand) are reported as unchecked.
// progress, when set, is called with bytes hashed so far.
func (c Cache) Verify(repo, commit string, progress func(file string, done, total int64)) ([]Check, error) {
	root := c.SnapshotDir(repo, commit)
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("hub: %s@%s is not in the cache: %w", repo, commit, err)
	}
	var out []Check
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		ck := Check{File: filepath.ToSlash(rel)}
		defer func() { out = append(out, ck) }()
		target, lerr := os.Readlink(p)
		blobPath := p
		if lerr == nil {
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			blobPath = target
			ck.Blob = filepath.Base(target)
		} else {
			ck.Blob = ""
		}
		f, err := os.Open(blobPath)
		if err != nil {
			ck.Reason = "missing blob: " + err.Error()
			return nil
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			ck.Reason = err.Error()
			return nil
		}
		ck.Size = fi.Size()
		var h hash.Hash
		switch {
		case len(ck.Blob) == 64 && isHex(ck.Blob):
			ck.Kind, h = "sha256", sha256.New()
		case len(ck.Blob) == 40 && isHex(ck.Blob):
			ck.Kind, h = "git-sha1", sha1.New()
			fmt.Fprintf(h, "blob %d\x00", fi.Size())
		default:
			ck.OK, ck.Reason = true, "not checked: the file is not a link to a blob named by a hash"
			return nil
		}
		var w io.Writer = h
		if progress != nil {
			w = &progressWriter{w: h, fn: func(done int64) { progress(ck.File, done, fi.Size()) }}
		}
		if _, err := io.Copy(w, f); err != nil {
			ck.Reason = err.Error()
			return nil
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != ck.Blob {
			ck.Reason = fmt.Sprintf("%s is %s, the blob name says %s", ck.Kind, got, ck.Blob)
			return nil
		}
		ck.OK = true
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("hub: verify %s@%s: %w", repo, commit, err)
	}
	return out, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

type progressWriter struct {
	w    io.Writer
	done int64
	fn   func(done int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	p.fn(p.done)
	return n, err
}

// LockFile takes an exclusive lock on the file path (created, with its
// folder, when missing), waiting until it is free or ctx ends, as downloads
// lock their blobs: processes sharing a cache use it to make a file once.
// The returned function releases it. Where the system has no flock, the
// file is created and not locked.
func LockFile(ctx context.Context, path string) (unlock func(), err error) {
	return lockFile(ctx, path)
}
