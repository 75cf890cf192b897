package text

import (
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"
)

// hfCharsmap is the library's Precompiled normalizer (the spm_precompiled
// crate): SentencePiece's precompiled_charsmap applied to each extended
// grapheme cluster. A cluster shorter than 6 bytes whose start is a key is
// replaced as a whole by the replacement of the shortest key it starts
// with; any other cluster one character at a time, each by its own
// replacement (or kept). This is not SentencePiece's normalizer, which
// takes the longest key at each point and also cleans whitespace up.
type hfCharsmap struct {
	cm *charsmap
	// ascii[c] is the replacement of the one-byte text c (ok: c is a key).
	ascii [utf8.RuneSelf]struct {
		rep string
		ok  bool
	}
	// keep[c] says that the byte c is an ASCII character other than CR that
	// is not a key: kept as it is when an ASCII byte (or the end) follows.
	keep [256]bool
}

func parseHFCharsmap(b64 string) (*hfCharsmap, error) {
	blob, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("precompiled_charsmap is not base64: %w", err)
	}
	cm, err := parseCharsmap(blob)
	if err != nil {
		return nil, err
	}
	if !utf8.ValidString(cm.normalized) {
		return nil, errors.New("precompiled_charsmap: the normalized strings are not valid UTF-8")
	}
	h := &hfCharsmap{cm: cm}
	for c := range utf8.RuneSelf {
		h.ascii[c].rep, h.ascii[c].ok = cm.shortest(string(rune(c)))
		h.keep[c] = !h.ascii[c].ok && c != '\r'
	}
	return h, nil
}

// shortest is spm_precompiled's transform: the replacement of the shortest
// key that s starts with (the first of darts-clone's common-prefix results),
// ok false when there is none. As the crate's search does, it stops at a
// NUL byte.
func (cm *charsmap) shortest(s string) (string, bool) {
	if s == "" || !cm.first[s[0]] {
		return "", false
	}
	u := cm.units
	id := dartsOffset(u[0])
	for i := 0; i < len(s); i++ {
		c := uint32(s[i])
		if c == 0 {
			return "", false
		}
		id ^= c
		if id >= uint32(len(u)) {
			return "", false
		}
		unit := u[id]
		if dartsLabel(unit) != c {
			return "", false
		}
		id ^= dartsOffset(unit)
		if dartsHasLeaf(unit) {
			if id >= uint32(len(u)) {
				return "", false
			}
			v := int(dartsValue(u[id]))
			if v > len(cm.normalized) {
				return "", false
			}
			rep := cm.normalized[v:]
			for end := 0; end < len(rep); end++ {
				if rep[end] == 0 {
					return rep[:end], true
				}
			}
			return rep, true
		}
	}
	return "", false
}

// appendNormalized appends s normalized.
func (h *hfCharsmap) appendNormalized(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		// An ASCII character followed by another (not CR LF) is a cluster
		// of its own: a run of those that are no key is kept as it is.
		j := i
		for j < len(s) && h.keep[s[j]] {
			j++
		}
		// The run's last byte starts a longer cluster when a non-ASCII
		// byte follows.
		if j > i && j < len(s) && s[j] >= utf8.RuneSelf {
			j--
		}
		if j > i {
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if c := s[i]; c < utf8.RuneSelf && (i+1 == len(s) || (s[i+1] < utf8.RuneSelf && (c != '\r' || s[i+1] != '\n'))) {
			a := &h.ascii[c] // a key
			dst = append(dst, a.rep...)
			i++
			continue
		}
		n := graphemeLen(s[i:])
		g := s[i : i+n]
		i += n
		if n < 6 {
			if rep, ok := h.cm.shortest(g); ok {
				dst = append(dst, rep...)
				continue
			}
		}
		for j := 0; j < len(g); {
			_, m := utf8.DecodeRuneInString(g[j:])
			if rep, ok := h.cm.shortest(g[j : j+m]); ok {
				dst = append(dst, rep...)
			} else {
				dst = append(dst, g[j:j+m]...)
			}
			j += m
		}
	}
	return dst
}
