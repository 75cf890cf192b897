// encode.js prints the ids the Hugging Face tokenizers library gives for
// texts, with the file's special tokens, truncated and padded to N with the
// pad id P, and the attention masks: {"ids": [[...]], "mask": [[...]]}.
// The texts come as a JSON list on standard input. Run with the tokenizers
// npm package (0.23.2):
//
//	NODE_PATH=/tmp/tok-node/node_modules node scripts/tokenizers/encode.js TOKENIZER_JSON N P < texts.json
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

(async () => {
  const [file, n, pad] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
  const texts = JSON.parse(fs.readFileSync(0, 'utf8'));
  const tok = Tokenizer.fromFile(file);
  tok.setTruncation(n);
  tok.setPadding({ maxLength: n, padId: pad });
  const ids = [];
  const mask = [];
  for (const s of texts) {
    const e = await tok.encode(s);
    ids.push(Array.from(e.getIds()));
    mask.push(Array.from(e.getAttentionMask()));
  }
  process.stdout.write(JSON.stringify({ ids, mask }) + '\n');
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
