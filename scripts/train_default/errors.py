"""Breaks an exported model's zero-shot errors on single-object scenes down by
kind of drawing: per shape (with what each shape was taken for), and by
outline or fill, size, aliasing, JPEG, backdrop and source size.

    /usr/bin/python3 scripts/train_default/errors.py [--renderer vec|varied]
        [--model DIR] [--seed N] [--n N] [--data DIR]

(from the repository root; with OpenBLAS first on LD_LIBRARY_PATH, as run.sh
sets it, it takes seconds rather than minutes).

--renderer vec (the default) draws the scenes with internal/vecscenes, the
independent renderer, at --seed 3001: not the seed the evaluation reports
(2001), so that what is learned from these errors is not learned from the
figures it is judged by. --renderer varied draws the training renderer's
varied scenes (internal/scenes with Variety) at --seed 4001, a seed training
never reads. The scenes are written into --data once and reused.
"""

import argparse
import collections
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train as T  # noqa: E402


def scenes(args, vocab):
    """-> pixel_values [N, 3, 64, 64] and one dict of kinds per scene."""
    out = os.path.join(args.data, f"errors-{args.renderer}-s{args.seed}-n{args.n}")
    if args.renderer == "vec":
        T.vecdata(out, args.seed, 1, args.n, os.path.join(args.model, "preprocessor_config.json"))
        px = np.load(os.path.join(out, "pixels.npy"))
        kinds = []
        with open(os.path.join(out, "scenes.jsonl"), encoding="utf-8") as f:
            for line in f:
                s = json.loads(line)
                o = s["objects"][0]
                side = min(s["w"], s["h"])
                kinds.append({"colour": o["colour"], "shape": o["shape"],
                              "outlined": o.get("stroke", 0) > 0,
                              "size (of the crop)": min(0.8, round((o["box"][2] - o["box"][0]) / side, 1)),
                              "aliased": s.get("aliased", False), "jpeg": s.get("jpeg", 0) > 0,
                              "backdrop": s["backdrop"], "source side": side // 48 * 48})
        return torch.from_numpy(px), kinds
    T.gendata(out, args.seed, args.n, 64, 1, 1, distinct=True, variety=True)
    ds = T.Scenes(out, vocab, 16, 8)
    kinds = []
    for s in ds.scenes:
        o, st = s["objects"][0], s.get("style") or {}
        kinds.append({"colour": o["colour"], "shape": o["shape"], "outlined": o.get("stroke", 0) > 0,
                      "varied": bool(s.get("style")), "radius": min(0.5, round(o["r"], 1)),
                      "aliased": st.get("aliased", False), "jpeg": st.get("jpeg", 0) > 0,
                      "blur": st.get("blur", 0) > 0, "scaled up": st.get("pixels", 0) > 0,
                      "backdrop": s["background"]["kind"]})
    return ds.pixels(np.arange(ds.n)), kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--renderer", choices=["vec", "varied"], default="vec")
    ap.add_argument("--model", default=os.path.join(T.ROOT, "models", "embedded", "model"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--data", default="/tmp/condition-scenes")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = 3001 if args.renderer == "vec" else 4001
    settings = T.trainsettings.load(os.path.join(HERE, "settings.json"))
    vocab = T.make_vocab()
    model = T.load_exported(settings, vocab, args.model)
    px, kinds = scenes(args, vocab)
    prompts, te = T.prompt_embeds(model, vocab)
    pred = []
    with torch.no_grad():
        for a in range(0, len(kinds), 250):
            _, ie = model.encode_image(px[a:a + 250])
            pred += (F.normalize(ie, dim=-1) @ te.t()).argmax(1).tolist()
    ok = [prompts[p] == (k["colour"], k["shape"]) for p, k in zip(pred, kinds)]
    print(f"{args.renderer} renderer, seed {args.seed}: zero-shot top-1 {np.mean(ok):.1%} of {len(ok)}; "
          f"colour right {np.mean([prompts[p][0] == k['colour'] for p, k in zip(pred, kinds)]):.1%}")
    for sh in T.SHAPES:
        rows = [(o, prompts[p][1]) for o, p, k in zip(ok, pred, kinds) if k["shape"] == sh]
        taken = collections.Counter(q for _, q in rows if q != sh)
        print(f"  {sh}: {np.mean([o for o, _ in rows]):.1%} of {len(rows)}; taken for "
              + ", ".join(f"{q} {c}" for q, c in taken.most_common()))
    for only in [None] + T.SHAPES:
        print(f"by kind, {only or 'every shape'}:")
        for key in kinds[0]:
            if key in ("colour", "shape"):
                continue
            groups = collections.defaultdict(list)
            for o, k in zip(ok, kinds):
                if only is None or k["shape"] == only:
                    groups[k[key]].append(o)
            print(f"  {key}: " + ", ".join(f"{v} {np.mean(g):.1%} of {len(g)}"
                                           for v, g in sorted(groups.items(), key=lambda t: str(t[0]))))


if __name__ == "__main__":
    main()
