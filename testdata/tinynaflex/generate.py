#!/usr/bin/python3
"""Generates testdata/tinynaflex: a tiny SigLIP 2 NaFlex (model_type siglip2) with random
weights in the Hugging Face layout, and torch's outputs for fixed inputs, which the Go tests
compare the graphs this program builds from model.safetensors against.

The towers are scripts/pysiglip's: SigLIP's text tower (siglip.py) and the NaFlex vision
tower (naflex.py, transcribed from transformers' modular_siglip2.py).

Run from anywhere (needs torch, numpy and Pillow: /usr/bin/python3 on the dev machine; and node
with the tokenizers npm package 0.23.2):

    NODE_PATH=/tmp/tok-node/node_modules /usr/bin/python3 testdata/tinynaflex/generate.py

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
    end to end (condition embed): golden/images/{wide,tall,small}.png (40x20, 12x36, 6x5) and
    golden/prompts.json's three prompts:
    embed_pixel_values [3, 24, 48], embed_pixel_attention_mask, embed_spatial_shapes int64
                               the images through Siglip2ImageProcessor (scripts/pysiglip2)
    embed_last_hidden_state [3, 24, 24], embed_pooler_output [3, 24]
    embed_patch_embeds [3, 24, 24]    each row through the pooling head alone (the patches'
                               joint space; the padding rows too)
    embed_input_ids int64 [3, 64]     the tokenizers library's ids, <eos> after the text, padded
                               with <pad> (0)
    embed_text_pooler_output [3, 24], embed_logits_per_image [3, 3]
    embed_readout_<kind>_patch_embeds float64 [3, 24, 24]   clearclip, naclip, maskclip: the
                               readouts of each image's own rows (readout_goldens), zeros after
"""

import json
import os
import shutil
import subprocess
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


PROMPTS = ["a red square", "two blue circles on a wall", "cat"]


def library_ids(prompts):
    """The tokenizers library's ids for the prompts with the file's special tokens (Gemma's
    <eos> after the text), truncated and padded with <pad> (0) to 64."""
    out = subprocess.run(
        ["node", os.path.join(ROOT, "scripts", "tokenizers", "encode.js"), os.path.join(HERE, "tokenizer.json"), "64", "0"],
        input=json.dumps(prompts).encode(), stdout=subprocess.PIPE, check=True).stdout
    return np.array(json.loads(out)["ids"], dtype=np.int64)


def readout_goldens(model, px, masks, shapes):
    """The dense readouts of the images' own rows, in float64: the last layer recomputed as
    testdata/tinysiglip/make_readout_golden.py defines it (ClearCLIP, NACLIP over the image's
    own grid, MaskCLIP) on the rows of the image's patches alone (the padding is out of the
    tower's attention, so out of the readout's too), then post_layernorm and the pooling head
    on each row. -> kind -> [N, M, D], zeros after each image's rows."""
    import copy
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tinysiglip_readout", os.path.join(ROOT, "testdata", "tinysiglip", "make_readout_golden.py"))
    ro = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ro)
    vm = copy.deepcopy(model.vision_model).double()
    out = {}
    with torch.no_grad():
        x = vm.layer_input(torch.from_numpy(px).double(), torch.from_numpy(masks), torch.from_numpy(shapes))
        for kind in ("clearclip", "naclip", "maskclip"):
            res = np.zeros(x.shape, dtype="<f8")
            for i, (h, w) in enumerate(shapes.tolist()):
                rows = x[i:i + 1, :h * w]
                bias = ro.naclip_bias(h, w, 5.0) if kind == "naclip" else None
                hidden, _ = ro.attention_out(vm.encoder.layers[-1], rows, kind, bias)
                res[i, :h * w] = vm.head.single_patch(vm.post_layernorm(hidden))[0].numpy()
            out[kind] = res
    return out


def write_embed_goldens(model, golden):
    """End to end: three PNGs (2:1 wide, 1:3 tall, smaller than a patch budget's worth)
    through Siglip2ImageProcessor (scripts/pysiglip2's transcription) and the vision tower,
    three prompts through the tokenizers library and the text tower; embed_* goldens."""
    from PIL import Image

    sys.path.insert(0, os.path.join(ROOT, "scripts", "pysiglip2"))
    from naflex_processor import Siglip2ImageProcessor

    proc = Siglip2ImageProcessor.from_json_file(os.path.join(HERE, "preprocessor_config.json"))
    rng = np.random.default_rng(SEED + 2)
    os.makedirs(os.path.join(golden, "images"), exist_ok=True)
    px, masks, shapes = [], [], []
    for name, (w, h) in (("wide.png", (40, 20)), ("tall.png", (12, 36)), ("small.png", (6, 5))):
        yy, xx = np.mgrid[0:h, 0:w]
        a = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) * 5 % 256], axis=-1)
        a = np.clip(a + rng.integers(-30, 31, a.shape), 0, 255).astype(np.uint8)
        path = os.path.join(golden, "images", name)
        Image.fromarray(a, "RGB").save(path, optimize=True)
        out = proc.preprocess(Image.open(path))
        px.append(out["pixel_values"])
        masks.append(out["pixel_attention_mask"].astype(np.int64))
        shapes.append(out["spatial_shapes"].astype(np.int64))
    px, masks, shapes = np.stack(px), np.stack(masks), np.stack(shapes)
    ids = library_ids(PROMPTS)
    with torch.no_grad():
        vm = model.vision_model
        lhs, pooled = vm(torch.from_numpy(px), torch.from_numpy(masks), torch.from_numpy(shapes))
        patch = vm.head.single_patch(lhs)
        _, tp = model.text_model(torch.from_numpy(ids))
        i = pooled / pooled.norm(dim=-1, keepdim=True)
        t = tp / tp.norm(dim=-1, keepdim=True)
        logits = i @ t.t() * model.logit_scale.exp() + model.logit_bias
    readouts = readout_goldens(model, px, masks, shapes)
    siglip.write_json(os.path.join(golden, "prompts.json"), {"prompts": PROMPTS})
    for kind, a in readouts.items():
        save(golden, f"embed_readout_{kind}_patch_embeds", a)
    for name, a in (("embed_pixel_values", px), ("embed_pixel_attention_mask", masks), ("embed_spatial_shapes", shapes),
                    ("embed_last_hidden_state", lhs.numpy()), ("embed_pooler_output", pooled.numpy()),
                    ("embed_patch_embeds", patch.numpy()), ("embed_input_ids", ids),
                    ("embed_text_pooler_output", tp.numpy()), ("embed_logits_per_image", logits.numpy())):
        save(golden, name, a)
    print(f"tinynaflex: images' grids {shapes.tolist()}")


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

    write_embed_goldens(model, golden)

    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(HERE) for f in fs)
    print(f"tinynaflex: vocabulary {vocab}; grids {SHAPES} in {MAX_PATCHES} patches; folder {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
