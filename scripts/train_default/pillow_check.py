"""Zero-shot check of the default model on shapes drawn by Pillow, a third renderer.

Single filled shapes in Pillow's named colours on plain grey backgrounds, in square
images of 64 to 224 pixels, upright: circles (ellipse), squares (rectangle), isosceles
triangles whose apex is the middle of the box's top edge, five-pointed stars with a
thin waist (inner radius 0.38), and crosses of two rectangles (arms a third of the box
wide). Each image is preprocessed as CLIPImageProcessor does (Pillow bicubic resize of
the shortest edge, centre crop, normalise) and classified in torch over the 40 prompts
"a/an <colour> <shape>".

    /usr/bin/python3 scripts/train_default/pillow_check.py [--model models/embedded/model] [--n 500]

Prints the top-1 accuracy, the colour accuracy and the shape confusion matrix (rows:
true shape; columns: the shape of the top-1 prompt).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train as tr  # noqa: E402

NAMED = {"red": "red", "green": "green", "blue": "blue", "yellow": "yellow", "purple": "purple",
         "orange": "orange", "white": "white", "black": "black"}


def draw_scene(rng):
    size = int(rng.integers(64, 225))
    grey = int(rng.integers(100, 200))
    img = Image.new("RGB", (size, size), (grey, grey, grey))
    d = ImageDraw.Draw(img)
    colour = tr.COLOURS[rng.integers(len(tr.COLOURS))]
    shape = tr.SHAPES[rng.integers(len(tr.SHAPES))]
    side = size * rng.uniform(0.3, 0.7)
    x0 = rng.uniform(0.05 * size, 0.95 * size - side)
    y0 = rng.uniform(0.05 * size, 0.95 * size - side)
    x1, y1 = x0 + side, y0 + side
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    fill = NAMED[colour]
    if shape == "circle":
        d.ellipse([x0, y0, x1, y1], fill=fill)
    elif shape == "square":
        d.rectangle([x0, y0, x1, y1], fill=fill)
    elif shape == "triangle":
        d.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=fill)
    elif shape == "star":
        pts = []
        for k in range(10):
            a = -math.pi / 2 + k * math.pi / 5
            r = side / 2 if k % 2 == 0 else side / 2 * 0.38
            pts.append((cx + r * math.cos(a), cy + r * math.sin(a)))
        d.polygon(pts, fill=fill)
    else:
        a = side / 6
        d.rectangle([cx - a, y0, cx + a, y1], fill=fill)
        d.rectangle([x0, cy - a, x1, cy + a], fill=fill)
    return img, colour, shape


def preprocess(img, side=64):
    w, h = img.size
    if w <= h:
        nw, nh = side, int(side * h / w)
    else:
        nw, nh = int(side * w / h), side
    img = img.resize((nw, nh), Image.BICUBIC)
    left, top = (nw - side) // 2, (nh - side) // 2
    img = img.crop((left, top, left + side, top + side))
    x = np.asarray(img, dtype=np.float32) / 255.0
    x = (x - np.array(tr.pc.CLIP_MEAN, dtype=np.float32)) / np.array(tr.pc.CLIP_STD, dtype=np.float32)
    return x.transpose(2, 0, 1)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(tr.ROOT, "models", "embedded", "model"))
    ap.add_argument("--settings", default=os.path.join(HERE, "settings.json"))
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=3001)
    args = ap.parse_args()
    settings = tr.trainsettings.load(args.settings)
    vocab = tr.make_vocab()
    model = tr.load_exported(settings, vocab, args.model)
    prompts, te = tr.prompt_embeds(model, vocab)
    rng = np.random.default_rng(args.seed)
    scenes = [draw_scene(rng) for _ in range(args.n)]
    px = torch.from_numpy(np.stack([preprocess(img) for img, _, _ in scenes]))
    _, ie = model.encode_image(px)
    pred = (F.normalize(ie, dim=-1) @ te.t()).argmax(1).tolist()
    top1 = colour_ok = 0
    conf = np.zeros((len(tr.SHAPES), len(tr.SHAPES)), dtype=int)
    for (_, c, s), k in zip(scenes, pred):
        pc_, ps = prompts[k]
        top1 += (pc_, ps) == (c, s)
        colour_ok += pc_ == c
        conf[tr.SHAPES.index(s), tr.SHAPES.index(ps)] += 1
    print(f"Pillow scenes (seed {args.seed}, {args.n}): zero-shot top-1 {100 * top1 / args.n:.1f}%, "
          f"colour {100 * colour_ok / args.n:.1f}%")
    print("confusion (rows: true shape; columns: predicted)")
    print(" " * 10 + "".join(f"{s:>9}" for s in tr.SHAPES))
    for i, s in enumerate(tr.SHAPES):
        print(f"{s:<10}" + "".join(f"{c:>9}" for c in conf[i]) + f"   {100 * conf[i, i] / max(1, conf[i].sum()):.1f}%")


if __name__ == "__main__":
    main()
