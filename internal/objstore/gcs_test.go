package objstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// fakeGCS is a Cloud Storage JSON API server (fake-gcs-server) behind a
// front that counts the requests and can answer some itself.
type fakeGCS struct {
	*httptest.Server
	gcs *fakestorage.Server

	mu   sync.Mutex
	seen []string // "METHOD path?query [Range|Content-Range]" of each request
	// hook, when set, may answer a request itself (returning true).
	hook func(w http.ResponseWriter, r *http.Request) bool
}

func startGCS(t *testing.T, buckets ...string) *fakeGCS {
	t.Helper()
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", NoListener: true, Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGCS{gcs: gcs}
	h := gcs.HTTPHandler()
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Range")+r.Header.Get("Content-Range")))
		hook := f.hook
		f.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { f.Close(); gcs.Stop() })
	for _, b := range buckets {
		gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	return f
}

// loc is a gs:// location on the server.
func (f *fakeGCS) loc(t *testing.T, s string) Location {
	t.Helper()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(s, "gs://"), "/")
	l := Location{Scheme: "gs", Bucket: bucket, Key: key}
	l.Query = url.Values{"endpoint": {f.URL}, "anonymous": {"true"}}
	return l
}

// requests returns the requests seen that contain all of parts, and
// forgets every request seen.
func (f *fakeGCS) requests(parts ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
next:
	for _, s := range f.seen {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				continue next
			}
		}
		out = append(out, s)
	}
	f.seen = nil
	return out
}

func (f *fakeGCS) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestGCSList lists more keys than a page holds (several pages), by pages
// of a size asked for, and one level of a tree with a delimiter, names with
// spaces, non-ASCII letters and URL metacharacters among them.
func TestGCSList(t *testing.T) {
	f := startGCS(t, "data")
	ctx := context.Background()
	st := &Stores{}
	defer st.Close()
	base := f.loc(t, "gs://data/many/")
	var want []string
	for i := range 1105 {
		k := fmt.Sprintf("many/k%05d.bin", i)
		want = append(want, k)
		if err := st.Write(ctx, base.Child(k[len("many/"):]), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	f.requests()
	var got []string
	err := st.List(ctx, base, func(o Object) error {
		if o.Size != int64(len(o.Key)) {
			t.Errorf("%s: size %d, want %d", o.Key, o.Size, len(o.Key))
		}
		got = append(got, o.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("listed %d keys (first %q), want %d in order", len(got), got[:min(3, len(got))], len(want))
	}
	if n := len(f.requests("GET /storage/v1/b/data/o?", "maxResults=1000")); n != 2 {
		t.Errorf("%d listing requests for 1,105 keys, want 2 pages of 1,000", n)
	}

	// Pages of 250.
	b, err := st.bucket(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	pages := 0
	for tok := blob.FirstPageToken; ; pages++ {
		objs, next, err := b.ListPage(ctx, tok, 250, &blob.ListOptions{Prefix: "many/"})
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) > 250 {
			t.Errorf("a page of %d, asked for 250", len(objs))
		}
		for _, o := range objs {
			got = append(got, o.Key)
		}
		if next == nil {
			break
		}
		tok = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 4 {
		t.Errorf("pages of 250: %d keys in %d pages after the first, want %d in 4", len(got), pages, len(want))
	}

	// A tree, one level at a time.
	tree := []string{"tree/a.txt", "tree/b/c.txt", "tree/b/d/e.txt", "tree/f g+h%?#&=.txt", "tree/日本/x", "tree2/no"}
	for _, k := range tree {
		if err := st.Write(ctx, f.loc(t, "gs://data/"+k), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	level := func(prefix string) []string {
		t.Helper()
		var out []string
		it := b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			s := o.Key
			if o.IsDir {
				s += " (dir)"
			}
			out = append(out, s)
		}
	}
	for prefix, want := range map[string]string{
		"tree/":   "tree/a.txt,tree/b/ (dir),tree/f g+h%?#&=.txt,tree/日本/ (dir)",
		"tree/b/": "tree/b/c.txt,tree/b/d/ (dir)",
		"":        "many/ (dir),tree/ (dir),tree2/ (dir)",
	} {
		if got := strings.Join(level(prefix), ","); got != want {
			t.Errorf("level %q: %s\nwant %s", prefix, got, want)
		}
	}
	// Stores.List: all below, not the sibling tree2/.
	got = got[:0]
	st.List(ctx, f.loc(t, "gs://data/tree"), func(o Object) error { got = append(got, o.Key); return nil })
	if w := strings.Join(tree[:5], ","); strings.Join(got, ",") != w {
		t.Errorf("List(tree) = %q, want %q", got, w)
	}
}

// TestGCSReadWrite writes, stats, reads whole, in ranges and as a stream,
// copies and deletes objects, names with URL metacharacters among them,
// and reads "not found" as NotFound.
func TestGCSReadWrite(t *testing.T) {
	f := startGCS(t, "data")
	ctx := context.Background()
	st := &Stores{}
	defer st.Close()
	data := randomBytes(3<<20 + 12345)
	l := f.loc(t, "gs://data/dir/ein schönes Bild 日本 +%?#&=.parquet")
	if err := st.Write(ctx, l, data); err != nil {
		t.Fatal(err)
	}
	if n, ok, err := st.Stat(ctx, l); err != nil || !ok || n != int64(len(data)) {
		t.Fatalf("Stat = %d, %v, %v; want %d, true", n, ok, err, len(data))
	}
	b, err := st.bucket(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.Attributes(ctx, l.Key)
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(data)
	if a.Size != int64(len(data)) || a.ContentType != "application/vnd.apache.parquet" || !bytes.Equal(a.MD5, sum[:]) || a.ModTime.IsZero() {
		t.Errorf("attributes: size %d, type %q, md5 %x, mod time %v; want %d, application/vnd.apache.parquet, %x", a.Size, a.ContentType, a.MD5, a.ModTime, len(data), sum)
	}

	got, err := st.ReadAll(ctx, l, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	if _, err := st.ReadAll(ctx, l, 1000); err == nil {
		t.Error("ReadAll over its limit took it")
	}
	// A stream, read a little at a time.
	r, err := st.Open(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	var streamed bytes.Buffer
	buf := make([]byte, 7777)
	for {
		n, err := r.Read(buf)
		streamed.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	if !bytes.Equal(streamed.Bytes(), data) {
		t.Errorf("streamed %d bytes, not the %d written", streamed.Len(), len(data))
	}
	if n := len(f.requests("alt=media")); n != 3 {
		t.Errorf("%d reads for 3 opens", n)
	}

	for _, c := range []struct{ off, n int64 }{{0, 10}, {1000, 5000}, {int64(len(data)) - 10, -1}, {int64(len(data)) - 10, 100}, {5, 0}, {2 << 20, -1}} {
		rr, err := b.NewRangeReader(ctx, l.Key, c.off, c.n, nil)
		if err != nil {
			t.Fatalf("range %d+%d: %v", c.off, c.n, err)
		}
		got, err := io.ReadAll(rr)
		rr.Close()
		end := int64(len(data))
		if c.n >= 0 {
			end = min(end, c.off+c.n)
		}
		if err != nil || !bytes.Equal(got, data[c.off:end]) || rr.Size() != int64(len(data)) {
			t.Errorf("range %d+%d: %d bytes (size %d), %v; want bytes %d-%d of %d", c.off, c.n, len(got), rr.Size(), err, c.off, end, len(data))
		}
	}
	if rs := f.requests("bytes=1000-5999"); len(rs) != 1 {
		t.Errorf("the range 1000+5000 asked as %q", rs)
	}

	// Copy, then delete.
	if err := b.Copy(ctx, "copy/x.bin", l.Key, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := st.ReadAll(ctx, f.loc(t, "gs://data/copy/x.bin"), 0); err != nil || !bytes.Equal(got, data) {
		t.Errorf("copy: %d bytes, %v", len(got), err)
	}
	if err := st.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Stat(ctx, l); ok || err != nil {
		t.Errorf("deleted, Stat: %v, %v", ok, err)
	}
	if err := st.Delete(ctx, l); err != nil {
		t.Errorf("deleting a deleted object: %v", err)
	}

	// Not found.
	if _, err := st.ReadAll(ctx, l, 0); !NotFound(err) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("reading a deleted object: %v; want not found", err)
	}
	if _, err := b.Attributes(ctx, l.Key); gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("attributes of a deleted object: %v", err)
	}
	if err := b.Delete(ctx, l.Key); gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("driver Delete of a deleted object: %v", err)
	}
	if err := b.Copy(ctx, "copy/y", l.Key, nil); gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("copy of a deleted object: %v", err)
	}
	nb := f.loc(t, "gs://nobucket/x")
	if _, err := st.ReadAll(ctx, nb, 0); !NotFound(err) {
		t.Errorf("reading from no bucket: %v; want not found", err)
	}
	if err := st.List(ctx, nb, func(Object) error { return nil }); !NotFound(err) {
		t.Errorf("listing no bucket: %v; want not found", err)
	}
	if _, err := b.SignedURL(ctx, "x", nil); gcerrors.Code(err) != gcerrors.Unimplemented {
		t.Errorf("SignedURL: %v; want Unimplemented", err)
	}
}

// failingReader gives n bytes, then an error.
type failingReader struct{ n int }

var errSource = errors.New("the source broke")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errSource
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

// TestGCSAtomicUpload checks that an object appears only when its upload
// completes, in one request or in several (a resumable upload), and that an
// upload that fails or is cancelled leaves nothing, and an older object
// whole.
func TestGCSAtomicUpload(t *testing.T) {
	f := startGCS(t, "data")
	ctx := context.Background()
	st := &Stores{}
	defer st.Close()
	l := f.loc(t, "gs://data/up/")
	b, err := st.bucket(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	absent := func(key string) {
		t.Helper()
		if _, err := b.Attributes(ctx, key); gcerrors.Code(err) != gcerrors.NotFound {
			t.Errorf("%s: %v; want it absent", key, err)
		}
		objs, _, err := b.ListPage(ctx, blob.FirstPageToken, 100, &blob.ListOptions{Prefix: key})
		if err != nil || len(objs) != 0 {
			t.Errorf("%s: listed %d, %v; want none", key, len(objs), err)
		}
	}

	for _, c := range []struct {
		name   string
		size   int
		buffer int
		resume bool
	}{
		{"small", 1000, 0, false},
		{"empty", 0, 0, false},
		{"chunked", 1<<20 + 17, 256 << 10, true}, // 4 chunks and a byte
		{"exact", 512 << 10, 256 << 10, true},    // 2 chunks, the last sent at Close
		{"one-request", 3 << 20, 0, false},       // under the 16 MiB default
	} {
		key := "up/" + c.name + ".jsonl"
		data := randomBytes(c.size)
		w, err := b.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/jsonl", BufferSize: c.buffer})
		if err != nil {
			t.Fatal(err)
		}
		for p := data; len(p) > 0; {
			n := min(len(p), 100_000)
			if _, err := w.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		absent(key)
		if err := w.Close(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := st.ReadAll(ctx, l.Child(c.name+".jsonl"), 0)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: read %d bytes, %v; want the %d written", c.name, len(got), err, len(data))
		}
		rs := f.requests("uploadType=resumable")
		if c.resume && len(rs) < 2 || !c.resume && len(rs) != 0 {
			t.Errorf("%s: %d resumable upload requests", c.name, len(rs))
		}
		if c.name == "chunked" {
			var ranges []string
			for _, r := range rs {
				if _, cr, ok := strings.Cut(r, " bytes "); ok {
					ranges = append(ranges, cr)
				}
			}
			if got, want := strings.Join(ranges, ","), "0-262143/*,262144-524287/*,524288-786431/*,786432-1048575/*,1048576-1048592/1048593"; got != want {
				t.Errorf("%s: the chunks sent %s\nwant %s", c.name, got, want)
			}
		}
		if c.name == "small" {
			if a, err := b.Attributes(ctx, key); err != nil || a.ContentType != "application/jsonl" {
				t.Errorf("%s: content type %v, %v", c.name, a, err)
			}
		}
	}

	// An older object stays whole under failed and cancelled uploads.
	old := []byte("the older object")
	if err := st.Write(ctx, l.Child("keep.bin"), old); err != nil {
		t.Fatal(err)
	}
	// A source that breaks: a single request never sent, a resumable
	// upload begun and cancelled.
	if err := st.Upload(ctx, l.Child("keep.bin"), &failingReader{n: 100_000}); !errors.Is(err, errSource) {
		t.Errorf("an upload whose source broke: %v", err)
	}
	if err := st.Upload(ctx, l.Child("broken.bin"), &failingReader{n: 100_000}); !errors.Is(err, errSource) {
		t.Errorf("an upload whose source broke: %v", err)
	}
	err = b.Upload(ctx, "up/keep.bin", &failingReader{n: 1 << 20}, &blob.WriterOptions{ContentType: "application/octet-stream", BufferSize: 256 << 10})
	if !errors.Is(err, errSource) {
		t.Errorf("a resumable upload whose source broke: %v", err)
	}
	if rs := f.requests("DELETE /upload/"); len(rs) != 1 {
		t.Errorf("the broken resumable upload cancelled by %q; want one DELETE", rs)
	}
	// A context cancelled mid-upload.
	for _, buffer := range []int{0, 256 << 10} {
		cctx, cancel := context.WithCancel(ctx)
		w, err := b.NewWriter(cctx, "up/keep.bin", &blob.WriterOptions{BufferSize: buffer})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(randomBytes(1 << 20))
		cancel()
		if err := w.Close(); !errors.Is(err, context.Canceled) {
			t.Errorf("buffer %d: a cancelled upload closed with %v; want context.Canceled", buffer, err)
		}
		w, _ = b.NewWriter(cctx, "up/cancelled.bin", &blob.WriterOptions{BufferSize: buffer})
		w.Write(randomBytes(1 << 20))
		if err := w.Close(); !errors.Is(err, context.Canceled) {
			t.Errorf("buffer %d: an upload on a done context closed with %v", buffer, err)
		}
	}
	absent("up/broken.bin")
	absent("up/cancelled.bin")
	if got, err := st.ReadAll(ctx, l.Child("keep.bin"), 0); err != nil || !bytes.Equal(got, old) {
		t.Errorf("the older object after failed uploads: %.40q (%d bytes), %v; want %q", got, len(got), err, old)
	}

	// IfNotExist: a second writer loses.
	if err := b.WriteAll(ctx, "up/once", []byte("1"), &blob.WriterOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAll(ctx, "up/once", []byte("2"), &blob.WriterOptions{IfNotExist: true}); gcerrors.Code(err) != gcerrors.FailedPrecondition {
		t.Errorf("overwriting with IfNotExist: %v; want FailedPrecondition", err)
	}
}

// TestGCSRetries answers requests with throttling, server errors and
// broken connections: they are tried again with backoff, up to Attempts,
// and a read that breaks off mid-body resumes where it stopped. Refusals
// are not tried again.
func TestGCSRetries(t *testing.T) {
	f := startGCS(t, "data")
	ctx := context.Background()
	st := &Stores{Attempts: 4, MaxBackoff: 5 * time.Millisecond}
	defer st.Close()
	data := randomBytes(1 << 20)
	l := f.loc(t, "gs://data/r/x.bin")
	var mu sync.Mutex
	fails := map[string]int{} // request kind → failures left
	status := 503
	kind := func(r *http.Request) string {
		switch {
		case strings.HasPrefix(r.URL.Path, "/upload/"):
			return "upload"
		case r.URL.Query().Get("alt") == "media":
			return "read"
		case strings.HasSuffix(r.URL.Path, "/o"):
			return "list"
		case r.Method == http.MethodDelete:
			return "delete"
		}
		return "attrs"
	}
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		k := kind(r)
		if fails[k] > 0 {
			fails[k]--
			if status == 0 { // a connection that drops
				c, _, _ := w.(http.Hijacker).Hijack()
				c.Close()
				return true
			}
			http.Error(w, `{"error":{"message":"try later"}}`, status)
			return true
		}
		return false
	})
	set := func(s int, kinds map[string]int) {
		mu.Lock()
		status = s
		fails = kinds
		mu.Unlock()
	}

	for _, s := range []int{503, 429, 0} {
		set(s, map[string]int{"upload": 2, "read": 2, "list": 2, "attrs": 2, "delete": 2})
		f.requests()
		if err := st.Write(ctx, l, data); err != nil {
			t.Fatalf("%d: write: %v", s, err)
		}
		if got, err := st.ReadAll(ctx, l, 0); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%d: read %d bytes, %v", s, len(got), err)
		}
		var keys []string
		if err := st.List(ctx, f.loc(t, "gs://data/r/"), func(o Object) error { keys = append(keys, o.Key); return nil }); err != nil || len(keys) != 1 {
			t.Errorf("%d: list %q, %v", s, keys, err)
		}
		if _, ok, err := st.Stat(ctx, l); !ok || err != nil {
			t.Errorf("%d: stat %v, %v", s, ok, err)
		}
		if n := len(f.requests()); n != 4*3 && (s != 0 || n < 4*3 || n > 4*6) { // net/http tries a dropped request once more itself
			t.Errorf("status %d: %d requests for 4 that failed twice each", s, n)
		}
	}

	// Failing every time: Attempts tries, then a clear error.
	for _, c := range []struct {
		status int
		code   gcerrors.ErrorCode
		tries  int
		hint   string
	}{
		{503, gcerrors.Internal, 4, "did not answer"},
		{429, gcerrors.ResourceExhausted, 4, "throttling"},
		{0, gcerrors.Internal, 4, "did not answer"},
		{403, gcerrors.PermissionDenied, 1, "access denied"},
		{401, gcerrors.PermissionDenied, 1, "access denied"},
		{412, gcerrors.FailedPrecondition, 1, "failed"},
	} {
		set(c.status, map[string]int{"attrs": 100})
		f.requests()
		_, _, err := st.Stat(ctx, l)
		if gcerrors.Code(err) != c.code || !strings.Contains(err.Error(), c.hint) || !strings.Contains(err.Error(), "gs://data/r/x.bin") {
			t.Errorf("status %d: %v (%v); want %v, saying %q", c.status, err, gcerrors.Code(err), c.code, c.hint)
		}
		if n := len(f.requests()); n != c.tries && (c.status != 0 || n < c.tries || n > 2*c.tries) {
			t.Errorf("status %d: %d tries, want %d", c.status, n, c.tries)
		}
	}
	set(0, nil)

	// A read that breaks off mid-body resumes at the byte it stopped at.
	var once sync.Once
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("alt") != "media" {
			return false
		}
		broke := false
		once.Do(func() {
			broke = true
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Header().Set("X-Goog-Stored-Content-Length", fmt.Sprint(len(data)))
			w.WriteHeader(200)
			w.Write(data[:300_000])
			w.(http.Flusher).Flush()
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		})
		return broke
	})
	f.requests()
	got, err := st.ReadAll(ctx, l, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("a read broken off: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	rs := f.requests("alt=media")
	if len(rs) != 2 || !strings.HasSuffix(rs[1], "bytes=300000-") {
		t.Errorf("reads %q; want one more from byte 300000", rs)
	}
	f.setHook(nil)
}

// TestGCSOptions opens buckets by STORAGE_EMULATOR_HOST and refuses
// options it does not know.
func TestGCSOptions(t *testing.T) {
	f := startGCS(t, "data")
	ctx := context.Background()
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(f.URL, "http://"))
	st := &Stores{}
	defer st.Close()
	l, _ := Parse("gs://data/env/x.txt")
	if err := st.Write(ctx, l, []byte("by the emulator's address")); err != nil {
		t.Fatal(err)
	}
	if got := f.gcs; got == nil {
		t.Fatal("no server")
	}
	obj, err := f.gcs.GetObject("data", "env/x.txt")
	if err != nil || string(obj.Content) != "by the emulator's address" {
		t.Errorf("the server holds %q, %v", obj.Content, err)
	}
	for _, bad := range []string{"gs://data/x?region=eu", "gs://data/x?endpoint=ftp://h"} {
		l, _ := Parse(bad)
		if _, err := st.ReadAll(ctx, l, 0); err == nil || !strings.Contains(err.Error(), "cannot open the bucket") {
			t.Errorf("%s: %v; want refused", bad, err)
		}
	}
	keys := []string{}
	env, _ := Parse("gs://data/env/")
	st.List(ctx, env, func(o Object) error { keys = append(keys, o.Key); return nil })
	sort.Strings(keys)
	if len(keys) != 1 || keys[0] != "env/x.txt" {
		t.Errorf("listed %q", keys)
	}
}
