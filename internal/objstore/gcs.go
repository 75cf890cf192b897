package objstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
)

// gcsEndpoint is Google Cloud Storage's address; STORAGE_EMULATOR_HOST or
// ?endpoint= name another (an emulator, a private endpoint).
const gcsEndpoint = "https://storage.googleapis.com"

const (
	// gcsChunk is the most an object takes in one upload request, and the
	// size of each request of a resumable upload (a multiple of 256 KiB, as
	// the API requires). It is also what a writer holds in memory.
	gcsChunk = 16 << 20
	// gcsPage is the number of keys asked for in one listing request (the
	// API's most).
	gcsPage = 1000
)

// openGCS opens a Google Cloud Storage bucket with the application default
// credentials, or none with ?anonymous=true (public buckets). The server is
// storage.googleapis.com, or the URL's ?endpoint=, or STORAGE_EMULATOR_HOST
// (an emulator: plain http unless it names a scheme, and no credentials),
// as Google's own clients do.
func (s *Stores) openGCS(ctx context.Context, l Location) (*blob.Bucket, error) {
	for k := range l.Query {
		if k != "anonymous" && k != "endpoint" {
			return nil, fmt.Errorf("option %q in the URL: want anonymous or endpoint", k)
		}
	}
	anonymous := l.Query.Get("anonymous") == "true"
	endpoint := l.Query.Get("endpoint")
	if endpoint == "" {
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			endpoint, anonymous = h, true
			if !strings.Contains(h, "://") {
				endpoint = "http://" + h
			}
		}
	}
	if endpoint == "" {
		endpoint = gcsEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want http(s)://HOST[:PORT]", endpoint)
	}
	endpoint = strings.TrimSuffix(endpoint, "/")

	// Many reads in flight to one endpoint: keep their connections.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	var client http.Client
	if anonymous {
		client = gcp.NewAnonymousHTTPClient(tr).Client
	} else {
		creds, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			return nil, err
		}
		c, err := gcp.NewHTTPClient(tr, gcp.CredentialsTokenSource(creds))
		if err != nil {
			return nil, err
		}
		client = c.Client
	}
	// The API answers a resumable upload's request with 308 and no
	// Location: an answer, not a redirect.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return blob.NewBucket(&gcsBucket{
		client:     &client,
		transport:  tr,
		name:       l.Bucket,
		api:        endpoint + "/storage/v1/b/" + escapeName(l.Bucket),
		upload:     endpoint + "/upload/storage/v1/b/" + escapeName(l.Bucket) + "/o",
		attempts:   s.attempts(),
		maxBackoff: s.maxBackoff(),
	}), nil
}

// gcsBucket is a gocloud blob driver for one Google Cloud Storage bucket,
// over the JSON API: listing page by page, attributes, range reads, uploads
// (one request, or a resumable upload in chunks for large objects; either
// way the object appears when the upload completes), rewrites and deletes.
// Requests that meet throttling (429), a server error (5xx, 408) or a
// broken connection are tried again, up to attempts times, with jittered
// exponential backoff up to maxBackoff. A read that breaks off mid-body is
// not resumed here: the Stores' reader does that above the driver.
type gcsBucket struct {
	client     *http.Client
	transport  *http.Transport
	name       string
	api        string // .../storage/v1/b/BUCKET
	upload     string // .../upload/storage/v1/b/BUCKET/o
	attempts   int
	maxBackoff time.Duration
}

// gcsError is a request the store refused (Status is its HTTP status) or
// that got no answer (Status 0, Err the cause).
type gcsError struct {
	Status  int
	Message string
	Err     error
	auth    bool // the credentials could not be had
}

func (e *gcsError) Error() string {
	if e.Status == 0 {
		return "objstore: gcs: " + e.Err.Error()
	}
	msg := fmt.Sprintf("objstore: gcs: %d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap returns the cause, but not io.EOF (a connection closed without an
// answer), which gocloud would take for the end of a read.
func (e *gcsError) Unwrap() error {
	if errors.Is(e.Err, io.EOF) {
		return nil
	}
	return e.Err
}

// HTTPStatusCode returns the response's HTTP status, 0 when there was none.
func (e *gcsError) HTTPStatusCode() int { return e.Status }

// retryable reports whether the request is worth another try.
func (e *gcsError) retryable() bool {
	if e.auth {
		return false
	}
	return e.Status == 0 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests ||
		(e.Status >= 500 && e.Status != http.StatusNotImplemented)
}

var errGCSUnimplemented = errors.New("objstore: gcs: not supported")

// ErrorCode maps the API's HTTP statuses to gocloud's codes.
func (b *gcsBucket) ErrorCode(err error) gcerrors.ErrorCode {
	if errors.Is(err, errGCSUnimplemented) {
		return gcerrors.Unimplemented
	}
	var e *gcsError
	if !errors.As(err, &e) {
		return gcerrors.Unknown
	}
	switch {
	case e.auth:
		return gcerrors.PermissionDenied
	case e.Status == http.StatusNotFound:
		return gcerrors.NotFound
	case e.Status == http.StatusPreconditionFailed:
		return gcerrors.FailedPrecondition
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return gcerrors.PermissionDenied
	case e.Status == http.StatusBadRequest || e.Status == http.StatusRequestedRangeNotSatisfiable:
		return gcerrors.InvalidArgument
	case e.Status == http.StatusConflict:
		return gcerrors.AlreadyExists
	case e.Status == http.StatusTooManyRequests:
		return gcerrors.ResourceExhausted
	case e.Status == http.StatusNotImplemented:
		return gcerrors.Unimplemented
	case e.retryable():
		return gcerrors.Internal // retried, still failing
	}
	return gcerrors.Unknown
}

func (b *gcsBucket) As(any) bool { return false }

func (b *gcsBucket) ErrorAs(error, any) bool { return false }

func (b *gcsBucket) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// SignedURL is not supported: a job reads with its own credentials.
func (b *gcsBucket) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", fmt.Errorf("%w: signed URLs", errGCSUnimplemented)
}

func noAs(any) bool { return false }

// escapeName percent-encodes every byte of s but the unreserved ones, so
// that an object's name, slashes and all, is one segment of a path.
func escapeName(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

func (b *gcsBucket) objectURL(key string) string { return b.api + "/o/" + escapeName(key) }

// send makes one try of a request. A status other than 2xx and 308 is
// returned as a *gcsError, the response's body read and closed.
func (b *gcsBucket) send(ctx context.Context, method, u string, header http.Header, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, fmt.Errorf("objstore: gcs: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e := &gcsError{Err: err}
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && (re.Response == nil || re.Response.StatusCode < 500) {
			e.auth = true
		}
		return nil, e
	}
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusPermanentRedirect {
		return resp, nil
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &gcsError{Status: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
	var api struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(msg, &api) == nil && api.Error.Message != "" {
		e.Message = api.Error.Message
	}
	if len(e.Message) > 500 {
		e.Message = e.Message[:500] + "…"
	}
	return nil, e
}

// do sends a request, trying again after throttling, server errors and
// broken connections.
func (b *gcsBucket) do(ctx context.Context, method, u string, header http.Header, body []byte) (*http.Response, error) {
	for try := 1; ; try++ {
		resp, err := b.send(ctx, method, u, header, body)
		if err == nil {
			return resp, nil
		}
		var e *gcsError
		if !errors.As(err, &e) || !e.retryable() || try >= b.attempts {
			return nil, err
		}
		if err := b.pause(ctx, try); err != nil {
			return nil, err
		}
	}
}

// pause waits before try+1: a random time up to 2^(try-1) seconds, at most
// maxBackoff.
func (b *gcsBucket) pause(ctx context.Context, try int) error {
	d := min(time.Second<<min(try-1, 20), b.maxBackoff)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(d) + 1)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decode reads a JSON answer into v.
func decode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return &gcsError{Err: fmt.Errorf("reading the answer: %w", err)}
	}
	return nil
}

// gcsObject is an object's resource in the API's answers.
type gcsObject struct {
	Name               string            `json:"name"`
	Size               int64             `json:"size,string"`
	ContentType        string            `json:"contentType"`
	ContentEncoding    string            `json:"contentEncoding"`
	ContentLanguage    string            `json:"contentLanguage"`
	ContentDisposition string            `json:"contentDisposition"`
	CacheControl       string            `json:"cacheControl"`
	Metadata           map[string]string `json:"metadata"`
	MD5Hash            string            `json:"md5Hash"`
	ETag               string            `json:"etag"`
	Updated            string            `json:"updated"`
	TimeCreated        string            `json:"timeCreated"`
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func parseMD5(s string) []byte {
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}

// ListPaged lists a page of keys, up to 1,000 unless asked for fewer.
func (b *gcsBucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if opts.BeforeList != nil {
		if err := opts.BeforeList(noAs); err != nil {
			return nil, err
		}
	}
	size := opts.PageSize
	if size <= 0 {
		size = gcsPage
	}
	q := url.Values{
		"maxResults": {strconv.Itoa(size)},
		"fields":     {"items(name,size,updated,md5Hash),prefixes,nextPageToken"},
	}
	if opts.Prefix != "" {
		q.Set("prefix", opts.Prefix)
	}
	if opts.Delimiter != "" {
		q.Set("delimiter", opts.Delimiter)
	}
	if len(opts.PageToken) > 0 {
		q.Set("pageToken", string(opts.PageToken))
	}
	resp, err := b.do(ctx, http.MethodGet, b.api+"/o?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, err
	}
	var page struct {
		Items         []gcsObject `json:"items"`
		Prefixes      []string    `json:"prefixes"`
		NextPageToken string      `json:"nextPageToken"`
	}
	if err := decode(resp, &page); err != nil {
		return nil, err
	}
	out := &driver.ListPage{Objects: make([]*driver.ListObject, 0, len(page.Items)+len(page.Prefixes))}
	for _, o := range page.Items {
		out.Objects = append(out.Objects, &driver.ListObject{Key: o.Name, Size: o.Size, ModTime: parseTime(o.Updated), MD5: parseMD5(o.MD5Hash)})
	}
	for _, p := range page.Prefixes {
		out.Objects = append(out.Objects, &driver.ListObject{Key: p, IsDir: true})
	}
	// The API answers objects and prefixes apart; one page covers one
	// stretch of keys.
	sort.SliceStable(out.Objects, func(i, j int) bool { return out.Objects[i].Key < out.Objects[j].Key })
	if page.NextPageToken != "" {
		out.NextPageToken = []byte(page.NextPageToken)
	}
	return out, nil
}

// Attributes reads the object's resource.
func (b *gcsBucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	resp, err := b.do(ctx, http.MethodGet, b.objectURL(key), nil, nil)
	if err != nil {
		return nil, err
	}
	var o gcsObject
	if err := decode(resp, &o); err != nil {
		return nil, err
	}
	return &driver.Attributes{
		CacheControl:       o.CacheControl,
		ContentDisposition: o.ContentDisposition,
		ContentEncoding:    o.ContentEncoding,
		ContentLanguage:    o.ContentLanguage,
		ContentType:        o.ContentType,
		Metadata:           o.Metadata,
		CreateTime:         parseTime(o.TimeCreated),
		ModTime:            parseTime(o.Updated),
		Size:               o.Size,
		MD5:                parseMD5(o.MD5Hash),
		ETag:               o.ETag,
	}, nil
}

// gcsReader streams an object's bytes.
type gcsReader struct {
	body  io.ReadCloser
	attrs driver.ReaderAttributes
}

func (r *gcsReader) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = &gcsError{Err: err}
	}
	return n, err
}

func (r *gcsReader) Close() error                         { return r.body.Close() }
func (r *gcsReader) Attributes() *driver.ReaderAttributes { return &r.attrs }
func (r *gcsReader) As(any) bool                          { return false }

// NewRangeReader streams length bytes (all, when negative) from offset; its
// Size is the whole object's.
func (b *gcsBucket) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	if opts.BeforeRead != nil {
		if err := opts.BeforeRead(noAs); err != nil {
			return nil, err
		}
	}
	if length == 0 {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, err
		}
		return &gcsReader{body: io.NopCloser(strings.NewReader("")), attrs: driver.ReaderAttributes{ContentType: a.ContentType, ModTime: a.ModTime, Size: a.Size}}, nil
	}
	h := http.Header{}
	switch {
	case length > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := b.do(ctx, http.MethodGet, b.objectURL(key)+"?alt=media", h, nil)
	if err != nil {
		return nil, err
	}
	r := &gcsReader{body: resp.Body, attrs: driver.ReaderAttributes{ContentType: resp.Header.Get("Content-Type")}}
	r.attrs.ModTime, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
	r.attrs.Size = -1
	if n, err := strconv.ParseInt(resp.Header.Get("X-Goog-Stored-Content-Length"), 10, 64); err == nil && resp.Header.Get("X-Goog-Stored-Content-Encoding") != "gzip" {
		r.attrs.Size = n
	} else if _, total, ok := strings.Cut(resp.Header.Get("Content-Range"), "/"); ok {
		if n, err := strconv.ParseInt(total, 10, 64); err == nil {
			r.attrs.Size = n
		}
	}
	if resp.StatusCode == http.StatusOK {
		if r.attrs.Size < 0 && !resp.Uncompressed {
			r.attrs.Size = resp.ContentLength
		}
		if offset > 0 || length > 0 { // the range was not honoured (a compressed object): cut it out
			if _, err := io.CopyN(io.Discard, resp.Body, offset); err != nil && err != io.EOF {
				resp.Body.Close()
				return nil, &gcsError{Err: err}
			}
			if length > 0 {
				r.body = struct {
					io.Reader
					io.Closer
				}{io.LimitReader(resp.Body, length), resp.Body}
			}
		}
	}
	return r, nil
}

// gcsMetadata is the resource of an object being uploaded.
type gcsMetadata struct {
	Name               string            `json:"name"`
	ContentType        string            `json:"contentType,omitempty"`
	ContentEncoding    string            `json:"contentEncoding,omitempty"`
	ContentLanguage    string            `json:"contentLanguage,omitempty"`
	ContentDisposition string            `json:"contentDisposition,omitempty"`
	CacheControl       string            `json:"cacheControl,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	MD5Hash            string            `json:"md5Hash,omitempty"`
}

// NewTypedWriter returns a writer whose object appears when it is closed.
func (b *gcsBucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	if opts.BeforeWrite != nil {
		if err := opts.BeforeWrite(noAs); err != nil {
			return nil, err
		}
	}
	md := gcsMetadata{
		Name: key, ContentType: contentType,
		ContentEncoding: opts.ContentEncoding, ContentLanguage: opts.ContentLanguage,
		ContentDisposition: opts.ContentDisposition, CacheControl: opts.CacheControl,
		Metadata: opts.Metadata,
	}
	if len(opts.ContentMD5) > 0 {
		md.MD5Hash = base64.StdEncoding.EncodeToString(opts.ContentMD5)
	}
	meta, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("objstore: gcs: %w", err)
	}
	q := url.Values{"name": {key}}
	if opts.IfNotExist {
		q.Set("ifGenerationMatch", "0")
	}
	chunk := gcsChunk
	if opts.BufferSize > 0 {
		chunk = opts.BufferSize
	}
	chunk = max((chunk+gcsQuantum-1)/gcsQuantum*gcsQuantum, gcsQuantum)
	return &gcsWriter{b: b, ctx: ctx, contentType: contentType, meta: meta, query: q, chunk: chunk}, nil
}

// gcsQuantum is what every request of a resumable upload but the last
// must be a multiple of.
const gcsQuantum = 256 << 10

// gcsWriter uploads one object. It holds up to a chunk of bytes: an object
// that fits is uploaded in one request at Close; a larger one by a resumable
// upload, a chunk per request, the last sent at Close. Either way the
// object appears only then: a writer that fails or whose context ends
// leaves nothing (a resumable upload begun is cancelled).
type gcsWriter struct {
	b           *gcsBucket
	ctx         context.Context
	contentType string
	meta        []byte
	query       url.Values
	chunk       int

	buf     []byte // the bytes from off on, not yet held by the server
	off     int64
	session string // the resumable upload's URL, once begun
	err     error
}

func (w *gcsWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.err = err
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		take := min(w.chunk+1-len(w.buf), len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		// A chunk goes once a byte more is had: the last request
		// carries at least one.
		if len(w.buf) > w.chunk {
			if err := w.put(false); err != nil {
				w.err = err
				return 0, err
			}
		}
	}
	return n, nil
}

// Upload writes r's bytes; a failure to read them fails the upload, which
// Close then abandons.
func (w *gcsWriter) Upload(r io.Reader) error {
	_, err := io.Copy(struct{ io.Writer }{w}, r)
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

func (w *gcsWriter) Close() error {
	if w.err == nil {
		w.err = w.ctx.Err()
	}
	if w.err != nil {
		w.abandon()
		return w.err
	}
	var err error
	if w.session == "" {
		err = w.single()
	} else {
		err = w.put(true)
	}
	if err != nil {
		w.abandon()
	}
	w.buf = nil
	return err
}

// single uploads the whole object in one multipart request: its resource,
// then its bytes.
func (w *gcsWriter) single() error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/json; charset=UTF-8"}})
	part.Write(w.meta)
	ct := w.contentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	part, _ = mw.CreatePart(textproto.MIMEHeader{"Content-Type": {ct}})
	part.Write(w.buf)
	mw.Close()
	q := url.Values{"uploadType": {"multipart"}}
	for k, v := range w.query {
		q[k] = v
	}
	h := http.Header{"Content-Type": {"multipart/related; boundary=" + mw.Boundary()}}
	resp, err := w.b.do(w.ctx, http.MethodPost, w.b.upload+"?"+q.Encode(), h, body.Bytes())
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// begin starts a resumable upload.
func (w *gcsWriter) begin() error {
	q := url.Values{"uploadType": {"resumable"}}
	for k, v := range w.query {
		q[k] = v
	}
	h := http.Header{"Content-Type": {"application/json; charset=UTF-8"}}
	if w.contentType != "" {
		h.Set("X-Upload-Content-Type", w.contentType)
	}
	resp, err := w.b.do(w.ctx, http.MethodPost, w.b.upload+"?"+q.Encode(), h, w.meta)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	w.session = resp.Header.Get("Location")
	if w.session == "" {
		return &gcsError{Status: resp.StatusCode, Message: "a resumable upload began with no session URL"}
	}
	return nil
}

// put sends a chunk of the resumable upload (beginning it if need be), or
// with last the rest, which completes it. A request that fails is followed
// by asking the server how much it holds, and the upload goes on from
// there.
func (w *gcsWriter) put(last bool) error {
	if w.session == "" {
		if err := w.begin(); err != nil {
			return err
		}
	}
	n := min(w.chunk, len(w.buf))
	if last {
		n = len(w.buf)
	}
	end := w.off + int64(n) // the bytes [off, end) are to be held
	total := "*"
	if last {
		total = strconv.FormatInt(end, 10)
	}
	for try := 1; ; try++ {
		rng := "bytes */" + total // nothing left to send: complete, or ask
		if n > 0 {
			rng = fmt.Sprintf("bytes %d-%d/%s", w.off, end-1, total)
		}
		resp, err := w.b.send(w.ctx, http.MethodPut, w.session, http.Header{"Content-Range": {rng}}, w.buf[:n:n])
		var e *gcsError
		if err != nil && (!errors.As(err, &e) || !e.retryable() || try >= w.b.attempts) {
			return err
		}
		if err != nil {
			if err := w.b.pause(w.ctx, try); err != nil {
				return err
			}
			// How much does the server hold?
			resp, err = w.b.do(w.ctx, http.MethodPut, w.session, http.Header{"Content-Range": {"bytes */" + total}}, []byte{})
			if err != nil {
				return err
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusPermanentRedirect && resp.Header.Get("X-Http-Status-Code-Override") != "308" {
			if !last {
				return &gcsError{Status: resp.StatusCode, Message: "the upload completed before its last request"}
			}
			w.off, w.buf = end, w.buf[:0]
			return nil
		}
		held := int64(0)
		if r := resp.Header.Get("Range"); r != "" {
			_, hi, ok := strings.Cut(r, "-")
			v, err := strconv.ParseInt(hi, 10, 64)
			if !ok || err != nil {
				return &gcsError{Status: resp.StatusCode, Message: fmt.Sprintf("a resumable upload answered the range %q", r)}
			}
			held = v + 1
		}
		if held < w.off || held > end {
			return &gcsError{Status: resp.StatusCode, Message: fmt.Sprintf("the server holds %d bytes of an upload at %d-%d", held, w.off, end)}
		}
		if held > w.off {
			try = 0 // progress: what is left gets fresh tries
		}
		w.buf = w.buf[:copy(w.buf, w.buf[held-w.off:])]
		n -= int(held - w.off)
		w.off = held
		if n == 0 && !last {
			return nil
		}
	}
}

// abandon cancels a resumable upload begun, so that it leaves nothing.
func (w *gcsWriter) abandon() {
	if w.session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
	defer cancel()
	if resp, err := w.b.send(ctx, http.MethodDelete, w.session, nil, nil); err == nil {
		resp.Body.Close()
	}
	w.session = ""
}

// Copy rewrites srcKey to dstKey, in as many requests as the server asks.
func (b *gcsBucket) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	if opts.BeforeCopy != nil {
		if err := opts.BeforeCopy(noAs); err != nil {
			return err
		}
	}
	u := b.objectURL(srcKey) + "/rewriteTo/b/" + escapeName(b.name) + "/o/" + escapeName(dstKey)
	h := http.Header{"Content-Type": {"application/json"}}
	token := ""
	for {
		q := url.Values{}
		if token != "" {
			q.Set("rewriteToken", token)
		}
		resp, err := b.do(ctx, http.MethodPost, u+"?"+q.Encode(), h, []byte("{}"))
		if err != nil {
			return err
		}
		var r struct {
			Done         bool   `json:"done"`
			RewriteToken string `json:"rewriteToken"`
		}
		if err := decode(resp, &r); err != nil {
			return err
		}
		if r.Done {
			return nil
		}
		if r.RewriteToken == "" {
			return &gcsError{Status: resp.StatusCode, Message: "a rewrite not done gave no token to go on"}
		}
		token = r.RewriteToken
	}
}

// Delete removes the object.
func (b *gcsBucket) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	if opts.BeforeDelete != nil {
		if err := opts.BeforeDelete(noAs); err != nil {
			return err
		}
	}
	resp, err := b.do(ctx, http.MethodDelete, b.objectURL(key), nil, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}
