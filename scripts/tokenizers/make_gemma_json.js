// make_gemma_json.js builds small tokenizer.json files with the structure of
// Gemma's (the tokenizer SigLIP 2 uses) and of Llama/Mistral-style files, and
// the ids the Hugging Face tokenizers library gives for a corpus of strings.
// TIPSv2's (tipsv2/: Lowercase and a Precompiled charsmap, WhitespaceSplit
// and Metaspace, no BOS or EOS). The vocabulary is trained by the library's
// BPE trainer on generated captions, cut to its first merges, and laid out
// as Gemma's is: <pad>=0
// <eos>=1 <bos>=2 <unk>=3, added tokens, the 256 byte pieces <0x00>..<0xFF>,
// then the trained pieces. Every file is loaded and run by the library itself.
//
// Run from the repository root, with the tokenizers npm package (0.23.2):
//
//	mkdir -p /tmp/tok-node && (cd /tmp/tok-node && npm install tokenizers@0.23.2)
//	NODE_PATH=/tmp/tok-node/node_modules node scripts/tokenizers/make_gemma_json.js text/testdata
//
// It writes <out>/gemma*/tokenizer.json, tokenizer_config.json and
// golden.jsonl (one line per string: text, ids without special tokens,
// ids with them, and ids and mask padded and truncated to 64 by the library).
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Tokenizer, BPE, metaspacePreTokenizer } = require('tokenizers');
const { readModel } = require('./spm_model');

const out = process.argv[2] || 'text/testdata';
const nMerges = 4000;

// A deterministic generator (an LCG) so that the files are the same each run.
let seed = 20250221;
function rnd(n) { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; }
function pick(a) { return a[rnd(a.length)]; }

const subjects = ['cat', 'dog', 'man', 'woman', 'child', 'bird', 'horse', 'car', 'bicycle', 'train', 'boat',
  'house', 'tree', 'flower', 'mountain', 'beach', 'city', 'street', 'table', 'chair', 'pizza', 'cake',
  'coffee', 'laptop', 'phone', 'guitar', 'painting', 'statue', 'bridge', 'river', 'forest', 'garden',
  'kitchen', 'bedroom', 'window', 'door', 'elephant', 'giraffe', 'zebra', 'teddy bear', 'umbrella',
  'café', 'crème brûlée', 'jalapeño', 'façade', 'Zürich', 'São Paulo', 'Málaga', 'naïve', 'résumé'];
const adjectives = ['red', 'blue', 'green', 'small', 'large', 'old', 'young', 'happy', 'wooden', 'shiny',
  'dark', 'bright', 'sleepy', 'wet', 'snowy', 'sunny', 'busy', 'empty', 'tall', 'tiny', 'beautiful',
  'colorful', 'vintage', 'modern', 'fluffy', 'black and white', 'golden'];
const verbs = ['sitting on', 'standing next to', 'lying on', 'running across', 'looking at', 'holding',
  'walking down', 'flying over', 'parked near', 'in front of', 'under', 'behind', 'on top of', 'inside'];
const styles = ['a photo of', 'a picture of', 'an image of', 'a painting of', 'a close-up of', 'a drawing of',
  'a blurry photo of', 'a bad photo of', 'a cropped photo of', 'a rendering of', 'this is a photo of', ''];
const extras = ['', '', '', ', highly detailed', ', 4k', ' at night', ' in the rain', ' during sunset',
  ', trending on artstation', ' (1990)', ' - 35mm film', '!', '.', '?', ' #nofilter', ' 100%'];
const cjk = ['猫', '犬', '写真', '東京', '山', '花', '一只猫', '北京', '고양이', '사진', 'ねこ', 'カメラ'];

function caption() {
  const a = pick(adjectives), s = pick(subjects), v = pick(verbs), b = pick(adjectives), t = pick(subjects);
  let c = `${pick(styles)} ${rnd(3) ? 'a' : 'the'} ${a} ${s} ${v} ${rnd(2) ? 'a' : 'the'} ${b} ${t}${pick(extras)}`.trim();
  if (rnd(5) === 0) c = c[0].toUpperCase() + c.slice(1);
  if (rnd(9) === 0) c = c.toUpperCase();
  if (rnd(7) === 0) c += ' ' + pick(cjk);
  if (rnd(11) === 0) c += ' ' + String(rnd(10000));
  return c;
}

// Training text: captions, one a line, and lines of made-up words (so that
// the vocabulary has a few thousand pieces of word parts).
const syllables = [];
for (const c of ['', 'b', 'c', 'd', 'f', 'g', 'h', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'w', 'st', 'tr', 'ch', 'sh']) {
  for (const v of ['a', 'e', 'i', 'o', 'u', 'ai', 'ou', 'ea']) syllables.push(c + v);
}
function word() {
  let w = '';
  for (let n = 1 + rnd(3); n > 0; n--) w += pick(syllables);
  return w + pick(['', '', 'n', 's', 'r', 'ng', 'ed', 'ing']);
}
const train = [];
for (let i = 0; i < 6000; i++) train.push(caption());
for (let i = 0; i < 8000; i++) {
  const ws = [];
  for (let n = 3 + rnd(6); n > 0; n--) ws.push(word());
  train.push(ws.join(' '));
}
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gemma-json-'));
fs.writeFileSync(path.join(tmp, 'train.txt'), train.join('\n') + '\n');
const trainer = new Tokenizer(BPE.empty());
trainer.setPreTokenizer(metaspacePreTokenizer('▁', 'always', true));
trainer.train([path.join(tmp, 'train.txt')]);
trainer.save(path.join(tmp, 'trained.json'));
const trained = JSON.parse(fs.readFileSync(path.join(tmp, 'trained.json'), 'utf8')).model;

// Keep the first nMerges merges and the pieces they make, over the
// characters of the trained alphabet (minus a few, so that byte fallback is
// exercised on characters of the training text too).
const merges = trained.merges.slice(0, nMerges).map((m) => (Array.isArray(m) ? m : m.split(' ')));
const made = new Set(trained.merges.map((m) => (Array.isArray(m) ? m.join('') : m.split(' ').join(''))));
const dropped = new Set(['ñ', 'ü', '\n']);
const alphabet = Object.keys(trained.vocab).filter((p) => !made.has(p) && [...p].length === 1 && !dropped.has(p));
const keepMerges = merges.filter(([a, b]) => ![...a + b].some((c) => dropped.has(c)));

const specials = [
  { content: '<pad>', special: true }, { content: '<eos>', special: true },
  { content: '<bos>', special: true }, { content: '<unk>', special: true },
  { content: '<mask>', special: true }, { content: '[@BOS@]', special: false },
  { content: '<unused0>', special: false }, { content: '<unused1>', special: false },
  { content: '<start_of_turn>', special: true }, { content: '<end_of_turn>', special: true },
  { content: '<start_of_image>', special: true }, { content: '<end_of_image>', special: false },
];
const vocab = {};
let next = 0;
for (const s of specials) vocab[s.content] = next++;
for (let b = 0; b < 256; b++) vocab['<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>'] = next++;
for (const c of alphabet) if (!(c in vocab)) vocab[c] = next++;
for (const [a, b] of keepMerges) if (!((a + b) in vocab)) vocab[a + b] = next++;
// Gemma spells runs of spaces and tabs as pieces of their own, made by
// merges (of equal pieces, so that which pair merges first on a tie shows).
for (const p of ['▁▁', '▁▁▁▁', '\t', '\t\t']) if (!(p in vocab)) vocab[p] = next++;
keepMerges.push(['▁', '▁'], ['▁▁', '▁▁'], ['\t', '\t']);

function added(extra) {
  const list = specials.map((s) => ({
    id: vocab[s.content], content: s.content, single_word: false, lstrip: false, rstrip: false,
    normalized: false, special: s.special,
  }));
  return list.concat(extra || []);
}
function template(single, specialTokens) {
  const items = single.split(' ').map((x) => (x === '$A'
    ? { Sequence: { id: 'A', type_id: 0 } } : { SpecialToken: { id: x, type_id: 0 } }));
  const pair = single.split(' ').flatMap((x) => (x === '$A'
    ? [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }] : [{ SpecialToken: { id: x, type_id: 0 } }]));
  const st = {};
  for (const t of specialTokens) st[t] = { id: t, ids: [vocab[t]], tokens: [t] };
  return { type: 'TemplateProcessing', single: items, pair, special_tokens: st };
}
function model(extra) {
  return Object.assign({
    type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
    vocab, merges: keepMerges,
  }, extra || {});
}
// Vocabularies without the byte pieces of the lead bytes of four-byte
// characters (emoji and others), which then become the unknown token: one
// with the pieces renamed (the ids stay dense), one with them deleted (ids
// with holes: the library then gives the added tokens after the model's
// other ids than the file states, its own rule).
const vocabNoF0 = Object.assign({}, vocab);
const vocabRenamedF0 = {};
for (const [k, v] of Object.entries(vocab)) vocabRenamedF0[/^<0xF[0-4]>$/.test(k) ? '<unused_' + k.slice(3, 5) + '>' : k] = v;
for (const b of ['F0', 'F1', 'F2', 'F3', 'F4']) delete vocabNoF0['<0x' + b + '>'];
const tipsCharsmap = readModel(path.join(out, 'spm', 'unigram_nfkc.model')).charsmap.toString('base64');
const gemmaDecoder = { type: 'Sequence', decoders: [
  { type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }] };

// Extra added tokens that exercise the added vocabulary's options.
const moreAdded = [
  { id: next, content: '<img>', single_word: false, lstrip: true, rstrip: false, normalized: false, special: true },
  { id: next + 1, content: '[SEP]', single_word: false, lstrip: false, rstrip: true, normalized: false, special: true },
  { id: next + 2, content: 'zebra crossing', single_word: true, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: next + 3, content: 'DOG', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: next + 4, content: '@@', single_word: true, lstrip: false, rstrip: false, normalized: false, special: false },
];

const variants = {
  // SigLIP 2's files: Gemma's pipeline, <eos> after the text, no <bos>,
  // padding and truncation to 64 in tokenizer.json.
  gemma: {
    json: {
      version: '1.0',
      truncation: { direction: 'Right', max_length: 64, strategy: 'LongestFirst', stride: 0 },
      padding: { strategy: { Fixed: 64 }, direction: 'Right', pad_to_multiple_of: null, pad_id: 0, pad_type_id: 0, pad_token: '<pad>' },
      added_tokens: added(),
      normalizer: { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
      pre_tokenizer: { type: 'Split', pattern: { String: ' ' }, behavior: 'MergedWithPrevious', invert: false },
      post_processor: template('$A <eos>', ['<eos>']),
      decoder: gemmaDecoder,
      model: model(),
    },
    config: {
      add_bos_token: false, add_eos_token: true, bos_token: '<bos>', eos_token: '<eos>', pad_token: '<pad>',
      unk_token: '<unk>', mask_token: '<mask>', model_max_length: 64, padding_side: 'right',
      tokenizer_class: 'GemmaTokenizer', clean_up_tokenization_spaces: false, spaces_between_special_tokens: false,
    },
  },
  // Gemma's own tokenizer.json: <bos> before the text, no pre-tokenizer,
  // merges as "a b" strings.
  gemma_bos: {
    json: {
      version: '1.0', truncation: null, padding: null, added_tokens: added(),
      normalizer: { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
      pre_tokenizer: null,
      post_processor: template('<bos> $A', ['<bos>']),
      decoder: gemmaDecoder,
      model: model({ merges: keepMerges.map(([a, b]) => a + ' ' + b) }),
    },
    config: {
      add_bos_token: true, add_eos_token: false, bos_token: '<bos>', eos_token: '<eos>', pad_token: '<pad>',
      unk_token: '<unk>', model_max_length: 1000000000000000019884624838656, tokenizer_class: 'GemmaTokenizer',
    },
  },
  // Llama/Mistral-style: Metaspace with prepend_scheme "first", no
  // normalizer, fuse_unk off, and added tokens with lstrip, rstrip,
  // single_word and normalized set.
  gemma_metaspace: {
    json: {
      version: '1.0', truncation: null, padding: null, added_tokens: added(moreAdded),
      normalizer: null,
      pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
      post_processor: template('<bos> $A <eos>', ['<bos>', '<eos>']),
      decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
      model: model({ fuse_unk: false, vocab: vocabRenamedF0 }),
    },
    config: {
      bos_token: '<bos>', eos_token: '<eos>', pad_token: '<pad>', unk_token: '<unk>', model_max_length: 64,
    },
  },
  // TIPSv2's (transformers' Tipsv2Tokenizer, a tokenizers-library BPE over
  // SentencePiece pieces): Lowercase, then the SentencePiece model's
  // Precompiled charsmap (here spm/unigram_nfkc.model's); WhitespaceSplit, then
  // Metaspace "always"; byte fallback; no BOS or EOS; <pad> (id 0) pads.
  tipsv2: {
    json: {
      version: '1.0', truncation: null, padding: null, added_tokens: added(),
      normalizer: { type: 'Sequence', normalizers: [
        { type: 'Lowercase' }, { type: 'Precompiled', precompiled_charsmap: tipsCharsmap }] },
      pre_tokenizer: { type: 'Sequence', pretokenizers: [
        { type: 'WhitespaceSplit' }, { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }] },
      post_processor: null,
      decoder: { type: 'Sequence', decoders: [
        { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }, { type: 'ByteFallback' }, { type: 'Fuse' }] },
      model: model(),
    },
    config: {
      tokenizer_class: 'Tipsv2Tokenizer', pad_token: '<pad>', unk_token: '<unk>', bos_token: null, eos_token: null,
      model_max_length: 64, do_lower_case: true, padding_side: 'right',
    },
  },
  // Older Llama files: Prepend and Replace normalizers, no pre-tokenizer;
  // here with NFKC and Lowercase too, and Metaspace-split words.
  gemma_llama: {
    json: {
      version: '1.0', truncation: null, padding: null, added_tokens: added(moreAdded),
      normalizer: { type: 'Sequence', normalizers: [
        { type: 'NFKC' }, { type: 'Lowercase' }, { type: 'Strip', strip_left: false, strip_right: true },
        { type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
        { type: 'Replace', pattern: { Regex: '[0-9]+' }, content: '#' }] },
      pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: true },
      post_processor: template('<bos> $A', ['<bos>']),
      decoder: gemmaDecoder,
      model: model({ vocab: vocabNoF0 }),
    },
    config: {
      add_bos_token: true, add_eos_token: false, bos_token: '<bos>', eos_token: '<eos>', pad_token: '<pad>',
      unk_token: '<unk>', model_max_length: 64, tokenizer_class: 'LlamaTokenizer',
    },
  },
};

// The strings: fixed cases, generated captions, and random strings.
const fixed = [
  '', ' ', '  ', '\t', '\n', ' \n ', 'a', 'A', 'cat', 'a photo of a cat', 'A Photo Of A Cat', 'A PHOTO OF A CAT',
  'a photo of a cat.', 'a photo of a cat!!!', 'a photo of a cat?!', '  a photo of a cat  ', 'a  photo   of    a cat',
  'a\tphoto\tof\ta\tcat', 'a\nphoto\nof\na\ncat', 'a\r\nphoto', ' '.repeat(50) + 'cat', 'cat' + ' '.repeat(70),
  '\t\t\tindented', 'line one\n\nline two\n\n\nline three',
  'café crème brûlée', 'cafe\u0301 cre\u0300me', 'jalapeño piñata', 'Zürich über München', 'naïve résumé façade',
  'ÀÉÎÕÜ àéîõü', 'Ω ω Σ σ ς ΟΔΟΣ', 'İstanbul ıI', 'Straße STRASSE ẞ', 'ǅ ǈ ǋ', 'ﬁ ﬀ ﬃ ligatures',
  'ＡＢＣ ａｂｃ １２３', '①②③ ⅠⅡⅢ ½ ¼ ² ³', '㎏ ㎡ ℃ ™ №', 'ｶﾀｶﾅ ﾊﾝｶｸ', '\u00a0nbsp\u00a0here', 'a\u3000b\u2003c',
  '0', '7', '42', '2024', '3.14159', '1,000,000', '555-1234', '#1 best', '100% cotton', '$9.99', '(1990)',
  '猫', '一只猫坐在垫子上', '東京タワーの写真', '고양이 사진', 'ねこがすき', '北京 上海 广州', '漢字かなカナ한글',
  '😀', '👍🏽', '😀😀 a😀b 😀猫😀', '🦜ñ🦜', 'x🦜\u0301', '❤️', '🏳️‍🌈', '🐱 cat 🐶 dog', 'a 🍕 pizza', '🎉🎉🎉', '∑∫√∞', '→ ← ↑ ↓', '♠♥♦♣', '\u200b', 'a\u200db',
  '\u0000', 'a\u0001b', '\u007f', '\ufeffbom', '\ufffd', 'ɐ ʃ ŋ ð θ', 'Ђ Љ Њ ж щ', 'مرحبا', 'שלום', 'नमस्ते', 'สวัสดี',
  'ñ', 'ü', 'ñññ', 'Ñandú', '<pad>', '<eos>', '<bos>', '<unk>', '<mask>', '<bos>a photo<eos>', 'a <eos> b',
  'x<pad>y', '<start_of_turn>user\nhi<end_of_turn>', '<unused0><unused1>', '[@BOS@] text', '<eos><eos><eos>',
  '<eos', 'eos>', '< eos >', '<EOS>', '<start_of_image>', '<end_of_image>', '<img>', 'a <img> b', 'a   <img>   b',
  '<img>start', 'end <img>', '[SEP]', 'a [SEP] b', 'a [SEP]   b', '[SEP][SEP]', 'zebra crossing', 'a zebra crossing here',
  'azebra crossing', 'zebra crossings', 'zebra  crossing', 'Zebra Crossing', 'ZEBRA CROSSING', 'DOG', 'dog', 'a DOG b',
  'hotdog', 'HOTDOGS', '@@', 'a @@ b', 'a@@b', '@@@', ' @@ ', 'under_score @@_x', '@@.', '.@@',
  "it's a cat's toy", "don't won't can't", '"quoted" \'single\'', 'foo@bar.com', 'https://example.com/a?b=c&d=e',
  'C++ and C#', 'snake_case camelCase PascalCase', 'e.g. i.e. etc.', '...', '---', '***', '!!!???', '¿Qué? ¡Sí!',
  'a'.repeat(100), 'ab'.repeat(80), 'the '.repeat(40), 'cat'.repeat(30), '1234567890'.repeat(8),
  'supercalifragilisticexpialidocious', 'pneumonoultramicroscopicsilicovolcanoconiosis',
  'a photo of a cat sitting on a mat, highly detailed, 4k, trending on artstation, by greg rutkowski, '.repeat(3),
  'x'.repeat(300), '😀'.repeat(40), '猫'.repeat(70), ' '.repeat(200), '\t'.repeat(30), 'a b '.repeat(50),
];
const randomAlphabet = [...'abcdefghijklmnopqrstuvwxyz ABCXYZ  0123456789.,!?-\'"()\t\n', 'é', 'ñ', 'ü', 'ß', 'Σ', 'ς',
  'İ', '猫', '山', '고', 'ж', '👍', '🏽', '\u200d', '\u00a0', 'ｆ', '½', 'ﬁ', '<eos>', '<pad>', '<img>', '[SEP]', '@@',
  'zebra crossing', 'DOG', '▁', '\u0301', '🍕', '∞', '\u3000'];
const random = [];
for (let i = 0; i < 180; i++) {
  let s = '';
  const len = rnd(50);
  for (let j = 0; j < len; j++) s += pick(randomAlphabet);
  random.push(s);
}
const captions = [];
for (let i = 0; i < 160; i++) captions.push(caption());
const corpus = fixed.concat(captions, random);

(async () => {
  for (const [name, v] of Object.entries(variants)) {
    const dir = path.join(out, name);
    fs.mkdirSync(dir, { recursive: true });
    const text = JSON.stringify(v.json, null, 1);
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), text + '\n');
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(v.config, null, 2) + '\n');
    // Three tokenizers from the same file: as it is (with its own padding
    // and truncation, if any), without padding and truncation, and padded
    // and truncated to 64 with the pad id.
    const bare = Tokenizer.fromString(text);
    bare.disablePadding();
    bare.disableTruncation();
    const fed = Tokenizer.fromString(text);
    fed.setTruncation(64);
    fed.setPadding({ maxLength: 64, padId: vocab['<pad>'], padToken: '<pad>' });
    const lines = [];
    for (const s of corpus) {
      const ids = Array.from((await bare.encode(s, null, { addSpecialTokens: false })).getIds());
      const special = Array.from((await bare.encode(s)).getIds());
      const e64 = await fed.encode(s);
      lines.push(JSON.stringify({ text: s, ids, special, ids_64: Array.from(e64.getIds()), mask_64: Array.from(e64.getAttentionMask()) }));
    }
    fs.writeFileSync(path.join(dir, 'golden.jsonl'), lines.join('\n') + '\n');
    process.stderr.write(`${dir}: vocabulary ${Object.keys(vocab).length}, ${keepMerges.length} merges, ${corpus.length} strings\n`);
  }
  fs.rmSync(tmp, { recursive: true, force: true });
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
