#!/usr/bin/env python3
"""Writes the expected tokenizer outputs that hotset's tests compare against, made
by other implementations, into tests/data/vocab/:

  strings.json  hand-written strings in many scripts and edge cases, each with
                - "o200k", "o200k_special": OpenAI tiktoken's ids on the gpt-oss
                  vocabulary (special-token text as plain text / parsed);
                - "qwen_tiny", "qwen_tiny_special": Hugging Face `tokenizers` ids
                  on the tiny Qwen3-MoE file's vocabulary (tests/data/oracle/), the
                  qwen2 pre-tokenizer as a Split regex then ByteLevel, as Qwen's own
                  tokenizer.json builds it (without its NFC normalizer: hotset, like
                  llama.cpp, does not normalize);
                - "split_o200k", "split_qwen2": the byte lengths of the pieces the
                  two patterns cut, by Python's `regex` module (null when the
                  string holds a character whose class changed in Unicode 17.0,
                  the version `regex` has, since hotset's tables are 16.0).
  random.json   random texts the C tests regenerate with the same generator
                (splitmix64 over the "pools" written into the file), with the
                count of the pieces and ids each oracle gives and a hash of them
                (FNV-1a 64 over 32-bit little-endian values, low 32 bits kept).

Needs: pip install tiktoken bpe-openai regex tokenizers unicodedata2==16.0.0
Run from the source tree: python3 tests/gen-tokenizer-data.py
"""
import base64
import gzip
import json
import os
import struct
import sys

import regex
import tiktoken
import unicodedata2
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

O200K = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
         r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
         r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
         r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
VOCAB = os.path.join(DATA, "vocab", "gptoss-o200k-harmony-vocab.gguf")
QWEN = os.path.join(DATA, "oracle", "qwen3moe-l3-h256-e16k4-q8.gguf")
M64 = (1 << 64) - 1


# ---- GGUF metadata (enough to read a tokenizer) ------------------------------
def gguf_meta(path):
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize(fmt)))[0]

        def value(t):
            if t in scalar:
                return rd(scalar[t])
            if t == 8:
                return f.read(rd("Q"))
            et, n = rd("I"), rd("Q")
            return [value(et) for _ in range(n)]
        assert f.read(4) == b"GGUF"
        rd("I")
        rd("Q")
        n_kv = rd("Q")
        return {f.read(rd("Q")).decode(): value(rd("I")) for _ in range(n_kv)}


# ---- the oracles --------------------------------------------------------------
def o200k():
    import bpe_openai
    d = os.path.join(os.path.dirname(bpe_openai.__file__), "data")
    ranks = {}
    with gzip.open(os.path.join(d, "o200k_base.tiktoken.gz"), "rt") as fh:
        for line in fh:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    meta = gguf_meta(VOCAB)
    specials = {t.decode(): i for i, (t, ty) in enumerate(zip(meta["tokenizer.ggml.tokens"],
                                                                 meta["tokenizer.ggml.token_type"])) if ty == 3}
    enc = tiktoken.Encoding("o200k_harmony", pat_str=O200K, mergeable_ranks=ranks, special_tokens=specials)
    return (lambda s: enc.encode(s, disallowed_special=())), (lambda s: enc.encode(s, allowed_special="all"))


def qwen_tiny():
    meta = gguf_meta(QWEN)
    toks, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    vocab = {t.decode(): i for i, (t, ty) in enumerate(zip(toks, types)) if ty == 1}
    merges = [tuple(m.decode().split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t.decode(), special=True, normalized=False)
                           for t, ty in zip(toks, types) if ty == 3])

    def plain(s):
        tk.encode_special_tokens = True  # special-token text is plain text
        return tk.encode(s, add_special_tokens=False).ids

    def special(s):
        tk.encode_special_tokens = False
        return tk.encode(s, add_special_tokens=False).ids
    return plain, special


def split(pattern, s):
    return [len(m.encode()) for m in regex.findall(pattern, s)]


# Code points whose class (for the patterns) differs between hotset's Unicode
# 16.0 tables and the `regex` module's own version, or that cannot be UTF-8.
def class16(cp):
    if cp in WHITE_SPACE:
        return "WS"
    cat = unicodedata2.category(chr(cp))
    return {"Lu": "LU", "Lt": "LU", "Ll": "LL", "Lm": "LO", "Lo": "LO"}.get(cat) or \
        {"M": "M", "N": "N"}.get(cat[0], "X")


WHITE_SPACE = set([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000] +
                  list(range(0x2000, 0x200B)))
RE_CLASSES = [("LU", regex.compile(r"[\p{Lu}\p{Lt}]")), ("LL", regex.compile(r"\p{Ll}")),
              ("LO", regex.compile(r"[\p{Lm}\p{Lo}]")), ("M", regex.compile(r"\p{M}")),
              ("N", regex.compile(r"\p{N}")), ("WS", regex.compile(r"\s"))]


def class_regex(cp):
    for name, p in RE_CLASSES:
        if p.match(chr(cp)):
            return name
    return "X"


def excluded_ranges():
    bad = [cp for cp in range(0x110000) if 0xD800 <= cp < 0xE000 or class16(cp) != class_regex(cp)]
    ranges = []
    for cp in bad:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


# ---- hand-written strings --------------------------------------------------
STRINGS = [
    # English, case and contractions
    "The quick brown fox jumps over the lazy dog.", "THE QUICK BROWN FOX", "tHe QuIcK bRoWn",
    "don't won't can't I'm you're we've they'll she'd it's", "DON'T WON'T CAN'T I'M YOU'RE WE'VE THEY'LL SHE'D IT'S",
    "We'RE They'Ll He'D it'S", "'s 's 'S 'll", "''s ''t", "rock'n'roll O'Neil's", "it'ſ IT'ſ ſ'ſ",
    "don’t (curly apostrophe)", "'tis 'twas", "x'S y'LL z'Re",
    # whitespace
    "a  b   c    d", "trailing   ", "   leading", "   ", " ", "\t", "\t\tx", "\n", "\n\n\n", "a\nb", "a\r\nb",
    "a\r\n\r\nb", "a\n\rb", "\r", "\r\r\n", "x \n y", "x  \n  y", "  \n  ", "a\u00a0b", "a\u3000b", "a\u2028b",
    "a\u0085b", "a\u000bb\u000cc", " \u00a0 x", "line\n    indented\n\tTabbed\n", "end with newline\n",
    "spaces then newline   \n", "\n   \n   x",
    # digits
    "0", "12", "123", "1234", "1234567890123", "3.14159", "1,000,000", "v1.2.3-rc4", "$100.00", "+1 (555) 010-9999",
    "abc123def456", "１２３４５", "٣٤٥٦٧", "१२३४", "๑๒๓", "Ⅻ Ⅳ ⅷ", "x² y³ ½ ¾", "①②③", "2026-12-01T04:14:43Z",
    # European languages
    "Größe Straße STRASSE Öl über", "Ça va? L'été à Paris, c'est très bien.", "¿Qué tal? ¡Muy bien!",
    "Ação, coração, pão.", "Zażółć gęślą jaźń", "Příliš žluťoučký kůň", "İstanbul ılık ĞÜŞİÖÇ", "Tiếng Việt có dấu",
    "Ελληνικά: Καλημέρα κόσμε", "Русский: Съешь же ещё этих мягких французских булок", "Українська: Ґанок їжак",
    "Հայերեն լեզու", "ქართული ენა ᲥᲐᲠᲗᲣᲚᲘ",
    # right to left, with marks
    "עִבְרִית מְנֻקֶּדֶת", "العَرَبِيَّةُ لُغَةٌ", "فارسی: سلام دنیا", "اردو زبان",
    # Indic and South-East Asian
    "हिन्दी भाषा का परीक्षण", "বাংলা ভাষা", "தமிழ் மொழி", "తెలుగు భాష", "ಕನ್ನಡ ಭಾಷೆ", "മലയാളം ഭാഷ", "ગુજરાતી ભાષા",
    "ਪੰਜਾਬੀ ਭਾਸ਼ਾ", "සිංහල භාෂාව", "ภาษาไทยสำหรับการทดสอบ", "ພາສາລາວ", "ភាសាខ្មែរ", "မြန်မာဘာသာ", "བོད་ཡིག",
    # East Asian
    "中文字符测试，包括标点符号。", "繁體中文測試", "日本語のテキスト、カタカナとひらがな。", "ｶﾀｶﾅ ﾊﾝｶｸ", "한국어 텍스트 테스트입니다",
    "한국어 자모 ᄒᆞᆫ", "Mixed 中文 and English", "日本語abc漢字DEF",
    # other scripts
    "አማርኛ ቋንቋ", "ᏣᎳᎩ ꮳꮃꭹ", "ᐃᓄᒃᑎᑐᑦ", "Ògún Yorùbá", "ᠮᠣᠩᠭᠣᠯ", "𐌰𐌱𐌲 Gothic", "𐐀𐐨𐐁𐐩 Deseret",
    "𝐀𝐁𝐂 𝒶𝒷𝒸 𝟏𝟐𝟑", "ǅemal ǈudevit ǋ", "ʰʲʷ modifier ˢ", "ʕaʕ ʕ ʕʕʕ", "𐗀𐗁𐗂 Todhri (Unicode 16)",
    # combining marks
    "\u0301", " \u0301", "a\u0301\u0302\u0303", "e\u0301 é", "Z\u0351\u0358a\u0366l\u0358g\u0353o", "x\u20dd",
    "\u0301abc", "ABC\u0301DEF", "Ab\u0301C", "\u0915\u094d\u0937", "1\u0301", "!\u0301?",
    # emoji and symbols
    "emoji 😀 👍🏽 👨\u200d👩\u200d👧\u200d👦 🇯🇵 ❤️ 1️⃣", "😀😀😀", "a😀b", "🏳️\u200d🌈", "\u200d", "\u200c\u200d",
    "math ∑∫√∞ ≤ ≥ ≠ ± × ÷ → ⇒ ∀∃", "𝄞 music", "\ufeffBOM", "soft\u00adhyphen", "\u202ebidi\u202c",
    "\ue000 private", "\U0010fffd",
    # code, markup, paths
    "def f(x):\n    return x ** 2  # comment\n", "int main(void) { return printf(\"%d\\n\", 42) != 0; }",
    "<div class=\"x\">Hello &amp; bye</div>", "{\"key\": [1, 2.5, null, true]}", "/usr/local/bin//hotset",
    "a//b\n/", "path/to/file.txt\n/next", "https://example.com/a/b?c=1&d=two#frag", "user@example.com",
    "# Title\n\n- item *bold* `code`\n", "...!!!???---___***", "''''''", "\"\"\"", "<<<>>>", "a-b_c.d",
    "Donaudampfschifffahrtsgesellschaftskapitän", "pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 100, "!" * 50, " " * 40 + "x", "ab" * 60, "The " * 30,
    # special-token text
    "<|endoftext|>", "<|start|>user<|message|>Hi<|end|><|start|>assistant", "<|start|", "<|start", "<<|end|>>",
    "x<|channel|>final<|message|>y", "<|reserved_200100|>", "<|im_start|>user\nhi<|im_end|>\n",
    "<think>\nhmm\n</think>\n\nanswer", "<|return|><|call|>", "<|constrain|>json",
]


# ---- random texts --------------------------------------------------------------
def rng_of(seed):
    state = [seed & M64]

    def nxt():
        state[0] = (state[0] + 0x9E3779B97F4A7C15) & M64
        z = state[0]
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)
    return nxt


def in_ranges(cp, ranges):
    lo, hi = 0, len(ranges)
    while lo < hi:
        mid = (lo + hi) // 2
        if ranges[mid][1] < cp:
            lo = mid + 1
        elif ranges[mid][0] > cp:
            hi = mid
        else:
            return True
    return False


def random_text(tset, i, exclude):
    nxt = rng_of(tset["seed"] * 1000003 + i)
    total = sum(p["w"] for p in tset["pools"])
    out = []
    for _ in range(1 + nxt() % tset["max_items"]):
        r = nxt() % total
        for p in tset["pools"]:
            if r < p["w"]:
                break
            r -= p["w"]
        if "strings" in p:
            out.append(p["strings"][nxt() % len(p["strings"])])
            continue
        size = sum(hi - lo + 1 for lo, hi in p["ranges"])
        while True:
            k = nxt() % size
            for lo, hi in p["ranges"]:
                if k <= hi - lo:
                    cp = lo + k
                    break
                k -= hi - lo + 1
            if not in_ranges(cp, exclude):
                break
        out.append(chr(cp))
    return "".join(out)


def fnv(values):
    h = 0xCBF29CE484222325
    for v in values:
        for b in struct.pack("<I", v & 0xFFFFFFFF):
            h = ((h ^ b) * 0x100000001B3) & M64
    return h


def R(*pairs):
    return [list(p) for p in pairs]


COMMON_POOLS = [
    {"w": 30, "ranges": R((0x61, 0x7A))}, {"w": 10, "ranges": R((0x41, 0x5A))},
    {"w": 12, "strings": [" the", " and", " Hello", " WORLD", "'s", "'S", "'ll", "'LL", "'re", "'Ve", "'d", "'m",
                          "'t", "'x", "'", "n't", " don't", "I'M", "the", "is", "of", "to", "on", "at", "er", "es"]},
    {"w": 14, "strings": [" ", " ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", "   ", " \n", "\u00a0", "\u3000",
                          "\u2028", "\u0085", "\u000b", "\u000c"]},
    {"w": 8, "ranges": R((0x30, 0x39))}, {"w": 2, "ranges": R((0x0660, 0x0669), (0x0966, 0x096F), (0xFF10, 0xFF19),
                                                             (0x2160, 0x2188), (0x00B2, 0x00B3), (0x2460, 0x2473))},
    {"w": 10, "ranges": R((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E))},
    {"w": 3, "strings": ["/", "//", "/\n", "\n/", ".../", "?!"]},
    {"w": 4, "ranges": R((0x0300, 0x036F), (0x0900, 0x0903), (0x093A, 0x094F), (0x0E31, 0x0E3A), (0x20D0, 0x20F0))},
    {"w": 2, "ranges": R((0x01C5, 0x01C5), (0x01C8, 0x01C8), (0x01CB, 0x01CB), (0x1F88, 0x1F8F), (0x02B0, 0x02C1),
                         (0x3005, 0x3005), (0x0640, 0x0640))},
    {"w": 8, "ranges": R((0x00C0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF), (0x0531, 0x0587), (0x10A0, 0x10FF))},
    {"w": 8, "ranges": R((0x0905, 0x0939), (0x0E01, 0x0E30), (0x1780, 0x17B3), (0x05D0, 0x05EA), (0x0620, 0x064A))},
    {"w": 8, "ranges": R((0x4E00, 0x9FFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3))},
    {"w": 3, "ranges": R((0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x2600, 0x27BF))},
    {"w": 1, "strings": ["\u200d", "\u200c", "\ufe0f", "\ufeff", "\u00ad", "\U0001F3FD"]},
    {"w": 2, "strings": ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|endoftext|>",
                         "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|reserved_200100|>", "<|start",
                         "<|", "|>", "<"]},
]
# the same plus any code point of Unicode
MIXED_POOLS = COMMON_POOLS + [{"w": 8, "ranges": R((0x80, 0x10FFFF))}, {"w": 1, "strings": ["ſ", "'ſ"]}]
SETS = {
    "mixed": {"seed": 1, "max_items": 300, "count": 3000, "pools": MIXED_POOLS},
    "common": {"seed": 2, "max_items": 200, "count": 1500, "pools": COMMON_POOLS},
}


def main():
    enc_plain, enc_special = o200k()
    qwen_plain, qwen_special = qwen_tiny()
    exclude = excluded_ranges()
    changed = [r for r in exclude if not (r[0] >= 0xD800 and r[1] < 0xE000)]

    def splittable(s):
        return not any(in_ranges(ord(c), changed) for c in s)

    rows = []
    for s in STRINGS:
        ok = splittable(s)
        rows.append({"text": s, "o200k": enc_plain(s), "o200k_special": enc_special(s),
                     "qwen_tiny": qwen_plain(s), "qwen_tiny_special": qwen_special(s),
                     "split_o200k": split(O200K, s) if ok else None,
                     "split_qwen2": split(QWEN2, s) if ok else None})
    with open(os.path.join(DATA, "vocab", "strings.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows) + "\n]\n")

    out = {"exclude": exclude, "sets": {}}
    oracles = [("split_o200k", lambda x: split(O200K, x)), ("split_qwen2", lambda x: split(QWEN2, x)),
               ("o200k", enc_plain), ("o200k_special", enc_special),
               ("qwen_tiny", qwen_plain), ("qwen_tiny_special", qwen_special)]
    for name, tset in SETS.items():
        # a chunk: its byte count, then for each column the count and the
        # low 32 bits of the hash of the pieces' lengths or the ids
        cols = [o for o in oracles if name == "common" or not o[0].startswith("qwen_tiny")]
        chunks = []
        for i in range(tset["count"]):
            s = random_text(tset, i, exclude)
            c = [len(s.encode())]
            for _, fn in cols:
                v = fn(s)
                c += [len(v), fnv(v) & 0xFFFFFFFF]
            chunks.append(c)
        out["sets"][name] = dict(tset, columns=[k for k, _ in cols], chunks=chunks)
    with open(os.path.join(DATA, "vocab", "random.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    n_bytes = sum(c[0] for t in out["sets"].values() for c in t["chunks"])
    print(f"{len(rows)} strings, {sum(len(t['chunks']) for t in out['sets'].values())} random texts "
          f"({n_bytes} bytes), {len(exclude)} excluded ranges", file=sys.stderr)


if __name__ == "__main__":
    main()
