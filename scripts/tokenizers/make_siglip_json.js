// make_siglip_json.js converts the SentencePiece Unigram model that
// make_spm.py trained in SigLIP's layout (text/testdata/spm/unigram_nfkc.model:
// <pad>=0, </s>=1, <unk>=2, nmt_nfkc) into a tokenizer.json as transformers'
// convert_slow_tokenizer does for T5 and the other SentencePiece Unigram
// tokenizers (SpmConverter and T5Converter): the pieces and scores as a
// Unigram model with the unknown id, the precompiled charsmap as a
// Precompiled normalizer followed by Strip (right) and Replace(" {2,}" -> "▁"),
// a Metaspace pre-tokenizer and decoder ("▁", prepend_scheme "always"), </s>
// after the text (TemplateProcessing), and <pad>, </s>, <unk> as special
// added tokens. The Hugging Face tokenizers library loads the file and writes
// it out again itself, then gives the ids of a corpus of strings; it also runs
// a few variants of the file (variants.json: parts of the file replaced) over
// the same strings.
//
// Run from the repository root, with the tokenizers npm package (0.23.2):
//
//	mkdir -p /tmp/tok-node && (cd /tmp/tok-node && npm install tokenizers@0.23.2)
//	NODE_PATH=/tmp/tok-node/node_modules node scripts/tokenizers/make_siglip_json.js text/testdata
//
// It writes <out>/siglip_json/:
//
//	tokenizer.json         the converted file, as the library saves it
//	tokenizer_config.json  SigLIP's (pad </s>, model_max_length 64)
//	variants.json          per variant, the top-level keys it replaces, the
//	                       model keys it replaces and the pieces it appends to
//	                       the vocabulary; the string "<base>" stands for the
//	                       base file's precompiled_charsmap
//	golden.jsonl           per string: text, ids (no special tokens), special
//	                       (with </s>), and ids_64 when the library's
//	                       truncation to 64 cut the string (otherwise its 64
//	                       ids are special padded with </s>, and its mask ones
//	                       over special: the script checks that)
//	golden_<variant>.jsonl per string, the variant's ids with </s>
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');
const { readModel, writeVariantGoldens } = require('./spm_model');

const out = path.join(process.argv[2] || 'text/testdata', 'siglip_json');
const spmDir = path.join(process.argv[2] || 'text/testdata', 'spm');

const sp = readModel(path.join(spmDir, 'unigram_nfkc.model'));
const eos = sp.pieces.findIndex((p) => p.piece === '</s>');
const addedToken = (id, opts) => Object.assign({
  id, content: sp.pieces[id].piece, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
}, opts || {});
const seqA = { Sequence: { id: 'A', type_id: 0 } };
const seqB = { Sequence: { id: 'B', type_id: 0 } };
const eosTok = { SpecialToken: { id: '</s>', type_id: 0 } };
const metaspace = (scheme, split) => ({ type: 'Metaspace', replacement: '▁', prepend_scheme: scheme, split });
const base = {
  version: '1.0',
  truncation: null,
  padding: null,
  // SpmConverter adds the CONTROL pieces; transformers adds the unknown
  // token as a special token too.
  added_tokens: [0, 1, 2].map((id) => addedToken(id)),
  normalizer: { type: 'Sequence', normalizers: [
    { type: 'Precompiled', precompiled_charsmap: sp.charsmap.toString('base64') },
    { type: 'Strip', strip_left: false, strip_right: true },
    { type: 'Replace', pattern: { Regex: ' {2,}' }, content: '▁' },
  ] },
  pre_tokenizer: metaspace('always', true),
  post_processor: {
    type: 'TemplateProcessing', single: [seqA, eosTok], pair: [seqA, eosTok, seqB, eosTok],
    special_tokens: { '</s>': { id: '</s>', ids: [eos], tokens: ['</s>'] } },
  },
  decoder: metaspace('always', true),
  model: { type: 'Unigram', unk_id: sp.unkId, vocab: sp.pieces.map((p) => [p.piece, p.score]), byte_fallback: false },
};

// Variants: what each changes in the base file.
const punctuation = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';
const bytePieces = [];
for (let b = 0; b < 256; b++) bytePieces.push(['<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>', 0]);
const variants = {
  // Metaspace "first" without splitting (one word per text between added
  // tokens), and the added tokens taking the spaces around them (lstrip,
  // rstrip), as SiglipTokenizer defines </s> and <unk>.
  first: {
    set: {
      pre_tokenizer: metaspace('first', false),
      decoder: metaspace('first', false),
      added_tokens: [0, 1, 2].map((id) => addedToken(id, { lstrip: true, rstrip: true })),
    },
  },
  // SiglipTokenizer's canonicalisation as normalizers: lower case,
  // punctuation removed, whitespace runs made one space, stripped; then the
  // charsmap and the runs of spaces it leaves.
  canon: {
    set: {
      normalizer: { type: 'Sequence', normalizers: [
        { type: 'Lowercase' },
        { type: 'Replace', pattern: { Regex: '[' + punctuation.replace(/[\\\]\[^-]/g, '\\$&') + ']' }, content: '' },
        { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' },
        { type: 'Strip', strip_left: true, strip_right: true },
        { type: 'Precompiled', precompiled_charsmap: '<base>' },
        { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' },
      ] },
    },
  },
  // Byte fallback (the 256 byte pieces after the others: unknown runs are
  // spelled in bytes), and no charsmap: whitespace runs (Oniguruma's \s,
  // Unicode's White_Space) made one space, stripped.
  bytes: {
    set: {
      normalizer: { type: 'Sequence', normalizers: [
        { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' },
        { type: 'Strip', strip_left: true, strip_right: true },
      ] },
    },
    model: { byte_fallback: true },
    append_vocab: bytePieces,
  },
};

// The strings: make_spm.py's corpus (captions, case, punctuation, digits,
// accents, full-width and compatibility characters, emoji, characters outside
// the vocabulary, CJK, runs of whitespace, empty strings, random strings) and
// cases of this pipeline: grapheme clusters the charsmap maps as a whole,
// added tokens and the spaces around them, runs of spaces, byte pieces.
const corpus = fs.readFileSync(path.join(spmDir, 'corpus.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const extra = [
  'a\r\nb', 'a\rb', 'a\n\rb', '\r\n', 'e\u0301', 'cafe\u0301 au lait', 'Ａ\u0301', 'ｶ\u0301', 'a\u0301\u0302', 'a\u0301\u0302\u0303',
  'ﬁ\u0301', '①\u0301', '\u0600a', '\u0600\u0600', '\u06ddx', '©\u200d©', '©\u200d', 'x\u200d', '👨‍👩‍👧‍👦 family',
  '🇯🇵🇺🇸🇫', '👍🏽👍', '각', '\u1100\u1161\u11a8', '\u1100\u1161', 'क्षत्रिय', 'क\u0301', 'स्\u0301', 'ก\u0e33',
  'x\u0000y', '\u0000', '\u00ad', 'a\u00adb', '\ufeff', 'a\ufeffb', '\u2028', '\u3000\u3000x', '\u00a0\u00a0x',
  'a </s> b', 'a</s>b', '  </s>  ', '</s></s>', '<unk>', ' <unk> ', 'x<unk>y', '<pad>', 'a <pad> b', '</S>', '< /s>',
  '<0x41>', '<0xE2><0x96><0x81>', '▁', '▁▁▁', 'a▁b', ' ▁ ', 'a' + ' '.repeat(2) + 'b', 'a' + ' '.repeat(3) + 'b',
  ' '.repeat(10) + 'x' + ' '.repeat(10), 'x' + ' \t '.repeat(5) + 'y', 'tab\t\ttab', 'A PHOTO OF A CAT!!!',
  '"Quoted," she said; (parens) [brackets] {braces}', 'snake_case-and-kebab', '50% off: $9.99 #1 @home',
  '猫と犬の写真、東京で。', '고양이와 개', 'Москва, ПРИВЕТ!', 'Ünïcödé ÀÉÎÕÜ', 'ǅ ǈ ǋ', 'İstanbul', 'ΣΑΣ σας',
  '🦜🦜🦜', '🦜 a 🦜', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝', 'x'.repeat(300), 'ab '.repeat(40),
];
const texts = corpus.concat(extra);

(async () => {
  fs.mkdirSync(out, { recursive: true });
  // The base file as the library writes it.
  const tmp = path.join(out, 'tokenizer.json');
  Tokenizer.fromString(JSON.stringify(base)).save(tmp);
  const saved = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  fs.writeFileSync(path.join(out, 'tokenizer_config.json'), JSON.stringify({
    added_tokens_decoder: {
      0: { content: '<pad>', lstrip: false, normalized: false, rstrip: false, single_word: false, special: true },
      1: { content: '</s>', lstrip: false, normalized: false, rstrip: false, single_word: false, special: true },
      2: { content: '<unk>', lstrip: false, normalized: false, rstrip: false, single_word: false, special: true },
    },
    eos_token: '</s>', pad_token: '</s>', unk_token: '<unk>', model_max_length: 64,
    tokenizer_class: 'SiglipTokenizer', processor_class: 'SiglipProcessor',
  }, null, 2) + '\n');
  fs.writeFileSync(path.join(out, 'variants.json'), JSON.stringify(variants, null, 1) + '\n');

  const bare = Tokenizer.fromFile(tmp);
  const fed = Tokenizer.fromFile(tmp);
  fed.setTruncation(64);
  fed.setPadding({ maxLength: 64, padId: eos, padToken: '</s>' });
  const lines = [];
  let cut = 0;
  for (const s of texts) {
    const ids = Array.from((await bare.encode(s, null, { addSpecialTokens: false })).getIds());
    const special = Array.from((await bare.encode(s)).getIds());
    const e64 = await fed.encode(s);
    const ids64 = Array.from(e64.getIds());
    const mask64 = Array.from(e64.getAttentionMask());
    const line = { text: s, ids, special };
    if (special.length > 64) {
      line.ids_64 = ids64;
      cut++;
      if (mask64.some((m) => m !== 1)) throw new Error('mask of a cut string is not all ones: ' + JSON.stringify(s));
    } else {
      const want = special.concat(Array(64 - special.length).fill(eos));
      if (JSON.stringify(ids64) !== JSON.stringify(want)) throw new Error('padding is not </s> after the ids: ' + JSON.stringify(s));
      for (let i = 0; i < 64; i++) if (mask64[i] !== (i < special.length ? 1 : 0)) throw new Error('mask: ' + JSON.stringify(s));
    }
    lines.push(JSON.stringify(line));
  }
  fs.writeFileSync(path.join(out, 'golden.jsonl'), lines.join('\n') + '\n');
  process.stderr.write(`${out}: ${saved.model.vocab.length} pieces, ${texts.length} strings (${cut} cut at 64)\n`);

  await writeVariantGoldens(Tokenizer, out, saved, variants, texts, sp.charsmap.toString('base64'));
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
