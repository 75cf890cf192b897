package text

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// readJSONL decodes each line of a testdata file into a new T.
func readJSONL[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 {
		tb.Fatalf("%s: empty", path)
	}
	return out
}

// TestSanitizeUTF8 checks the U+FFFD replacement against Python's
// bytes.decode("utf-8", errors="replace") (testdata/utf8_replace.jsonl).
func TestSanitizeUTF8(t *testing.T) {
	for _, c := range readJSONL[struct{ Hex, Want string }](t, "testdata/utf8_replace.jsonl") {
		b, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		if got := sanitizeUTF8(string(b)); got != c.Want {
			t.Errorf("sanitizeUTF8(%x) = %+q, want %+q", b, got, c.Want)
		}
	}
}

// TestUnescapeHTML checks against Python's html.unescape
// (testdata/html_unescape.jsonl).
func TestUnescapeHTML(t *testing.T) {
	for _, c := range readJSONL[struct{ Text, Want string }](t, "testdata/html_unescape.jsonl") {
		if got := unescapeHTML(c.Text); got != c.Want {
			t.Errorf("unescapeHTML(%q) = %+q, want %+q", c.Text, got, c.Want)
		}
	}
}

// TestOpenAIExtra checks the openai cleaning on testdata/openai_extra.jsonl:
// HTML entities, Python's whitespace and lower() (final sigma), special
// tokens in the text, made by gen_python.py with Python's html, re and regex
// (without ftfy: where ftfy changes the text, openai_ftfy.jsonl has the ids).
func TestOpenAIExtra(t *testing.T) {
	for name, tok := range loadAll(t) {
		oa, err := tok.WithOptions(Options{OpenAIClean: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range readJSONL[struct {
			Text   string
			OpenAI []int
		}](t, "testdata/openai_extra.jsonl") {
			got, _ := oa.Encode(c.Text)
			if want := openAIWant(t, c.Text, c.OpenAI); !slices.Equal(got, want) {
				t.Errorf("%s: openai Encode(%q)\n got %v\nwant %v", name, c.Text, got, want)
			}
		}
	}
}

// TestLowerPython covers str.lower's final-sigma rule (values from Python).
func TestLowerPython(t *testing.T) {
	for in, want := range map[string]string{
		"ΟΔΟΣ ΟΔΟΣ.": "οδος οδος.",
		"Σ":          "σ",
		"ΑΣ'Α":       "ασ'α",
		"ΑΣ'":        "ας'",
		"İ":          "i\u0307",
		"ǅ":          "ǆ",
	} {
		if got := lowerPython(in); got != want {
			t.Errorf("lowerPython(%q) = %q, want %q", in, got, want)
		}
	}
}
