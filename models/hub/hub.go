// Package hub fetches model files from the Hugging Face Hub into the Hugging
// Face cache, in the layout huggingface_hub uses, so that files fetched by
// Python are reused here and the other way round:
//
//	<cache>/models--org--name/
//	    blobs/<etag>                     file contents, named by their sha256 (LFS) or git sha1
//	    refs/<revision>                  the commit a branch or tag pointed to when last resolved
//	    snapshots/<commit>/<path>        relative symlinks into blobs/
//	    .no_exist/<commit>/<path>        empty files marking paths the hub said do not exist
//	<cache>/.locks/models--org--name/<etag>.lock
//
// A file is resolved at <endpoint>/<org>/<name>/resolve/<revision>/<path>.
// A HEAD request gives the commit (X-Repo-Commit), the etag (X-Linked-Etag
// for LFS files, else ETag) and the size; the body is downloaded to
// blobs/<etag>.incomplete under an flock on the lock file, resumed with a
// Range request after an interruption, checked (size; sha256 for LFS files,
// git blob sha1 for others) and renamed into place.
//
// The environment is read as huggingface_hub reads it: HF_HOME, HF_HUB_CACHE,
// HF_ENDPOINT, HF_TOKEN (else the token file HF_TOKEN_PATH or HF_HOME/token)
// and HF_HUB_OFFLINE. The token is sent to the endpoint's host only, never to
// the host a download is redirected to.
package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// DefaultEndpoint is the Hugging Face Hub.
const DefaultEndpoint = "https://huggingface.co"

// DefaultRevision is the revision used when a reference names none.
const DefaultRevision = "main"

// Errors that callers test with errors.Is.
var (
	// ErrOffline: HF_HUB_OFFLINE (or Client.Offline) forbids the network and
	// the file is not in the cache.
	ErrOffline = errors.New("hub: offline mode and not in the cache")
	// ErrRepoNotFound: the repository does not exist, or is private or gated
	// and the token (if any) gives no access.
	ErrRepoNotFound = errors.New("hub: repository not found")
	// ErrRevisionNotFound: the repository has no such branch, tag or commit.
	ErrRevisionNotFound = errors.New("hub: revision not found")
	// ErrEntryNotFound: the revision has no such file. It wraps fs.ErrNotExist.
	ErrEntryNotFound = fmt.Errorf("hub: file not found: %w", fs.ErrNotExist)
	// ErrUnauthorized: the hub refused the request (401/403).
	ErrUnauthorized = errors.New("hub: unauthorized")
	// ErrChecksum: a downloaded file does not match its etag or size.
	ErrChecksum = errors.New("hub: checksum mismatch")
)

// Progress reports a download as it advances. Total is -1 when unknown.
type Progress struct {
	Repo  string
	File  string
	Done  int64
	Total int64
}

// Client fetches files from a hub into a cache folder. The zero value is not
// usable; start from FromEnv and override fields.
type Client struct {
	Endpoint string // e.g. https://huggingface.co (no trailing slash)
	Token    string // sent as "Authorization: Bearer <token>" to the endpoint's host only
	CacheDir string // the hub cache (…/huggingface/hub)
	Offline  bool   // never touch the network

	// HTTP is the client used for requests; nil means a default client
	// (redirects are handled by Client itself either way).
	HTTP *http.Client
	// Progress, when set, is called as a download advances.
	Progress func(Progress)
	// Logger receives debug lines (requests, cache hits); nil discards.
	Logger *slog.Logger
	// Retries is how many times a failed transfer (connection error,
	// truncated body, 5xx) is retried, resuming where it stopped; 0 means 4.
	Retries int
	// RetryWait is the pause before the first retry (doubling each time);
	// 0 means one second.
	RetryWait time.Duration
	// UserAgent is sent with every request.
	UserAgent string
}

// FromEnv returns a client configured from the environment as
// huggingface_hub configures itself.
func FromEnv() *Client {
	return &Client{
		Endpoint: EndpointFromEnv(),
		Token:    TokenFromEnv(),
		CacheDir: CacheDirFromEnv(),
		Offline:  OfflineFromEnv(),
	}
}

// HomeDir returns HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface.
func HomeDir() string {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".cache", "huggingface")
	}
	return filepath.Join(home, ".cache", "huggingface")
}

// CacheDirFromEnv returns HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE (its old
// name), else HomeDir()/hub.
func CacheDirFromEnv() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HUGGINGFACE_HUB_CACHE"); d != "" {
		return d
	}
	return filepath.Join(HomeDir(), "hub")
}

// EndpointFromEnv returns HF_ENDPOINT without a trailing slash, else
// DefaultEndpoint.
func EndpointFromEnv() string {
	if e := strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"); e != "" {
		return e
	}
	return DefaultEndpoint
}

// TokenFromEnv returns HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the
// contents of the token file (HF_TOKEN_PATH, else HomeDir()/token), else "".
func TokenFromEnv() string {
	for _, k := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(os.Getenv(k)); t != "" {
			return t
		}
	}
	p := os.Getenv("HF_TOKEN_PATH")
	if p == "" {
		p = filepath.Join(HomeDir(), "token")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// OfflineFromEnv reports whether HF_HUB_OFFLINE is set to a true value
// (1, ON, YES, TRUE, any case).
func OfflineFromEnv() bool {
	switch strings.ToUpper(strings.TrimSpace(os.Getenv("HF_HUB_OFFLINE"))) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// offlineWhy says, in errors, why a client stays off the network:
// "HF_HUB_OFFLINE is set" when it is, else "offline mode" (Client.Offline set
// by the program, which the environment is not blamed for).
func offlineWhy() string {
	if OfflineFromEnv() {
		return "HF_HUB_OFFLINE is set"
	}
	return "offline mode"
}

// offlineNote ends an error about something offline mode cannot get: why,
// and, when HF_HUB_OFFLINE is the reason, that unsetting it allows todo.
func offlineNote(todo string) string {
	if OfflineFromEnv() {
		return "HF_HUB_OFFLINE is set: unset it to " + todo
	}
	return "offline mode: not fetched"
}

// Ref is a parsed hub reference "org/name[@revision]".
type Ref struct {
	Repo     string // org/name
	Revision string // branch, tag or commit; "" means DefaultRevision
}

func (r Ref) String() string {
	if r.Revision == "" {
		return r.Repo
	}
	return r.Repo + "@" + r.Revision
}

// Rev returns the revision, or DefaultRevision when none was given.
func (r Ref) Rev() string {
	if r.Revision == "" {
		return DefaultRevision
	}
	return r.Revision
}

var (
	namePartRE = regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$`)
	revRE      = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_./-]*$`)
	commitRE   = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// IsCommit reports whether rev is a full commit hash (40 lowercase hex digits).
func IsCommit(rev string) bool { return commitRE.MatchString(rev) }

// ParseRef parses a hub reference, "org/name" or "org/name@revision". It is
// the one authority on what a hub reference is; callers that also accept
// directories look on disk first.
//
// org and name follow the hub's rules for repository ids: letters, digits,
// '_', '-' and '.', at most 96 characters, neither starting nor ending with
// '-' or '.', and no "--" or ".." (the cache folder models--org--name
// could not be read back otherwise). The revision is a branch, tag or
// commit, and may hold slashes (refs/pr/1, refs/convert/parquet), but no
// empty, "." or ".." element: it names a file under refs/ in the cache.
func ParseRef(s string) (Ref, error) {
	repo, rev, hasRev := strings.Cut(s, "@")
	org, name, ok := strings.Cut(repo, "/")
	if !ok || !validNamePart(org) || !validNamePart(name) {
		return Ref{}, fmt.Errorf("hub: %q is not a hub id of the form org/name[@revision] (org and name: letters, digits, '_', '-', '.', at most 96)", s)
	}
	if hasRev && (!revRE.MatchString(rev) || checkFile(rev) != nil) {
		return Ref{}, fmt.Errorf("hub: %q: bad revision %q (a branch, tag or commit, such as main, v1.0, refs/pr/1)", s, rev)
	}
	return Ref{Repo: repo, Revision: rev}, nil
}

func validNamePart(s string) bool {
	return len(s) <= 96 && namePartRE.MatchString(s) && !strings.Contains(s, "--") && !strings.Contains(s, "..")
}

// checkFile checks a path inside a repository: relative, slash-separated,
// no "." or ".." elements.
func checkFile(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || path.Clean(name) != name || name == "." ||
		strings.HasPrefix(name, "../") || name == ".." {
		return fmt.Errorf("hub: bad file name %q (a relative path inside the repository)", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." || el == "." {
			return fmt.Errorf("hub: bad file name %q (a relative path inside the repository)", name)
		}
	}
	return nil
}

func (c *Client) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c *Client) endpoint() string {
	if c.Endpoint == "" {
		return DefaultEndpoint
	}
	return strings.TrimRight(c.Endpoint, "/")
}

// ResolveURL returns <endpoint>/<repo>/resolve/<revision>/<file>, with the
// revision escaped as one path segment (refs/pr/1 → refs%2Fpr%2F1).
func (c *Client) ResolveURL(repo, revision, file string) string {
	segs := strings.Split(file, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return c.endpoint() + "/" + repo + "/resolve/" + url.PathEscape(revision) + "/" + strings.Join(segs, "/")
}

// Cache returns the client's cache.
func (c *Client) Cache() Cache { return Cache{Dir: c.CacheDir} }
