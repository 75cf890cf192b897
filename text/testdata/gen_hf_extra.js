// gen_hf_extra.js writes hf_extra.jsonl: strings with the ids that the
// Hugging Face tokenizers library (Rust, through its Node binding) gives with
// CLIP's tokenizer.json. Run from this folder:
//
//	npm pack tokenizers@0.23.2 && mkdir -p node_modules/tokenizers && tar -xzf tokenizers-0.23.2.tgz -C node_modules/tokenizers --strip-components=1
//	node gen_hf_extra.js clip/tokenizer.json > hf_extra.jsonl
//
// (or npm install tokenizers@0.23.2 in a scratch folder and set NODE_PATH).
const { Tokenizer } = require('tokenizers');

const fixed = [
  'ΟΔΟΣ ΟΔΟΣ.', 'ΑΣ.', 'Σ', 'İstanbul İ', 'ǅ ǈ ẞ ß', 'ﬁ ﬀ', 'Ⅻ ½ ² ٣٤ ১২',
  '<|endoftext|> hi <|startoftext|>', '<|ENDOFTEXT|>', '<|StartOfText|>x', '!<|endoftext|>!',
  'a<|endoftext|>b<|startoftext|>c', '<|endoftext|>\u0301a', '<|startoftext', '<|endoftext|><|endoftext|>',
  "it's 'S", "''s", "x'S", "we'll've'd 're 'm 'x", "'", "'s", "rock'n'roll", "ſ 'ſ",
  'a\x1cb', 'a\x85b', 'a\u200bb', 'a\u180eb', 'a\ufeffb', 'a\u2028b\u2029c', 'a\x00b\x01c\x7f',
  'नमस्ते दुनिया', 'สวัสดีครับ', 'e\u0301 o\u0308 \u0301', 'ａｂｃ１２３', '👍🏽 ❤️ 🏳️‍🌈',
  '!'.repeat(200), 'a'.repeat(300), 'ab'.repeat(150), '1234567890'.repeat(10),
  'supercalifragilisticexpialidocious antidisestablishmentarianism',
  'a photo of a cat sitting on a mat, highly detailed, 4k, trending on artstation, by greg rutkowski',
  'x'.repeat(40) + ' ' + 'the quick brown fox '.repeat(30),
  '\ud800x', 'x\udfff', '\t\n\r\f\v', 'A\u00a0B\u3000C\u2003D',
  '&amp; &lt;b&gt; &#39;', 'foo@bar.com #hashtag $100 50% C++',
];

// Random strings from a mixed alphabet, with a fixed seed.
const alphabet = [...'abcdefgXYZ  \'\'sStTlLmd0123!?.,-_<>|/&;#\t\n', 'é', 'e\u0301', 'Σ', 'ς', 'İ', 'ß', '日', '本', '한', 'ж', 'ا', '👍', '🏽', '\u200d', '\u00a0', '\u0085', '\x1c', '<|endoftext|>', '<|startoftext|>', 'Ⅻ', '½', '٣', 'ſ', 'ǅ', '\u0301'];
let seed = 12345;
function rnd(n) { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; }
const random = [];
for (let i = 0; i < 300; i++) {
  let s = '';
  const len = rnd(40);
  for (let j = 0; j < len; j++) s += alphabet[rnd(alphabet.length)];
  random.push(s);
}

(async () => {
  const path = process.argv[2];
  const tok = Tokenizer.fromFile(path);
  // Padding and truncation from the library too, not by hand.
  const t2 = Tokenizer.fromFile(path);
  t2.setTruncation(77);
  t2.setPadding({ maxLength: 77, padId: 49407, padToken: '<|endoftext|>' });
  for (const text of fixed.concat(random)) {
    const hf = Array.from((await tok.encode(text)).getIds());
    const hf77 = Array.from((await t2.encode(text)).getIds());
    process.stdout.write(JSON.stringify({ text, hf, hf_77: hf77 }) + '\n');
  }
})();
