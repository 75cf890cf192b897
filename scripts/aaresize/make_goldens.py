#!/usr/bin/python3
"""make_goldens.py: torch's antialiased bilinear resizes of random grids, the references
internal/aaresize's tests compare with.

    /usr/bin/python3 scripts/aaresize/make_goldens.py [OUT_DIR]

OUT_DIR defaults to internal/aaresize/testdata. Needs torch 1.13 (Debian's python3-torch) and
numpy, on an x86-64 CPU with AVX2: torch then runs its AVX2 (or AVX-512) kernel, whose sums use
fused multiply-adds, the ones the Go package computes. The script runs itself a second time with
ATEN_CPU_CAPABILITY=default, torch's kernel without them, for the *_nofma.npy files.

Writes, all float32, from a fixed seed:

  bilinear_<case>_in.npy          [C, inH, inW]    standard normal
  bilinear_<case>_out.npy         [C, outH, outW]  F.interpolate(in[None], size=(outH, outW),
                                                   mode="bilinear", align_corners=False,
                                                   antialias=True)[0]
  bilinear_<case>_out_nofma.npy   the same from torch's kernel without fused multiply-adds
  scaled_<case>_in.npy, scaled_<case>_out.npy   the same with scale_factor=(fh, fw) in place of
                                                   a size (recompute_scale_factor unset), cases
                                                   listed with their factors in scaled.json
  pos_s<side>_table.npy           [side*side, D]   standard normal: a positional-embedding table
  pos_s<side>_h<h>_w<w>_m<max>.npy  [max, D]       SigLIP 2 NaFlex's resized table for an h x w
                                                   patch grid padded to max rows, as transformers'
                                                   Siglip2VisionEmbeddings.resize_positional_embeddings
                                                   makes it
"""

import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "internal", "aaresize", "testdata")

CHANNELS = 3
D = 8

# (input height, input width, output height, output width)
BILINEAR = [
    (16, 16, 5, 3),
    (16, 16, 1, 1),
    (16, 16, 1, 16),
    (16, 16, 7, 9),
    (16, 16, 32, 8),
    (16, 16, 1, 256),
    (16, 16, 256, 1),
    (4, 4, 13, 11),
    (16, 16, 16, 16),
    (16, 16, 4, 64),
    (7, 12, 20, 5),
    (9, 4, 3, 30),
    (1, 10, 4, 4),
    (10, 1, 1, 7),
    (23, 17, 8, 40),
    (5, 300, 2, 3),
    (3, 2, 300, 1),
]

# (side, h, w, max_num_patches)
POSITIONS = [
    (16, 5, 3, 64),
    (16, 1, 1, 64),
    (16, 7, 9, 64),
    (16, 8, 8, 64),
    (16, 4, 16, 64),
    (16, 12, 21, 256),
    (16, 16, 16, 256),
    (16, 1, 256, 256),
    (16, 256, 1, 256),
    (16, 13, 11, 256),
    (16, 4, 64, 256),
    (16, 32, 8, 256),
    (4, 13, 11, 256),
    (4, 2, 3, 64),
]


# (input height, input width, factor along the height, factor along the width): DINOv2's
# interpolate_offset asks for (grid + 0.1) / side; the others are plain factors.
SCALED = [
    (4, 4, (6 + 0.1) / 4, (5 + 0.1) / 4),
    (16, 16, (3 + 0.1) / 16, (2 + 0.1) / 16),
    (32, 32, (32 + 0.1) / 32, (20 + 0.1) / 32),
    (37, 37, (64 + 0.1) / 37, (24 + 0.1) / 37),
    (4, 4, 1.0, 2.0),
    (16, 16, 0.5, 0.25),
    (7, 12, 1.7, 0.3),
]


def resize(x, h, w):
    return F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=True)


def resize_positions(table, side, h, w, max_patches):
    """Transformers' resize_positional_embeddings for one image, on a float32 table."""
    d = table.shape[-1]
    grid = table.reshape(side, side, d).permute(2, 0, 1).unsqueeze(0).to(torch.float32)
    resized = resize(grid, h, w).reshape(d, h * w).transpose(0, 1)
    out = torch.empty((max_patches, d), dtype=torch.float32)
    out[: h * w] = resized
    out[h * w :] = resized[0]
    return out


def capability():
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def name(ih, iw, oh, ow):
    return f"bilinear_{ih}x{iw}_to_{oh}x{ow}"


def save(out, file, a):
    np.save(os.path.join(out, file), np.ascontiguousarray(a, dtype=np.float32))


def main():
    args = [a for a in sys.argv[1:] if a != "--nofma"]
    nofma = "--nofma" in sys.argv[1:]
    out = os.path.abspath(args[0] if args else DEFAULT_OUT)
    cap = capability()
    torch.set_num_threads(1)

    if nofma:
        if cap != "NO AVX":
            sys.exit(f"make_goldens.py: torch runs its {cap} kernel, not the one without AVX")
        for ih, iw, oh, ow in BILINEAR:
            x = torch.from_numpy(np.load(os.path.join(out, name(ih, iw, oh, ow) + "_in.npy")))
            save(out, name(ih, iw, oh, ow) + "_out_nofma.npy", resize(x[None], oh, ow)[0].numpy())
        return

    if cap not in ("AVX2", "AVX512"):
        sys.exit(f"make_goldens.py: torch runs its {cap} kernel; the goldens need AVX2 or AVX512")
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(20250213)
    for ih, iw, oh, ow in BILINEAR:
        x = torch.randn((CHANNELS, ih, iw), generator=gen, dtype=torch.float32)
        save(out, name(ih, iw, oh, ow) + "_in.npy", x.numpy())
        save(out, name(ih, iw, oh, ow) + "_out.npy", resize(x[None], oh, ow)[0].numpy())

    tables = {}
    for side, h, w, m in POSITIONS:
        if side not in tables:
            tables[side] = torch.randn((side * side, D), generator=gen, dtype=torch.float32)
            save(out, f"pos_s{side}_table.npy", tables[side].numpy())
        got = resize_positions(tables[side], side, h, w, m)
        save(out, f"pos_s{side}_h{h}_w{w}_m{m}.npy", got.numpy())

    cases = []
    for i, (ih, iw, fh, fw) in enumerate(SCALED):
        x = torch.randn((CHANNELS, ih, iw), generator=gen, dtype=torch.float32)
        y = F.interpolate(x[None], scale_factor=(fh, fw), mode="bilinear", align_corners=False, antialias=True)[0]
        case = f"scaled_{i}_{ih}x{iw}_to_{y.shape[1]}x{y.shape[2]}"
        save(out, case + "_in.npy", x.numpy())
        save(out, case + "_out.npy", y.numpy())
        cases.append({"name": case, "factor_h": fh, "factor_w": fw, "out_h": y.shape[1], "out_w": y.shape[2]})
    with open(os.path.join(out, "scaled.json"), "w") as f:
        json.dump(cases, f, indent=1)
        f.write("\n")
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    subprocess.run([sys.executable, os.path.abspath(__file__), "--nofma", out], env=env, check=True)


if __name__ == "__main__":
    main()
