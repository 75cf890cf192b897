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
// pre-tokenizer. The file's content chooses the reader, not the model's
// name. Its normalizers (Replace, Prepend, NFC/NFKC/NFD/NFKD, Lowercase,
// Strip), pre-tokenizers (none, Metaspace, Split), added tokens (lstrip,
// rstrip, single_word, matched before or after normalization), the
// post-processor's template, padding and truncation, and
// tokenizer_config.json's add_bos_token/add_eos_token (as GemmaTokenizerFast
// applies them) each run as the Hugging Face tokenizers library runs them;
// anything else is an error that names it. Merging keeps the library's order
// (lowest rank, leftmost first) in O(n log n) for long words, since without a
// pre-tokenizer a whole prompt is one word. The ids are checked against the
// library's own on generated Gemma-style files (testdata/gemma*, made by
// scripts/tokenizers/make_gemma_json.js).
//
// It is written here rather than taken from a library because the ids must
// equal the reference implementations' for every input (checked against the
// reference ids of the real CLIP vocabulary, and of SentencePiece models
// trained with the sentencepiece library: testdata/spm), and it builds with
// CGO_ENABLED=0. Running the text encoder is not here: see models/clip, and
// the engine in pipeline.
package text
