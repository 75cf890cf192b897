#!/usr/bin/env python3
"""make_goldens.py runs the real ftfy over a list of inputs and writes what it
returns, as test data for text/internal/ftfy and the text package.

  /usr/bin/python3 scripts/ftfy/make_goldens.py FTFY_CHECKOUT

from the repository root, where FTFY_CHECKOUT is a checkout of
github.com/rspeer/python-ftfy (ftfy imports wcwidth: Debian's python3-wcwidth;
the token ids need Debian's python3-regex). It writes:

  text/internal/ftfy/testdata/fix_text.jsonl
      {"in", "out": ftfy.fix_text(in), "bad": ftfy.badness.is_bad(in)} for the
      inputs of ftfy's own test cases (tests/test-cases/*.json and the strings
      of tests/test_entities.py and test_characters.py), the prompts below
      (curly quotes, ligatures, full width, mojibake of real words in several
      languages and codecs, emoji, CJK, entities, control characters, line
      breaks, long texts) and random mixtures of them.
  text/internal/ftfy/testdata/heuristic.jsonl
      {"text", "bad": is_bad(text), "encoding": ftfy.fix_encoding(text)} for
      short random strings drawn class by class from the characters of ftfy's
      badness heuristic, and strings made to hit each of its patterns.
  text/internal/ftfy/testdata/long.jsonl
      {"prefix", "count", "suffix", "out_suffix"}: fix_text of prefix*count +
      suffix is prefix*count + out_suffix, for texts around ftfy's
      max_decode_length (1,000,000 characters a segment).
  text/testdata/openai_ftfy.jsonl
      {"text", "fixed": fix_text(text), "openai": ids} where ids are openai's
      simple_tokenizer.py encoding (ftfy.fix_text, html.unescape twice, strip,
      whitespace runs to one space, lower, its regex, BPE: gen_python.py's
      restatement, checked there against clip/golden.jsonl) with the real
      CLIP vocabulary, for the prompts below and for every text of
      clip/golden.jsonl and openai_extra.jsonl that ftfy changes.

The first line of each file names the ftfy version and commit it ran.
"""
import json
import os
import random
import subprocess
import sys

CHECKOUT = sys.argv[1]
sys.path.insert(0, CHECKOUT)
import ftfy  # noqa: E402
from ftfy.badness import MOJIBAKE_CATEGORIES, is_bad  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "text", "testdata"))
import gen_python  # noqa: E402

COMMIT = subprocess.run(["git", "-C", CHECKOUT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
HEADER = {"ftfy": ftfy.__version__, "commit": COMMIT, "python": sys.version.split()[0]}

CODECS = ["latin-1", "sloppy-windows-1252", "sloppy-windows-1251", "sloppy-windows-1250", "sloppy-windows-1253",
          "sloppy-windows-1254", "sloppy-windows-1257", "iso-8859-2", "macroman", "cp437", "windows-1252"]

WORDS = ["café", "naïve", "résumé", "crème brûlée", "Ångström", "Müller straße", "São Paulo", "piñata", "jalapeño",
         "Zürich", "façade", "Œuvre", "déjà vu", "à la mode", "voilà le travail", "Łódź", "Kraków", "Dvořák", "Škoda",
         "Türkçe ağaç", "İstanbul", "Ελληνικά", "Москва", "привет мир", "Київ", "日本語", "東京タワー", "한국어",
         "中文字符", "🙂 smile", "👍🏽", "🇫🇷", "😀 emoji 🎉", "naïve café — “quoted” ‘text’…", "€100", "5 × 3 ½",
         "50°C", "© 2024 ™", "عربي", "עברית", "हिन्दी", "ไทย", "Việt Nam"]

PROMPTS = [
    "a photo of a cat", "a photo of a dog’s face", "it’s a “good” day", "‘single’ and ‛reversed’ quotes",
    "„low“ quotes", "ʼapostrophe", "the ﬁrst ﬂower", "ﬀ ﬃ ﬄ ﬅ ﬆ Ĳ ĳ ǆ ǈ ŉ", "ＬＯＵＤ　ＮＯＩＳＥＳ", "ｆｕｌｌ ｗｉｄｔｈ １２３！",
    "ﾊﾝｶｸ ｶﾀｶﾅ", "Ｕﾀｰﾝ", "￥１００ ￣", "salt &amp; pepper", "Tom &amp;amp; Jerry", "&lt;b&gt;bold&lt;/b&gt;",
    "&lt;&gt; then <b>", "a < b &amp; c", "line1 &amp;\n<html>\nline3 &amp;", "&amp;\n<html>\n&amp;",
    "&eacute;t&eacute;", "P&EACUTE;REZ", "&hellip; &mdash; &nbsp;x", "&#x2019;s", "&#8217;", "&#59;", "&#128512;",
    "&#xffffffff;", "&#0;", "&#13;x", "&#12ab;", "&#x;", "&notin &not;", "&NotEqualTilde;", "&nGt;",
    "\x1b[31mred\x1b[0m text", "\x1b[1;32mbold green\x1b[m", "\x1b[x not an escape", "bell\x07 and nul\x00 here",
    "tab\tnew\nline\r\nand\rcr", "a\u2028b\u2029c\x85d", "zero\u200bwidth joiner\u200d", "bom\ufeffhere",
    "\u206a\u206f deprecated", "\ufff9\ufffa\ufffb\ufffc objects", "e\u0301 combining", "Å vs A\u030a",
    "Ã©tÃ©", "cafÃ©", "Ã la mode", "Ã  la", "voilÃ le travail", "fÃ cil", "Ã s vezes", "Ã quele",
    "â€œquotedâ€\x9d", "â€œ like this â€�", "itâ€™s", "Iâ€™m", "donâ€™t", "â€”", "â€¦", "Ã¢â‚¬Å“double mojibakeÃ¢â‚¬Â\x9d",
    "Ð¿Ñ€Ð¸Ð²ÐµÑ‚", "Ð\xa0Ð¾ÑÑÐ¸Ñ", "ÐœÐ¾ÑÐºÐ²Ð°", "ÃƒÂ©", "Ãƒ©", "Ã¼ber", "MÃ¼ller",
    "sÃ³", "Ã³", "Ã±", "Ã§a", "Ã‰cole", "Ã¨", "Ã¶", "Ã¤", "Ã…ngstrÃ¶m", "Ã\x89cole", "Ã\x81frica",
    "ì•ˆë…•í•˜ì„¸ìš”", "æ—¥æœ¬èªž", "ä¸­æ–‡", "ðŸ˜€", "ðŸ‘\x8d", "ðŸ™‚", "\xed\xa0\xbd\xed\xb8\x80",
    "Ã\x80", "\x80\x81\x82 c1 controls", "broken\x81", "ellipsis\x85 here", "Â¯\\_(ã\x83\x84)_/Â¯",
    "&macr;\\_(ã\x83\x84)_/&macr;", "âœ” No problems", "Broken text&hellip; it&#x2019;s ﬂubberiﬁc!",
    "this is just informal english &not html", "ÆÆÆ", "Ã\xa0", "Â\xa0", "non\xa0breaking", "ΟΔΟΣ",
    "„Anführungszeichen“", "«guillemets»", "‹single›", "(╯°□°)╯︵ ┻━┻", "¯\\_(ツ)_/¯", "ʕ•ᴥ•ʔ", "ಠ_ಠ",
    "ÐŸÑ€Ð¸Ð²ÐµÑ‚ Ð¼Ð¸Ñ€ and âœ“ check", "Ã‚Â£100", "Â£100", "â‚¬100", "Ã—", "Ã·", "Â½", "Â°C",
    "maÃ±ana", "niÃ±o", "cora\u00e7\u00e3o", "coraÃ§Ã£o", "Ð¡Ð°Ð½ÐºÑ‚-ÐŸÐµÑ‚ÐµÑ€Ð±ÑƒÑ€Ð³",
    "ΑΘΗΝΑ", "Î‘Î¸Î®Î½Î±", "Ä°stanbul", "Ã‡ok gÃ¼zel", "Å½luÅ¥ouÄ\x8dkÃ½ kÅ¯Åˆ", "ZaÅ¼Ã³Å‚Ä‡ gÄ™Å›lÄ… jaÅºÅ„",
    "",  " ", "\n", "\n\n", "a\n", "&", "&;", "&&amp;", "<", "A&B", "x" * 300, "word " * 120,
    ("Ã©tÃ© " * 40) + "\n" + ("&amp; " * 30) + "\n" + "ﬁn ＦＩＮ “end”",
    "Ã© À\n", "Ã©À\n", "Ã©À", "í\xa0½í¸\n", "í\xa0½í¸\x80", "í\xa0½í¸\x80\n", "Ã©Ã\x80\n",
    "\u00a0\u3000\u2003 spaces", "Ⅻ ½ ² ℌ ㎏", "ǅungla", "Σίσυφος", "𝒥ohn", "\U0001F600\U0001F3FD",
]


def mojibake_cases():
    out = []
    for w in WORDS:
        raw = w.encode("utf-8")
        for enc in CODECS:
            try:
                out.append(raw.decode(enc))
            except UnicodeDecodeError:
                out.append(raw.decode(enc, errors="replace"))
            # with byte 0xA0 turned into a space, as some programs do
            try:
                out.append(raw.decode(enc).replace("\xa0", " "))
            except UnicodeDecodeError:
                pass
        try:  # twice
            out.append(raw.decode("latin-1").encode("utf-8").decode("sloppy-windows-1252"))
            out.append(raw.decode("sloppy-windows-1252").encode("utf-8").decode("sloppy-windows-1252"))
        except UnicodeDecodeError:
            pass
        # inside clean text, and in a sentence
        out.append("The word " + raw.decode("sloppy-windows-1252") + " is " + w)
    return out


def ftfy_test_inputs():
    out = []
    casedir = os.path.join(CHECKOUT, "tests", "test-cases")
    for name in sorted(os.listdir(casedir)):
        if name.endswith(".json"):
            with open(os.path.join(casedir, name)) as f:
                out.extend(case["original"] for case in json.load(f))
    out += ["&\n<html>\n&amp;", "&amp;\n<html>\n&amp;", "&lt;&gt;", "jednocze&sacute;nie", "JEDNOCZE&Sacute;NIE",
            "ellipsis&#133;", "ellipsis&#x85;", "broken&#x81;", "&amp;amp;amp;", "euro &#x80;", "EURO &EURO;",
            "not an entity &#20x6;", "JEDNOCZE&SACUTE;NIE", "V&SCARON;ICHNI", "&#xffff;", "&#xffffffff;",
            "ï»¿", "\ufeffhello", "&lt;tag&gt;", "&Jscr;ohn &HilbertSpace;ancock", "&checkmark;", "P&eacute;rez",
            "BUNDESSTRA&SZLIG;E", "&ntilde; &Ntilde; &NTILDE; &nTILDE;", "ﬂuﬃeﬆ",
            "\u201chere\u2019s a test\u201d", "This string is made of two things:\u20291. Unicode\u20282. Spite",
            "Content-type: text/plain\r\n\r\nHi.", "This is how Microsoft \r trolls Mac users",
            "What is this \x85 I don't even", "\033[36;44mI'm blue, da ba dee da ba doo...\033[0m"]
    return out


def random_mixtures(rng, n):
    pieces = PROMPTS[:120] + mojibake_cases()[:200] + ["\n", " ", "&amp;", "<", "\r\n", "\x1b[0m", "\x00", "\x85"]
    return ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 5))) for _ in range(n)]


def heuristic_cases(rng, n):
    import re
    every = "".join(chr(i) for i in range(0x3000))
    groups = [re.findall("[" + cls + "]", every + "\uf8ff\ufffd\ufb01\ufb02") for cls in MOJIBAKE_CATEGORIES.values()]
    literal = set(ftfy.badness.BADNESS_RE.pattern) - set(" \n\t")
    groups.append(sorted(c for c in literal if ord(c) >= 0x80))
    groups += [list("abcxyz"), list("ABCXYZ"), list(" \t\n\u00a0\u3000"), list(".,?!_-'\"/"), list("0123456789"),
               list("ÃÂÎÐØÙВГРСΒΓΞΟβāàŒœ×√≈‚вў€"), list("éèüöñçåøæ日本")]
    out = []
    for _ in range(n):
        out.append("".join(rng.choice(rng.choice(groups)) for _ in range(rng.randrange(1, 7))))
    out += ["ГўВЂВ™s", "ГўВЂВ x", "ГўВЂВ\nx", "вЂ™", "β€™", "β€x", "ā€", "‚Äô", "‚âà", "‚óê", "√±", "≈°", "à²",
            "ØŸØ§", "Ø§Ù„", "ÙØ", "× ²", "×²", "Œx", "Œ1", "œ", "É°", "aÃ b", "a Ã b", "Ã b", "Â b", "xÂ ©", ".Â»",
            "aÂ ", "Ã¡", "Ã\xa0", "ВЃВ", "В°С", "Β€Ο", "Γ°Ξ", " É€", "aÉ€", "aÉ‚", "É‘x", "é’s", "é‘1"]
    return out


def write_jsonl(path, rows):
    with open(path, "w") as f:
        f.write(json.dumps(HEADER) + "\n")
        for r in rows:
            f.write(json.dumps(r) + "\n")


def main():
    rng = random.Random(11)
    seen, fix_rows = set(), []
    for text in ftfy_test_inputs() + PROMPTS + mojibake_cases() + random_mixtures(rng, 600):
        if text in seen:
            continue
        seen.add(text)
        fix_rows.append({"in": text, "out": ftfy.fix_text(text), "bad": is_bad(text)})
    write_jsonl(os.path.join(ROOT, "text/internal/ftfy/testdata/fix_text.jsonl"), fix_rows)

    heur, hseen = [], set()
    for text in heuristic_cases(rng, 4000):
        if text not in hseen:
            hseen.add(text)
            heur.append({"text": text, "bad": is_bad(text), "encoding": ftfy.fix_encoding(text)})
    write_jsonl(os.path.join(ROOT, "text/internal/ftfy/testdata/heuristic.jsonl"), heur)

    long_rows = []
    for prefix, count, suffix in [("a", 999999, "Ã©"), ("a", 999998, "Ã©"), ("é", 999999, "Ã©x"),
                                  ("x", 1000000, "Ã©\nÃ©"), ("a", 2500000, "&amp;")]:
        out = ftfy.fix_text(prefix * count + suffix)
        assert out.startswith(prefix * count), (prefix, count, suffix)
        long_rows.append({"prefix": prefix, "count": count, "suffix": suffix, "out_suffix": out[count:]})
    write_jsonl(os.path.join(ROOT, "text/internal/ftfy/testdata/long.jsonl"), long_rows)

    tok = gen_python.OpenAI(os.path.join(ROOT, "text/testdata/clip/bpe_simple_vocab_16e6.txt.gz"))
    texts = list(PROMPTS) + [w for w in WORDS] + mojibake_cases()[:150]
    for name in ("text/testdata/clip/golden.jsonl", "text/testdata/openai_extra.jsonl"):
        with open(os.path.join(ROOT, name)) as f:
            for line in f:
                t = json.loads(line)["text"]
                if ftfy.fix_text(t) != t:
                    texts.append(t)
    rows, tseen = [], set()
    for t in texts:
        if t not in tseen:
            tseen.add(t)
            fixed = ftfy.fix_text(t)
            rows.append({"text": t, "fixed": fixed, "openai": tok.encode(fixed)})
    write_jsonl(os.path.join(ROOT, "text/testdata/openai_ftfy.jsonl"), rows)


if __name__ == "__main__":
    main()
