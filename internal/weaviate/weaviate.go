// Package weaviate is a small client of the Weaviate vector database's REST
// and GraphQL interfaces: what a collection of images needs (a class with
// two named vectors, batched upserts with per-object errors, counts, id
// listings, near-vector search returning distances and stored vectors).
//
// It is our own rather than Weaviate's Go client because that client
// requires the Weaviate server's module (its entities and gRPC stubs), whose
// dependency graph pins versions of gRPC, OpenTelemetry and the cloud SDKs
// this module already uses at other versions; the dozen endpoints used here
// are plain JSON over HTTP.
//
// Addresses are weaviate://HOST:PORT/Collection (plain HTTP); the
// collection is a Weaviate class name: an upper-case letter, then letters,
// digits and underscores.
package weaviate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Scheme is the URL scheme of a collection's address.
const Scheme = "weaviate"

// IsURL reports whether s names a collection (weaviate://...).
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme+"://") }

var classRe = regexp.MustCompile(`^[A-Z][_0-9A-Za-z]{0,254}$`)

// Target is a parsed collection address.
type Target struct {
	Host       string // HOST:PORT
	Collection string // the class name
}

// String returns the address as weaviate://HOST:PORT/Collection.
func (t Target) String() string { return Scheme + "://" + t.Host + "/" + t.Collection }

// Parse parses weaviate://HOST:PORT/Collection.
func Parse(s string) (Target, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Target{}, fmt.Errorf("weaviate: address %q: %v", s, err)
	}
	if u.Scheme != Scheme {
		return Target{}, fmt.Errorf("weaviate: address %q: want %s://HOST:PORT/Collection", s, Scheme)
	}
	if u.Host == "" || u.Port() == "" {
		return Target{}, fmt.Errorf("weaviate: address %q: want a host and port, %s://HOST:PORT/Collection", s, Scheme)
	}
	if _, err := strconv.ParseUint(u.Port(), 10, 16); err != nil {
		return Target{}, fmt.Errorf("weaviate: address %q: port %q is not a port number", s, u.Port())
	}
	name := strings.TrimPrefix(u.Path, "/")
	if !classRe.MatchString(name) {
		return Target{}, fmt.Errorf("weaviate: address %q: collection %q: want a class name (an upper-case letter, then letters, digits or underscores), %s://HOST:PORT/Collection", s, name, Scheme)
	}
	if u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return Target{}, fmt.Errorf("weaviate: address %q: want %s://HOST:PORT/Collection and nothing more (the API key is read from the environment)", s, Scheme)
	}
	return Target{Host: u.Host, Collection: name}, nil
}

// RequestTimeout is how long one request may take before it is given up
// (and, when retries are left, sent again): a write to a replicated class
// whose replica has just died can wait far longer for it than sending it
// again takes once the cluster knows.
const RequestTimeout = 30 * time.Second

// Client talks to one Weaviate node. Its methods are safe for concurrent
// use.
type Client struct {
	base string // http://HOST:PORT
	key  string
	hc   *http.Client
	// Retries is how many times a request that failed to connect, timed
	// out or was answered 429, 500, 502, 503 or 504 is sent again, with
	// exponential backoff from RetryWait (default 5 and 250 ms).
	Retries   int
	RetryWait time.Duration
}

// New returns a client of the node at host (HOST:PORT). key, when not
// empty, is sent as a bearer token (Weaviate's API key).
func New(host, key string) *Client {
	return &Client{
		base:      "http://" + host,
		key:       key,
		hc:        &http.Client{Timeout: RequestTimeout},
		Retries:   5,
		RetryWait: 250 * time.Millisecond,
	}
}

// StatusError is an answer of the server other than success.
type StatusError struct {
	Method, Path string
	Status       int
	Message      string // the server's own words
}

func (e *StatusError) Error() string {
	what := http.StatusText(e.Status)
	switch e.Status {
	case http.StatusUnauthorized:
		what = "unauthorized: the API key (WEAVIATE_API_KEY) is missing or refused"
	case http.StatusForbidden:
		what = "forbidden: the API key's user may not do this"
	}
	msg := strings.TrimSpace(e.Message)
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	if msg == "" {
		return fmt.Sprintf("weaviate: %s %s: %d %s", e.Method, e.Path, e.Status, what)
	}
	return fmt.Sprintf("weaviate: %s %s: %d %s: %s", e.Method, e.Path, e.Status, what, msg)
}

// retryable reports whether err is worth sending the request again.
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Status {
		case 429, 500, 502, 503, 504:
			return true
		}
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// do sends a request with body in as JSON and decodes the answer into out
// (when not nil), retrying as Retries says.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("weaviate: %s %s: %w", method, path, err)
		}
	}
	wait := c.RetryWait
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, path, body, out)
		if err == nil || attempt >= c.Retries || !retryable(err) || ctx.Err() != nil {
			if err != nil && ctx.Err() == nil && retryable(err) && attempt > 0 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt+1)
			}
			return err
		}
		d := wait + time.Duration(rand.Int64N(int64(wait/2)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		wait = min(2*wait, 8*time.Second)
	}
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("weaviate: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("weaviate: %s %s%s: %w", method, c.base, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("weaviate: %s %s%s: reading the answer: %w", method, c.base, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &StatusError{Method: method, Path: path, Status: resp.StatusCode, Message: errorMessage(data)}
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("weaviate: %s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// errorMessage returns Weaviate's error text from an answer's body
// ({"error": [{"message": ...}]}, or {"message": ...}), else the body.
func errorMessage(data []byte) string {
	var e struct {
		Error []struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil {
		var ms []string
		for _, m := range e.Error {
			ms = append(ms, m.Message)
		}
		if e.Message != "" {
			ms = append(ms, e.Message)
		}
		if len(ms) > 0 {
			return strings.Join(ms, "; ")
		}
	}
	return string(data)
}

// Ready checks that the node answers and is ready
// (/v1/.well-known/ready), and that the API key, if any, is accepted
// (/v1/schema).
func (c *Client) Ready(ctx context.Context) error {
	if err := c.do(ctx, http.MethodGet, "/v1/.well-known/ready", nil, nil); err != nil {
		return fmt.Errorf("%w (is a Weaviate node listening at %s?)", err, strings.TrimPrefix(c.base, "http://"))
	}
	return c.do(ctx, http.MethodGet, "/v1/schema", nil, nil)
}
