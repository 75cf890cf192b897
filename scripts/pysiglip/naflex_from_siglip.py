#!/usr/bin/python3
"""naflex_from_siglip.py: makes a SigLIP 2 NaFlex model (model_type siglip2) of a SigLIP
model's weights, unchanged: the patch convolution becomes NaFlex's Linear over each patch's
pixels (the same weights, laid out channel-last as Siglip2ImageProcessor cuts patches), the
position table is kept (its grid is resized to each image's own), every other tensor is the
same. The tokenizer files are copied.

    /usr/bin/python3 scripts/pysiglip/naflex_from_siglip.py testdata/siglip-scenes testdata/naflex-scenes --max-patches 192

On an image of the SigLIP model's own size whose NaFlex grid is the SigLIP grid, the NaFlex
model computes what the SigLIP model computes: a convolution of stride p over a p×p patch is
that Linear, and the position table resized to its own grid is itself. The NaFlex processor
resizes keeping the aspect within --max-patches (192 patches of 8 pixels: a 3:1 image of
64 pixels high is cut at its own scale, 8×24) rather than squeezing to the square.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from pyclip.clip import read_safetensors, write_json, write_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--max-patches", type=int, default=256)
    args = ap.parse_args()
    with open(os.path.join(args.src, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "siglip":
        sys.exit(f"{args.src}: model_type {cfg.get('model_type')!r}, want siglip")
    with open(os.path.join(args.src, "preprocessor_config.json")) as f:
        pre = json.load(f)
    vc = cfg["vision_config"]
    p, grid = vc["patch_size"], vc["image_size"] // vc["patch_size"]
    sd, meta = read_safetensors(os.path.join(args.src, "model.safetensors"))
    name = "vision_model.embeddings.patch_embedding.weight"
    w = sd[name]  # [d, C, p, p]
    sd[name] = np.ascontiguousarray(w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1))  # [d, p·p·C]
    if sd["vision_model.embeddings.position_embedding.weight"].shape[0] != grid * grid:
        sys.exit("the position table is not the vision grid's")
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), sd, meta or {"format": "pt"})
    cfg["architectures"] = ["Siglip2Model"]
    cfg["model_type"] = "siglip2"
    cfg["text_config"]["model_type"] = "siglip2_text_model"
    vc = dict(vc)
    del vc["image_size"]
    vc["num_patches"], vc["model_type"] = grid * grid, "siglip2_vision_model"
    cfg["vision_config"] = vc
    write_json(os.path.join(args.out, "config.json"), cfg)
    write_json(os.path.join(args.out, "preprocessor_config.json"), {
        "do_convert_rgb": True, "do_normalize": pre.get("do_normalize", True), "do_rescale": pre.get("do_rescale", True),
        "do_resize": True, "image_mean": pre["image_mean"], "image_std": pre["image_std"],
        "image_processor_type": "Siglip2ImageProcessor", "max_num_patches": args.max_patches, "patch_size": p,
        "processor_class": "Siglip2Processor", "resample": pre.get("resample", 2),
        "rescale_factor": pre.get("rescale_factor", 1 / 255)})
    for f in ("spiece.model", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if os.path.exists(os.path.join(args.src, f)):
            shutil.copyfile(os.path.join(args.src, f), os.path.join(args.out, f))
    print(f"naflex_from_siglip: {args.out}: {grid}x{grid} positions, patch {p}, max_num_patches {args.max_patches}")


if __name__ == "__main__":
    main()
