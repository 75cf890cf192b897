package text

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// testPiece is a piece of a ModelProto made by spProtoBytes.
type testPiece struct {
	text  string
	score float32
	typ   uint64
}

// spProtoBytes serializes a small ModelProto: the pieces, a trainer_spec
// with model_type and byte_fallback, a normalizer_spec with the charsmap.
func spProtoBytes(pieces []testPiece, modelType uint64, byteFallback bool, charsmap []byte) []byte {
	var b []byte
	for _, p := range pieces {
		var pb []byte
		pb = protowire.AppendTag(pb, 1, protowire.BytesType)
		pb = protowire.AppendString(pb, p.text)
		pb = protowire.AppendTag(pb, 2, protowire.Fixed32Type)
		pb = protowire.AppendFixed32(pb, math.Float32bits(p.score))
		pb = protowire.AppendTag(pb, 3, protowire.VarintType)
		pb = protowire.AppendVarint(pb, p.typ)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, pb)
	}
	var tb []byte
	tb = protowire.AppendTag(tb, 3, protowire.VarintType)
	tb = protowire.AppendVarint(tb, modelType)
	if byteFallback {
		tb = protowire.AppendTag(tb, 35, protowire.VarintType)
		tb = protowire.AppendVarint(tb, 1)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, tb)
	var nb []byte
	nb = protowire.AppendTag(nb, 1, protowire.BytesType)
	nb = protowire.AppendString(nb, "test")
	if charsmap != nil {
		nb = protowire.AppendTag(nb, 2, protowire.BytesType)
		nb = protowire.AppendBytes(nb, charsmap)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, nb)
}

var testPieces = []testPiece{
	{"<unk>", 0, spUnknown}, {"<s>", 0, spControl}, {"</s>", 0, spControl},
	{"▁", -1, spNormal}, {"a", -2, spNormal}, {"b", -2, spNormal}, {"▁a", -1.5, spNormal}, {"ab", -1, spNormal},
}

// testSPModel is the model of pieces, of type typ, without byte fallback
// or a charsmap, read from its ModelProto bytes.
func testSPModel(t *testing.T, pieces []testPiece, typ uint64) *spModel {
	t.Helper()
	p, err := parseSPProto(spProtoBytes(pieces, typ, false, nil))
	if err != nil {
		t.Fatal(err)
	}
	m, err := newSPModel(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSentencePieceSmallModel(t *testing.T) {
	for _, typ := range []uint64{spUnigram, spBPE} {
		m := testSPModel(t, testPieces, typ)
		// The ids sentencepiece 0.1.97 gives for this ModelProto (built with
		// its sentencepiece_model_pb2): "cc" is one <unk>, merged.
		got := m.appendIDs(nil, "ab cc a")
		if want := []int{3, 7, 3, 0, 6}; !slices.Equal(got, want) {
			t.Errorf("model type %d: ids %v, want %v", typ, got, want)
		}
	}
}

func TestSentencePieceBadModels(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "spm", "bpe_bytes.model"))
	if err != nil {
		t.Fatal(err)
	}
	withType := func(typ uint64) []byte { return spProtoBytes(testPieces, typ, false, nil) }
	noUnk := append([]testPiece(nil), testPieces[1:]...)
	twoUnk := append([]testPiece{{"<unk2>", 0, spUnknown}}, testPieces...)
	dup := append([]testPiece{{"a", 0, spNormal}}, testPieces...)
	empty := append([]testPiece{{"", 0, spNormal}}, testPieces...)
	badType := append([]testPiece{{"x", 0, 9}}, testPieces...)
	bytePiece := append([]testPiece{{"<0x41>", 0, spByte}}, testPieces...)
	badByte := append([]testPiece{{"<0x4G>", 0, spByte}}, testPieces...)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"cut in half", good[:len(good)/2], "spiece.model"},
		{"cut after the pieces", good[:len(good)-200], "spiece.model"},
		{"cut to 3 bytes", good[:3], "spiece.model"},
		{"empty", nil, "no pieces"},
		{"json", []byte(`{"model": {"type": "Unigram"}}`), "not a SentencePiece model"},
		{"text", []byte("hello world, this is not a model\n"), "not a SentencePiece model"},
		{"WORD", withType(spWord), "WORD is not supported"},
		{"CHAR", withType(spChar), "CHAR is not supported"},
		{"model type 7", withType(7), "model_type 7 is unknown"},
		{"charsmap too short", spProtoBytes(testPieces, spUnigram, false, []byte{1, 2, 3}), "precompiled_charsmap"},
		{"charsmap size past the end", spProtoBytes(testPieces, spUnigram, false, []byte{200, 0, 0, 0, 1, 2, 3, 4}), "precompiled_charsmap"},
		{"charsmap size not units", spProtoBytes(testPieces, spUnigram, false, []byte{3, 0, 0, 0, 1, 2, 3, 4, 0}), "precompiled_charsmap"},
		{"charsmap strings not ended", spProtoBytes(testPieces, spUnigram, false, []byte{4, 0, 0, 0, 1, 2, 3, 4, 'a'}), "NUL"},
		{"no unknown piece", spProtoBytes(noUnk, spUnigram, false, nil), "no UNKNOWN piece"},
		{"two unknown pieces", spProtoBytes(twoUnk, spUnigram, false, nil), "both UNKNOWN"},
		{"duplicate piece", spProtoBytes(dup, spUnigram, false, nil), "defined twice"},
		{"empty piece", spProtoBytes(empty, spUnigram, false, nil), "piece 0 is empty"},
		{"bad piece type", spProtoBytes(badType, spUnigram, false, nil), "type 9"},
		{"byte piece without byte_fallback", spProtoBytes(bytePiece, spUnigram, false, nil), "byte_fallback is false"},
		{"byte_fallback without byte pieces", spProtoBytes(bytePiece, spUnigram, true, nil), "no byte piece <0x00>"},
		{"bad byte piece", spProtoBytes(badByte, spUnigram, true, nil), "is not <0xNN>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadTokenizer(fstest.MapFS{"spiece.model": {Data: c.data}})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "spiece.model") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to name spiece.model and say %q", err, c.want)
			}
		})
	}
}

func TestSentencePieceConfigErrors(t *testing.T) {
	model, err := os.ReadFile(filepath.Join("testdata", "spm", "unigram_nfkc.model"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadTokenizer(fstest.MapFS{
		"spiece.model":          {Data: model},
		"tokenizer_config.json": {Data: []byte(`{"tokenizer_class": "SiglipTokenizer", "eos_token": "<eos>"}`)},
	})
	if err == nil || !strings.Contains(err.Error(), `"<eos>"`) || !strings.Contains(err.Error(), "spiece.model") {
		t.Errorf("EOS not in the model: error %v, want one naming the token and the file", err)
	}
	tok, err := LoadTokenizer(siglipFS(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]int{{-1}, {3000}, {1 << 30}} {
		if _, err := tok.Tokens(ids); err == nil {
			t.Errorf("Tokens(%v): no error", ids)
		}
		if _, err := tok.Words(ids); err == nil {
			t.Errorf("Words(%v): no error", ids)
		}
	}
}

// spFuzzSeeds are small models for the fuzzers to start from (the test
// models are too large for the fuzzing engine to mutate quickly): the first
// pieces of bpe_bytes (its byte pieces and user-defined ones) as BPE and as
// Unigram, the hand-made model, and one with a small charsmap.
func spFuzzSeeds(f *testing.F) [][]byte {
	m := loadSPModel(f, "bpe_bytes")
	var pieces []testPiece
	for _, pc := range m.pieces[:300] {
		pieces = append(pieces, testPiece{pc.text, pc.score, uint64(pc.typ)})
	}
	// A darts-clone array of 4 units, then the strings "x" and "yz".
	charsmap := []byte{16, 0, 0, 0, 0, 4, 0, 0, 'a', 1, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 'x', 0, 'y', 'z', 0}
	return [][]byte{
		spProtoBytes(pieces, spBPE, true, nil), spProtoBytes(pieces, spUnigram, true, nil),
		spProtoBytes(testPieces, spUnigram, false, nil), spProtoBytes(testPieces, spBPE, false, nil),
		spProtoBytes(testPieces, spUnigram, false, charsmap),
	}
}

func FuzzSentencePieceModel(f *testing.F) {
	for _, b := range spFuzzSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseSPProto(b)
		if err != nil {
			return
		}
		m, err := newSPModel(p)
		if err != nil {
			return
		}
		for _, s := range []string{"", " ", "a photo of a cat", "ＡＢ ☃ 猫 \t x  y ", "<0x41>▁▁"} {
			got := m.appendIDs(nil, s)
			for _, id := range got {
				if id < 0 || id >= len(p.pieces) {
					t.Fatalf("%q: id %d out of range [0, %d)", s, id, len(p.pieces))
				}
			}
			if m.unigramWords {
				u := *m
				u.unigramWords = false
				if want := u.appendIDs(nil, s); !slices.Equal(got, want) {
					t.Fatalf("%q: by words %v, whole %v", s, got, want)
				}
			}
		}
	})
}

func FuzzSentencePieceEncode(f *testing.F) {
	for _, s := range []string{"", "a photo of a cat", "  Ｈｅｌｌｏ\t\n🐱 </s> <unk>x", "▁▁", "\x00\xff\xfe", "ﬁ½㍻", " A Photo, of a CAT!  ", "x</s>y <unk>", "it's 3:45 -- ok?"} {
		f.Add(s)
	}
	var models []*spModel
	for _, name := range spmModels {
		models = append(models, loadSPModel(f, name))
	}
	sig, err := LoadTokenizer(siglipFS(f))
	if err != nil {
		f.Fatal(err)
	}
	general := siglipGeneral(f, sig)
	f.Fuzz(func(t *testing.T, s string) {
		v := sanitizeUTF8(s)
		if !utf8.ValidString(v) {
			t.Fatalf("sanitizeUTF8(%q) is not valid UTF-8", s)
		}
		for i, m := range models {
			got := m.appendIDs(nil, v)
			for _, id := range got {
				if id < 0 || id >= len(m.pieces) {
					t.Fatalf("%s %q: id %d out of range", spmModels[i], v, id)
				}
			}
			if m.cache != nil { // the cache gives what merging gives
				u := *m
				u.cache = nil
				if want := u.appendIDs(nil, v); !slices.Equal(got, want) {
					t.Fatalf("%s %q: cached %v, merged %v", spmModels[i], v, got, want)
				}
			}
			if m.unigramWords { // word by word, what the whole text gives
				u := *m
				u.unigramWords = false
				if want := u.appendIDs(nil, v); !slices.Equal(got, want) {
					t.Fatalf("%s %q: by words %v, whole %v", spmModels[i], v, got, want)
				}
			}
		}
		ids, mask, err := sig.EncodePadded(s, 0)
		if err != nil || len(ids) != 64 || len(mask) != 64 {
			t.Fatalf("%q: %d ids, %d mask, %v", s, len(ids), len(mask), err)
		}
		for _, id := range ids {
			if id < 0 || int(id) >= sig.VocabSize() {
				t.Fatalf("SigLIP %q: id %d out of range", s, id)
			}
		}
		// The ASCII fast path gives what the general path gives.
		if want, _, err := general.EncodePadded(s, 0); err != nil || !slices.Equal(ids, want) {
			t.Fatalf("SigLIP %q: fast path %v, general %v (%v)", s, ids, want, err)
		}
	})
}
