package ftfy

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// readJSONL reads a testdata file made by scripts/ftfy/make_goldens.py: a
// header line naming the ftfy that ran, then one case a line (at least min).
func readJSONL[T any](t *testing.T, path string, min int) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	var out []T
	for line := 0; sc.Scan(); line++ {
		if line == 0 {
			var h struct{ Ftfy, Commit string }
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Ftfy == "" {
				t.Fatalf("%s: first line is not the header naming ftfy: %s", path, sc.Text())
			}
			continue
		}
		var c T
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s:%d: %v", path, line+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < min {
		t.Fatalf("%s: %d cases, want at least %d", path, len(out), min)
	}
	return out
}

// TestFtfyFixText compares FixText with ftfy.fix_text on ftfy's own test cases,
// prompts and random mixtures (testdata/fix_text.jsonl).
func TestFtfyFixText(t *testing.T) {
	changed := 0
	for _, c := range readJSONL[struct {
		In, Out string
		Bad     bool
	}](t, "testdata/fix_text.jsonl", 1000) {
		if got := FixText(c.In); got != c.Out {
			t.Errorf("FixText(%+q)\n got %+q\nwant %+q", c.In, got, c.Out)
		}
		if got := isBad(c.In); got != c.Bad {
			t.Errorf("isBad(%+q) = %v, want %v", c.In, got, c.Bad)
		}
		if c.In != c.Out {
			changed++
		}
	}
	if changed < 500 {
		t.Errorf("only %d cases change the text: the golden file tests too little", changed)
	}
}

// TestFtfyHeuristic compares the badness heuristic and fix_encoding with ftfy's
// on short strings drawn from the heuristic's characters
// (testdata/heuristic.jsonl).
func TestFtfyHeuristic(t *testing.T) {
	bad := 0
	for _, c := range readJSONL[struct {
		Text, Encoding string
		Bad            bool
	}](t, "testdata/heuristic.jsonl", 3000) {
		if got := isBad(c.Text); got != c.Bad {
			t.Errorf("isBad(%+q) = %v, want %v", c.Text, got, c.Bad)
		}
		if got := fixEncoding(c.Text); got != c.Encoding {
			t.Errorf("fixEncoding(%+q)\n got %+q\nwant %+q", c.Text, got, c.Encoding)
		}
		if c.Bad {
			bad++
		}
	}
	if bad < 100 {
		t.Errorf("only %d bad cases", bad)
	}
}

// TestFtfyLong checks texts around ftfy's max_decode_length, which fix_text
// cuts into segments of 1,000,000 characters (testdata/long.jsonl).
func TestFtfyLong(t *testing.T) {
	for _, c := range readJSONL[struct {
		Prefix, Suffix string
		OutSuffix      string `json:"out_suffix"`
		Count          int
	}](t, "testdata/long.jsonl", 5) {
		prefix := strings.Repeat(c.Prefix, c.Count)
		got := FixText(prefix + c.Suffix)
		if !strings.HasPrefix(got, prefix) || got[len(prefix):] != c.OutSuffix {
			t.Errorf("FixText(%q × %d + %+q) does not end in %+q", c.Prefix, c.Count, c.Suffix, c.OutSuffix)
		}
	}
}

// TestFtfyASCII checks that plain ASCII comes back as the same string and
// that ASCII ftfy changes does not take the fast path.
func TestFtfyASCII(t *testing.T) {
	s := "a photo of a cat, 2 dogs; (3) <birds>!"
	if got := FixText(s); got != s || !plainASCII(s) {
		t.Errorf("FixText(%q) = %q", s, got)
	}
	for _, s := range []string{"a &amp; b", "a\r\nb", "a\x1b[0mb", "a\x00b", "a\x7fb"} {
		if plainASCII(s) {
			t.Errorf("plainASCII(%q) = true; ftfy changes it", s)
		}
	}
}
