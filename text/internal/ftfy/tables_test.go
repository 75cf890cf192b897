package ftfy

import (
	"slices"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// TestFtfyCodecs checks the generated codec tables against
// golang.org/x/text's charmaps: every byte a charmap defines decodes to the
// same character, and the bytes it leaves undefined (the holes ftfy's sloppy
// codecs fill, and ISO 8859-2's C1 controls, which Python decodes to
// themselves) decode as Latin-1.
func TestFtfyCodecs(t *testing.T) {
	want := map[string]*charmap.Charmap{
		"latin-1": charmap.ISO8859_1, "sloppy-windows-1252": charmap.Windows1252,
		"sloppy-windows-1251": charmap.Windows1251, "sloppy-windows-1250": charmap.Windows1250,
		"sloppy-windows-1253": charmap.Windows1253, "sloppy-windows-1254": charmap.Windows1254,
		"sloppy-windows-1257": charmap.Windows1257, "iso-8859-2": charmap.ISO8859_2,
		"macroman": charmap.Macintosh, "cp437": charmap.CodePage437,
	}
	if len(codecs) != len(want) {
		t.Fatalf("%d codecs, want %d", len(codecs), len(want))
	}
	for _, c := range codecs {
		cm := want[c.name]
		if cm == nil {
			t.Fatalf("codec %q: no charmap to compare with", c.name)
		}
		holes := 0
		for b := 0x80; b < 0x100; b++ {
			r := cm.DecodeByte(byte(b))
			if r == utf8.RuneError {
				holes++
				r = rune(b)
			}
			if got := c.high[b-0x80]; got != r {
				t.Errorf("%s: byte %02X decodes to %U, want %U", c.name, b, got, r)
			}
		}
		if holes > 0 && !c.sloppy && c.name != "iso-8859-2" {
			t.Errorf("%s: %d undefined bytes in a codec that is not sloppy", c.name, holes)
		}
	}
	var undefined []byte
	for b := 0x80; b < 0x100; b++ {
		if charmap.Windows1252.DecodeByte(byte(b)) == utf8.RuneError {
			undefined = append(undefined, byte(b))
		}
	}
	if !slices.Equal(undefined, cp1252Undefined[:]) {
		t.Errorf("cp1252Undefined = % X, windows-1252 leaves % X undefined", cp1252Undefined, undefined)
	}
}

// FuzzFixText checks that any text, valid UTF-8 or not, gives valid UTF-8
// and that plain ASCII comes back unchanged.
func FuzzFixText(f *testing.F) {
	for _, s := range []string{"", "a photo", "cafÃ©", "â€œquotedâ€\x9d", "&amp;lt;", "\x1b[31mx", "í\u00a0½í¸\n",
		"Ã© À\n", "ﬁ ＡＢ", "a\r\nb\u2028", "ÐŸÑ€Ð¸Ð²ÐµÑ‚", "\xff\xfe", "Ã\xa0 la"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := FixText(s)
		if !utf8.ValidString(got) {
			t.Errorf("FixText(%+q) = %+q: not UTF-8", s, got)
		}
		if plainASCII(s) && got != s {
			t.Errorf("FixText(%+q) = %+q: plain ASCII changed", s, got)
		}
	})
}
