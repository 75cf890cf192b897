// Package ftfy is ftfy's fix_text (python-ftfy 6.3.1, its default
// configuration) in Go: the text repair that openai's CLIP tokenizer and
// OpenCLIP's run on every prompt before cleaning it, so that a prompt gets the
// token ids those tokenizers give it.
//
// It is our own because no Go library does this. Of the text modules in the
// Go module list this project draws on, golang.org/x/text decodes the
// codecs (encoding/charmap, which the tests compare the tables with) and
// normalises (unicode/norm, the NFC step here) and github.com/rivo/uniseg
// segments text; neither detects or repairs mojibake, and the list holds no
// module that carries ftfy's rules.
// The rules were learnt from ftfy's source; the tables in tables.go (ftfy's
// character classes, entities, width and ligature maps, and the single-byte
// codecs as Python decodes them) are generated from ftfy and Python by
// scripts/ftfy/make_tables.py, and the tests compare FixText with ftfy's own
// output (testdata/fix_text.jsonl, made by scripts/ftfy/make_goldens.py).
//
// What it does, in ftfy's order, per line (and per 1,000,000 characters):
// unescape_html (only until a line holds '<'), fix_encoding (the badness
// heuristic; re-encoding in latin-1, sloppy windows-1252/1251/1250/1253/
// 1254/1257, iso-8859-2, macroman and cp437 and decoding as UTF-8 or its
// CESU-8/Java variants; restore_byte_a0; replace_lossy_sequences;
// decode_inconsistent_utf8; C1 controls as windows-1252), fix_c1_controls,
// fix_latin_ligatures, fix_character_width, uncurl_quotes, fix_line_breaks,
// remove_terminal_escapes, remove_control_chars and NFC, repeated until the
// text no longer changes. ftfy's quirks are kept (its goldens hold cases of
// both): once a line holds '<' no later line is unescaped either; and the
// utf-8-variants codec's patterns, through Python's '$', take a final newline
// after C0 or a surrogate pair as part of the sequence.
//
// What it does not do: fix_surrogates has nothing to fix, because a Go string
// holds no UTF-16 surrogates (invalid UTF-8 reads as U+FFFD); explanations,
// other configurations and the rest of ftfy's API (fix_file, guess_bytes,
// decode_escapes) are left out. ftfy is Apache-2.0 licensed, by Robyn Speer;
// the generated tables are its data. NFC and the \d of terminal escapes use Go's
// Unicode tables, whose version may differ from the Python that ran ftfy.
package ftfy
