#!/usr/bin/python3
"""Trains small SentencePiece models with the official library and writes the
golden ids the Go tokenizer in text/ is checked against.

Run from the repository root with a Python that has sentencepiece (0.1.97
was used) and its protobuf module:

    /usr/bin/python3 scripts/tokenizers/make_spm.py

It writes, under text/testdata/spm/:

  corpus.jsonl            the test strings, one JSON string a line
  <model>.model           the trained models (see MODELS) and ones edited
                          from them (derived_models)
  <model>.jsonl           per corpus line, sp.encode(text) of that model
  llama_bos.jsonl         per corpus line, sp.encode(text, add_bos=True) of bpe_bytes
  siglip.jsonl            per corpus line, the 64 ids SiglipTokenizer gives with
                          unigram_nfkc.model as its spiece.model (padding="max_length",
                          truncation=True, max_length=64), transcribed below from
                          transformers' tokenization_siglip.py on top of sp
  siglip_tokenizer_config.json  the tokenizer_config.json of that SigLIP folder

The models are trained on synthetic captions made here (no download); the
corpus mixes captions with case, punctuation, digits, accents, full-width and
compatibility characters NFKC maps, emoji and rare characters outside the
vocabularies (unknown pieces, byte fallback), CJK, runs of spaces, tabs and
newlines, empty and space-only strings, and random strings.
"""

import io
import json
import os
import random
import re
import string
import sys
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "text", "testdata", "spm")

NOUNS = """cat dog bird horse cow sheep elephant bear zebra giraffe person man woman child boy girl
car bus truck train bicycle motorcycle airplane boat ship bench chair table couch bed tree flower
street road building house window door kitchen bathroom room city beach mountain river lake sky
cloud sun snow grass field park pizza cake sandwich banana apple orange bowl cup plate bottle
phone laptop keyboard book clock vase umbrella kite ball bat frisbee surfboard skateboard wave
photo picture painting drawing sketch rendering cartoon sculpture portrait landscape food
café naïve jalapeño façade résumé über straße mädchen garçon niño 猫 犬 鳥 花 山 川 空 車 人 東京
写真 風景 정원 고양이 개 кошка собака город""".split()
ADJS = """red blue green yellow black white brown gray small large big tiny old young happy sad
beautiful bright dark wooden metal glass plastic sunny rainy snowy cloudy busy empty open closed
fresh hot cold wet dry long short tall round square colorful vintage modern""".split()
VERBS = """sitting standing running walking eating drinking playing sleeping flying riding holding
looking lying jumping swimming parked reading writing cooking smiling""".split()
PREPS = "on in under near next to behind above with at by of from into over".split()
TEMPLATES = [
    "a photo of a {a} {n}",
    "a {a} {n} {v} {p} the {n2}",
    "the {n} is {v} {p} a {a} {n2}",
    "two {n}s {v} {p} the {n2}",
    "{n} and {n2}",
    "an image of {n}",
    "a close-up of the {a} {n}",
    "there are {d} {n}s {p} the {a} {n2}",
    "a {n} {v} {p} a {n2} in {y}",
    "{A} {N} {V}",
]


def caption(rng):
    t = rng.choice(TEMPLATES)
    n, n2 = rng.choice(NOUNS), rng.choice(NOUNS)
    a, v, p = rng.choice(ADJS), rng.choice(VERBS), rng.choice(PREPS)
    s = t.format(n=n, n2=n2, a=a, v=v, p=p, d=rng.randint(2, 99), y=rng.randint(1900, 2030),
                 A=a.capitalize(), N=n.upper(), V=v.title())
    r = rng.random()
    if r < 0.1:
        s = s.capitalize() + "."
    elif r < 0.15:
        s = s.upper()
    elif r < 0.2:
        s = s + "!"
    elif r < 0.25:
        s = '"' + s + '", she said.'
    return s


def pseudo_word(rng):
    cons, vow = "bcdfghjklmnprstvwz", "aeiouy"
    return "".join(rng.choice(cons) + rng.choice(vow) + (rng.choice(cons) if rng.random() < 0.3 else "")
                   for _ in range(rng.randint(1, 4)))


def training_text(rng):
    lines = [caption(rng) for _ in range(30000)]
    words = [pseudo_word(rng) for _ in range(6000)]
    lines += [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(20000)]
    extra = [
        "The quick brown fox jumps over the lazy dog. 0123456789",
        "東京の写真と風景、猫と犬。", "정원에 있는 고양이와 개", "кошка и собака в городе",
        "Ünïcödé àéîõü çñ ß ÆØÅ æøå œ", "email me at someone@example.com or visit https://example.org/path?q=1",
        "prices: $5, €10, £3.50, ¥100; 50% off! (limited) [offer] {now} #sale @shop",
        "C++ and C# and F#; x = y + z * 2 / 3 - 1; a<b>c; a|b; a~b; a^b; a`b`; a\\b",
    ]
    return lines + extra * 200


# Models: name -> trainer arguments.
MODELS = {
    # SigLIP's layout: <pad>=0, </s>=1, <unk>=2, no <s>; nmt_nfkc.
    "unigram_nfkc": dict(model_type="unigram", vocab_size=3000, normalization_rule_name="nmt_nfkc",
                         pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=0.995),
    # Llama's layout: <unk>=0, <s>=1, </s>=2; identity normalization, byte fallback,
    # no whitespace clean-up.
    "bpe_bytes": dict(model_type="bpe", vocab_size=2000, normalization_rule_name="identity",
                      byte_fallback=True, remove_extra_whitespaces=False, unk_id=0, bos_id=1, eos_id=2,
                      pad_id=-1, character_coverage=0.995, split_digits=True,
                      user_defined_symbols=["<sep>", "[MASK]", "@@"]),
    # Unigram with byte fallback, user-defined and control symbols, nmt_nfkc_cf.
    "unigram_bytes": dict(model_type="unigram", vocab_size=1500, normalization_rule_name="nmt_nfkc_cf",
                          byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=3,
                          character_coverage=0.995,
                          user_defined_symbols=["<sep>", "[MASK]", "cat dog", "▁photo", "ab"],
                          control_symbols=["<ctrl>"]),
    # BPE with nmt_nfkc and no byte fallback (unknown characters become <unk>).
    "bpe_nfkc": dict(model_type="bpe", vocab_size=1200, normalization_rule_name="nmt_nfkc",
                     unk_id=0, bos_id=1, eos_id=2, pad_id=-1, character_coverage=0.99),
}


def edge_cases():
    return [
        "", " ", "   ", "\t", "\n", "\r\n", " \t \n ", "a", "A", "a b", "a  b", "a   b   c",
        "  leading spaces", "trailing spaces   ", "  both  ", "tab\tseparated\twords", "new\nline\nwords",
        "mixed \t\n\r whitespace", "a" + " " * 100 + "b", " " * 50, "x" * 200, "ab" * 80,
        "a photo of a cat", "A PHOTO OF A CAT", "A Photo Of A Cat", "a photo of a cat.",
        "a photo of a cat!!!", "cat, dog, bird; horse: cow?", "don't stop", "it's a dog's life",
        "\"quoted\" 'single' `back`", "(parens) [brackets] {braces} <angles>", "#hashtag @mention",
        "email@example.com", "https://example.org/a/b?c=d&e=f#g", "C++ & C#", "100% sure", "$9.99",
        "3.14159", "1,000,000", "2024-01-01", "12:30pm", "0123456789", "1st 2nd 3rd 4th",
        # full-width and compatibility characters that NFKC maps
        "Ｈｅｌｌｏ　ＷＯＲＬＤ", "ｆｕｌｌ－ｗｉｄｔｈ！？", "１２３４５", "ｶﾀｶﾅ ﾊﾝｶｸ", "①②③④⑤", "⑴⑵⑶",
        "ﬁne ﬂower ﬀ", "½ ¼ ¾ ⅓", "x² y³ H₂O", "™ ℠ ©  ®", "㍻ ㌔ ㎏ ㎡", "Å Ω K", "ℌ ℍ ℕ ℝ",
        "… ‥", "ｱｲｳ", "\u00a0non\u00a0breaking\u00a0", "\u3000ideographic\u3000space\u3000",
        "\u2002en\u2003em\u2009thin", "zero\u200bwidth\u200cjoiners\u200d", "soft\u00adhyphen",
        "line\u2028separator\u2029para", "e\u0301 vs é", "A\u030a vs Å", "ﾞﾟ", "\ufeffbom",
        # accents and scripts
        "café naïve jalapeño façade résumé", "Straße Mädchen über", "ÀÉÎÕÜ àéîõü", "Ærøskøbing",
        "İstanbul ıi", "ΣΑΣ ΟΔΟΣ σας", "Ελληνικά", "кошка собака", "Москва ПРИВЕТ", "עברית",
        "العربية", "हिन्दी", "ภาษาไทย", "한국어 고양이", "정원에 있는 개", "日本語の写真", "東京 猫 犬",
        "中文字符测试", "繁體中文", "ひらがな カタカナ", "漢字かなまじり文", "tiếng Việt", "Ωmega",
        # emoji and characters outside the vocabularies
        "🐱", "🐶🐱🐭", "a 🐱 on a 🛋️", "👨‍👩‍👧", "🇯🇵🇺🇸", "👍🏽", "❤️", "☃", "♞♟", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "𝐛𝐨𝐥𝐝", "𠀋𡈽", "ꙮ", "ᚠᚢᚦ", "☺☹", "⌘⌥", "∑∫√∞", "→←↑↓", "•·°", "§¶†‡",
        # controls and special-token spellings
        "\x01\x02\x7f", "bell\x07", "nul\x00byte", "\x1c\x1d\x1e\x1f", "\x85next line",
        "▁", "▁▁", "▁a▁b", "a▁", "▁ ▁", "<unk>", "</s>", "<s>", "<pad>", "</S>", "<UNK> x",
        "a</s>b", "  </s>  cat", "cat </s>", "</s></s>", "<unk>dog<unk>", "<sep>", "[MASK]",
        "a <sep> b", "x[MASK]y", "@@", "a@@b", "cat dog", "a cat dog photo", "ab abab", "<ctrl>",
        "photo", "▁photo", "PHOTO photo",
    ]


def random_strings(rng, n):
    pool = (string.ascii_letters * 3 + string.digits + string.punctuation + "     \t\n" +
            "éèàüößçñÅØæ" + "猫犬写真東京日本語" + "고양이" + "кошка" + "🐱🐶👍❤️" + "ＡＢ１２" + "①½ﬁ™" + "▁" +
            "\u00a0\u3000\u200b")
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(pool) for _ in range(k)))
    return out


def corpus(rng):
    c = edge_cases()
    c += [caption(rng) for _ in range(250)]
    c += random_strings(rng, 200)
    # Long captions, past 64 tokens.
    for _ in range(20):
        c.append(" ".join(caption(rng) for _ in range(rng.randint(5, 15))))
    return c


def train(name, args, text_path):
    prefix = os.path.join(OUT, name)
    spm.SentencePieceTrainer.train(input=text_path, model_prefix=prefix, num_threads=1,
                                   minloglevel=2, **args)
    os.remove(prefix + ".vocab")
    # The trainer keeps the paths it was given; drop them so that the file
    # does not depend on where it was made.
    with open(prefix + ".model", "rb") as f:
        m = model_pb2.ModelProto.FromString(f.read())
    del m.trainer_spec.input[:]
    m.trainer_spec.model_prefix = ""
    with open(prefix + ".model", "wb") as f:
        f.write(m.SerializeToString())
    return prefix + ".model"


def derived_models(paths):
    """Models edited from the trained ones, for what training does not make:
    UNUSED pieces, no charsmap, spaces not escaped, whitespace as suffix."""
    def edit(src, out, unused_every, **norm):
        with open(paths[src], "rb") as f:
            m = model_pb2.ModelProto.FromString(f.read())
        multi = [p for p in m.pieces if p.type == p.NORMAL and len(p.piece) > 1]
        for p in multi[::unused_every] if unused_every else []:
            p.type = p.UNUSED
        suffix = norm.pop("treat_whitespace_as_suffix", None)
        if suffix is not None:
            m.trainer_spec.treat_whitespace_as_suffix = suffix
        for k, v in norm.items():
            setattr(m.normalizer_spec, k, v)
        path = os.path.join(OUT, out + ".model")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        return out, path
    return dict([
        # BPE with UNUSED pieces: merges through them, then split back.
        edit("bpe_bytes", "bpe_unused", 23),
        # Unigram without a charsmap, UNUSED pieces skipped, no whitespace
        # clean-up, the space mark as a suffix.
        edit("unigram_bytes", "unigram_identity", 31, name="identity", precompiled_charsmap=b"",
             remove_extra_whitespaces=False, treat_whitespace_as_suffix=True),
        # BPE whose spaces stay spaces, with the dummy space as a suffix.
        edit("bpe_bytes", "bpe_spaces", 0, escape_whitespaces=False, treat_whitespace_as_suffix=True,
             remove_extra_whitespaces=True),
    ])


# --- SiglipTokenizer, transcribed from transformers' tokenization_siglip.py and
# the PreTrainedTokenizer.tokenize / __call__ steps it runs through.

SPIECE_UNDERLINE = "\u2581"


class Siglip:
    def __init__(self, model_path, eos="</s>", unk="<unk>", pad="</s>", max_length=64):
        # get_spm_processor: the model with normalizer_spec.add_dummy_prefix = False.
        with open(model_path, "rb") as f:
            m = model_pb2.ModelProto.FromString(f.read())
        ns = model_pb2.NormalizerSpec()
        ns.add_dummy_prefix = False
        m.normalizer_spec.MergeFrom(ns)
        self.sp = spm.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(m.SerializeToString())
        self.eos, self.unk, self.pad = eos, unk, pad
        self.added = {eos: self.sp.piece_to_id(eos), unk: self.sp.piece_to_id(unk)}
        self.all_special = list(dict.fromkeys([eos, unk, pad]))
        self.max_length = max_length

    def canonicalize(self, text):
        text = text.translate(str.maketrans("", "", string.punctuation))
        text = re.sub(r"\s+", " ", text)
        return text.strip()

    def _tokenize(self, text):
        text = self.canonicalize(text)
        k = len(self.sp.encode(self.unk, out_type=str))
        tokens = self.sp.encode(self.unk + text, out_type=str)
        return tokens[k:] if len(tokens) >= k else tokens

    def split_added(self, text):
        # tokens_trie.split for added tokens none of which is a prefix of another.
        pat = "(" + "|".join(re.escape(t) for t in self.added) + ")"
        return [p for p in re.split(pat, text) if p != ""]

    def tokenize(self, text):
        text = SPIECE_UNDERLINE + text.replace(SPIECE_UNDERLINE, " ")
        # do_lower_case: PreTrainedTokenizer.tokenize lowers every character
        # outside the special tokens, one character at a time.
        pattern = r"(" + r"|".join(re.escape(t) for t in self.all_special) + r")|" + r"(.+?)"
        text = re.sub(pattern, lambda m: m.groups()[0] or m.groups()[1].lower(), text, flags=re.DOTALL)
        tokens = self.split_added(text)
        for i, tok in enumerate(tokens):
            if tok in self.added:
                left = tokens[i - 1] if i > 0 else None
                right = tokens[i + 1] if i < len(tokens) - 1 else None
                # </s> and <unk> are AddedToken(lstrip=True, rstrip=True).
                if right:
                    tokens[i + 1] = right.lstrip()
                if left:
                    tokens[i - 1] = left.rstrip()
        out = []
        for tok in tokens:
            if not tok:
                continue
            if tok in self.added:
                out.append(tok)
            else:
                out.extend(self._tokenize(tok))
        if len(out) > 1 and out[0] == SPIECE_UNDERLINE and out[1] in self.all_special:
            out = out[1:]
        return out

    def __call__(self, text):
        ids = [self.added[t] if t in self.added else self.sp.piece_to_id(t) for t in self.tokenize(text)]
        eos = self.added[self.eos]
        # truncation=True, max_length: prepare_for_model removes from the end
        # of the content what the one added EOS would push past max_length.
        if len(ids) + 1 > self.max_length:
            ids = ids[: self.max_length - 1]
        if not (ids and ids[-1] == eos):
            ids = ids + [eos]
        pad = self.added[self.pad]
        return ids + [pad] * (self.max_length - len(ids))


def main():
    rng = random.Random(20260)
    with tempfile.TemporaryDirectory() as tmp:
        text_path = os.path.join(tmp, "train.txt")
        with open(text_path, "w", encoding="utf-8") as f:
            for line in training_text(rng):
                f.write(line + "\n")
        paths = {name: train(name, args, text_path) for name, args in MODELS.items()}

    paths.update(derived_models(paths))

    texts = corpus(random.Random(7))
    with open(os.path.join(OUT, "corpus.jsonl"), "w") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
    for name, path in paths.items():
        sp = spm.SentencePieceProcessor(model_file=path)
        with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
            for t in texts:
                f.write(json.dumps(sp.encode(t)) + "\n")
        print(name, "pieces", sp.get_piece_size(), "bytes", os.path.getsize(path), file=sys.stderr)
    sp = spm.SentencePieceProcessor(model_file=paths["bpe_bytes"])
    with open(os.path.join(OUT, "llama_bos.jsonl"), "w") as f:
        for t in texts:
            f.write(json.dumps(sp.encode(t, add_bos=True)) + "\n")

    sig = Siglip(paths["unigram_nfkc"])
    with open(os.path.join(OUT, "siglip.jsonl"), "w") as f:
        for t in texts:
            f.write(json.dumps(sig(t)) + "\n")
    cfg = {
        "added_tokens_decoder": {
            "1": {"content": "</s>", "lstrip": True, "normalized": False, "rstrip": True, "single_word": False, "special": True},
            "2": {"content": "<unk>", "lstrip": True, "normalized": False, "rstrip": True, "single_word": False, "special": True},
        },
        "additional_special_tokens": [],
        "do_lower_case": True,
        "eos_token": "</s>",
        "model_input_names": ["input_ids"],
        "model_max_length": 64,
        "pad_token": "</s>",
        "processor_class": "SiglipProcessor",
        "tokenizer_class": "SiglipTokenizer",
        "unk_token": "<unk>",
    }
    with open(os.path.join(OUT, "siglip_tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    print("corpus", len(texts), file=sys.stderr)


if __name__ == "__main__":
    main()
