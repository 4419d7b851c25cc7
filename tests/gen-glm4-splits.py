#!/usr/bin/env python3
"""Writes tests/data/vocab/glm4-splits.json: texts and the byte lengths of
the pieces Python's `regex` cuts them into with GLM-4's pre-tokenizer
pattern (llama.cpp's `glm4` / `chatglm-bpe`, the pattern Llama 3 uses), for
tests/test-pretok.c.  The texts: those of strings.json whose qwen2 split is
known (no character whose class Unicode 17 changed), and texts built from
digit runs beside letters, punctuation and spaces (digits are where the
pattern differs from qwen2's).  Deterministic.  Needs `pip install regex`."""
import json
import os
import random

import regex

GLM4 = (r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
        r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

here = os.path.dirname(os.path.abspath(__file__))
texts = [row["text"] for row in json.load(open(os.path.join(here, "data/vocab/strings.json")))
         if row.get("split_qwen2") is not None]
parts = ["1", "23", "4567", "٣٤", "१२३", "½", "a", "Zq", "é", " ", "  ", "\n", "!", ".", "'s", "-", "日", "\t", "x9"]
rng = random.Random(4)
for i in range(300):
    texts.append("".join(rng.choice(parts) for _ in range(rng.randint(1, 12))))
pat = regex.compile(GLM4)
rows = [{"text": t, "split": [len(m.encode("utf-8")) for m in pat.findall(t)]} for t in texts]
with open(os.path.join(here, "data/vocab/glm4-splits.json"), "w", encoding="utf-8") as f:
    json.dump(rows, f, ensure_ascii=False, indent=0)
print(len(rows), "texts")
