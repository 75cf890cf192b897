package text

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// hfUnigram is the Hugging Face tokenizers library's models::unigram as a
// tokenizer.json gives it: pieces with float64 scores, searched by Viterbi
// (Unigram::encode_optimized) on each pre-token. Every piece of the
// vocabulary, special ones included, is in the trie; an unknown character
// costs the lowest score of all pieces minus 10; runs of unknown characters
// are fused into one piece, which is then looked up in the vocabulary, else
// spelled as <0xNN> byte pieces (byte_fallback) when all of them exist, else
// the unknown id. It is read-only after loading but for its cache.
type hfUnigram struct {
	tokens []string  // by id, as the vocabulary lists them
	scores []float64 // by id
	// ids maps a piece to its id; of pieces listed twice, the last (the
	// library's token_to_ids keeps the last insertion). trie holds the same.
	ids          map[string]int32
	trie         *trie
	unkScore     float64
	unk          int32
	byteFallback bool
	byteID       [256]int32 // noID when the vocabulary lacks the piece
	cache        hfCache
}

// uniNode is a position of the Viterbi lattice: the best path ending there,
// its last piece and where that piece starts (-1: not reached).
type uniNode struct {
	score float64
	start int32
	id    int32
}

// hfUnigramModel is the part of a Unigram model object that is read.
type hfUnigramModel struct {
	UnkID        json.RawMessage `json:"unk_id"`
	ByteFallback bool            `json:"byte_fallback"`
	Vocab        json.RawMessage `json:"vocab"`
}

// buildHFUnigram reads tokenizer.json's model of type "Unigram" as the
// library's Unigram::from does, and refuses what it would fail on later.
func buildHFUnigram(mj hfUnigramModel) (*hfUnigram, error) {
	const where = "text: tokenizer.json: model"
	if isNull(mj.Vocab) {
		return nil, errors.New(where + ".vocab is missing (want a list of [piece, score])")
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(mj.Vocab, &entries); err != nil {
		return nil, fmt.Errorf(where+".vocab: want a list of [piece, score]: %w", err)
	}
	if len(entries) == 0 {
		return nil, errors.New(where + ".vocab is empty (want at least the unknown piece)")
	}
	if len(entries) > hfMaxID {
		return nil, fmt.Errorf(where+".vocab has %d pieces, want at most %d", len(entries), hfMaxID)
	}
	m := &hfUnigram{
		tokens: make([]string, len(entries)), scores: make([]float64, len(entries)),
		ids: make(map[string]int32, len(entries)), byteFallback: mj.ByteFallback,
	}
	minScore := math.Inf(1)
	var pair []json.RawMessage
	for i, raw := range entries {
		pair = pair[:0]
		if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf(where+".vocab[%d]: %.60s is not [piece, score]", i, raw)
		}
		var piece string
		if err := json.Unmarshal(pair[0], &piece); err != nil {
			return nil, fmt.Errorf(where+".vocab[%d]: piece %.40s is not a string", i, pair[0])
		}
		score, err := jsonNumber(pair[1])
		if err != nil {
			return nil, fmt.Errorf(where+".vocab[%d] (%q): score %.40s is not a number", i, piece, pair[1])
		}
		m.tokens[i], m.scores[i] = piece, score
		m.ids[piece] = int32(i)
		minScore = min(minScore, score)
	}
	m.unkScore = minScore - 10 // the library's K_UNK_PENALTY

	// unk_id: the library accepts null, and then fails on any character
	// outside the vocabulary; it is refused here.
	switch raw := bytes.TrimSpace(mj.UnkID); {
	case isNull(raw):
		return nil, errors.New(where + ".unk_id is null or missing: the library then fails on text with a character outside the vocabulary; want the id of the unknown piece")
	default:
		id, err := strconv.Atoi(string(raw))
		if err != nil || id < 0 || id >= len(entries) {
			return nil, fmt.Errorf(where+".unk_id %.40s: want an id below the vocabulary's %d pieces", raw, len(entries))
		}
		m.unk = int32(id)
	}

	keys := make([]trieKey, 0, len(m.ids))
	for piece, id := range m.ids {
		if piece != "" { // an empty piece is never found in text
			keys = append(keys, trieKey{piece, id})
		}
	}
	m.trie = buildTrie(keys)
	for b := range m.byteID {
		m.byteID[b] = noID
		if id, ok := m.ids[bytePieceName(byte(b))]; ok {
			m.byteID[b] = id
		}
	}
	m.cache.init()
	return m, nil
}

// jsonNumber reads a JSON number as float64 (as serde reads an f64).
func jsonNumber(raw json.RawMessage) (float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, errors.New("not a number")
	}
	return strconv.ParseFloat(string(raw), 64)
}

// bytePieceName is the byte-fallback piece of b, "<0xNN>".
func bytePieceName(b byte) string {
	const hex = "0123456789ABCDEF"
	return string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})
}

func (m *hfUnigram) vocabSize() int             { return len(m.tokens) }
func (m *hfUnigram) tokenIDs() map[string]int32 { return m.ids }
func (m *hfUnigram) idTokens() []string         { return m.tokens }
func (m *hfUnigram) bytePieces() bool           { return m.byteFallback }

// word appends the ids of one pre-token, through the cache.
func (m *hfUnigram) word(dst []int, w string, sc *hfScratch) []int {
	if w == "" {
		return dst
	}
	if ids, ok := m.cache.get(w); ok {
		return widen(dst, ids)
	}
	ids := m.encode(sc.ids[:0], w, sc)
	sc.ids = ids
	putCopy(&m.cache, w, ids)
	return widen(dst, ids)
}

// encode appends the ids of w (not empty) to dst: the library's
// encode_optimized, then tokenize's lookup of each piece.
func (m *hfUnigram) encode(dst []int32, w string, sc *hfScratch) []int32 {
	size := len(w)
	best := sc.lattice[:0]
	for range size + 1 {
		best = append(best, uniNode{start: -1})
	}
	sc.lattice = best
	nodes := m.trie.nodes
	for start := 0; start < size; {
		till := best[start].score
		mblen := min(oneCharLen(w[start]), size-start)
		single := false
		n := int32(0)
		for i := start; i < size; i++ {
			c := nodes[n].base + int32(w[i])
			if c < 0 || int(c) >= len(nodes) || nodes[c].check != n {
				break
			}
			n = c
			id := nodes[n].value
			if id < 0 {
				continue
			}
			cand := m.scores[id] + till
			if t := &best[i+1]; t.start < 0 || cand > t.score {
				*t = uniNode{score: cand, start: int32(start), id: id}
			}
			if i+1-start == mblen {
				single = true
			}
		}
		if !single {
			cand := m.unkScore + till
			if t := &best[start+mblen]; t.start < 0 || cand > t.score {
				*t = uniNode{score: cand, start: int32(start), id: m.unk}
			}
		}
		start += mblen
	}
	// Backtrack into sc.spans (last piece first), then emit in order with
	// runs of unknown pieces fused.
	spans := sc.uspans[:0]
	for end := size; end > 0; {
		nd := best[end]
		spans = append(spans, spSpan{start: nd.start, end: int32(end), id: nd.id})
		end = int(nd.start)
	}
	sc.uspans = spans
	for i := len(spans) - 1; i >= 0; i-- {
		p := spans[i]
		if p.id != m.unk {
			dst = append(dst, p.id)
			continue
		}
		end := p.end
		for i > 0 && spans[i-1].id == m.unk {
			i--
			end = spans[i].end
		}
		dst = m.unknown(dst, w[p.start:end])
	}
	return dst
}

// unknown appends the ids of a fused run of unknown pieces: the piece it
// spells when there is one, else its bytes' pieces, else the unknown id.
func (m *hfUnigram) unknown(dst []int32, s string) []int32 {
	if id := m.trie.lookup(s); id >= 0 {
		return append(dst, id)
	}
	if m.byteFallback {
		all := true
		for i := 0; i < len(s); i++ {
			if m.byteID[s[i]] == noID {
				all = false
				break
			}
		}
		if all {
			for i := 0; i < len(s); i++ {
				dst = append(dst, m.byteID[s[i]])
			}
			return dst
		}
	}
	return append(dst, m.unk)
}
