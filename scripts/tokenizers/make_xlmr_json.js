// make_xlmr_json.js converts the SentencePiece Unigram model that make_spm.py
// trained (text/testdata/spm/unigram_nfkc.model) into a tokenizer.json in the
// layout of XLM-RoBERTa's (the layout of XLM-V, the tokenizer of MetaCLIP 2),
// as transformers' convert_slow_tokenizer does (XLMRobertaConverter on
// SpmConverter): <s>=0 <pad>=1 </s>=2 <unk>=3, the model's pieces from its
// fourth on, <mask> last; the unknown id 3; the precompiled charsmap as a
// Precompiled normalizer followed by Strip (right) and Replace(" {2,}" ->
// "▁"); a Metaspace pre-tokenizer ("▁", prepend_scheme "always"); and
// "<s> $A </s>" (TemplateProcessing). <mask> takes the space before it
// (lstrip), as XLMRobertaTokenizer defines it. The Hugging Face tokenizers
// library loads the file and writes it out again itself, then gives the ids of
// a corpus of strings, and of the same strings under a few variants of the
// file (variants.json: parts of the file replaced).
//
// Run from the repository root, with the tokenizers npm package (0.23.2):
//
//	mkdir -p /tmp/tok-node && (cd /tmp/tok-node && npm install tokenizers@0.23.2)
//	NODE_PATH=/tmp/tok-node/node_modules node scripts/tokenizers/make_xlmr_json.js text/testdata
//
// It writes <out>/xlmr_json/:
//
//	tokenizer.json         the converted file, as the library saves it
//	tokenizer_config.json  XLMRobertaTokenizer's (model_max_length 512)
//	variants.json          per variant, the top-level keys it replaces (the
//	                       string "<base>" stands for the base file's
//	                       precompiled_charsmap)
//	golden.jsonl           per string: text, ids (no special tokens),
//	                       special (<s> … </s>), and ids_77 when the
//	                       library's truncation to 77 cut the string
//	                       (otherwise its 77 ids are special padded with
//	                       <pad>, and its mask ones over special: the script
//	                       checks that)
//	golden_<variant>.jsonl per string, the variant's ids with <s> and </s>
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');
const { readModel, writeVariantGoldens } = require('./spm_model');

const out = path.join(process.argv[2] || 'text/testdata', 'xlmr_json');
const spmDir = path.join(process.argv[2] || 'text/testdata', 'spm');

const sp = readModel(path.join(spmDir, 'unigram_nfkc.model'));
// XLMRobertaConverter: four special pieces, the model's from its fourth on
// (the trained model's own <pad>, </s>, <unk> are its first three), <mask>.
const vocab = [['<s>', 0], ['<pad>', 0], ['</s>', 0], ['<unk>', 0]]
  .concat(sp.pieces.slice(3).map((p) => [p.piece, p.score]))
  .concat([['<mask>', 0]]);
const mask = vocab.length - 1;
const added = (id, content, opts) => Object.assign({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
}, opts || {});
const seqA = { Sequence: { id: 'A', type_id: 0 } };
const seqB = { Sequence: { id: 'B', type_id: 0 } };
const tok = (t) => ({ SpecialToken: { id: t, type_id: 0 } });
const metaspace = (scheme, split) => ({ type: 'Metaspace', replacement: '▁', prepend_scheme: scheme, split });
const charsmap = { type: 'Precompiled', precompiled_charsmap: sp.charsmap.toString('base64') };
const base = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [added(0, '<s>'), added(1, '<pad>'), added(2, '</s>'), added(3, '<unk>'), added(mask, '<mask>', { lstrip: true })],
  normalizer: { type: 'Sequence', normalizers: [
    charsmap,
    { type: 'Strip', strip_left: false, strip_right: true },
    { type: 'Replace', pattern: { Regex: ' {2,}' }, content: '▁' },
  ] },
  pre_tokenizer: metaspace('always', true),
  post_processor: {
    type: 'TemplateProcessing',
    single: [tok('<s>'), seqA, tok('</s>')],
    pair: [tok('<s>'), seqA, tok('</s>'), tok('</s>'), seqB, tok('</s>')],
    special_tokens: {
      '<s>': { id: '<s>', ids: [0], tokens: ['<s>'] },
      '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] },
    },
  },
  decoder: metaspace('always', true),
  model: { type: 'Unigram', unk_id: 3, vocab, byte_fallback: false },
};

// Variants: what each changes in the base file.
const variants = {
  // WhitespaceSplit before Metaspace (SpmConverter's pre-tokenizer for
  // Pegasus and the files made that way): words split at Unicode White_Space
  // and the whitespace dropped, then "▁" before each word.
  wsplit: {
    set: { pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, metaspace('always', true)] } },
  },
  // The same with Metaspace "first" unsplit: only a word at the start of the
  // text gets "▁".
  wsplit_first: {
    set: { pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, metaspace('first', false)] } },
  },
  // WhitespaceSplit with no normalizer: tabs, newlines, no-break and
  // ideographic spaces reach the pre-tokenizer as they are.
  wsplit_raw: {
    set: {
      normalizer: null,
      pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, metaspace('always', true)] },
    },
  },
  // The older files' form: the charsmap and runs of spaces made one space,
  // and Metaspace with add_prefix_space instead of prepend_scheme.
  legacy: {
    set: {
      normalizer: { type: 'Sequence', normalizers: [{ type: 'Precompiled', precompiled_charsmap: '<base>' }, { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] },
      pre_tokenizer: { type: 'Metaspace', replacement: '▁', add_prefix_space: true },
    },
  },
};

// The strings: make_spm.py's corpus and cases of this layout: its special
// tokens, <mask> taking the space before it, whitespace of every kind.
const corpus = fs.readFileSync(path.join(spmDir, 'corpus.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const extra = [
  '<s>', 'a <s> b', 'a</s>b', '</s>', '<pad>', '<unk>', '<mask>', 'a <mask> b', 'a<mask>b', '  <mask>  x', 'x <mask>',
  '<mask><mask>', 'a photo of a <mask>', '<S>', '< mask>',
  'a\tb', 'a\nb', 'a\r\nb', ' \t\n x \t\n ', 'a\u00a0b', 'a\u3000b', '\u3000\u3000x', 'a\u2028b', 'a\u2029b', 'a\u0085b',
  'a\u1680b', 'a\u2002b', 'a\u200ab', 'a\u202fb', 'a\u205fb', 'a\u180eb', 'a\u200bb', 'a\ufeffb', 'a\u000bb', 'a\u000cb',
  'a\u001cb', 'a\u001fb', 'x' + ' '.repeat(6) + 'y', ' '.repeat(5), '\t', '\n\n', '',
  'eine Katze auf dem Sofa', 'un chat noir sur un canapé', 'кошка на диване', 'قطة على الأريكة', 'חתול על הספה',
  'बिल्ली सोफे पर', 'แมวบนโซฟา', '沙发上的猫', 'ソファの上の猫', '소파 위의 고양이', 'Ο γάτος στον καναπέ', 'mèo trên ghế sofa',
  'kedi kanepede', 'ĳ ŉ ǆ', 'ＡＢＣ　ｘｙｚ', '①②③', 'x'.repeat(200), 'a b '.repeat(60),
];
const texts = corpus.concat(extra);

(async () => {
  fs.mkdirSync(out, { recursive: true });
  const tmp = path.join(out, 'tokenizer.json');
  Tokenizer.fromString(JSON.stringify(base)).save(tmp);
  const saved = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  const special = (content, opts) => Object.assign({ content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true }, opts || {});
  fs.writeFileSync(path.join(out, 'tokenizer_config.json'), JSON.stringify({
    added_tokens_decoder: {
      0: special('<s>'), 1: special('<pad>'), 2: special('</s>'), 3: special('<unk>'), [mask]: special('<mask>', { lstrip: true }),
    },
    bos_token: '<s>', cls_token: '<s>', eos_token: '</s>', mask_token: '<mask>', pad_token: '<pad>', sep_token: '</s>', unk_token: '<unk>',
    model_max_length: 512, tokenizer_class: 'XLMRobertaTokenizer',
  }, null, 2) + '\n');
  fs.writeFileSync(path.join(out, 'variants.json'), JSON.stringify(variants, null, 1) + '\n');

  const bare = Tokenizer.fromFile(tmp);
  const fed = Tokenizer.fromFile(tmp);
  fed.setTruncation(77);
  fed.setPadding({ maxLength: 77, padId: 1, padToken: '<pad>' });
  const lines = [];
  let cut = 0;
  for (const s of texts) {
    const ids = Array.from((await bare.encode(s, null, { addSpecialTokens: false })).getIds());
    const withSpecial = Array.from((await bare.encode(s)).getIds());
    const e77 = await fed.encode(s);
    const ids77 = Array.from(e77.getIds());
    const mask77 = Array.from(e77.getAttentionMask());
    const line = { text: s, ids, special: withSpecial };
    if (withSpecial.length > 77) {
      line.ids_77 = ids77;
      cut++;
      if (mask77.some((m) => m !== 1)) throw new Error('mask of a cut string is not all ones: ' + JSON.stringify(s));
    } else {
      const want = withSpecial.concat(Array(77 - withSpecial.length).fill(1));
      if (JSON.stringify(ids77) !== JSON.stringify(want)) throw new Error('padding is not <pad> after the ids: ' + JSON.stringify(s));
      for (let i = 0; i < 77; i++) if (mask77[i] !== (i < withSpecial.length ? 1 : 0)) throw new Error('mask: ' + JSON.stringify(s));
    }
    lines.push(JSON.stringify(line));
  }
  fs.writeFileSync(path.join(out, 'golden.jsonl'), lines.join('\n') + '\n');
  process.stderr.write(`${out}: ${saved.model.vocab.length} pieces, ${texts.length} strings (${cut} cut at 77)\n`);

  await writeVariantGoldens(Tokenizer, out, saved, variants, texts, sp.charsmap.toString('base64'));
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
