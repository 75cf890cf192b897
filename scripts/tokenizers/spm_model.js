// spm_model.js reads the parts of a SentencePiece ModelProto (.model file)
// that converting it to a tokenizer.json uses: the pieces with their scores
// and types, the model type, byte_fallback, the unknown id and the
// precompiled charsmap; and the variants of a converted tokenizer.json
// (parts replaced, the string "<base>" standing for the base file's
// charsmap) with the ids the tokenizers library gives under each. Used by
// make_siglip_json.js and make_xlmr_json.js.
const fs = require('fs');
const path = require('path');

function varint(b, p) {
  let x = 0n;
  let s = 0n;
  for (;;) {
    const c = b[p.i++];
    x |= BigInt(c & 0x7f) << s;
    s += 7n;
    if (!(c & 0x80)) return x;
  }
}
function fields(b) {
  const f = [];
  const p = { i: 0 };
  while (p.i < b.length) {
    const tag = Number(varint(b, p));
    const num = tag >>> 3;
    const wt = tag & 7;
    if (wt === 0) f.push([num, varint(b, p)]);
    else if (wt === 1) { f.push([num, b.subarray(p.i, p.i + 8)]); p.i += 8; }
    else if (wt === 2) { const n = Number(varint(b, p)); f.push([num, b.subarray(p.i, p.i + n)]); p.i += n; }
    else if (wt === 5) { f.push([num, b.subarray(p.i, p.i + 4)]); p.i += 4; }
    else throw new Error('wire type ' + wt);
  }
  return f;
}
function readModel(file) {
  const pieces = [];
  let unkId = 0;
  let modelType = 1;
  let byteFallback = false;
  let charsmap = null;
  for (const [num, v] of fields(fs.readFileSync(file))) {
    if (num === 1) {
      const p = { piece: '', score: 0, type: 1 };
      for (const [n, x] of fields(v)) {
        if (n === 1) p.piece = Buffer.from(x).toString('utf8');
        if (n === 2) p.score = Buffer.from(x).readFloatLE(0);
        if (n === 3) p.type = Number(x);
      }
      pieces.push(p);
    } else if (num === 2) {
      for (const [n, x] of fields(v)) {
        if (n === 3) modelType = Number(x);
        if (n === 35) byteFallback = x !== 0n;
        if (n === 40) unkId = Number(BigInt.asIntN(32, x));
      }
    } else if (num === 3) {
      for (const [n, x] of fields(v)) if (n === 2) charsmap = Buffer.from(x);
    }
  }
  if (modelType !== 1) throw new Error(file + ': not a Unigram model');
  return { pieces, unkId, byteFallback, charsmap };
}


// applyVariant returns json with variant v applied: v.set's top-level keys
// replaced ("<base>" made charsmapB64), v.model's model keys replaced,
// v.append_vocab appended to the model's vocabulary.
function applyVariant(json, v, charsmapB64) {
  const j = JSON.parse(JSON.stringify(json));
  const set = JSON.parse(JSON.stringify(v.set || {}).split('"<base>"').join(JSON.stringify(charsmapB64)));
  Object.assign(j, set);
  Object.assign(j.model, v.model || {});
  if (v.append_vocab) j.model.vocab = j.model.vocab.concat(v.append_vocab);
  return j;
}

// writeVariantGoldens writes <out>/golden_<name>.jsonl for each variant of
// saved: per text, the ids (special tokens included) the library gives.
async function writeVariantGoldens(Tokenizer, out, saved, variants, texts, charsmapB64) {
  for (const [name, v] of Object.entries(variants)) {
    const tok = Tokenizer.fromString(JSON.stringify(applyVariant(saved, v, charsmapB64)));
    const lines = [];
    for (const s of texts) lines.push(JSON.stringify(Array.from((await tok.encode(s)).getIds())));
    fs.writeFileSync(path.join(out, `golden_${name}.jsonl`), lines.join('\n') + '\n');
    process.stderr.write(`  variant ${name}\n`);
  }
}

module.exports = { readModel, applyVariant, writeVariantGoldens };
