// spm_model.js reads the parts of a SentencePiece ModelProto (.model file)
// that converting it to a tokenizer.json uses: the pieces with their scores
// and types, the model type, byte_fallback, the unknown id and the
// precompiled charsmap. Used by make_siglip_json.js and make_xlmr_json.js.
const fs = require('fs');

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


module.exports = { readModel };
