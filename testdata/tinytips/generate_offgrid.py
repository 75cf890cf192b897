#!/usr/bin/python3
"""Generates testdata/tinytips/golden/offgrid_*: torch's outputs of the folder's tiny TIPSv2
(model.safetensors, read back) on its two PNGs preprocessed to pixel sizes whose patch grid is
not the position table's 4x4, as transformers runs such a model: Tipsv2ImageProcessor resizes to
its size (Pillow's bilinear resize, times 1/255: generate.py's pixel_values), and
Tipsv2VisionEmbeddings resizes the position table's patch rows to the grid with
F.interpolate(mode="bilinear", antialias=True, align_corners=False) in float32
(scripts/pytips/tips.py, VisionEmbeddings.positions).

  offgrid_24x20_*          a 6x5 grid: positions upscaled, the image not square
  offgrid_12x8_*           a 3x2 grid: positions downscaled, antialiased
  offgrid_offset_24x20_*   the 6x5 grid with vision_config.interpolate_offset 0.1 (DINOv2's
                           offset: the table resized by scale_factor ((6 + 0.1) / 4,
                           (5 + 0.1) / 4), whose step is not that of a resize to 6x5)

Each set: pixel_values [2, 3, H, W], positions [1+h·w, 32], vision_last_hidden_state
[2, 1+2+h·w, 32], image_embeds [2, 32], patch_embeds [2, h·w, 32]. The Go test copies the folder
with preprocessor_config.json's size set to H x W and compares the engine's outputs with these.
Run with /usr/bin/python3 from anywhere; it rewrites only those files.
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from pytips import tips  # noqa: E402
from pyclip.clip import read_safetensors  # noqa: E402

sys.path.insert(0, HERE)
from generate import pixel_values, save  # noqa: E402

# (pixel height, pixel width, interpolate_offset)
SIZES = [(24, 20, 0.0), (12, 8, 0.0), (24, 20, 0.1)]


def load(offset=0.0):
    with open(os.path.join(HERE, "config.json")) as f:
        cfg = json.load(f)
    tc, vc = dict(cfg["text_config"]), dict(cfg["vision_config"])
    tc.pop("model_type", None)
    vc.pop("model_type", None)
    vc["interpolate_offset"] = offset
    config = tips.Config(tips.TextConfig(**tc), tips.VisionConfig(**vc), temperature=cfg["temperature"])
    model = tips.Tips(config).eval()
    tensors, _ = read_safetensors(os.path.join(HERE, "model.safetensors"))
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()}, strict=False)
    if missing or unexpected:
        raise SystemExit(f"model.safetensors: missing {missing}, unexpected {unexpected}")
    return model, vc["patch_size"]


def main():
    from PIL import Image

    golden = os.path.join(HERE, "golden")
    paths = [os.path.join(golden, "images", n) for n in ("wide.png", "tall.png")]
    for h, w, offset in SIZES:
        model, p = load(offset)
        pv = np.stack([pixel_values(Image.open(q), h, w) for q in paths])
        with torch.no_grad():
            vh, ve, vp = model.encode_image(torch.from_numpy(pv))
            pos = model.positions(h // p, w // p, h, w)
        name = f"offgrid_{'offset_' if offset else ''}{h}x{w}_"
        for k, a in [("pixel_values", pv), ("positions", pos[0].numpy()), ("vision_last_hidden_state", vh.numpy()),
                     ("image_embeds", ve.numpy()), ("patch_embeds", vp.numpy())]:
            save(golden, name + k, a)
        print(f"{name}: grid {h // p}x{w // p}, last_hidden_state {tuple(vh.shape)}")


if __name__ == "__main__":
    main()
