package text

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The models and golden ids of testdata/spm come from the official
// sentencepiece library (scripts/tokenizers/make_spm.py).
var spmModels = []string{"unigram_nfkc", "bpe_bytes", "unigram_bytes", "bpe_nfkc", "bpe_unused", "unigram_identity", "bpe_spaces"}

func readSPJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: line %d: %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func spmCorpus(t testing.TB) []string {
	c := readSPJSONL[string](t, filepath.Join("testdata", "spm", "corpus.jsonl"))
	if len(c) < 500 {
		t.Fatalf("corpus has %d strings, want at least 500", len(c))
	}
	return c
}

func loadSPModel(t testing.TB, name string) *spModel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "spm", name+".model"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseSPProto(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m, err := newSPModel(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func TestSentencePieceGolden(t *testing.T) {
	corpus := spmCorpus(t)
	for _, name := range spmModels {
		t.Run(name, func(t *testing.T) {
			m := loadSPModel(t, name)
			want := readSPJSONL[[]int](t, filepath.Join("testdata", "spm", name+".jsonl"))
			if len(want) != len(corpus) {
				t.Fatalf("%d golden lines for %d strings", len(want), len(corpus))
			}
			uncached := *m
			uncached.cache, uncached.edges, uncached.wordPieces = nil, nil, nil
			edges := *m
			edges.wordPieces = nil
			whole := uncached
			whole.unigramWords = false
			if !m.bpe && !m.unigramWords && !m.norm.wsAsSuffix {
				t.Errorf("%s: the Unigram lattice is not found word by word (a piece has \"▁\" past its start?)", name)
			}
			// Each string with the word caches cold, warm, and off,
			// (Unigram) with each word's edges cached but not its pieces,
			// and with the lattice found over the whole text.
			for _, run := range []struct {
				what string
				m    *spModel
			}{{"cold", m}, {"warm", m}, {"uncached", &uncached}, {"edges", &edges}, {"whole", &whole}} {
				bad, ids := 0, 0
				for i, s := range corpus {
					got := run.m.appendIDs(nil, s)
					ids += len(want[i])
					if !slices.Equal(got, want[i]) {
						if bad++; bad <= 10 {
							t.Errorf("%s %q:\n got %v\nwant %v", run.what, s, got, want[i])
						}
					}
				}
				if bad > 0 {
					t.Errorf("%s: %d of %d strings differ", run.what, bad, len(corpus))
				}
				t.Logf("%s: %d strings, %d ids matched", run.what, len(corpus)-bad, ids)
			}
		})
	}
}

func siglipFS(t testing.TB) fstest.MapFS {
	model, err := os.ReadFile(filepath.Join("testdata", "spm", "unigram_nfkc.model"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("testdata", "spm", "siglip_tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{"spiece.model": {Data: model}, "tokenizer_config.json": {Data: cfg}}
}

// siglipGeneral returns tok (SigLIP's) with every text taking the general
// path, not siglipFast.
func siglipGeneral(t testing.TB, tok *Tokenizer) *Tokenizer {
	e, ok := tok.pieces.(*siglipEncoder)
	if !ok {
		t.Fatalf("model %T, want *siglipEncoder", tok.pieces)
	}
	general := *e
	general.fast = nil
	c := *tok
	c.pieces = &general
	return &c
}

func TestSiglipGolden(t *testing.T) {
	corpus := spmCorpus(t)
	tok, err := LoadTokenizer(siglipFS(t))
	if err != nil {
		t.Fatal(err)
	}
	if tok.ContextLength() != 64 || tok.BOS() != -1 || tok.EOS() != 1 || tok.Pad() != 1 {
		t.Fatalf("context %d, BOS %d, EOS %d, pad %d; want 64, -1, 1, 1", tok.ContextLength(), tok.BOS(), tok.EOS(), tok.Pad())
	}
	fast := tok.pieces.(*siglipEncoder).fast
	if fast == nil {
		t.Fatal("no fast path for the SigLIP model")
	}
	want := readSPJSONL[[]int](t, filepath.Join("testdata", "spm", "siglip.jsonl"))
	for _, run := range []struct {
		what string
		tok  *Tokenizer
	}{{"fast", tok}, {"general", siglipGeneral(t, tok)}} {
		bad := 0
		for i, s := range corpus {
			ids, _, err := run.tok.EncodePadded(s, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]int, len(ids))
			for j, id := range ids {
				got[j] = int(id)
			}
			if !slices.Equal(got, want[i]) {
				if bad++; bad <= 10 {
					t.Errorf("%s %q:\n got %v\nwant %v", run.what, s, got, want[i])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d strings differ", run.what, bad, len(corpus))
		}
		t.Logf("%s: %d strings × 64 ids matched", run.what, len(corpus)-bad)
	}
	// The fast path takes part of the corpus (ASCII text).
	taken := 0
	for _, s := range corpus {
		if _, ok := fast.appendIDs(tok.pieces.(*siglipEncoder), nil, s); ok {
			taken++
		}
	}
	if taken < len(corpus)/10 {
		t.Errorf("the fast path took %d of %d strings, want at least a tenth", taken, len(corpus))
	}
	t.Logf("the fast path took %d of %d strings", taken, len(corpus))
}

func TestSentencePieceLlamaBOS(t *testing.T) {
	corpus := spmCorpus(t)
	model, err := os.ReadFile(filepath.Join("testdata", "spm", "bpe_bytes.model"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := LoadTokenizer(fstest.MapFS{
		"tokenizer.model":       {Data: model},
		"tokenizer_config.json": {Data: []byte(`{"tokenizer_class": "LlamaTokenizer", "add_bos_token": true, "add_eos_token": false}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := readSPJSONL[[]int](t, filepath.Join("testdata", "spm", "llama_bos.jsonl"))
	bad := 0
	for i, s := range corpus {
		got, err := tok.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			if bad++; bad <= 10 {
				t.Errorf("%q:\n got %v\nwant %v", s, got, want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d strings differ", bad, len(corpus))
	}
}

// benchSentencePiece encodes short captions (benchCaptions: 5 to 16 words)
// on one goroutine and reports captions per second, wall-clock and per
// CPU-second of the process.
func benchSentencePiece(b *testing.B, encode func(s string)) {
	caps := benchCaptions(1024)
	b.ReportAllocs()
	cpu0 := processCPU()
	for i := 0; b.Loop(); i++ {
		encode(caps[i%len(caps)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "captions/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "captions/cpu-s")
	}
}

func benchSPModel(b *testing.B, name string) {
	m := loadSPModel(b, name)
	if strings.HasSuffix(b.Name(), "NoCache") {
		m.cache = nil
	}
	var dst []int
	benchSentencePiece(b, func(s string) { dst = m.appendIDs(dst[:0], s) })
}

// BenchmarkSentencePieceUnigram is the Unigram model with nmt_nfkc.
func BenchmarkSentencePieceUnigram(b *testing.B) { benchSPModel(b, "unigram_nfkc") }

// BenchmarkSentencePieceBPE is the BPE model with byte fallback.
func BenchmarkSentencePieceBPE(b *testing.B) { benchSPModel(b, "bpe_bytes") }

// BenchmarkSentencePieceBPENoCache is BenchmarkSentencePieceBPE with every
// word merged afresh.
func BenchmarkSentencePieceBPENoCache(b *testing.B) { benchSPModel(b, "bpe_bytes") }

// BenchmarkSentencePieceBPENFKC is the BPE model with nmt_nfkc.
func BenchmarkSentencePieceBPENFKC(b *testing.B) { benchSPModel(b, "bpe_nfkc") }

// BenchmarkSentencePieceSiglip is SigLIP's tokenizer to 64 ids and a mask.
func BenchmarkSentencePieceSiglip(b *testing.B) {
	tok, err := LoadTokenizer(siglipFS(b))
	if err != nil {
		b.Fatal(err)
	}
	ids, mask := make([]int64, 64), make([]int64, 64)
	benchSentencePiece(b, func(s string) {
		if err := tok.encodeInto(ids, mask, s); err != nil {
			b.Fatal(err)
		}
	})
}
