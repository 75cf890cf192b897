package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync/atomic"

	"github.com/conditionhq/condition/tensorio"
)

// Remote is a file on the hub read with HTTP range requests, without
// downloading it: an io.ReaderAt of a known size. It suits reading a
// safetensors header and a few tensors out of a large checkpoint.
type Remote struct {
	c    *Client
	ctx  context.Context
	meta *FileMeta
	// Requests and Bytes count the range requests made and the bytes they returned.
	Requests atomic.Int64
	Bytes    atomic.Int64
}

// OpenRemote asks the hub about file at revision (a HEAD request) and
// returns a reader of its contents by ranges. ctx bounds every later read.
func (c *Client) OpenRemote(ctx context.Context, repo, revision, file string) (*Remote, error) {
	meta, err := c.Metadata(ctx, repo, revision, file)
	if err != nil {
		return nil, err
	}
	return c.OpenRemoteMeta(ctx, meta)
}

// OpenRemoteMeta returns a reader by ranges of the file meta describes (as
// Metadata returned it), without asking the hub about it again. ctx bounds
// every read.
func (c *Client) OpenRemoteMeta(ctx context.Context, meta *FileMeta) (*Remote, error) {
	if meta == nil || meta.Location == "" {
		return nil, fmt.Errorf("hub: OpenRemoteMeta needs the metadata of a file as Metadata returns it")
	}
	if c.Offline {
		return nil, fmt.Errorf("hub: %s@%s: %s: not reading from the hub (%s): %w", meta.Repo, meta.Revision, meta.File, offlineWhy(), ErrOffline)
	}
	if meta.Size < 0 {
		return nil, fmt.Errorf("hub: %s@%s: %s: the hub did not say how large the file is, so it cannot be read by ranges", meta.Repo, meta.Revision, meta.File)
	}
	return &Remote{c: c, ctx: ctx, meta: meta}, nil
}

// Meta returns what the hub said about the file.
func (r *Remote) Meta() *FileMeta { return r.meta }

// Size returns the file's size in bytes.
func (r *Remote) Size() int64 { return r.meta.Size }

// ReadAt reads len(p) bytes at off with one range request.
func (r *Remote) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("hub: read %s: negative offset", r.meta.File)
	}
	if off >= r.meta.Size {
		return 0, io.EOF
	}
	want := p
	if rest := r.meta.Size - off; int64(len(want)) > rest {
		want = want[:rest]
	}
	if len(want) == 0 {
		return 0, nil
	}
	req, err := r.c.newRequest(r.ctx, http.MethodGet, r.meta.Location)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+int64(len(want))-1))
	resp, err := r.c.do(req, true)
	if err != nil {
		return 0, fmt.Errorf("hub: read %s: %w", r.meta.File, err)
	}
	defer resp.Body.Close()
	r.Requests.Add(1)
	if resp.StatusCode != http.StatusPartialContent {
		if resp.StatusCode == http.StatusOK {
			return 0, fmt.Errorf("hub: read %s bytes %d-%d: the server ignored the Range request (200 instead of 206)", r.meta.File, off, off+int64(len(want))-1)
		}
		return 0, httpError(resp)
	}
	if s, ok := contentRangeStart(resp.Header.Get("Content-Range")); !ok || s != off {
		return 0, fmt.Errorf("hub: read %s: asked for bytes from %d, got Content-Range %q", r.meta.File, off, resp.Header.Get("Content-Range"))
	}
	n, err := io.ReadFull(resp.Body, want)
	r.Bytes.Add(int64(n))
	if err != nil {
		return n, fmt.Errorf("hub: read %s bytes %d-%d: %w", r.meta.File, off, off+int64(len(want))-1, err)
	}
	if len(want) < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// ReadTensors reads the named tensors out of a safetensors file on the hub
// with range requests: one HEAD request for the file's metadata, then 8
// bytes for the header length, the header, and one request per tensor. A
// checkpoint of hundreds of megabytes is not downloaded for a few heads. A
// name the file lacks is an error. It returns the tensors and the file's
// metadata (its commit among them).
func (c *Client) ReadTensors(ctx context.Context, repo, revision, file string, names []string) (map[string]tensorio.Tensor, *FileMeta, error) {
	meta, err := c.Metadata(ctx, repo, revision, file)
	if err != nil {
		return nil, nil, err
	}
	out, err := c.readTensors(ctx, meta, func(h *tensorio.Header) ([]string, error) {
		for _, n := range names {
			if _, ok := h.Tensors[n]; !ok {
				return nil, fmt.Errorf("hub: %s@%s: %s has no tensor %s", repo, revision, file, n)
			}
		}
		return names, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, meta, nil
}

// ReadTensorsFunc reads, from the safetensors file meta describes (as
// Metadata returned it, so with no further HEAD request), the tensors whose
// names keep accepts, with range requests: the header, then one request per
// tensor. Tensors the file lacks are simply not in the result.
func (c *Client) ReadTensorsFunc(ctx context.Context, meta *FileMeta, keep func(name string) bool) (map[string]tensorio.Tensor, error) {
	return c.readTensors(ctx, meta, func(h *tensorio.Header) ([]string, error) {
		var names []string
		for n := range h.Tensors {
			if keep(n) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		return names, nil
	})
}

// readTensors reads the header of meta's file, asks pick which tensors to
// read, and reads them.
func (c *Client) readTensors(ctx context.Context, meta *FileMeta, pick func(*tensorio.Header) ([]string, error)) (map[string]tensorio.Tensor, error) {
	r, err := c.OpenRemoteMeta(ctx, meta)
	if err != nil {
		return nil, err
	}
	h, err := tensorio.ReadSafetensorsHeader(r, r.Size())
	if err != nil {
		return nil, fmt.Errorf("hub: %s@%s: %s: %w", meta.Repo, meta.Revision, meta.File, err)
	}
	names, err := pick(h)
	if err != nil {
		return nil, err
	}
	out := make(map[string]tensorio.Tensor, len(names))
	for _, n := range names {
		t, err := h.ReadTensor(r, n)
		if err != nil {
			return nil, fmt.Errorf("hub: %s@%s: %s: %w", meta.Repo, meta.Revision, meta.File, err)
		}
		out[n] = t
	}
	c.log().Debug("read tensors by range", "repo", meta.Repo, "file", meta.File, "tensors", len(out),
		"requests", r.Requests.Load(), "bytes", r.Bytes.Load(), "size", r.Size())
	return out, nil
}
