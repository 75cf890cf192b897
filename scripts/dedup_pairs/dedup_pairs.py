#!/usr/bin/python3
"""dedup_pairs.py: the near-duplicate pairs of a job's collection index, by brute force with numpy.

What it does: reads every part of the index (INDEX/index/<part>/, or INDEX/<part>/, or one part
folder) in name order, as `condition dedup` reads it: index.json's items (the rows of images read
and encoded, status "ok"), embeds.npy as stored (float16, float32, or int8 times embeds_scale.npy),
each row divided by its norm in float64; then every pair of rows' cosine (the full N×N product, so
only for small indexes) and writes, as JSON, the pairs whose cosine is at least THRESHOLD - BAND,
each named by the images' paths, sorted by path: the golden pairs the Go tests compare against
(a pair within BAND of the threshold may fall either side of it in float32 arithmetic).

Usage (numpy, as /usr/bin/python3 on the development machine has):

    /usr/bin/python3 scripts/dedup_pairs/dedup_pairs.py INDEX --threshold T [--band 0.001] > golden.json
"""

import argparse
import json
import os
import sys

import numpy as np


def part_dirs(root):
    if os.path.exists(os.path.join(root, "index.json")):
        return [root]
    for base in (os.path.join(root, "index"), root):
        if os.path.isdir(base):
            names = sorted(n for n in os.listdir(base) if os.path.exists(os.path.join(base, n, "index.json")))
            if names:
                return [os.path.join(base, n) for n in names]
    sys.exit(f"dedup_pairs.py: no index parts in {root}")


def read_part(d):
    with open(os.path.join(d, "index.json")) as f:
        meta = json.load(f)
    e = np.load(os.path.join(d, "embeds.npy")).astype(np.float64)
    if meta.get("dtype") == "int8":
        e = e * np.load(os.path.join(d, "embeds_scale.npy")).astype(np.float64)[:, None]
    paths = [None] * meta["rows"]
    for it in meta["items"]:
        if it["status"] == "ok":
            paths[it["row"]] = it["path"]
    keep = [r for r, p in enumerate(paths) if p is not None]
    return e[keep], [paths[r] for r in keep]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("index")
    ap.add_argument("--threshold", type=float, required=True)
    ap.add_argument("--band", type=float, default=0.001)
    a = ap.parse_args()
    vecs, paths = [], []
    for d in part_dirs(a.index):
        e, p = read_part(d)
        vecs.append(e)
        paths += p
    e = np.concatenate(vecs)
    norms = np.linalg.norm(e, axis=1)
    ok = norms > 0
    e, paths = e[ok] / norms[ok][:, None], [p for p, k in zip(paths, ok) if k]
    cos = e @ e.T
    i, j = np.nonzero(np.triu(cos >= a.threshold - a.band, k=1))
    pairs = []
    for x, y in zip(i, j):
        p, q = sorted((paths[x], paths[y]))
        pairs.append({"a": p, "b": q, "cos": round(float(cos[x, y]), 7)})
    pairs.sort(key=lambda r: (r["a"], r["b"]))
    json.dump({"threshold": a.threshold, "band": a.band, "images": len(paths), "pairs": pairs}, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
