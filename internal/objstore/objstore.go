// Package objstore reads and writes the object stores a batch job takes
// its images from and writes its shards to: s3:// (AWS and S3-compatible
// endpoints), gs:// and azblob:// URLs.
//
// It is built on gocloud.dev/blob, one portable API over the three
// vendors: listing page by page, streaming reads, atomic writes (an object
// appears when its upload completes, a multipart upload when it is
// completed), and the same error codes for every store. S3 is opened with
// the AWS SDK v2 client configured here rather than through gocloud's URL
// opener, so that the standard AWS_* environment and profiles apply
// (AWS_ENDPOINT_URL for S3-compatible servers, which then get path-style
// requests and no optional checksums), and retries are ours to set: the
// SDK's standard retryer (5xx, throttling and connection errors, with
// exponential backoff) with more attempts than its default, and a read that
// breaks off is resumed from where it stopped by a range request.
//
// gs:// is our own gocloud driver over the Cloud Storage JSON API and plain
// net/http, not Google's storage SDK: the SDK brings gRPC, xDS and Cloud
// Monitoring along, about a third of the binary, for the few requests a job
// makes (list, attributes, range reads, uploads, deletes). It uses
// Google's application default credentials (or none, with ?anonymous=true,
// for public buckets), retries throttling, server and connection errors as
// the S3 path does, uploads an object in one request or, past 16 MiB, by a
// resumable upload completed last, and talks to STORAGE_EMULATOR_HOST or
// ?endpoint= instead of storage.googleapis.com when told to. azblob:// uses
// gocloud's opener and the Azure SDK's credentials (AZURE_STORAGE_ACCOUNT
// and a key, a SAS token or Azure AD).
package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// schemes are the URL schemes of the stores this package opens.
var schemes = []string{"s3", "gs", "azblob"}

// IsURL reports whether s names an object-store location (s3://, gs://,
// azblob://).
func IsURL(s string) bool {
	for _, sc := range schemes {
		if strings.HasPrefix(s, sc+"://") {
			return true
		}
	}
	return false
}

// Location is an object or a prefix in a bucket.
type Location struct {
	Scheme string
	Bucket string
	Key    string     // no leading slash; a prefix ends in "/" or is ""
	Query  url.Values // the bucket's options (s3: endpoint, region, profile, use_path_style; gs: endpoint, anonymous)
}

// Parse reads an object-store URL: scheme://bucket/key[?options].
func Parse(s string) (Location, error) {
	if !IsURL(s) {
		return Location{}, fmt.Errorf("objstore: %q is not an s3://, gs:// or azblob:// URL", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("objstore: %q: %w", s, err)
	}
	if u.Host == "" {
		return Location{}, fmt.Errorf("objstore: %q names no bucket (want %s://BUCKET/PREFIX)", s, u.Scheme)
	}
	return Location{Scheme: u.Scheme, Bucket: u.Host, Key: strings.TrimPrefix(u.Path, "/"), Query: u.Query()}, nil
}

// String returns the location as a URL, without its options.
func (l Location) String() string { return l.Scheme + "://" + l.Bucket + "/" + l.Key }

// Child returns the location of name below l (a prefix).
func (l Location) Child(name string) Location {
	c := l
	c.Key = l.Dir() + name
	return c
}

// Dir returns l's key as a prefix: "" or ending in "/".
func (l Location) Dir() string {
	if l.Key == "" || strings.HasSuffix(l.Key, "/") {
		return l.Key
	}
	return l.Key + "/"
}

// Base returns the last element of l's key.
func (l Location) Base() string { return path.Base(strings.TrimSuffix(l.Key, "/")) }

func (l Location) bucketID() string { return l.Scheme + "://" + l.Bucket + "?" + l.Query.Encode() }

// Stores opens buckets as they are first named and keeps them open. One
// Stores serves any number of goroutines; Close closes every bucket.
type Stores struct {
	// Attempts bounds the tries of one request (the SDK's retries) and of
	// one read that breaks off; 0 means 8.
	Attempts int
	// MaxBackoff bounds the wait between tries; 0 means 10 s.
	MaxBackoff time.Duration

	mu      sync.Mutex
	buckets map[string]*blob.Bucket
	closed  bool
}

func (s *Stores) attempts() int {
	if s.Attempts > 0 {
		return s.Attempts
	}
	return 8
}

func (s *Stores) maxBackoff() time.Duration {
	if s.MaxBackoff > 0 {
		return s.MaxBackoff
	}
	return 10 * time.Second
}

// Close closes the buckets opened. It is safe to call more than once.
func (s *Stores) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, b := range s.buckets {
		errs = append(errs, b.Close())
	}
	s.buckets = nil
	s.closed = true
	return errors.Join(errs...)
}

// bucket returns l's bucket, opening it.
func (s *Stores) bucket(ctx context.Context, l Location) (*blob.Bucket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("objstore: closed")
	}
	id := l.bucketID()
	if b := s.buckets[id]; b != nil {
		return b, nil
	}
	var b *blob.Bucket
	var err error
	hint := "cannot open the bucket"
	switch l.Scheme {
	case "s3":
		b, err = s.openS3(ctx, l)
	case "gs":
		b, err = s.openGCS(ctx, l)
		hint = "cannot open the bucket: Google credentials come from GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login` (a public bucket: add ?anonymous=true)"
	default:
		u := url.URL{Scheme: l.Scheme, Host: l.Bucket, RawQuery: l.Query.Encode()}
		b, err = blob.OpenBucket(ctx, u.String())
		hint = "cannot open the container: set AZURE_STORAGE_ACCOUNT, and AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN (or sign in for Azure AD)"
	}
	if err != nil {
		return nil, &Error{Loc: Location{Scheme: l.Scheme, Bucket: l.Bucket}, Hint: hint, Err: err}
	}
	if s.buckets == nil {
		s.buckets = map[string]*blob.Bucket{}
	}
	s.buckets[id] = b
	return b, nil
}

// openS3 opens an S3 bucket with the AWS SDK's default configuration (the
// AWS_* environment, shared config and credentials files, profiles) and
// the URL's options: endpoint, region, profile, use_path_style.
func (s *Stores) openS3(ctx context.Context, l Location) (*blob.Bucket, error) {
	q := l.Query
	for k := range q {
		switch k {
		case "endpoint", "region", "profile", "use_path_style":
		default:
			return nil, fmt.Errorf("option %q in the URL: want endpoint, region, profile or use_path_style", k)
		}
	}
	// Many reads in flight to one endpoint: keep their connections.
	client := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = 64
	})
	loads := []func(*config.LoadOptions) error{
		config.WithHTTPClient(client),
		config.WithLogger(logging.Nop{}), // a library does not print
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = s.attempts()
				o.MaxBackoff = s.maxBackoff()
			})
		}),
	}
	if r := q.Get("region"); r != "" {
		loads = append(loads, config.WithRegion(r))
	}
	if p := q.Get("profile"); p != "" {
		loads = append(loads, config.WithSharedConfigProfile(p))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, err
	}
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // S3-compatible servers take any; AWS redirects
	}
	pathStyle := endpoint != "" // S3-compatible servers are addressed by path
	if v := q.Get("use_path_style"); v != "" {
		pathStyle = v == "true" || v == "1"
	}
	opts := &s3blob.Options{}
	if endpoint != "" {
		// Third-party servers do not all take the SDK's optional checksums.
		cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		opts.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
	})
	return s3blob.OpenBucket(ctx, s3c, l.Bucket, opts)
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// Object is one listed object.
type Object struct {
	Key  string // the whole key in its bucket
	Size int64
}

// List calls fn for every object under the prefix l.Dir() (or, when l
// names one object, l itself and whatever lies below l.Key+"/"), in key
// order, a page of up to 1,000 keys at a time: a listing is never held
// whole. fn's error stops it.
func (s *Stores) List(ctx context.Context, l Location, fn func(Object) error) error {
	b, err := s.bucket(ctx, l)
	if err != nil {
		return err
	}
	it := b.List(&blob.ListOptions{Prefix: l.Dir()})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return Explain(l, err)
		}
		if o.IsDir {
			continue
		}
		if err := fn(Object{Key: o.Key, Size: o.Size}); err != nil {
			return err
		}
	}
}

// Stat returns the size of the object l, and whether it exists.
func (s *Stores) Stat(ctx context.Context, l Location) (int64, bool, error) {
	b, err := s.bucket(ctx, l)
	if err != nil {
		return 0, false, err
	}
	a, err := b.Attributes(ctx, l.Key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, Explain(l, err)
	}
	return a.Size, true, nil
}

// Open returns a stream of the object l. A read that breaks off (a
// connection reset, a server restarting) is resumed where it stopped, by a
// range request, up to Attempts times with growing waits.
func (s *Stores) Open(ctx context.Context, l Location) (io.ReadCloser, error) {
	return s.open(ctx, l, false)
}

// OpenExisting is Open for an object known to exist (listed or found a
// moment ago): failing to open it, even with "not found" (a restarting
// server answers 404 for a while), is retried as a broken read is.
func (s *Stores) OpenExisting(ctx context.Context, l Location) (io.ReadCloser, error) {
	return s.open(ctx, l, true)
}

func (s *Stores) open(ctx context.Context, l Location, retry bool) (io.ReadCloser, error) {
	b, err := s.bucket(ctx, l)
	if err != nil {
		return nil, err
	}
	r := &reader{s: s, ctx: ctx, b: b, l: l}
	for {
		err := r.open()
		if err == nil {
			return r, nil
		}
		if !retry || !r.again(err) {
			return nil, err
		}
	}
}

// ReadAll reads the object l whole; more than limit bytes (when > 0) is an
// error.
func (s *Stores) ReadAll(ctx context.Context, l Location, limit int64) ([]byte, error) {
	r, err := s.Open(ctx, l)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if limit > 0 {
		if n := r.(*reader).size; n > limit {
			return nil, fmt.Errorf("%s: %d bytes, more than the %d allowed", l, n, limit)
		}
	}
	return io.ReadAll(r)
}

// Write writes data to the object l. The object appears whole when the
// upload completes, or not at all.
func (s *Stores) Write(ctx context.Context, l Location, data []byte) error {
	return s.Upload(ctx, l, bytes.NewReader(data))
}

// Upload streams r to the object l (a multipart upload for large objects,
// completed last, so the object appears whole or not at all).
func (s *Stores) Upload(ctx context.Context, l Location, r io.Reader) error {
	b, err := s.bucket(ctx, l)
	if err != nil {
		return err
	}
	if err := b.Upload(ctx, l.Key, r, &blob.WriterOptions{ContentType: contentType(l.Key)}); err != nil {
		return Explain(l, err)
	}
	return nil
}

// Delete removes the object l; one already gone is not an error.
func (s *Stores) Delete(ctx context.Context, l Location) error {
	b, err := s.bucket(ctx, l)
	if err != nil {
		return err
	}
	if err := b.Delete(ctx, l.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return Explain(l, err)
	}
	return nil
}

func contentType(key string) string {
	switch path.Ext(key) {
	case ".parquet":
		return "application/vnd.apache.parquet"
	case ".jsonl":
		return "application/jsonl"
	case ".json":
		return "application/json"
	}
	return "application/octet-stream"
}

// Explain wraps a store's error with the location and what its code means
// for the user.
func Explain(l Location, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var hint string
	code := gcerrors.Code(err)
	var status interface{ HTTPStatusCode() int }
	var api interface{ ErrorCode() string }
	switch {
	case strings.Contains(err.Error(), "get identity: get credentials"):
		code, hint = gcerrors.PermissionDenied, "no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
	case errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket":
		code, hint = gcerrors.NotFound, "no such bucket"
	case errors.As(err, &status) && (status.HTTPStatusCode() == 403 || status.HTTPStatusCode() == 401):
		code = gcerrors.PermissionDenied
	case errors.As(err, &status) && status.HTTPStatusCode() >= 500:
		code = gcerrors.Internal
	}
	switch code {
	case gcerrors.NotFound:
		if hint == "" {
			hint = "not found"
		}
	case gcerrors.PermissionDenied:
		if hint != "" {
			break
		}
		switch l.Scheme {
		case "gs":
			hint = "access denied: check Google's application default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login) and the bucket's permissions"
		case "azblob":
			hint = "access denied: check AZURE_STORAGE_ACCOUNT with its key, SAS token or Azure AD credentials, and the container's permissions"
		default:
			hint = "access denied: check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and the bucket's permissions"
		}
	case gcerrors.ResourceExhausted:
		hint = "the store is throttling requests (retried, still refused)"
	case gcerrors.Internal, gcerrors.DeadlineExceeded:
		hint = "the store did not answer (retried with backoff, still failing)"
	default:
		hint = "failed"
	}
	return &Error{Loc: l, Hint: hint, Err: err}
}

// Error is a failed request to a store.
type Error struct {
	Loc  Location
	Hint string
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %v", e.Loc, e.Hint, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// NotFound reports whether err says an object or bucket does not exist.
func NotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// reader streams one object, reopening it at its offset when a read fails.
type reader struct {
	s    *Stores
	ctx  context.Context
	b    *blob.Bucket
	l    Location
	r    *blob.Reader
	off  int64
	size int64
	try  int
}

func (r *reader) open() error {
	var err error
	r.r, err = r.b.NewRangeReader(r.ctx, r.l.Key, r.off, -1, nil)
	if err != nil {
		return Explain(r.l, err)
	}
	if r.off == 0 {
		r.size = r.r.Size()
	}
	return nil
}

func (r *reader) Read(p []byte) (int, error) {
	for {
		if r.r == nil {
			if err := r.open(); err != nil {
				if !r.again(err) {
					return 0, err
				}
				continue
			}
		}
		n, err := r.r.Read(p)
		r.off += int64(n)
		if n > 0 {
			r.try = 0 // each break gets its own tries
		}
		if err == nil || err == io.EOF {
			if err == io.EOF && r.off < r.size {
				err = io.ErrUnexpectedEOF
			} else {
				return n, err
			}
		}
		r.r.Close()
		r.r = nil
		if n > 0 {
			return n, nil // reopen on the next read
		}
		if !r.again(err) {
			return 0, &Error{Loc: r.l, Hint: fmt.Sprintf("the read broke off at byte %d and could not be resumed", r.off), Err: err}
		}
	}
}

// again waits before the next try, and reports false once the tries are
// spent, the context is done or err is not worth another.
func (r *reader) again(err error) bool {
	r.try++
	if r.try >= r.s.attempts() || r.ctx.Err() != nil {
		return false
	}
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied, gcerrors.InvalidArgument:
		return false
	} // not NotFound: the object was there a moment ago (a restarting server answers 404 for a while)
	wait := min(time.Duration(1<<min(r.try, 10))*200*time.Millisecond, r.s.maxBackoff())
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}

func (r *reader) Close() error {
	if r.r == nil {
		return nil
	}
	err := r.r.Close()
	r.r = nil
	return err
}

// URLReader reads objects named by URL, in standard-library types only: the
// object-store reader of the collection index (pipeline/index.Store, which
// it satisfies). Its zero value is not usable: use NewURLReader.
type URLReader struct {
	stores *Stores
}

// NewURLReader returns a URLReader over new Stores of default settings;
// Close closes them.
func NewURLReader() *URLReader { return &URLReader{stores: &Stores{}} }

// IsURL reports whether s names an object-store location.
func (r *URLReader) IsURL(s string) bool { return IsURL(s) }

// Parse checks the object-store URL s (Parse) and returns it as a URL: the
// bucket is its Host, the key its Path without the leading slash.
func (r *URLReader) Parse(s string) (*url.URL, error) {
	if _, err := Parse(s); err != nil {
		return nil, err
	}
	return url.Parse(s)
}

// List calls fn with the key and size of every object below the prefix
// (Stores.List).
func (r *URLReader) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	l, err := Parse(prefix)
	if err != nil {
		return err
	}
	return r.stores.List(ctx, l, func(o Object) error { return fn(o.Key, o.Size) })
}

// Open returns a stream of the object u names: Stores.OpenExisting when
// existing, else Stores.Open.
func (r *URLReader) Open(ctx context.Context, u string, existing bool) (io.ReadCloser, error) {
	l, err := Parse(u)
	if err != nil {
		return nil, err
	}
	if existing {
		return r.stores.OpenExisting(ctx, l)
	}
	return r.stores.Open(ctx, l)
}

// ReadAll reads the object u names whole (Stores.ReadAll).
func (r *URLReader) ReadAll(ctx context.Context, u string, limit int64) ([]byte, error) {
	l, err := Parse(u)
	if err != nil {
		return nil, err
	}
	return r.stores.ReadAll(ctx, l, limit)
}

// Close closes the reader's buckets.
func (r *URLReader) Close() error { return r.stores.Close() }
