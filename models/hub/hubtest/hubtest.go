// Package hubtest is a fake Hugging Face Hub for tests: an httptest server
// answering resolve requests and the revision API as the hub does (HEAD with
// X-Repo-Commit, ETag or X-Linked-Etag/X-Linked-Size and a redirect for LFS
// files; X-Error-Code on errors), and a second server on another host name
// standing for the CDN that LFS downloads are redirected to. Faults can be
// injected per file: truncated bodies, wrong bytes, error statuses.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// File is one file of a fake repository.
type File struct {
	Data []byte
	LFS  bool // served through the CDN with X-Linked-Etag = sha256
}

// Repo is a fake repository: its commits' files and its branches.
type Repo struct {
	Commits  map[string]map[string]File // commit → path → file
	Branches map[string]string          // branch or tag → commit
	Token    string                     // when set, requests must carry "Bearer <Token>"
}

// Fault makes the server misbehave for one file.
type Fault struct {
	// TruncateAt cuts the body of the next TruncateTimes GETs after this many
	// bytes of the file (counted from the start of the file, so a resumed
	// request gets fewer).
	TruncateAt    int64
	TruncateTimes int
	// Corrupt serves these bytes instead of the file (headers still describe the real file).
	Corrupt []byte
	// Status answers the next StatusTimes GETs with this status.
	Status      int
	StatusTimes int
	// NoRange makes the server ignore Range headers (always 200 and the whole file).
	NoRange bool
}

// Server is a fake hub and its CDN.
type Server struct {
	Hub *httptest.Server
	CDN *httptest.Server
	// CDNHost is the CDN's base URL, with a host name other than the hub's.
	CDNBase string

	mu     sync.Mutex
	repos  map[string]*Repo
	faults map[string]*Fault // by path in the repo ("org/name:path")
	// Log of requests: method, host role ("hub"/"cdn"), path, Range and Authorization headers.
	reqs   []seqRequest
	seq    int
	active sync.WaitGroup // handlers running
}

// Request is one request the fake servers received.
type Request struct {
	Role          string // "hub" or "cdn"
	Method        string
	Path          string
	Range         string
	Authorization string
	Status        int
	Bytes         int64 // body bytes written
}

// New starts a fake hub with the given repositories, closed when the test ends.
func New(t testing.TB, repos map[string]*Repo) *Server {
	s := &Server{repos: repos, faults: map[string]*Fault{}}
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	u, _ := url.Parse(s.CDN.URL)
	// Another host name for the same address: the token must not follow a redirect to it.
	s.CDNBase = "http://localhost:" + u.Port()
	t.Cleanup(func() { s.Hub.Close(); s.CDN.Close() })
	return s
}

// URL is the hub endpoint (HF_ENDPOINT).
func (s *Server) URL() string { return s.Hub.URL }

// SetFault installs a fault for repo's file path.
func (s *Server) SetFault(repo, path string, f *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == nil {
		delete(s.faults, repo+":"+path)
		return
	}
	s.faults[repo+":"+path] = f
}

type seqRequest struct {
	seq int
	Request
}

// Requests returns the requests received so far, in arrival order, once the
// handlers still running have ended.
func (s *Server) Requests() []Request {
	s.active.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := append([]seqRequest(nil), s.reqs...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].seq < rs[j].seq })
	out := make([]Request, len(rs))
	for i, r := range rs {
		out[i] = r.Request
	}
	return out
}

// Reset forgets the requests received so far.
func (s *Server) Reset() {
	s.active.Wait() // a handler still ending belongs to what is forgotten
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
}

// SHA256 returns the hex sha256 of b (the etag of an LFS file).
func SHA256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// GitSHA1 returns the git blob sha1 of b (the etag of a file kept in git).
func GitSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// begin numbers a request as it arrives and returns the function that
// logs it (with its final status) when its handler ends. Requests lists the
// requests in arrival order, after in-flight handlers have ended: a handler
// cut short by a client that has already retried may end after the retry.
func (s *Server) begin(rec *Request) func() {
	s.active.Add(1)
	s.mu.Lock()
	seq := s.seq
	s.seq++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.reqs = append(s.reqs, seqRequest{seq, *rec})
		s.mu.Unlock()
		s.active.Done()
	}
}

type lookup struct {
	repo   string
	commit string
	path   string
	file   File
	status int
	code   string
}

// find resolves repo, revision and path; status != 0 on errors.
func (s *Server) find(r *http.Request, repoName, rev, path string) lookup {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := lookup{repo: repoName, path: path}
	repo, ok := s.repos[repoName]
	if !ok {
		l.status, l.code = http.StatusUnauthorized, "RepoNotFound"
		return l
	}
	if repo.Token != "" && r.Header.Get("Authorization") != "Bearer "+repo.Token {
		l.status, l.code = http.StatusUnauthorized, "RepoNotFound"
		return l
	}
	commit := rev
	if c, ok := repo.Branches[rev]; ok {
		commit = c
	}
	files, ok := repo.Commits[commit]
	if !ok {
		l.status, l.code = http.StatusNotFound, "RevisionNotFound"
		return l
	}
	l.commit = commit
	if path == "" {
		return l
	}
	f, ok := files[path]
	if !ok {
		l.status, l.code = http.StatusNotFound, "EntryNotFound"
		return l
	}
	l.file = f
	return l
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	rec := Request{Role: "hub", Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization")}
	defer s.begin(&rec)()
	fail := func(l lookup) {
		if l.commit != "" {
			w.Header().Set("X-Repo-Commit", l.commit)
		}
		w.Header().Set("X-Error-Code", l.code)
		w.Header().Set("X-Error-Message", l.code)
		w.WriteHeader(l.status)
		rec.Status = l.status
	}
	p := r.URL.EscapedPath()
	if rest, ok := strings.CutPrefix(p, "/api/models/"); ok {
		parts := strings.SplitN(rest, "/", 4) // org, name, "revision", rev
		if len(parts) != 4 || parts[2] != "revision" {
			http.NotFound(w, r)
			rec.Status = 404
			return
		}
		rev, _ := url.PathUnescape(parts[3])
		l := s.find(r, parts[0]+"/"+parts[1], rev, "")
		if l.status != 0 {
			fail(l)
			return
		}
		s.mu.Lock()
		var names []string
		for n := range s.repos[l.repo].Commits[l.commit] {
			names = append(names, n)
		}
		s.mu.Unlock()
		sort.Strings(names)
		type sib struct {
			RFilename string `json:"rfilename"`
		}
		body := struct {
			ID       string `json:"id"`
			SHA      string `json:"sha"`
			Siblings []sib  `json:"siblings"`
		}{ID: l.repo, SHA: l.commit}
		for _, n := range names {
			body.Siblings = append(body.Siblings, sib{n})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(body)
		rec.Status = 200
		return
	}
	// /org/name/resolve/rev/path...
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		rec.Status = 404
		return
	}
	rev, _ := url.PathUnescape(parts[3])
	path, _ := url.PathUnescape(parts[4])
	l := s.find(r, parts[0]+"/"+parts[1], rev, path)
	if l.status != 0 {
		fail(l)
		return
	}
	w.Header().Set("X-Repo-Commit", l.commit)
	if l.file.LFS {
		sum := SHA256(l.file.Data)
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(l.file.Data)))
		w.Header().Set("ETag", `"`+GitSHA1([]byte("pointer "+sum))+`"`)
		w.Header().Set("Location", s.CDNBase+"/blobs/"+sum+"?sig=secret&file="+url.QueryEscape(l.repo+":"+path))
		w.WriteHeader(http.StatusFound)
		rec.Status = http.StatusFound
		return
	}
	w.Header().Set("ETag", `"`+GitSHA1(l.file.Data)+`"`)
	rec.Status, rec.Bytes = s.serveBody(w, r, l.repo+":"+path, l.file.Data)
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	rec := Request{Role: "cdn", Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization")}
	defer s.begin(&rec)()
	sum, ok := strings.CutPrefix(r.URL.Path, "/blobs/")
	key := r.URL.Query().Get("file")
	if !ok || r.URL.Query().Get("sig") != "secret" {
		w.WriteHeader(http.StatusForbidden)
		rec.Status = 403
		return
	}
	var data []byte
	s.mu.Lock()
	for _, repo := range s.repos {
		for _, files := range repo.Commits {
			for _, f := range files {
				if f.LFS && SHA256(f.Data) == sum {
					data = f.Data
				}
			}
		}
	}
	s.mu.Unlock()
	if data == nil {
		w.WriteHeader(http.StatusNotFound)
		rec.Status = 404
		return
	}
	rec.Status, rec.Bytes = s.serveBody(w, r, key, data)
}

// serveBody writes data (or part of it for a Range request), applying faults.
func (s *Server) serveBody(w http.ResponseWriter, r *http.Request, key string, data []byte) (int, int64) {
	s.mu.Lock()
	f := s.faults[key]
	var status, truncate int64 = 0, -1
	var corrupt []byte
	noRange := false
	if f != nil && r.Method == http.MethodGet {
		if f.StatusTimes > 0 {
			f.StatusTimes--
			status = int64(f.Status)
		}
		if f.TruncateTimes > 0 {
			f.TruncateTimes--
			truncate = f.TruncateAt
		}
		corrupt = f.Corrupt
		noRange = f.NoRange
	}
	s.mu.Unlock()
	if status != 0 {
		w.WriteHeader(int(status))
		return int(status), 0
	}
	if corrupt != nil {
		data = corrupt
	}
	size := int64(len(data))
	start, end := int64(0), size-1
	code := http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" && !noRange {
		a, b, ok := parseRange(rg, size)
		if !ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return http.StatusRequestedRangeNotSatisfiable, 0
		}
		start, end, code = a, b, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, size))
	}
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Length", strconv.FormatInt(end-start+1, 10))
	w.WriteHeader(code)
	if r.Method == http.MethodHead {
		return code, 0
	}
	body := data[start : end+1]
	if truncate >= 0 {
		if cut := truncate - start; cut < int64(len(body)) {
			if cut < 0 {
				cut = 0
			}
			body = body[:cut]
		}
	}
	n, _ := w.Write(body)
	if int64(len(body)) < end-start+1 {
		// Close the connection mid-body: the client sees an unexpected EOF.
		if hj, ok := w.(http.Hijacker); ok {
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			conn, _, err := hj.Hijack()
			if err == nil {
				conn.Close()
			}
		}
	}
	return code, int64(n)
}

// parseRange parses a single "bytes=a-b" or "bytes=a-" range.
func parseRange(h string, size int64) (start, end int64, ok bool) {
	s, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(s, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	end = size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return 0, 0, false
		}
		if end > size-1 {
			end = size - 1
		}
	}
	return start, end, start < size
}
