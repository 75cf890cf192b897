#!/usr/bin/python3
"""Generates testdata/tinytips: a tiny TIPSv2 (model_type tipsv2) with random weights in the
Hugging Face layout, and torch's outputs for fixed inputs, which the Go tests compare the
graphs this program builds from model.safetensors against.

The towers are scripts/pytips/tips.py's (a transcription of transformers' modeling_tipsv2.py).
There is no tokenizer here: the text inputs are random ids with their attention masks, and
the graphs take ids, so a tokenizer file is not needed to check them.

Run from anywhere (needs torch and numpy; /usr/bin/python3 on the dev machine):

    /usr/bin/python3 testdata/tinytips/generate.py

Files:
  config.json          Tipsv2Config, temperature 0.01:
                       text 32 wide, 2 layers, 4 heads, MLP 64 (relu), 16 positions, vocabulary
                       100, layer_norm_eps 1e-5, pooling_epsilon 1e-8;
                       vision 32 wide, 2 layers, 4 heads, mlp_ratio 1.75 (MLP 56, gelu),
                       image 16, patch 4 (a 4x4 position grid), 2 register tokens,
                       layer_norm_eps 1e-6, antialiased positions, no offset
  model.safetensors    the state dict, Hugging Face names, float32
  golden/*.npy         float32 unless said:
    text_input_ids, text_attention_mask int64 [3, 16]   three prompts of random ids, 16, 5 and
                       1 long, padded with 0 (mask 0 there)
    text_last_hidden_state [3, 16, 32], text_pooled [3, 32]   (the masked mean)
    short_input_ids, short_attention_mask int64 [2, 7], short_last_hidden_state [2, 7, 32],
    short_pooled [2, 32]   a shorter sequence (positions 0..6 of the table)
    For each image set S (pixels in [-1, 1)):
      vision    [2, 3, 16, 16]   the position grid's own size: positions used as they are
      wide      [2, 3, 24, 20]   a 6x5 grid: positions upscaled, not square
      small     [1, 3, 14, 9]    a 3x2 grid (the remainder pixels dropped by the
                                 convolution): positions downscaled, antialiased
    S_pixel_values, S_positions [1+h·w, 32] (what the image's rows got added),
    S_last_hidden_state [B, 1+2+h·w, 32] (class, 2 registers, patches), S_pooled [B, 32]
    (row 0), S_patch_embeds [B, h·w, 32] (rows 3..)
  swiglu/              the same sizes with use_swiglu_ffn (the g14 size's MLP: F = 40,
                       mlp.weights_in 32 -> 80, mlp.weights_out 40 -> 32), its own seed:
                       config.json, model.safetensors, golden/ with the vision and text sets
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from pytips import tips  # noqa: E402

SEED = 20261204
IMAGES = [("vision", 2, 16, 16), ("wide", 2, 24, 20), ("small", 1, 14, 9)]


def save(golden, name, a):
    np.save(os.path.join(golden, name + ".npy"), np.ascontiguousarray(a))


def make(out, seed, swiglu):
    """Writes a tiny model with its goldens into out."""
    tc = tips.TextConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=16)
    vc = tips.VisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=1.75,
                           image_size=16, patch_size=4, num_register_tokens=2, use_swiglu_ffn=swiglu)
    config = tips.Config(tc, vc, temperature=0.01)
    model = tips.Tips(config).init_random(seed).eval()

    os.makedirs(out, exist_ok=True)
    tips.write_json(os.path.join(out, "config.json"), config.to_dict())
    tips.write_safetensors(os.path.join(out, "model.safetensors"),
                           {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                           {"format": "pt"})

    golden = os.path.join(out, "golden")
    os.makedirs(golden, exist_ok=True)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, lengths, t in [("text", [16, 5, 1], 16), ("short", [7, 3], 7)]:
            ids = torch.zeros(len(lengths), t, dtype=torch.int64)
            mask = torch.zeros(len(lengths), t, dtype=torch.int64)
            for b, k in enumerate(lengths):
                ids[b, :k] = torch.randint(1, tc.vocab_size, (k,), generator=g)
                mask[b, :k] = 1
            h, pooled = model.encode_text(ids, mask)
            save(golden, name + "_input_ids", ids.numpy())
            save(golden, name + "_attention_mask", mask.numpy())
            save(golden, name + "_last_hidden_state", h.numpy())
            save(golden, name + "_pooled", pooled.numpy())
        p = vc.patch_size
        for name, b, height, width in IMAGES:
            px = torch.rand(b, 3, height, width, generator=g) * 2 - 1
            h, pooled, patches = model.encode_image(px)
            pos = model.positions(height // p, width // p, height, width)
            save(golden, name + "_pixel_values", px.numpy())
            save(golden, name + "_positions", pos[0].numpy())
            save(golden, name + "_last_hidden_state", h.numpy())
            save(golden, name + "_pooled", pooled.numpy())
            save(golden, name + "_patch_embeds", patches.numpy())


def main():
    make(HERE, SEED, False)
    make(os.path.join(HERE, "swiglu"), SEED + 10, True)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(HERE) for f in fs)
    print(f"tinytips: folder {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
