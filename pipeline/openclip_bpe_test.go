package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// clipVocabDir holds CLIP's real tokenizer files and golden.jsonl.
var clipVocabDir = filepath.Join("..", "text", "testdata", "clip")

// openCLIPWithCLIPVocab writes to a new folder testdata/tinyopenclip with
// CLIP's vocabulary size: text_cfg.vocab_size 49,408 and the token table
// grown to 49,408 rows (the first 594 as they are, the others made up),
// plus CLIP's real tokenizer files (names) from text/testdata/clip; edit,
// when not nil, changes the config's text_cfg.
func openCLIPWithCLIPVocab(t *testing.T, names []string, edit func(map[string]any)) string {
	t.Helper()
	src, dir := filepath.Join("..", "testdata", "tinyopenclip"), t.TempDir()
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(src, models.OpenCLIPConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	text := cfg["model_cfg"].(map[string]any)["text_cfg"].(map[string]any)
	text["vocab_size"] = 49408
	if edit != nil {
		edit(text)
	}
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, models.OpenCLIPConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ts, meta, err := tensorio.ReadSafetensors(filepath.Join(src, models.OpenCLIPWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	emb := ts["token_embedding.weight"]
	old, w := emb.Data.([]float32), emb.Shape[1]
	grown := make([]float32, 49408*w)
	copy(grown, old)
	for i := len(old); i < len(grown); i++ {
		grown[i] = float32(0.2 * math.Sin(float64(i)*0.618))
	}
	ts["token_embedding.weight"] = tensorio.F32([]int{49408, w}, grown)
	if err := tensorio.WriteSafetensors(filepath.Join(dir, models.OpenCLIPWeightsFile), ts, meta); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(clipVocabDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestOpenCLIPBuiltinBPE opens a model in OpenCLIP's layout with CLIP's
// vocabulary size twice: with CLIP's tokenizer files (vocab.json,
// merges.txt, tokenizer_config.json) and without any, when OpenCLIP's
// built-in CLIP BPE is its tokenizer. Both give openai's ids
// (text/testdata/clip/golden.jsonl's openai field, cut to the context of
// 16 with the end of text last) and the same text embeddings; the built-in
// one pads with 0. A folder without tokenizer files whose config names a
// Hugging Face tokenizer, asks OpenCLIP's SimpleTokenizer for another
// cleaning, or whose vocabulary is smaller than CLIP's, is refused naming
// the field; tokenizer_kwargs with SimpleTokenizer's defaults are not.
func TestOpenCLIPBuiltinBPE(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	withFiles := openCLIPWithCLIPVocab(t, []string{"vocab.json", "merges.txt", "tokenizer_config.json"}, nil)
	bare := openCLIPWithCLIPVocab(t, nil, nil)
	golden := readOpenAIGolden(t)
	prompts := make([]string, len(golden))
	for i, g := range golden {
		prompts[i] = g.Text
	}
	var got [2][]TextEncoding
	for k, dir := range []string{withFiles, bare} {
		m, err := models.Open(dir, models.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if builtin, err := m.OpenAIBPE(); builtin != (k == 1) || err != nil {
			t.Fatalf("%s: OpenAIBPE %v, %v; want %v", dir, builtin, err, k == 1)
		}
		eng := tinyEngine(t, m, Options{Threads: 1, Truncate: true})
		if tok := eng.Tokenizer(); tok.ContextLength() != 16 || k == 1 && tok.Pad() != 0 {
			t.Fatalf("%s: context %d, pad %d; want 16 (text_cfg.context_length) and, built in, 0", dir, tok.ContextLength(), tok.Pad())
		}
		if got[k], err = eng.EncodeTexts(context.Background(), prompts); err != nil {
			t.Fatal(err)
		}
	}
	for i, g := range golden {
		want := g.OpenAI
		if len(want) > 16 {
			want = append(slices.Clone(want[:15]), want[len(want)-1])
		}
		for k, what := range []string{"with the files", "built in"} {
			if ids := got[k][i].IDs; !slices.Equal(ids, want) {
				t.Errorf("%s: %q: ids %v, openai's %v", what, g.Text, ids, want)
			}
		}
		if a, b := got[0][i].Embeds, got[1][i].Embeds; len(a) == 0 || !slices.Equal(a, b) {
			t.Errorf("%q: text_embeds with the files %v, built in %v", g.Text, a, b)
		}
	}

	for _, c := range []struct {
		edit func(map[string]any)
		want string
	}{
		{func(m map[string]any) { m["hf_tokenizer_name"] = "org/some-tokenizer" }, `model_cfg.text_cfg.hf_tokenizer_name is "org/some-tokenizer"`},
		{func(m map[string]any) { m["vocab_size"] = 594 }, "model_cfg.text_cfg.vocab_size 594 is smaller than the 49408 ids"},
		{func(m map[string]any) { m["tokenizer_kwargs"] = map[string]any{"clean": "canonicalize"} }, `model_cfg.text_cfg.tokenizer_kwargs.clean is "canonicalize"`},
		{func(m map[string]any) { m["tokenizer_kwargs"] = map[string]any{"clean": "lower", "reduction_mask": ""} }, ""},
	} {
		m, err := models.Open(openCLIPWithCLIPVocab(t, nil, c.edit), models.Options{NoBuild: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = loadTokenizer(m)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("loadTokenizer: %v; want an error saying %q (none when empty)", err, c.want)
		}
	}
}

// openAIGolden is a line of text/testdata/clip/golden.jsonl: a text and
// openai's simple_tokenizer.py ids for it.
type openAIGolden struct {
	Text   string  `json:"text"`
	OpenAI []int64 `json:"openai"`
}

// readOpenAIGolden reads golden.jsonl's lines whose text is not blank.
func readOpenAIGolden(t *testing.T) []openAIGolden {
	t.Helper()
	f, err := os.Open(filepath.Join(clipVocabDir, "golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []openAIGolden
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var g openAIGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(g.Text) != "" { // the engine refuses empty prompts
			out = append(out, g)
		}
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		t.Fatalf("golden.jsonl: %d lines, %v", len(out), err)
	}
	return withFtfyIDs(t, out)
}

// withFtfyIDs takes the openai ids of the texts ftfy changes from
// text/testdata/openai_ftfy.jsonl (the real ftfy, then openai's
// tokenizer: golden.jsonl's openai ids were made without ftfy), and adds
// that file's other texts ftfy changes.
func withFtfyIDs(t *testing.T, gs []openAIGolden) []openAIGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "text", "testdata", "openai_ftfy.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	fixed := map[string][]int64{}
	var order []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		var l struct {
			Text, Fixed string
			OpenAI      []int64
		}
		if err := json.Unmarshal(line, &l); err != nil || l.Text == "" || l.Fixed == l.Text || strings.TrimSpace(l.Fixed) == "" {
			continue
		}
		fixed[l.Text] = l.OpenAI
		order = append(order, l.Text)
	}
	if len(order) < 100 {
		t.Fatalf("openai_ftfy.jsonl: %d texts ftfy changes; want more", len(order))
	}
	for i, g := range gs {
		if ids, ok := fixed[g.Text]; ok {
			gs[i].OpenAI = ids
			delete(fixed, g.Text)
		}
	}
	for _, text := range order {
		if ids, ok := fixed[text]; ok {
			gs = append(gs, openAIGolden{Text: text, OpenAI: ids})
		}
	}
	return gs
}
