#!/usr/bin/env python3
"""Writes a large mixed multilingual text for the tokenizer benchmark from the
gettext catalogs of this machine (/usr/share/locale/LANG/LC_MESSAGES/*.mo, the
translations Debian packages ship: real sentences of real programs), English
(the catalogs' source strings) and 24 other languages in 14 scripts, at most
CAP bytes of each, the messages of all languages shuffled together with a
fixed seed.  The same packages give the same text.

usage: bench/make-corpus.py OUT [CAP_PER_LANGUAGE_BYTES]
Prints the size, the share of each language and the SHA-256 of the text.
"""
import gettext
import glob
import hashlib
import random
import sys

LANGS = ["de", "fr", "es", "pt_BR", "it", "pl", "cs", "tr", "vi", "id", "ru", "uk", "el", "ka", "ar", "he",
         "hi", "bn", "ta", "th", "ja", "zh_CN", "zh_TW", "ko"]


def messages(lang):
    out = {}
    for path in sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as f:
                cat = gettext.GNUTranslations(f)._catalog
        except Exception:
            continue
        for k, v in cat.items():
            src = k[0] if isinstance(k, tuple) else k
            if src and v and isinstance(v, str):
                out.setdefault(src, v)
    return out


def main():
    path = sys.argv[1]
    cap = int(sys.argv[2]) if len(sys.argv) > 2 else 400_000
    rng = random.Random(20261201)
    english, items, share = {}, [], {}
    for lang in LANGS:
        m = messages(lang)
        for src in m:
            english.setdefault(src, src)
        taken, size = [], 0
        for src in sorted(m):
            b = len(m[src].encode())
            if size + b > cap:
                break
            taken.append(m[src])
            size += b
        share[lang] = size
        items += taken
    taken, size = [], 0
    for src in sorted(english):
        if size + len(src.encode()) > cap:
            break
        taken.append(src)
        size += len(src.encode())
    share["en"] = size
    items += taken
    if not items:
        sys.exit("make-corpus: no gettext catalogs under /usr/share/locale")
    rng.shuffle(items)
    text = "\n\n".join(items) + "\n"
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    data = text.encode()
    total = len(data)
    print(f"corpus: {path}, {total} bytes, {len(items)} messages, sha256 {hashlib.sha256(data).hexdigest()}")
    print("bytes per language: " + ", ".join(f"{k} {v * 100 / total:.1f}%" for k, v in share.items()))


main()
