package dedup_test

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline/index"
)

// rssFile is this process's resident memory of mapped files
// (/proc/self/status RssFile), in bytes.
func rssFile(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestDropResident: rows read from the mapped parts are resident; after
// DropResident their pages are not (RssFile falls by most of the 8 MiB of
// float16 rows), and reading them again gives the same values.
func TestDropResident(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RssFile is Linux's")
	}
	const n, d = 8192, 512
	x, err := index.Open(context.Background(), synthIndex(t, t.TempDir(), index.DTypeF16, synthVectors(n, d, 100, 5), d, 3000), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	first := make([]uint16, n*d)
	if err := x.ReadEmbedsF16(0, first, nil); err != nil {
		t.Fatal(err)
	}
	before := rssFile(t)
	if err := x.DropResident(0, n); err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if fell := before - after; fell < 6<<20 {
		t.Errorf("RssFile fell by %d bytes (%d to %d); want most of the %d bytes of rows", fell, before, after, n*d*2)
	}
	again := make([]uint16, n*d)
	if err := x.ReadEmbedsF16(0, again, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, again) {
		t.Error("rows differ after DropResident")
	}
	if err := x.DropResident(n-1, 2); err == nil {
		t.Error("DropResident past the last row: no error")
	}
}
