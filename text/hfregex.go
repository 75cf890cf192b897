package text

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"unicode/utf8"
)

// The library compiles a tokenizer.json's {"Regex": ...} patterns with
// Oniguruma, where \s, \d and \w are Unicode classes; Go's are ASCII.
// onigPattern rewrites them so that Go's regexp means what Oniguruma does:
// \s the White_Space characters, \d the decimal digits (Nd), \w letters,
// marks, decimal digits and connector punctuation, \h hexadecimal digits,
// and the upper-case letters their complements.
const (
	onigSpace = `\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`
	onigWord  = `\p{L}\p{M}\p{Nd}\p{Pc}`
	onigHex   = `0-9A-Fa-f`
)

// onigPattern returns p in Go's syntax.
func onigPattern(p string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			i++
			e := p[i]
			var class string
			switch e {
			case 's', 'S':
				class = onigSpace
			case 'w', 'W':
				class = onigWord
			case 'h', 'H':
				class = onigHex
			case 'd':
				b.WriteString(`\p{Nd}`)
				continue
			case 'D':
				b.WriteString(`\P{Nd}`)
				continue
			default:
				b.WriteByte(c)
				b.WriteByte(e)
				continue
			}
			negated := e == 'S' || e == 'W' || e == 'H'
			switch {
			case inClass && negated:
				return "", fmt.Errorf(`\%c inside a character class is not supported`, e)
			case inClass:
				b.WriteString(class)
			case negated:
				b.WriteString("[^" + class + "]")
			default:
				b.WriteString("[" + class + "]")
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			// A ']' right after "[" or "[^" is a literal.
			if i+1 < len(p) && p[i+1] == '^' {
				i++
				b.WriteByte('^')
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++
				b.WriteByte(']')
			}
		case c == '[' && inClass && strings.HasPrefix(p[i:], "[:"):
			// A POSIX class such as [:alpha:] inside a class.
			j := strings.Index(p[i+2:], ":]")
			if j < 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(p[i : i+2+j+2])
			i += 2 + j + 1
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// hfRegex is a compiled {"Regex": ...} pattern. When the pattern is one
// character class (or one character) repeated at least min times and at
// most max (max 1: each character alone; max -1: no limit), matches are
// found by a scan over the text (runs), which finds what the regular
// expression finds: each maximal run of at least min class characters
// (leftmost, greedy). Other patterns run on Go's regexp.
type hfRegex struct {
	re   *regexp.Regexp
	runs *classRuns
}

type classRuns struct {
	ascii    [utf8.RuneSelf]bool
	ranges   [][2]rune // non-ASCII ranges, in order
	single   int       // the class's one byte when it is one ASCII byte, else -1
	min, max int
}

func compileHFRegex(pattern string) (*hfRegex, error) {
	p, err := onigPattern(pattern)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	r := &hfRegex{re: re}
	if tree, err := syntax.Parse(p, syntax.Perl); err == nil {
		r.runs = classRunsOf(tree)
	}
	return r, nil
}

// classRunsOf recognises a class repeated at least n times.
func classRunsOf(t *syntax.Regexp) *classRuns {
	min, max := 1, 1
	switch t.Op {
	case syntax.OpPlus:
		min, max = 1, -1
		if t.Flags&syntax.NonGreedy != 0 {
			max = 1 // one character at a time
		}
		t = t.Sub[0]
	case syntax.OpRepeat:
		if t.Min < 1 || t.Max != -1 {
			return nil
		}
		min, max = t.Min, -1
		if t.Flags&syntax.NonGreedy != 0 {
			return nil
		}
		t = t.Sub[0]
	}
	var rs []rune
	switch {
	case t.Op == syntax.OpCharClass:
		rs = t.Rune
	case t.Op == syntax.OpLiteral && len(t.Rune) == 1 && t.Flags&syntax.FoldCase == 0:
		rs = []rune{t.Rune[0], t.Rune[0]}
	default:
		return nil
	}
	c := &classRuns{min: min, max: max}
	for i := 0; i+1 < len(rs); i += 2 {
		lo, hi := rs[i], rs[i+1]
		for r := lo; r <= hi && r < utf8.RuneSelf; r++ {
			c.ascii[r] = true
		}
		if hi >= utf8.RuneSelf {
			c.ranges = append(c.ranges, [2]rune{max32(lo, utf8.RuneSelf), hi})
		}
	}
	sort.Slice(c.ranges, func(i, j int) bool { return c.ranges[i][0] < c.ranges[j][0] })
	c.single = -1
	if len(rs) == 2 && rs[0] == rs[1] && rs[0] < utf8.RuneSelf {
		c.single = int(rs[0])
	}
	return c
}

func max32(a, b rune) rune {
	if a > b {
		return a
	}
	return b
}

// has reports whether r, not ASCII, is in the class.
func (c *classRuns) has(r rune) bool {
	if len(c.ranges) == 0 {
		return false
	}
	i := sort.Search(len(c.ranges), func(i int) bool { return c.ranges[i][1] >= r })
	return i < len(c.ranges) && c.ranges[i][0] <= r
}

// replaceAll appends s with every match replaced by to.
func (x *hfRegex) replaceAll(dst []byte, s, to string) []byte {
	c := x.runs
	if c == nil {
		return append(dst, x.re.ReplaceAllLiteralString(s, to)...)
	}
	copied := 0 // s[:copied] is in dst (or replaced)
	for i := 0; i < len(s); {
		if c.single >= 0 {
			// The class is one ASCII byte: jump to it.
			j := strings.IndexByte(s[i:], byte(c.single))
			if j < 0 {
				break
			}
			i += j
		}
		r, n := rune(s[i]), 1
		in := false
		if r < utf8.RuneSelf {
			in = c.ascii[r]
		} else {
			r, n = utf8.DecodeRuneInString(s[i:])
			in = c.has(r)
		}
		if !in {
			i += n
			continue
		}
		// A run of class characters: [i, j), k of them.
		j, k := i+n, 1
		for j < len(s) && (c.max < 0 || k < c.max) {
			r, n := rune(s[j]), 1
			if r < utf8.RuneSelf {
				if !c.ascii[r] {
					break
				}
			} else if r, n = utf8.DecodeRuneInString(s[j:]); !c.has(r) {
				break
			}
			j += n
			k++
		}
		if k >= c.min {
			dst = append(append(dst, s[copied:i]...), to...)
			copied = j
		}
		i = j
	}
	return append(dst, s[copied:]...)
}
