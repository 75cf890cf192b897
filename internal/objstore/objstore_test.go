package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/internal/s3test"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, bucket, key, dir string }{
		{"s3://b/p/", "b", "p/", "p/"},
		{"s3://b/p", "b", "p", "p/"},
		{"s3://b", "b", "", ""},
		{"gs://b/a/x.tar", "b", "a/x.tar", "a/x.tar/"},
		{"azblob://c/k?x=1", "c", "k", "k/"},
	} {
		l, err := objstore.Parse(c.in)
		if err != nil || l.Bucket != c.bucket || l.Key != c.key || l.Dir() != c.dir {
			t.Errorf("Parse(%q) = %+v (dir %q), %v; want bucket %q key %q dir %q", c.in, l, l.Dir(), err, c.bucket, c.key, c.dir)
		}
	}
	for _, bad := range []string{"/tmp/x", "s3:///key", "http://x/y"} {
		if _, err := objstore.Parse(bad); err == nil {
			t.Errorf("Parse(%q) took it", bad)
		}
	}
}

// TestStoresAgainstSeaweedFS lists over 1,000 keys (several pages), reads
// and writes names with spaces and non-ASCII letters, and names wrong
// credentials clearly, on a real S3-compatible server.
func TestStoresAgainstSeaweedFS(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	st := &objstore.Stores{}
	defer st.Close()
	base, _ := objstore.Parse("s3://data/many/")
	want := []string{}
	for i := range 1105 {
		k := fmt.Sprintf("many/k%05d.bin", i)
		want = append(want, k)
		if err := st.Write(ctx, base.Child(k[len("many/"):]), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := st.List(ctx, base, func(o objstore.Object) error { got = append(got, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !sort.StringsAreSorted(got) || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %d keys (sorted %v), want %d", len(got), sort.StringsAreSorted(got), len(want))
	}

	odd := base.Child("with space/naïve ünïcödé 日本.txt")
	if err := st.Write(ctx, odd, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	b, err := st.ReadAll(ctx, odd, 0)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read %q back: %q, %v", odd, b, err)
	}
	found := false
	dir, _ := objstore.Parse("s3://data/many/with space/")
	st.List(ctx, dir, func(o objstore.Object) error { found = found || o.Key == odd.Key; return nil })
	if !found {
		t.Errorf("listing %s did not give %q", dir, odd.Key)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB: a multipart upload
	bl := base.Child("big.bin")
	if err := st.Upload(ctx, bl, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	r, err := st.Open(ctx, bl)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(rb, big) {
		t.Fatalf("big object read back: %d bytes, %v", len(rb), err)
	}
	if _, ok, err := st.Stat(ctx, base.Child("nope.bin")); ok || err != nil {
		t.Errorf("Stat of a missing object: %v, %v", ok, err)
	}

	// An object found a moment ago that the server answers "not found" for
	// a while (a restarting server does): Open gives up at once,
	// OpenExisting retries until it is there.
	late := base.Child("late.bin")
	if _, err := st.Open(ctx, late); !objstore.NotFound(err) {
		t.Errorf("Open of a missing object: %v; want not found", err)
	}
	quick := &objstore.Stores{MaxBackoff: 400 * time.Millisecond}
	defer quick.Close()
	go func() {
		time.Sleep(700 * time.Millisecond)
		st.Write(ctx, late, []byte("here now"))
	}()
	lr, err := quick.OpenExisting(ctx, late)
	if err != nil {
		t.Fatalf("OpenExisting of an object written 0.7 s later: %v", err)
	}
	lb, err := io.ReadAll(lr)
	lr.Close()
	if err != nil || string(lb) != "here now" {
		t.Errorf("read %q, %v; want \"here now\"", lb, err)
	}
	if _, err := (&objstore.Stores{Attempts: 2, MaxBackoff: 100 * time.Millisecond}).OpenExisting(ctx, base.Child("never.bin")); !objstore.NotFound(err) {
		t.Errorf("OpenExisting of an object that never comes: %v; want not found once the tries are spent", err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	bad := &objstore.Stores{Attempts: 2}
	defer bad.Close()
	err = bad.List(ctx, base, func(objstore.Object) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), "s3://data/many/") {
		t.Errorf("wrong credentials: %v; want an error naming the location and access denied", err)
	}
}

// TestOpenWithoutCredentials: a gs:// or azblob:// location with no
// credentials in the environment fails saying what to set, and prints
// nothing.
func TestOpenWithoutCredentials(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no gcloud or Azure CLI sign-in
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	for _, k := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"} {
		t.Setenv(k, "")
	}
	st := &objstore.Stores{Attempts: 1}
	defer st.Close()
	for url, want := range map[string]string{
		"gs://some-bucket/x/":  "GOOGLE_APPLICATION_CREDENTIALS",
		"azblob://cont/x/":     "AZURE_STORAGE_ACCOUNT",
		"s3://b/x/?bogus=true": `option "bogus"`,
	} {
		l, _ := objstore.Parse(url)
		err := st.List(context.Background(), l, func(objstore.Object) error { return nil })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error naming %s", url, err, want)
		}
	}
}
