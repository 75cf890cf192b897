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

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
)

// rssOf is this process's resident memory in the mappings of files whose
// path has the given prefix, in bytes: the Rss lines of /proc/self/smaps,
// which the kernel counts by walking the page tables (the RssFile of
// /proc/self/status is a running count that can lag).
func rssOf(t *testing.T, prefix string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	defer f.Close()
	var sum int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's first line
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], prefix)
			continue
		}
		if in && fields[0] == "Rss:" && len(fields) >= 2 {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestReadEmbedsNotResident: reading every row (as dedup does, float16
// bits and float32) leaves the index's rows out of this process's resident
// memory (the index's mappings grow by far less than the 8 MiB of float16
// rows: they are read from the files, not through the mappings), and the
// rows read equal the stored values.
func TestReadEmbedsNotResident(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RssFile is Linux's")
	}
	const n, d = 8192, 512
	vecs := synthVectors(n, d, 100, 5)
	dir := synthIndex(t, t.TempDir(), index.DTypeF16, vecs, d, 3000)
	x, err := index.Open(context.Background(), dir, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	half := make([]uint16, n*d)
	full := make([]float32, n*d)
	ok := make([]bool, n)
	before := rssOf(t, dir) // the pages Open mapped to read the headers
	if err := x.ReadEmbedsF16(0, half, nil); err != nil {
		t.Fatal(err)
	}
	if err := x.ReadEmbeds(0, full, ok); err != nil {
		t.Fatal(err)
	}
	if grew := rssOf(t, dir) - before; grew > 512<<10 {
		t.Errorf("the index's mappings grew by %d bytes reading %d bytes of rows; want the rows read from the files, not mapped in", grew, n*d*2)
	}
	for i, h := range half {
		if want := tensorio.Float32ToF16(vecs[i]); h != want {
			t.Fatalf("row %d value %d: bits %#04x, stored %#04x", i/d, i%d, h, want)
		}
		if full[i] != halfdot.ToFloat32(h) {
			t.Fatalf("row %d value %d: ReadEmbeds %g, ReadEmbedsF16 %g", i/d, i%d, full[i], halfdot.ToFloat32(h))
		}
	}
	if !slices.Equal(ok, slices.Repeat([]bool{true}, n)) {
		t.Error("ok flags: not all true")
	}
	if err := x.ReadEmbedsF16(n-1, make([]uint16, 2*d), nil); err == nil {
		t.Error("ReadEmbedsF16 past the last row: no error")
	}
}
