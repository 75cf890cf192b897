#!/usr/bin/python3
"""compare_runs.py: how close two `condition run` outputs are, image by image.

Usage: /usr/bin/python3 scripts/bench_models/compare_runs.py REF_DIR OTHER_DIR

Reads every <image>.safetensors both folders hold (as `condition run --out`
writes them; numpy only) and prints, over all images, the cosine of
image_embeds and of each patch's joint-space vector (patch_features, one
row per patch) between the two runs: smallest, median and mean. Written to
compare a float32 run with an int8 run of the same images.
"""
import glob
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], DTYPES[t["dtype"]]).reshape(t["shape"]).astype(np.float64)
    return out


def cosines(a, b):
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))


def main():
    ref, other = sys.argv[1:3]
    emb, patch = [], []
    for p in sorted(glob.glob(os.path.join(ref, "**", "*.safetensors"), recursive=True)):
        q = os.path.join(other, os.path.relpath(p, ref))
        if not os.path.exists(q):
            continue
        x, y = load(p), load(q)
        emb.append(cosines(x["image_embeds"], y["image_embeds"]))
        patch.append(cosines(x["patch_features"], y["patch_features"]))
    if not emb:
        raise SystemExit("compare_runs: no image's outputs in both folders")
    for name, c in (("image_embeds", np.concatenate(emb)), ("patch_features", np.concatenate(patch))):
        print(f"{name:15s} {len(c):6d} rows  cosine min {c.min():.5f}  median {np.median(c):.5f}  mean {c.mean():.5f}")


if __name__ == "__main__":
    main()
