#!/usr/bin/env python3
"""gen_python.py writes the Python-side goldens of the text package:

  utf8_replace.jsonl   bytes (hex) -> bytes.decode("utf-8", errors="replace")
  html_unescape.jsonl  text -> html.unescape(text) (once)
  openai_extra.jsonl   text -> ids of openai's simple_tokenizer cleaning and
                       split, without ftfy (as clip/golden.jsonl)

Run from this folder with Debian's python3 and python3-regex:

  /usr/bin/python3 gen_python.py clip/bpe_simple_vocab_16e6.txt.gz

openai_extra.jsonl follows simple_tokenizer.py's steps: html.unescape twice,
strip, re.sub(r"\\s+", " "), strip, str.lower, its regex (the `regex` module,
IGNORECASE), byte-level BPE with "</w>". The BPE loop is restated here; the
real vocabulary and golden.jsonl's openai field check that it agrees.
"""
import gzip
import html
import json
import random
import re
import sys

import regex


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


class OpenAI:
    pat = regex.compile(r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""", regex.IGNORECASE)

    def __init__(self, path):
        merges = gzip.open(path).read().decode("utf-8").split("\n")
        merges = [tuple(m.split()) for m in merges[1:49152 - 256 - 2 + 1]]
        self.byte_encoder = bytes_to_unicode()
        vocab = list(self.byte_encoder.values())
        vocab = vocab + [v + "</w>" for v in vocab]
        vocab += ["".join(m) for m in merges]
        vocab += ["<|startoftext|>", "<|endoftext|>"]
        self.encoder = {v: i for i, v in enumerate(vocab)}
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.specials = {"<|startoftext|>", "<|endoftext|>"}

    def bpe(self, token):
        if token in self.specials:
            return [token]
        word = list(token[:-1]) + [token[-1] + "</w>"]
        while len(word) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 60), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            rank, _ = min(pairs)
            if rank == 1 << 60:
                break
            # merge every occurrence of the best pair, left to right
            best = min(((self.ranks.get((a, b), 1 << 60), (a, b)) for a, b in zip(word, word[1:])))[1]
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        return word

    def encode(self, text):
        text = html.unescape(html.unescape(text)).strip()
        text = re.sub(r"\s+", " ", text).strip().lower()
        ids = [self.encoder["<|startoftext|>"]]
        for token in self.pat.findall(text):
            if token in self.specials:  # bpe()'s cache holds them as they are
                ids.append(self.encoder[token])
                continue
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(token))
        ids.append(self.encoder["<|endoftext|>"])
        return ids


def main():
    rng = random.Random(7)

    with open("utf8_replace.jsonl", "w") as f:
        cases = [b"", b"abc", b"\xff", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xed\xa0\x80", b"\xf0\x9f\x98",
                 b"\xf0\x9f\x98\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\xaf", b"\xc0\xaf", b"\x80\x80", b"a\xf5b",
                 b"\xf0\x90\x80", b"\xef\xbf\xbd", b"\xe0\xa0", b"\xf1\x80\x80\xc3\xa9"]
        pool = [b"\x80", b"\xbf", b"\xc2", b"\xdf", b"\xe0", b"\xe1", b"\xed", b"\xef", b"\xf0", b"\xf3", b"\xf4", b"\xf5", b"\xff",
                b"\xa0", b"\x9f", b"\x90", b"\x8f", b"a", b" ", "é".encode(), "日".encode(), "😀".encode()]
        for _ in range(300):
            cases.append(b"".join(rng.choice(pool) for _ in range(rng.randrange(1, 12))))
        for c in cases:
            f.write(json.dumps({"hex": c.hex(), "want": c.decode("utf-8", errors="replace")}) + "\n")

    with open("html_unescape.jsonl", "w") as f:
        cases = ["&amp;", "&amp", "&ampx", "&amp;amp;", "&lt;b&gt;", "&notin", "&notin;", "&notit;", "&#39;", "&#x27;", "&#X27",
                 "&#0;", "&#1;", "&#13;", "&#128;", "&#129;", "&#x80;", "&#x9F;", "&#127;", "&#xD800;", "&#x110000;",
                 "&#99999999999999999999999;", "&#xFFFE;", "&#x1FFFF;", "&#xFDD0;", "&#65;&#66", "&#;", "&#x;", "&#xg;",
                 "&", "&;", "& amp;", "&&amp;", "&AElig", "&AElig;", "&aelig;", "&CounterClockwiseContourIntegral;",
                 "&" + "a" * 40 + ";", "&amp-x", "&amp.b;", "&ampé;", "&fjlig;", "&nGt;", "&NotEqualTilde;", "&ThickSpace;",
                 "a&b c&d;", "&quot;quoted&quot;", "&copy 2024", "&#9;tab", "&nbsp;x", "&lt", "&LT", "&Lt;", "&gtx;"]
        alphabet = list("&#;xX0123456789abcdefampltgquoAE ") + ["é", "&amp;", "&#", "&#x", ";"]
        for _ in range(300):
            cases.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 16))))
        for c in cases:
            f.write(json.dumps({"text": c, "want": html.unescape(c)}) + "\n")

    tok = OpenAI(sys.argv[1])
    with open("openai_extra.jsonl", "w") as f:
        cases = ["ΟΔΟΣ ΟΔΟΣ.", "ΑΣ.", "Σ", "aΣb", "aΣ'", "İstanbul", "ſ 'ſ x'ſ", "x'S", "''s", "we'll've'd",
                 "&lt;b&gt;bold&lt;/b&gt; &amp;amp; &#39;quoted&#39;", "Tom &amp; Jerry", "&amp;lt;", "&notin &#128;",
                 "a\x1cb\x1fc", "a\x85b", "  lead\ttab\n", "<|endoftext|> hi <|startoftext|>", "<|ENDOFTEXT|>",
                 "!<|endoftext|>!", "x<|endoftext|>", "<|ſtartoftext|>", "e\u0301", "日本語 テキスト", "a\u200bb",
                 "Ⅻ ½ ²", "!" * 100, "a" * 120]
        alphabet = list("abcXYZ  '!?.&;#<>|") + ["&amp;", "&lt;", "&#39;", "é", "e\u0301", "Σ", "İ", "ſ", "\x1c", "\u00a0",
                                                 "<|endoftext|>", "<|startoftext|>", "日", "👍", "1"]
        for _ in range(200):
            cases.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))))
        for c in cases:
            f.write(json.dumps({"text": c, "openai": tok.encode(c)}) + "\n")

    # Self-check against golden.jsonl's openai field, beside the vocabulary.
    gold = sys.argv[1].replace("bpe_simple_vocab_16e6.txt.gz", "golden.jsonl")
    for line in open(gold):
        g = json.loads(line)
        assert tok.encode(g["text"]) == g["openai"], g["text"]


if __name__ == "__main__":
    main()
