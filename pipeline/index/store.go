package index

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Store is what the reader needs of object stores: the parts of an index
// under an object-store prefix, and the images whose hits name them by an
// object URL (scheme://bucket/key[?options]). Its methods take and give
// standard-library types only, so that any object-store client can supply
// one; the reader never closes it.
type Store interface {
	// IsURL reports whether s names an object or a prefix in a store.
	IsURL(s string) bool
	// Parse checks the object-store URL s and returns it parsed: the
	// bucket is its Host, the key its Path without the leading slash, the
	// bucket's options its query.
	Parse(s string) (*url.URL, error)
	// List calls fn with the key (whole, in its bucket) and size of every
	// object below the prefix URL names (its key as a folder: "" or ending
	// in "/"), in key order. fn's error stops it.
	List(ctx context.Context, prefix string, fn func(key string, size int64) error) error
	// Open returns a stream of the object URL names. existing says it was
	// listed a moment ago: failing to open it, even as not found, is then
	// retried.
	Open(ctx context.Context, url string, existing bool) (io.ReadCloser, error)
	// ReadAll reads the object URL names whole; more than limit bytes
	// (when > 0) is an error.
	ReadAll(ctx context.Context, url string, limit int64) ([]byte, error)
}

// storeSchemes are the URL schemes taken for object-store URLs when no
// Store is given, to say that one is needed.
var storeSchemes = []string{"s3", "gs", "azblob"}

// isURL reports whether s names an object in a store: st's URL, or without
// st one of storeSchemes.
func isURL(st Store, s string) bool {
	if st != nil {
		return st.IsURL(s)
	}
	for _, sc := range storeSchemes {
		if strings.HasPrefix(s, sc+"://") {
			return true
		}
	}
	return false
}

// errNoStore is the error of an object-store URL read without a Store.
func errNoStore(what, url string) error {
	return fmt.Errorf("index: %s %q: no object-store opener given (Options.Store is nil)", what, url)
}

// storeKey returns the key of a parsed object-store URL.
func storeKey(u *url.URL) string { return strings.TrimPrefix(u.Path, "/") }

// keyDir returns key as a prefix: "" or ending in "/".
func keyDir(key string) string {
	if key == "" || strings.HasSuffix(key, "/") {
		return key
	}
	return key + "/"
}

// withKey returns the URL u with key in place of its own, its options kept.
func withKey(u *url.URL, key string) string {
	v := *u
	v.Path, v.RawPath = "/"+key, ""
	return v.String()
}

// shownURL is an object's URL as messages show it: without its options.
func shownURL(u *url.URL, key string) string { return u.Scheme + "://" + u.Host + "/" + key }
