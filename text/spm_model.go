package text

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Piece types of a SentencePiece ModelProto.
const (
	spNormal      = 1
	spUnknown     = 2
	spControl     = 3
	spUserDefined = 4
	spUnused      = 5
	spByte        = 6
)

// Model types of a SentencePiece TrainerSpec.
const (
	spUnigram = 1
	spBPE     = 2
	spWord    = 3
	spChar    = 4
)

// spProto is the part of a SentencePiece ModelProto that encoding needs.
type spProto struct {
	pieces []spPiece
	// trainer_spec
	modelType                  int
	byteFallback, wsAsSuffix   bool
	unkID, bosID, eosID, padID int
	// normalizer_spec
	normName                     string
	charsmap                     []byte
	dummyPrefix, removeWS, escWS bool
}

type spPiece struct {
	text  string
	score float32
	typ   uint8
}

// parseSPProto reads a serialized SentencePiece ModelProto (the
// sentencepiece_model.proto messages: pieces 1, trainer_spec 2,
// normalizer_spec 3). Fields it does not need are skipped; missing ones take
// the proto's defaults.
func parseSPProto(b []byte) (*spProto, error) {
	p := &spProto{
		modelType: spUnigram, unkID: 0, bosID: 1, eosID: 2, padID: -1,
		dummyPrefix: true, removeWS: true, escWS: true,
	}
	hasTrainer, hasNormalizer := false, false
	err := walkProto(b, func(num protowire.Number, typ protowire.Type, v uint64, sub []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			pc, err := parseSPPiece(sub)
			if err != nil {
				return fmt.Errorf("piece %d: %w", len(p.pieces), err)
			}
			p.pieces = append(p.pieces, pc)
		case num == 2 && typ == protowire.BytesType:
			hasTrainer = true
			if err := p.parseTrainerSpec(sub); err != nil {
				return fmt.Errorf("trainer_spec: %w", err)
			}
		case num == 3 && typ == protowire.BytesType:
			hasNormalizer = true
			if err := p.parseNormalizerSpec(sub); err != nil {
				return fmt.Errorf("normalizer_spec: %w", err)
			}
		case num >= 1 && num <= 3:
			return fmt.Errorf("field %d has wire type %d, want a message", num, typ)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case len(p.pieces) == 0:
		return nil, errors.New("no pieces (want a SentencePiece ModelProto)")
	case !hasTrainer:
		return nil, errors.New("no trainer_spec (is the file cut short?)")
	case !hasNormalizer:
		return nil, errors.New("no normalizer_spec (is the file cut short?)")
	}
	return p, nil
}

func parseSPPiece(b []byte) (spPiece, error) {
	pc := spPiece{typ: spNormal}
	err := walkProto(b, func(num protowire.Number, typ protowire.Type, v uint64, sub []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			if !utf8.Valid(sub) {
				return fmt.Errorf("piece %q is not valid UTF-8", sub)
			}
			pc.text = string(sub)
		case num == 2 && typ == protowire.Fixed32Type:
			pc.score = math.Float32frombits(uint32(v))
		case num == 3 && typ == protowire.VarintType:
			if v < spNormal || v > spByte {
				return fmt.Errorf("type %d, want 1..6 (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE)", int64(v))
			}
			pc.typ = uint8(v)
		case num >= 1 && num <= 3:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	return pc, err
}

func (p *spProto) parseTrainerSpec(b []byte) error {
	return walkProto(b, func(num protowire.Number, typ protowire.Type, v uint64, sub []byte) error {
		if typ != protowire.VarintType {
			return nil
		}
		i := int(int32(v)) // int32 fields are sign-extended varints
		switch num {
		case 3:
			p.modelType = i
		case 24:
			p.wsAsSuffix = v != 0
		case 35:
			p.byteFallback = v != 0
		case 40:
			p.unkID = i
		case 41:
			p.bosID = i
		case 42:
			p.eosID = i
		case 43:
			p.padID = i
		}
		return nil
	})
}

func (p *spProto) parseNormalizerSpec(b []byte) error {
	return walkProto(b, func(num protowire.Number, typ protowire.Type, v uint64, sub []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			p.normName = string(sub)
		case num == 2 && typ == protowire.BytesType:
			p.charsmap = sub
		case num == 3 && typ == protowire.VarintType:
			p.dummyPrefix = v != 0
		case num == 4 && typ == protowire.VarintType:
			p.removeWS = v != 0
		case num == 5 && typ == protowire.VarintType:
			p.escWS = v != 0
		}
		return nil
	})
}

// walkProto calls f for each field of the message b: v holds varint and
// fixed values, sub the bytes of length-delimited ones. Groups are skipped.
func walkProto(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, sub []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("bad field tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v uint64
		var sub []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			sub, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, sub); err != nil {
			return err
		}
	}
	return nil
}

// newSPModel checks a ModelProto as SentencePiece's model loading does and
// builds the tables encoding uses.
func newSPModel(p *spProto) (*spModel, error) {
	switch p.modelType {
	case spUnigram, spBPE:
	case spWord, spChar:
		return nil, fmt.Errorf("trainer_spec.model_type %s is not supported (want UNIGRAM or BPE)", map[int]string{spWord: "WORD", spChar: "CHAR"}[p.modelType])
	default:
		return nil, fmt.Errorf("trainer_spec.model_type %d is unknown (want 1, UNIGRAM, or 2, BPE)", p.modelType)
	}
	m := &spModel{bpe: p.modelType == spBPE, pieces: p.pieces, unk: -1, byteFallback: p.byteFallback}
	for i := range m.byteID {
		m.byteID[i] = -1
	}
	normal := make(map[string]int32, len(p.pieces))
	m.reserved = map[string]int32{}
	var userDefined []string
	for i, pc := range p.pieces {
		if pc.text == "" {
			return nil, fmt.Errorf("piece %d is empty", i)
		}
		dst := m.reserved
		if pc.typ == spNormal || pc.typ == spUserDefined || pc.typ == spUnused {
			dst = normal
		}
		if _, dup := dst[pc.text]; dup {
			return nil, fmt.Errorf("piece %d %q is defined twice", i, pc.text)
		}
		dst[pc.text] = int32(i)
		switch pc.typ {
		case spUserDefined:
			userDefined = append(userDefined, pc.text)
		case spUnknown:
			if m.unk >= 0 {
				return nil, fmt.Errorf("pieces %d and %d are both UNKNOWN (want one)", m.unk, i)
			}
			m.unk = int32(i)
		case spByte:
			if !p.byteFallback {
				return nil, fmt.Errorf("byte piece %d %q, but trainer_spec.byte_fallback is false", i, pc.text)
			}
			b, ok := bytePiece(pc.text)
			if !ok {
				return nil, fmt.Errorf("byte piece %d %q is not <0xNN>", i, pc.text)
			}
			m.byteID[b] = int32(i)
		}
	}
	if m.unk < 0 {
		return nil, errors.New("no UNKNOWN piece (want one, such as <unk>)")
	}
	if p.byteFallback {
		for b, id := range m.byteID {
			if id < 0 {
				return nil, fmt.Errorf("trainer_spec.byte_fallback is true but there is no byte piece <0x%02X> (want all 256)", b)
			}
		}
	}
	// Scores as unigram_model.cc takes them: the min and max over NORMAL
	// pieces, starting from FLT_MAX and FLT_MIN; 0 when they stay there.
	m.minScore, m.maxScore = math.MaxFloat32, minNormalFloat32
	for _, pc := range p.pieces {
		if pc.typ == spNormal {
			m.minScore = min(m.minScore, pc.score)
			m.maxScore = max(m.maxScore, pc.score)
		}
	}
	if m.minScore == math.MaxFloat32 {
		m.minScore = 0
	}
	if m.maxScore == minNormalFloat32 {
		m.maxScore = 0
	}

	keys := make([]trieKey, 0, len(normal))
	for s, id := range normal {
		keys = append(keys, trieKey{s, id})
	}
	m.trie = buildTrie(keys)
	m.lattice = make([]spLatticeNode, len(m.trie.nodes))
	for i, nd := range m.trie.nodes {
		m.lattice[i] = spLatticeNode{base: nd.base, check: nd.check, id: -1}
		if id := nd.value; id >= 0 && p.pieces[id].typ != spUnused {
			m.lattice[i].id, m.lattice[i].score, m.lattice[i].userDefined = id, p.pieces[id].score, p.pieces[id].typ == spUserDefined
		}
	}
	if len(userDefined) > 0 {
		uk := make([]trieKey, len(userDefined))
		for i, s := range userDefined {
			uk[i] = trieKey{s, normal[s]}
		}
		m.matcher = buildTrie(uk)
	}
	// reservedOf maps a NORMAL-class id whose text is also a reserved piece
	// to that piece (PieceToId looks reserved pieces up first).
	for s, id := range normal {
		if r, ok := m.reserved[s]; ok {
			if m.override == nil {
				m.override = map[int32]int32{}
			}
			m.override[id] = r
		}
	}
	for s := range m.reserved {
		if utf8.RuneCountInString(s) == 1 {
			m.shortReserved = true
		}
	}
	norm, err := newSPNormalizer(p, m.matcher)
	if err != nil {
		return nil, err
	}
	m.norm = norm
	if !m.bpe && !p.wsAsSuffix {
		m.unigramWords = true
		mark := norm.mark()
		for _, pc := range p.pieces {
			if (pc.typ == spNormal || pc.typ == spUserDefined) && len(pc.text) > 1 && strings.Contains(pc.text[1:], mark) {
				m.unigramWords = false
			}
		}
		if m.unigramWords {
			m.edges = new(wordCache[[]spEdge])
			m.edges.init()
			m.wordPieces = new(wordCache[spWordPieces])
			m.wordPieces.init()
		}
	}
	if m.bpe {
		m.buildPairs(normal)
		m.words = !p.wsAsSuffix
		mark := norm.mark()
		for _, pc := range p.pieces {
			if pc.typ == spUnused || (len(pc.text) > 1 && strings.Contains(pc.text[1:], mark)) {
				m.words = false
			}
		}
		if m.words {
			m.cache = &spCache{m: make(map[string][]spSpan)}
		}
	}
	return m, nil
}

// minNormalFloat32 is C's FLT_MIN, the smallest normal float32.
const minNormalFloat32 = 0x1p-126
