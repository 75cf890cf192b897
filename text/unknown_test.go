package text

import (
	"slices"
	"testing"
)

// builtinModel is the model compiled into the program (models/embedded),
// read here from its folder: package text does not import models.
const builtinModel = "../models/embedded/model"

// unknownTexts returns the text of each word Unknown reports for s.
func unknownTexts(t *testing.T, tok *Tokenizer, s string) []string {
	t.Helper()
	ids, err := tok.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	words, err := tok.Unknown(ids)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{}
	for _, w := range words {
		texts = append(texts, w.Text)
	}
	return texts
}

func TestUnknownBuiltin(t *testing.T) {
	tok, err := LoadTokenizerDir(builtinModel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []string
	}{
		{"a red circle", []string{}},
		{"red circle", []string{}},
		{"a blue square above a green triangle", []string{}},
		{"a dog", []string{"dog"}},
		{"Two DOGS playing, in the grass!", []string{"two", "dogs", "playing", "grass"}},
		// Punctuation and digits are not words the vocabulary should know.
		{"!! 42 ,", []string{}},
		// Bytes of one character count as single letters.
		{"café 猫", []string{"café", "猫"}},
		// A word with a longer piece ("bot" t "le</w>") is not spelled out.
		{"bottle", []string{}},
		// An emoji spelled out in bytes names something the model does not
		// know, as a word does.
		{"a red 🐱", []string{"🐱"}},
	} {
		if got := unknownTexts(t, tok, c.text); !slices.Equal(got, c.want) {
			t.Errorf("Unknown(%q) = %q, want %q", c.text, got, c.want)
		}
	}

	// The words carry their token range: "dog" is d o g</w>.
	ids, _ := tok.Encode("a dog")
	words, err := tok.Unknown(ids)
	if err != nil || len(words) != 1 {
		t.Fatalf("Unknown(a dog) = %+v, %v", words, err)
	}
	pieces, err := tok.Tokens(ids[words[0].Start:words[0].End])
	if err != nil || !slices.Equal(pieces, []string{"d", "o", "g</w>"}) {
		t.Errorf("pieces of %+v = %q, %v", words[0], pieces, err)
	}
	// Padding after EOS is special, never unknown.
	padded, _, err := tok.EncodePadded("a dog", 0)
	if err != nil {
		t.Fatal(err)
	}
	ints := make([]int, len(padded))
	for i, id := range padded {
		ints[i] = int(id)
	}
	if words, err := tok.Unknown(ints); err != nil || len(words) != 1 || words[0].Text != "dog" {
		t.Errorf("Unknown(padded a dog) = %+v, %v", words, err)
	}
	if _, err := tok.Unknown([]int{tok.VocabSize()}); err == nil {
		t.Error("Unknown accepted an id past the vocabulary")
	}
}

func TestUnknownCLIP(t *testing.T) {
	tok, err := LoadTokenizerDir(clipDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []string
	}{
		{"a red circle", []string{}},
		{"red circle", []string{}},
		{"a dog", []string{}},
		{"Two DOGS playing, in the grass!", []string{}},
		{"café", []string{}},
		// Not even CLIP's vocabulary has everything.
		{"zxqv 猫", []string{"zxqv", "猫"}},
	} {
		if got := unknownTexts(t, tok, c.text); !slices.Equal(got, c.want) {
			t.Errorf("Unknown(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
