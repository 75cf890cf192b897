package batch

import (
	"fmt"
	"strconv"
	"strings"
)

// maxExpansion bounds what one brace pattern may expand to.
const maxExpansion = 10_000_000

// expandBraces expands the brace patterns of an input, as WebDataset and
// clip-retrieval write shard lists: "shards/{000000..000999}.tar" (a
// numeric range; the width of the first bound is kept, zero-padded) and
// "{train,val}/x.tar" (a list). Several patterns multiply; a pattern may
// not nest. A string without braces is returned as it is.
func expandBraces(s string) ([]string, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		if strings.IndexByte(s, '}') >= 0 {
			return nil, fmt.Errorf("batch: input %q: '}' without '{'", s)
		}
		return []string{s}, nil
	}
	end := strings.IndexByte(s[open:], '}')
	if end < 0 {
		return nil, fmt.Errorf("batch: input %q: '{' without '}'", s)
	}
	end += open
	body := s[open+1 : end]
	if strings.IndexByte(body, '{') >= 0 {
		return nil, fmt.Errorf("batch: input %q: nested braces are not expanded", s)
	}
	var alts []string
	if lo, hi, ok := strings.Cut(body, ".."); ok {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("batch: input %q: range {%s} must be {FIRST..LAST} with 0 ≤ FIRST ≤ LAST", s, body)
		}
		if b-a+1 > maxExpansion {
			return nil, fmt.Errorf("batch: input %q: range {%s} names more than %d inputs", s, body, maxExpansion)
		}
		width := len(lo)
		for i := a; i <= b; i++ {
			alts = append(alts, fmt.Sprintf("%0*d", width, i))
		}
	} else {
		alts = strings.Split(body, ",")
	}
	rest, err := expandBraces(s[end+1:])
	if err != nil {
		return nil, err
	}
	if len(alts)*len(rest) > maxExpansion {
		return nil, fmt.Errorf("batch: input %q names more than %d inputs", s, maxExpansion)
	}
	out := make([]string, 0, len(alts)*len(rest))
	for _, a := range alts {
		for _, r := range rest {
			out = append(out, s[:open]+a+r)
		}
	}
	return out, nil
}

// expandInputs expands the brace patterns of every input, in order.
func expandInputs(inputs []string) ([]string, error) {
	var out []string
	for _, in := range inputs {
		ex, err := expandBraces(in)
		if err != nil {
			return nil, err
		}
		out = append(out, ex...)
	}
	return out, nil
}
