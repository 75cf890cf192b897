package text

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ftfyLine is a line of testdata/openai_ftfy.jsonl, made by
// scripts/ftfy/make_goldens.py with the real ftfy and openai's cleaning.
type ftfyLine struct {
	Text   string `json:"text"`
	Fixed  string `json:"fixed"`
	OpenAI []int  `json:"openai"`
}

var ftfyGolden = sync.OnceValues(func() ([]ftfyLine, error) {
	f, err := os.Open("testdata/openai_ftfy.jsonl")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ftfyLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 0; sc.Scan(); n++ {
		if n == 0 { // the header naming the ftfy that ran
			continue
		}
		var l ftfyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, sc.Err()
})

// openAIWant returns the openai ids to expect for text: ids, made without
// ftfy, unless ftfy changes the text, when openai_ftfy.jsonl gives them.
func openAIWant(tb testing.TB, text string, ids []int) []int {
	tb.Helper()
	lines, err := ftfyGolden()
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range lines {
		if l.Text == text && l.Fixed != text {
			return l.OpenAI
		}
	}
	return ids
}

// TestOpenAIFtfy checks the openai cleaning, ftfy's fix_text first, on
// prompts ftfy changes (curly quotes, ligatures, full width, mojibake,
// entities, control characters) and on those it leaves.
func TestOpenAIFtfy(t *testing.T) {
	lines, err := ftfyGolden()
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, l := range lines {
		if l.Fixed != l.Text {
			changed++
		}
	}
	if len(lines) < 300 || changed < 200 {
		t.Fatalf("openai_ftfy.jsonl: %d lines, %d changed by ftfy; want more", len(lines), changed)
	}
	for name, tok := range loadAll(t) {
		oa, err := tok.WithOptions(Options{OpenAIClean: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			got, err := oa.Encode(l.Text)
			if err != nil {
				t.Fatalf("%s: openai Encode(%+q): %v", name, l.Text, err)
			}
			if !slices.Equal(got, l.OpenAI) {
				t.Errorf("%s: openai Encode(%+q) (ftfy: %+q)\n got %v\nwant %v", name, l.Text, l.Fixed, got, l.OpenAI)
			}
		}
	}
}

// BenchmarkEncodeOpenAI is BenchmarkEncode with openai's cleaning (ftfy
// first): ASCII captions, ftfy's fast path.
func BenchmarkEncodeOpenAI(b *testing.B) { benchOpenAI(b, benchCaptions(1024)) }

// BenchmarkEncodeOpenAIUnicode is BenchmarkEncodeOpenAI on captions with a
// curly apostrophe, an accented word and an ellipsis: ftfy's full path.
func BenchmarkEncodeOpenAIUnicode(b *testing.B) {
	caps := benchCaptions(1024)
	for i := range caps {
		caps[i] = strings.Replace(caps[i], " ", " café’s ", 1) + "…"
	}
	benchOpenAI(b, caps)
}

func benchOpenAI(b *testing.B, caps []string) {
	tok, err := loadCLIP(b).WithOptions(Options{OpenAIClean: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := processCPU()
	for i := 0; b.Loop(); i++ {
		if _, _, err := tok.EncodePadded(caps[i%len(caps)], 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "captions/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "captions/cpu-s")
	}
}
