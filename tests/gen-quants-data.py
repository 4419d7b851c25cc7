#!/usr/bin/env python3
"""Writes tests/data/quants/: for each block type hotset reads beyond Q8_0
and MXFP4, random blocks (NAME.bin) and their values as gguf-py's
gguf.quants.dequantize gives them (NAME.f32, float32 little-endian), an
implementation of ggml's formats that hotset did not write.  Scale fields
are set to finite halves of realistic size (random bytes would make many
NaN or inf scales); every other byte is random.  Not needed for the build or
`make check`: run it to remake the files (pip install gguf numpy)."""
import os
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize

# byte offsets of the fp16 scale fields in each block
HALVES = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.IQ4_NL: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_XS: [0],
}
VALUES = 2048

def main(out):
    rng = np.random.default_rng(20261201)
    os.makedirs(out, exist_ok=True)
    for t, offs in HALVES.items():
        bv, bb = GGML_QUANT_SIZES[t]
        nb = VALUES // bv
        raw = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
        for o in offs:
            h = (rng.uniform(0.002, 0.2, size=nb) * rng.choice([-1, 1], size=nb)).astype(np.float16)
            raw[:, o:o + 2] = h.view(np.uint8).reshape(nb, 2)
        y = dequantize(raw.reshape(-1), t).astype(np.float32).reshape(-1)
        assert y.size == VALUES and np.isfinite(y).all()
        name = t.name.lower().replace("_k", "_K")
        raw.tofile(os.path.join(out, name + ".bin"))
        y.astype("<f4").tofile(os.path.join(out, name + ".f32"))
        print(name, nb, "blocks")

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data", "quants"))
