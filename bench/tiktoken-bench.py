#!/usr/bin/env python3
"""OpenAI's tiktoken on the same text as bench-tokenizer: o200k_base's ranks (from the
bpe-openai wheel, as tests/gen-tokenizer-data.py builds them) and the o200k pattern,
encode_ordinary on one thread; best and median MB/s, and the ids' count and FNV-1a 64
hash for comparison with hotset's.
usage: bench/tiktoken-bench.py TEXT [REPEATS]   (pip install tiktoken bpe-openai)"""
import base64
import gzip
import os
import struct
import sys
import time

import bpe_openai
import tiktoken

O200K = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
         r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
         r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

ranks = {}
with gzip.open(os.path.join(os.path.dirname(bpe_openai.__file__), "data", "o200k_base.tiktoken.gz"), "rt") as fh:
    for line in fh:
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
enc = tiktoken.Encoding("o200k", pat_str=O200K, mergeable_ranks=ranks, special_tokens={})
with open(sys.argv[1], encoding="utf-8", newline="") as f:  # bytes exactly: no newline translation
    text = f.read()
n = len(text.encode())
times = []
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 5):
    t0 = time.perf_counter()
    ids = enc.encode_ordinary(text)
    times.append(time.perf_counter() - t0)
times.sort()
print(f"tiktoken {tiktoken.__version__} encode_ordinary  best {n / times[0] / 1e6:8.2f} MB/s   "
      f"median {n / times[len(times) // 2] / 1e6:8.2f} MB/s   ({len(times)} runs)")
h = 0xCBF29CE484222325
for b in struct.pack(f"<{len(ids)}I", *ids):
    h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
print(f"ids: {len(ids)}, fnv64 {h:016x}")
