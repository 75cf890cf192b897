// Package text holds the tokenizers of the text towers, in pure Go:
//
//   - CLIP's byte-level BPE as OpenAI's CLIP and Hugging Face's
//     CLIPTokenizerFast make it (UTF-8 repair, NFC, whitespace clean-up and
//     lower-casing, the CLIP split pattern, merges by rank), read from a
//     model's tokenizer.json or vocab.json + merges.txt and
//     tokenizer_config.json;
//   - SentencePiece (spiece.model, tokenizer.model) as the sentencepiece
//     library encodes: the ModelProto, its normalizer (the precompiled
//     charsmap, nmt_nfkc or identity, whitespace clean-up, the "▁" dummy
//     prefix and space mark), Unigram by Viterbi over piece scores and BPE by
//     piece score, with user-defined pieces, byte fallback and merged unknown
//     runs;
//   - SigLIP's tokenizer (Hugging Face's SiglipTokenizer) on top of it: lower
//     case, punctuation removed, whitespace collapsed, </s> appended, 64
//     positions padded with </s>.
//
// It gives token ids padded or truncated to the context length with their
// attention mask, the tokens as the vocabulary spells them, the words they
// make up (for per-word heatmaps), and which of those words the vocabulary
// can only spell out letter by letter (Unknown).
//
// The same Tokenizer reads the tokenizer.json of a BPE model over characters
// rather than bytes: Gemma's, which SigLIP 2 uses (spaces as "▁", byte
// fallback to <0xNN> pieces for characters the vocabulary lacks, unknown
// tokens fused), and Llama/Mistral-style files with a Metaspace
// pre-tokenizer; and the tokenizer.json of a Unigram model, which SigLIP's
// and T5's exports ship (Xenova's and onnx-community's SigLIP: [piece, score]
// pairs, unk_id, byte_fallback; a Precompiled charsmap normalizer; Metaspace;
// </s> appended by the template). The file's model.type chooses the reader,
// not the model's name. Its normalizers (Precompiled, Replace, Prepend,
// NFC/NFKC/NFD/NFKD, Lowercase, Strip), pre-tokenizers (none, Metaspace,
// Split), added tokens (lstrip, rstrip, single_word, matched before or after
// normalization), the post-processor's template, padding and truncation,
// and tokenizer_config.json's add_bos_token/add_eos_token (as
// GemmaTokenizerFast applies them) each run as the Hugging Face tokenizers
// library runs them; anything else is an error that names it. Merging keeps
// the library's order (lowest rank, leftmost first) in O(n log n) for long
// words, since without a pre-tokenizer a whole prompt is one word. The
// library's Unigram is not SentencePiece's, and is followed as the library
// has it: scores in float64, the unknown score the lowest of all pieces
// (special ones too) minus 10, runs of unknown characters fused and then
// looked up, spelled in bytes or made the unknown id; its Precompiled
// normalizer replaces a grapheme cluster shorter than 6 bytes by the
// replacement of the shortest key it starts with, other clusters a
// character at a time (grapheme clusters per Unicode's UAX #29 from Go's
// Unicode 15.0 tables, without the Indic conjunct rule GB9c: see
// grapheme.go); Regex patterns have Oniguruma's Unicode \s, \d and \w. The
// ids are checked against the library's own on generated files
// (testdata/gemma*, made by scripts/tokenizers/make_gemma_json.js, and
// testdata/siglip_json, a SentencePiece Unigram model converted to a
// tokenizer.json as transformers converts T5's, with three variants, made by
// scripts/tokenizers/make_siglip_json.js).
//
// A SigLIP directory with both spiece.model and tokenizer.json is read from
// spiece.model: transformers has no fast SigLIP tokenizer, so its
// AutoTokenizer builds SiglipTokenizer from spiece.model and never reads
// tokenizer.json, and SiglipTokenizer's canonicalisation (which a converted
// tokenizer.json need not have) is what the model was trained with. A SigLIP
// directory with tokenizer.json alone is read from it, as the tokenizers
// library and Transformers.js read it.
//
// Encoding a short caption takes no allocation once its words are known:
// tokenizer.json models keep each word's ids and SentencePiece Unigram each
// word's lattice edges (the search over them is run afresh, since its
// float32 sums depend on the text before the word) in caches read without
// locks; SentencePiece BPE and CLIP's BPE keep each word's pieces.
//
// It is written here rather than taken from a library because the ids must
// equal the reference implementations' for every input (checked against the
// reference ids of the real CLIP vocabulary, of SentencePiece models trained
// with the sentencepiece library: testdata/spm, and of the tokenizers
// library on generated tokenizer.json files), and it builds with
// CGO_ENABLED=0. Running the text encoder is not here: see models/clip, and
// the engine in pipeline.
package text
