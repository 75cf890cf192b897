package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FileMeta is what the hub says about one file at one revision.
type FileMeta struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	File     string `json:"file"`
	Commit   string `json:"commit"`   // X-Repo-Commit
	ETag     string `json:"etag"`     // X-Linked-Etag (LFS) or ETag, without quotes and W/
	Size     int64  `json:"size"`     // X-Linked-Size or Content-Length; -1 when unknown
	Location string `json:"location"` // where to GET the contents (the CDN for LFS files)
	LFS      bool   `json:"lfs"`
}

// File is a file in the cache.
type File struct {
	Path       string // snapshots/<commit>/<file>, a link into blobs/
	Commit     string
	ETag       string // the blob name; "" when taken from the cache without asking the hub
	Size       int64
	Downloaded bool // false when the cache already had it
}

// HTTPError is an error status from the hub or its CDN.
type HTTPError struct {
	Method  string
	URL     string // without its query (signed CDN URLs carry credentials there)
	Status  int
	Code    string // X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo
	Message string // X-Error-Message
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("hub: %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Code == "GatedRepo":
		s += "; the repository may be private or gated, or not exist: set HF_TOKEN (or log in with `huggingface-cli login`) to a token with access"
	case e.Code == "RepoNotFound":
		s += "; check the repository id"
	case e.Code == "RevisionNotFound":
		s += "; check the branch, tag or commit after @"
	}
	return s
}

// Is maps the status and error code to ErrUnauthorized, ErrRepoNotFound,
// ErrRevisionNotFound and ErrEntryNotFound (and so fs.ErrNotExist).
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Code == "GatedRepo"
	case ErrRepoNotFound:
		return e.Code == "RepoNotFound"
	case ErrRevisionNotFound:
		return e.Code == "RevisionNotFound"
	case ErrEntryNotFound:
		return e.Code == "EntryNotFound" || (e.Status == http.StatusNotFound && e.Code == "")
	}
	return false
}

func (e *HTTPError) Unwrap() error {
	if e.Is(ErrEntryNotFound) {
		return ErrEntryNotFound
	}
	return nil
}

func httpError(resp *http.Response) error {
	u := *resp.Request.URL
	u.RawQuery = ""
	return &HTTPError{
		Method:  resp.Request.Method,
		URL:     u.String(),
		Status:  resp.StatusCode,
		Code:    resp.Header.Get("X-Error-Code"),
		Message: resp.Header.Get("X-Error-Message"),
	}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) endpointHost() string {
	u, err := url.Parse(c.endpoint())
	if err != nil {
		return ""
	}
	return u.Host
}

// newRequest builds a request with the user agent and, for the endpoint's
// host only, the token.
func (c *Client) newRequest(ctx context.Context, method, rawURL string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	ua := c.UserAgent
	if ua == "" {
		ua = "condition (huggingface_hub cache layout)"
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("Accept-Encoding", "identity")
	if c.Token != "" && req.URL.Host == c.endpointHost() {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// do sends req. With follow, redirects are followed and the token is dropped
// for any host other than the endpoint's; without, only redirects within the
// endpoint's host are followed (a renamed repository) and the first redirect
// elsewhere (the CDN) is returned as is.
func (c *Client) do(req *http.Request, follow bool) (*http.Response, error) {
	base := c.httpClient()
	hc := *base
	host := c.endpointHost()
	hc.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("hub: too many redirects")
		}
		if r.URL.Host != host {
			if !follow {
				return http.ErrUseLastResponse
			}
			r.Header.Del("Authorization")
		}
		return nil
	}
	c.log().Debug("hub request", "method", req.Method, "url", redact(req.URL))
	return hc.Do(req)
}

func redact(u *url.URL) string {
	v := *u
	v.RawQuery = ""
	return v.String()
}

// Metadata asks the hub about file at revision with a HEAD request.
func (c *Client) Metadata(ctx context.Context, repo, revision, file string) (*FileMeta, error) {
	if c.Offline {
		return nil, fmt.Errorf("hub: %s@%s: %s: not asking the hub (%s): %w", repo, revision, file, offlineWhy(), ErrOffline)
	}
	if err := checkFile(file); err != nil {
		return nil, err
	}
	if revision == "" {
		revision = DefaultRevision
	}
	req, err := c.newRequest(ctx, http.MethodHead, c.ResolveURL(repo, revision, file))
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req, false)
	if err != nil {
		return nil, fmt.Errorf("hub: %s@%s: %s: %w", repo, revision, file, err)
	}
	resp.Body.Close()
	m := &FileMeta{Repo: repo, Revision: revision, File: file, Size: -1}
	m.Commit = resp.Header.Get("X-Repo-Commit")
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		loc, err := resp.Location()
		if err != nil {
			return nil, fmt.Errorf("hub: %s@%s: %s: redirect without a Location: %w", repo, revision, file, err)
		}
		m.Location = loc.String()
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		m.Location = resp.Request.URL.String()
	default:
		err := httpError(resp)
		if errors.Is(err, ErrEntryNotFound) && IsCommit(m.Commit) {
			c.Cache().markNoExist(repo, m.Commit, file)
		}
		return nil, err
	}
	if e := resp.Header.Get("X-Linked-Etag"); e != "" {
		m.ETag, m.LFS = normalizeETag(e), true
	} else {
		m.ETag = normalizeETag(resp.Header.Get("ETag"))
	}
	sz := resp.Header.Get("X-Linked-Size")
	if sz == "" {
		sz = resp.Header.Get("Content-Length")
	}
	if n, err := strconv.ParseInt(sz, 10, 64); err == nil && n >= 0 {
		m.Size = n
	}
	if !IsCommit(m.Commit) {
		return nil, fmt.Errorf("hub: %s@%s: %s: the server sent no commit (X-Repo-Commit %q); is %s a Hugging Face hub?", repo, revision, file, m.Commit, c.endpoint())
	}
	if m.ETag == "" || strings.ContainsAny(m.ETag, `/\`) || m.ETag == "." || m.ETag == ".." {
		return nil, fmt.Errorf("hub: %s@%s: %s: the server sent no usable etag (%q)", repo, revision, file, m.ETag)
	}
	return m, nil
}

func normalizeETag(e string) string {
	e = strings.TrimSpace(e)
	e = strings.TrimPrefix(e, "W/")
	return strings.Trim(e, `"`)
}

// Download returns file at revision from the cache, fetching it first when
// the cache does not have it. A revision that is a commit hash and is cached
// needs no network. Otherwise the hub is asked which commit the revision is
// at (and refs/<revision> updated); when the hub cannot be reached, a cached
// copy of the last known commit is used. In offline mode only the cache is
// read, and a missing file is an ErrOffline error naming it.
func (c *Client) Download(ctx context.Context, repo, revision, file string) (*File, error) {
	if err := checkFile(file); err != nil {
		return nil, err
	}
	if revision == "" {
		revision = DefaultRevision
	}
	cache := c.Cache()
	fromCache := func() (*File, error) {
		commit, err := cache.Commit(repo, revision)
		if err != nil {
			return nil, err
		}
		p, ok := cache.File(repo, commit, file)
		if !ok {
			if cache.NoExist(repo, commit, file) {
				return nil, fmt.Errorf("hub: %s@%s has no %s (recorded in the cache): %w", repo, revision, file, ErrEntryNotFound)
			}
			return nil, fmt.Errorf("hub: %s@%s: %s is not in the cache (%s)", repo, revision, file, filepath.Join(cache.SnapshotDir(repo, commit), filepath.FromSlash(file)))
		}
		fi, _ := os.Stat(p)
		return &File{Path: p, Commit: commit, Size: fi.Size()}, nil
	}
	if IsCommit(revision) {
		if f, err := fromCache(); err == nil {
			return f, nil
		}
	}
	if c.Offline {
		f, err := fromCache()
		if err != nil {
			if errors.Is(err, ErrEntryNotFound) {
				return nil, err
			}
			return nil, fmt.Errorf("hub: %s@%s: %s is not in the cache %s (%v); %s: %w",
				repo, revision, file, c.CacheDir, err, offlineNote("download it"), ErrOffline)
		}
		return f, nil
	}
	meta, err := c.Metadata(ctx, repo, revision, file)
	if err != nil {
		var he *HTTPError
		if !errors.As(err, &he) && ctx.Err() == nil {
			// The hub is unreachable: fall back to the cache, as huggingface_hub does.
			if f, cerr := fromCache(); cerr == nil {
				c.log().Warn("hub unreachable, using the cached file", "repo", repo, "revision", revision, "file", file, "err", err)
				return f, nil
			}
		}
		return nil, err
	}
	return c.Fetch(ctx, meta)
}

// Fetch puts the file meta describes (as Metadata returned it) into the
// cache, without asking the hub about it again: the caller that already made
// the HEAD request for a file, to learn its size or commit, reuses it here.
// A blob already in the cache is linked, not downloaded.
func (c *Client) Fetch(ctx context.Context, meta *FileMeta) (*File, error) {
	if meta == nil || !IsCommit(meta.Commit) || meta.ETag == "" || meta.Location == "" {
		return nil, errors.New("hub: Fetch needs the metadata of a file as Metadata returns it")
	}
	if c.Offline {
		return nil, fmt.Errorf("hub: %s@%s: %s: not downloading (%s): %w", meta.Repo, meta.Revision, meta.File, offlineWhy(), ErrOffline)
	}
	cache := c.Cache()
	repo := meta.Repo
	if err := cache.WriteRef(repo, meta.Revision, meta.Commit); err != nil {
		return nil, err
	}
	f := &File{Commit: meta.Commit, ETag: meta.ETag, Size: meta.Size}
	if p, ok := cache.File(repo, meta.Commit, meta.File); ok {
		if t, err := os.Readlink(p); err == nil && filepath.Base(t) == meta.ETag {
			f.Path = p
			return f, nil
		}
	}
	blob := cache.BlobPath(repo, meta.ETag)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	if !blobOK(blob, meta.Size) {
		unlock, err := lockFile(ctx, cache.LockPath(repo, meta.ETag))
		if err != nil {
			return nil, err
		}
		defer unlock()
		if !blobOK(blob, meta.Size) { // another process may have finished it meanwhile
			if err := c.fetchBlob(ctx, meta, blob); err != nil {
				return nil, err
			}
			f.Downloaded = true
		}
	}
	p, err := cache.link(repo, meta.Commit, meta.File, meta.ETag)
	if err != nil {
		return nil, err
	}
	f.Path = p
	if fi, err := os.Stat(p); err == nil {
		f.Size = fi.Size()
	}
	return f, nil
}

func blobOK(p string, size int64) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && (size < 0 || fi.Size() == size)
}

// fetchBlob downloads meta's contents to blob+".incomplete", resuming what is
// there, retrying transient failures, then checks and renames it.
func (c *Client) fetchBlob(ctx context.Context, meta *FileMeta, blob string) error {
	inc := blob + ".incomplete"
	var h hash.Hash
	if len(meta.ETag) == 64 && isHex(meta.ETag) {
		h = sha256.New()
	}
	st := &dlState{h: h}
	retries := c.Retries
	if retries <= 0 {
		retries = 4
	}
	wait := c.RetryWait
	if wait <= 0 {
		wait = time.Second
	}
	for attempt := 0; ; attempt++ {
		err := c.fetchOnce(ctx, meta, inc, st)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transient(err) || attempt >= retries {
			if !transient(err) {
				return err
			}
			return fmt.Errorf("hub: download %s@%s: %s: gave up after %d attempts (the partial file %s is kept and will be resumed): %w",
				meta.Repo, meta.Revision, meta.File, attempt+1, inc, err)
		}
		c.log().Info("download interrupted, resuming", "file", meta.File, "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	fi, err := os.Stat(inc)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if meta.Size >= 0 && fi.Size() != meta.Size {
		os.Remove(inc)
		return fmt.Errorf("hub: %s@%s: %s: downloaded %d bytes, the hub said %d: %w", meta.Repo, meta.Revision, meta.File, fi.Size(), meta.Size, ErrChecksum)
	}
	var kind, got string
	switch {
	case h != nil:
		kind, got = "sha256", hex.EncodeToString(h.Sum(nil))
	case len(meta.ETag) == 40 && isHex(meta.ETag):
		kind = "git sha1"
		if got, err = gitSHA1File(inc); err != nil {
			return fmt.Errorf("hub: %w", err)
		}
	}
	if kind != "" && got != meta.ETag {
		os.Remove(inc)
		return fmt.Errorf("hub: %s@%s: %s: %s of the download is %s, the hub's etag is %s (file removed; try again): %w",
			meta.Repo, meta.Revision, meta.File, kind, got, meta.ETag, ErrChecksum)
	}
	if err := os.Chmod(inc, 0o644); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.Rename(inc, blob); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

type dlState struct {
	h      hash.Hash // nil when not hashing as we go
	hashed int64     // bytes of the .incomplete file fed to h
}

// errRetry marks a failure worth retrying.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

func transient(err error) bool {
	var r errRetry
	if errors.As(err, &r) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &oe)
}

// fetchOnce makes one GET, with a Range request when part of the file is there.
func (c *Client) fetchOnce(ctx context.Context, meta *FileMeta, inc string, st *dlState) error {
	f, err := os.OpenFile(inc, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if meta.Size >= 0 && have > meta.Size {
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("hub: %w", err)
		}
		have = 0
		st.reset()
	}
	if err := st.catchUp(f, have); err != nil {
		return err
	}
	if meta.Size >= 0 && have == meta.Size {
		return nil
	}
	req, err := c.newRequest(ctx, http.MethodGet, meta.Location)
	if err != nil {
		return err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.do(req, true)
	if err != nil {
		return errRetry{fmt.Errorf("hub: GET %s: %w", redact(req.URL), err)}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
		if !ok || start != have {
			return fmt.Errorf("hub: GET %s: asked for bytes from %d, got Content-Range %q", redact(req.URL), have, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 { // the server ignored the Range: start over
			if err := f.Truncate(0); err != nil {
				return fmt.Errorf("hub: %w", err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("hub: %w", err)
			}
			have = 0
			st.reset()
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// What we have is longer than the file, or stale: start over.
		f.Truncate(0)
		st.reset()
		return errRetry{fmt.Errorf("hub: GET %s: range from %d not satisfiable", redact(req.URL), have)}
	default:
		err := httpError(resp)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return errRetry{err}
		}
		return err
	}
	total := meta.Size
	if total < 0 && resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	var w io.Writer = f
	if st.h != nil {
		w = io.MultiWriter(f, st.h)
	}
	if c.Progress != nil {
		p := Progress{Repo: meta.Repo, File: meta.File, Done: have, Total: total}
		c.Progress(p)
		w = &progressWriter{w: w, done: have, fn: func(done int64) {
			p.Done = done
			c.Progress(p)
		}}
	}
	n, err := io.Copy(w, resp.Body)
	st.hashed += n
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errRetry{fmt.Errorf("hub: GET %s: after %d bytes: %w", redact(req.URL), have+n, err)}
	}
	if resp.ContentLength >= 0 && n < resp.ContentLength {
		return errRetry{fmt.Errorf("hub: GET %s: body ended after %d of %d bytes: %w", redact(req.URL), n, resp.ContentLength, io.ErrUnexpectedEOF)}
	}
	if meta.Size >= 0 && have+n < meta.Size {
		return errRetry{fmt.Errorf("hub: GET %s: got %d of %d bytes: %w", redact(req.URL), have+n, meta.Size, io.ErrUnexpectedEOF)}
	}
	return nil
}

func (st *dlState) reset() {
	if st.h != nil {
		st.h.Reset()
	}
	st.hashed = 0
}

// catchUp feeds the hash the bytes of f before have that it has not seen (a
// partial file left by an earlier process).
func (st *dlState) catchUp(f *os.File, have int64) error {
	if st.h == nil || st.hashed == have {
		return nil
	}
	if st.hashed > have {
		st.reset()
	}
	if _, err := io.Copy(st.h, io.NewSectionReader(f, st.hashed, have-st.hashed)); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	st.hashed = have
	return nil
}

func contentRangeStart(s string) (int64, bool) {
	s, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, false
	}
	a, _, ok := strings.Cut(s, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(a, 10, 64)
	return n, err == nil
}

func gitSHA1File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", fi.Size())
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// RepoInfo is the hub's listing of a repository at a revision.
type RepoInfo struct {
	Repo   string   `json:"repo"`
	Commit string   `json:"commit"`
	Files  []string `json:"files"`
}

// ListFiles asks the hub which files a revision has
// (GET <endpoint>/api/models/<repo>/revision/<revision>). In offline mode it
// lists the cached snapshot instead.
func (c *Client) ListFiles(ctx context.Context, repo, revision string) (*RepoInfo, error) {
	if revision == "" {
		revision = DefaultRevision
	}
	if c.Offline {
		commit, err := c.Cache().Commit(repo, revision)
		if err != nil {
			return nil, fmt.Errorf("hub: %s@%s is not in the cache %s; %s: %w", repo, revision, c.CacheDir, offlineNote("download it"), ErrOffline)
		}
		r, err := c.Cache().Repo(repo)
		if err != nil {
			return nil, err
		}
		for _, s := range r.Snapshots {
			if s.Commit == commit {
				return &RepoInfo{Repo: repo, Commit: commit, Files: s.Files}, nil
			}
		}
		return nil, fmt.Errorf("hub: %s@%s (commit %s) has no snapshot in the cache %s; %s: %w", repo, revision, commit, c.CacheDir, offlineNote("download it"), ErrOffline)
	}
	u := c.endpoint() + "/api/models/" + repo + "/revision/" + url.PathEscape(revision)
	req, err := c.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.do(req, false)
	if err != nil {
		return nil, fmt.Errorf("hub: list %s@%s: %w", repo, revision, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpError(resp)
	}
	var body struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("hub: list %s@%s: %w", repo, revision, err)
	}
	info := &RepoInfo{Repo: repo, Commit: body.SHA}
	for _, s := range body.Siblings {
		info.Files = append(info.Files, s.RFilename)
	}
	if IsCommit(body.SHA) {
		c.Cache().WriteRef(repo, revision, body.SHA)
	}
	return info, nil
}
