#!/usr/bin/env python3
"""Writes tests/data/vocab/qwen35-splits.json: texts and the byte lengths of
the pieces Python's `regex` cuts them into with Qwen3.5's pre-tokenizer
pattern (tokenizer.json of Qwen3.5; llama.cpp's `qwen35`), for
tests/test-pretok.c.  The texts: those of strings.json whose qwen2 split is
known (no character whose class Unicode 17 changed), and texts built from
combining marks beside letters, digits, punctuation and spaces (the marks
are what the pattern changes).  Deterministic: no randomness beyond a
fixed-seed generator.  Needs `pip install regex`."""
import json
import os
import random

import regex

QWEN35 = (r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"""
          r"""| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

here = os.path.dirname(os.path.abspath(__file__))
texts = [row["text"] for row in json.load(open(os.path.join(here, "data/vocab/strings.json")))
         if row.get("split_qwen2") is not None]
marks = [chr(c) for c in list(range(0x300, 0x370)) + [0x93E, 0x93F, 0x940, 0x94D, 0x902, 0xE31, 0xE34, 0xE48, 0x5B4,
                                                       0x64E, 0x650, 0x20DD, 0x1AB0]]
parts = ["a", "Z", "é", "ß", "日", "क", "ก", "7", "٣", " ", "  ", "\n", "\r\n", "!", "?", ".", "'s", "'LL", "-", "—",
         "😀", "\t"]
rng = random.Random(35)
for i in range(400):
    n = rng.randint(1, 12)
    texts.append("".join(rng.choice(marks) if rng.random() < 0.4 else rng.choice(parts) for _ in range(n)))
pat = regex.compile(QWEN35)
rows = [{"text": t, "split": [len(m.encode("utf-8")) for m in pat.findall(t)]} for t in texts]
with open(os.path.join(here, "data/vocab/qwen35-splits.json"), "w", encoding="utf-8") as f:
    json.dump(rows, f, ensure_ascii=False, indent=0)
