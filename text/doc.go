// Package text is CLIP's tokenizer in pure Go: byte-level BPE as OpenAI's
// CLIP and Hugging Face's CLIPTokenizerFast make it (UTF-8 repair, NFC,
// whitespace clean-up and lower-casing, the CLIP split pattern, merges by
// rank), read from a model's tokenizer.json or vocab.json + merges.txt
// and tokenizer_config.json. It gives token ids padded or truncated to the
// context length with their attention mask, the tokens as the vocabulary
// spells them, the words they make up (for per-word heatmaps), and which of
// those words the vocabulary can only spell out letter by letter (Unknown).
//
// It is written here rather than taken from a library because the ids must
// equal Hugging Face's for every input (checked against the reference ids of
// the real CLIP vocabulary), and it builds with CGO_ENABLED=0. Running the
// text encoder is not here: see models/clip, and the engine in pipeline.
package text
