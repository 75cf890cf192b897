#!/usr/bin/python3
"""Generates testdata/tinynaflex: a tiny SigLIP 2 NaFlex (model_type siglip2) with random
weights in the Hugging Face layout, and torch's outputs for fixed inputs, which the Go tests
compare the graphs this program builds from model.safetensors against.

The towers are scripts/pysiglip's: SigLIP's text tower (siglip.py) and the NaFlex vision
tower (naflex.py, transcribed from transformers' modular_siglip2.py).

Run from anywhere (needs torch and numpy; /usr/bin/python3 on the dev machine):

    /usr/bin/python3 testdata/tinynaflex/generate.py

Files:
  config.json                  Siglip2Config: text 32 wide, 2 layers, 4 heads, MLP 64, 64
                               positions, head 32 -> 24, over text/testdata/gemma's vocabulary;
                               vision 24 wide, 2 layers, 4 heads, MLP 48, patch 4, num_patches
                               16 (a 4x4 position grid); gelu_pytorch_tanh, layer_norm_eps 1e-6
  preprocessor_config.json     Siglip2ImageProcessor: patch 4, max_num_patches 24, bilinear,
                               rescale 1/255, mean = std = 0.5
  tokenizer.json,              text/testdata/gemma's (SigLIP 2's Gemma layout)
  tokenizer_config.json
  model.safetensors            the full state dict, Hugging Face names, float32
  golden/*.npy                 float32 unless said:
    vision_pixel_values [5, 24, 48], vision_pixel_attention_mask int64 [5, 24],
    vision_spatial_shapes int64 [5, 2]   five images with patch grids 4x4 (the position
                               grid's own), 2x7, 1x3, 6x4 (the whole budget) and 5x1: random
                               patches, zero rows after each image's own
    vision_position_embeddings [5, 24, 24]   the positions resized to each grid and padded
    vision_last_hidden_state [5, 24, 24], vision_pooler_output [5, 24]
    vision_layer_input [5, 24, 24]    the last encoder layer's input
    text_input_ids int64 [2, 64]      two prompts of random ids padded with <pad> (0)
    text_last_hidden_state [2, 64, 32], text_pooler_output [2, 24]
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from pysiglip import siglip  # noqa: E402
from pysiglip.naflex import NaFlexVision, NaFlexVisionConfig  # noqa: E402

SEED = 20261205
GEMMA = os.path.join(ROOT, "text", "testdata", "gemma")
SHAPES = [(4, 4), (2, 7), (1, 3), (6, 4), (5, 1)]
MAX_PATCHES = 24


class Model(nn.Module):
    """Siglip2Model's parameters: text_model, vision_model, logit_scale, logit_bias."""

    def __init__(self, tc, vc):
        super().__init__()
        self.config = siglip.SiglipConfig(logit_scale_init=2.3, logit_bias_init=-4.0)
        self.text_model = siglip.SiglipTextTransformer(tc)
        self.vision_model = NaFlexVision(vc)
        self.logit_scale = nn.Parameter(torch.zeros(1))
        self.logit_bias = nn.Parameter(torch.zeros(1))


def save(golden, name, a):
    np.save(os.path.join(golden, name + ".npy"), np.ascontiguousarray(a))


def main():
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(GEMMA, f), os.path.join(HERE, f))
    with open(os.path.join(HERE, "tokenizer.json")) as f:
        tj = json.load(f)
    vocab = max(len(tj["model"]["vocab"]), 1 + max(a["id"] for a in tj["added_tokens"]))
    tc = siglip.TextConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, max_position_embeddings=64, projection_size=24)
    vc = NaFlexVisionConfig(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                            num_patches=16, patch_size=4)
    model = Model(tc, vc)
    siglip.SigLIP.init_random(model, SEED)
    model.eval()

    t = tc.to_dict()
    t["model_type"] = "siglip2_text_model"
    siglip.write_json(os.path.join(HERE, "config.json"), {
        "architectures": ["Siglip2Model"], "initializer_factor": 1.0, "model_type": "siglip2",
        "text_config": t, "vision_config": vc.to_dict(), "torch_dtype": "float32"})
    siglip.write_json(os.path.join(HERE, "preprocessor_config.json"), {
        "do_convert_rgb": None, "do_normalize": True, "do_rescale": True, "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "Siglip2ImageProcessor",
        "image_std": [0.5, 0.5, 0.5], "max_num_patches": MAX_PATCHES, "patch_size": 4,
        "processor_class": "Siglip2Processor", "resample": 2, "rescale_factor": 1 / 255})
    siglip.write_safetensors(os.path.join(HERE, "model.safetensors"),
                             {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                             {"format": "pt"})

    golden = os.path.join(HERE, "golden")
    os.makedirs(golden, exist_ok=True)
    g = torch.Generator().manual_seed(SEED + 1)
    n, width = len(SHAPES), 3 * vc.patch_size * vc.patch_size
    px = torch.zeros(n, MAX_PATCHES, width)
    mask = torch.zeros(n, MAX_PATCHES, dtype=torch.int64)
    for i, (h, w) in enumerate(SHAPES):
        px[i, :h * w] = torch.rand(h * w, width, generator=g) * 2 - 1
        mask[i, :h * w] = 1
    shapes = torch.tensor(SHAPES, dtype=torch.int64)
    ids = torch.zeros(2, 64, dtype=torch.int64)
    for b, k in enumerate([6, 64]):
        ids[b, :k] = torch.randint(3, vocab, (k,), generator=g)
    with torch.no_grad():
        vm = model.vision_model
        pos = vm.embeddings.positions(shapes, MAX_PATCHES)
        lhs, pooled = vm(px, mask, shapes)
        x = vm.layer_input(px, mask, shapes)
        th, tp = model.text_model(ids)
    save(golden, "vision_pixel_values", px.numpy())
    save(golden, "vision_pixel_attention_mask", mask.numpy())
    save(golden, "vision_spatial_shapes", shapes.numpy())
    save(golden, "vision_position_embeddings", pos.numpy())
    save(golden, "vision_last_hidden_state", lhs.numpy())
    save(golden, "vision_pooler_output", pooled.numpy())
    save(golden, "vision_layer_input", x.numpy())
    save(golden, "text_input_ids", ids.numpy())
    save(golden, "text_last_hidden_state", th.numpy())
    save(golden, "text_pooler_output", tp.numpy())

    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(HERE) for f in fs)
    print(f"tinynaflex: vocabulary {vocab}; grids {SHAPES} in {MAX_PATCHES} patches; folder {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
