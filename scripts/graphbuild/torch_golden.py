#!/usr/bin/python3
"""torch_golden.py: torch's outputs of a CLIP, SigLIP or TIPSv2 model folder on fixed inputs, to check
the graphs `condition models build` writes (internal/graphbuild's TestBuildRealSize reads them).

    /usr/bin/python3 scripts/graphbuild/torch_golden.py MODEL_DIR OUT_DIR

MODEL_DIR holds config.json and model.safetensors (Hugging Face names); the model runs as
scripts/pyclip transcribes CLIP (model_type clip) or scripts/pysiglip transcribes SigLIP
(model_type siglip: SiglipTextModel, SiglipVisionModel) or scripts/pytips TIPSv2 (model_type tipsv2).
OUT_DIR gets, as .npy:

CLIP:
  input_ids, attention_mask    int64 [3, 77]: prompts of 7, 20 and 77 tokens (BOS, random ids,
                               EOS, then EOS as padding), from a fixed seed
  pixel_values                 float32 [3, 3, S, S], standard normal, from a fixed seed
  text_last_hidden_state       [3, 77, d_t]   text_embeds [3, d_p]
  vision_last_hidden_state     [3, 1+P, d_v]  image_embeds [3, d_p]
SigLIP:
  input_ids                    int64 [3, 64]: prompts of 7, 20 and 64 tokens (random ids, </s>),
                               padded with </s> (id 1) to 64 as SiglipTokenizer does; no mask
  pixel_values                 float32 [3, 3, S, S], standard normal, from a fixed seed
  text_last_hidden_state       [3, 64, d_t]   text_pooler_output [3, P]
  vision_last_hidden_state     [3, P, d_v]    vision_pooler_output [3, d_v]
TIPSv2:
  input_ids, attention_mask    int64 [3, T] (T = max_position_embeddings): prompts of 7, 20 and
                               T random ids, padded with 0
  pixel_values                 float32 [3, 3, S, S], standard normal, from a fixed seed
  text_last_hidden_state       [3, T, d]      text_embeds [3, d] (the masked mean)
  vision_last_hidden_state     [3, 1+R+P, d]  image_embeds [3, d]  patch_embeds [3, P, d]
  resized_*                    the same vision outputs for one image of (3/4·S, 9/8·S) pixels
                               (rounded down to patches), whose positions are resized, and
                               resized_positions [1+P', d] (what its rows got added)
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from pyclip import clip  # noqa: E402


def save(out, arrays):
    os.makedirs(out, exist_ok=True)
    for name, a in arrays:
        np.save(os.path.join(out, name + ".npy"), np.ascontiguousarray(a))
    print(f"torch_golden: wrote {out}")


def siglip_golden(model_dir, cfg, out):
    from pysiglip import siglip

    tfields = {k for k in siglip.TextConfig.__dataclass_fields__}
    vfields = {k for k in siglip.VisionConfig.__dataclass_fields__}
    config = siglip.SiglipConfig(
        text_config=siglip.TextConfig(**{k: v for k, v in cfg.get("text_config", {}).items() if k in tfields}),
        vision_config=siglip.VisionConfig(**{k: v for k, v in cfg.get("vision_config", {}).items() if k in vfields}))
    model = siglip.SigLIP(config).eval()
    sd, _ = siglip.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_hf_state_dict({k: v.astype(np.float32, copy=False) if v.dtype != np.int64 else v for k, v in sd.items()})
    del sd

    tc, vc = config.text_config, config.vision_config
    rng = np.random.default_rng(20261202)
    t = tc.max_position_embeddings
    ids = np.full((3, t), siglip.EOS_ID, dtype=np.int64)
    for b, n in enumerate([7, 20, t]):
        ids[b, :n - 1] = rng.integers(3, tc.vocab_size, n - 1)
    px = rng.standard_normal((3, vc.num_channels, vc.image_size, vc.image_size)).astype(np.float32)
    with torch.no_grad():
        h, e = model.encode_text(torch.from_numpy(ids))
        hv, ev = model.encode_image(torch.from_numpy(px))
    save(out, [("input_ids", ids), ("pixel_values", px),
               ("text_last_hidden_state", h.numpy()), ("text_pooler_output", e.numpy()),
               ("vision_last_hidden_state", hv.numpy()), ("vision_pooler_output", ev.numpy())])


def tips_golden(model_dir, cfg, out):
    from pytips import tips

    tfields = {k for k in tips.TextConfig.__dataclass_fields__}
    vfields = {k for k in tips.VisionConfig.__dataclass_fields__}
    config = tips.Config(
        text_config=tips.TextConfig(**{k: v for k, v in cfg.get("text_config", {}).items() if k in tfields}),
        vision_config=tips.VisionConfig(**{k: v for k, v in cfg.get("vision_config", {}).items() if k in vfields}),
        temperature=cfg.get("temperature", cfg.get("temperature_init_value", 0.01)))
    model = tips.Tips(config).eval()
    sd, _ = clip.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float32, copy=False)) for k, v in sd.items()})
    del sd

    tc, vc = config.text_config, config.vision_config
    rng = np.random.default_rng(20261202)
    t = tc.max_position_embeddings
    ids = np.zeros((3, t), dtype=np.int64)
    mask = np.zeros((3, t), dtype=np.int64)
    for b, n in enumerate([7, 20, t]):
        ids[b, :n] = rng.integers(1, tc.vocab_size, n)
        mask[b, :n] = 1
    s, p = vc.image_size, vc.patch_size
    px = rng.standard_normal((3, vc.num_channels, s, s)).astype(np.float32)
    rh, rw = s * 3 // 4 // p * p, s * 9 // 8 // p * p
    rpx = rng.standard_normal((1, vc.num_channels, rh, rw)).astype(np.float32)
    with torch.no_grad():
        h, e = model.encode_text(torch.from_numpy(ids), torch.from_numpy(mask))
        hv, ev, pv = model.encode_image(torch.from_numpy(px))
        rhv, rev, rpv = model.encode_image(torch.from_numpy(rpx))
        rpos = model.positions(rh // p, rw // p, rh, rw)[0]
    save(out, [("input_ids", ids), ("attention_mask", mask), ("pixel_values", px),
               ("text_last_hidden_state", h.numpy()), ("text_embeds", e.numpy()),
               ("vision_last_hidden_state", hv.numpy()), ("image_embeds", ev.numpy()), ("patch_embeds", pv.numpy()),
               ("resized_pixel_values", rpx), ("resized_positions", rpos.numpy()),
               ("resized_vision_last_hidden_state", rhv.numpy()), ("resized_image_embeds", rev.numpy()),
               ("resized_patch_embeds", rpv.numpy())])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model_dir, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") == "siglip":
        return siglip_golden(model_dir, cfg, out)
    if cfg.get("model_type") == "tipsv2":
        return tips_golden(model_dir, cfg, out)
    if cfg.get("model_type", "clip") != "clip":
        sys.exit(f"torch_golden: model_type {cfg['model_type']!r}: expected clip, siglip or tipsv2")
    tfields = {k for k in clip.TextConfig.__dataclass_fields__}
    vfields = {k for k in clip.VisionConfig.__dataclass_fields__}
    config = clip.CLIPConfig(
        text_config=clip.TextConfig(**{k: v for k, v in cfg["text_config"].items() if k in tfields}),
        vision_config=clip.VisionConfig(**{k: v for k, v in cfg["vision_config"].items() if k in vfields}),
        projection_dim=cfg["projection_dim"])
    model = clip.CLIP(config).eval()
    sd, _ = clip.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    sd = {k: v.astype(np.float32) if v.dtype != np.int64 else v for k, v in sd.items()}
    model.load_hf_state_dict({k: v for k, v in sd.items() if k != "logit_scale"} | {"logit_scale": sd["logit_scale"].reshape(())})

    tc, vc = config.text_config, config.vision_config
    rng = np.random.default_rng(20261202)
    t = tc.max_position_embeddings
    ids = np.full((3, t), tc.eos_token_id, dtype=np.int64)
    mask = np.zeros((3, t), dtype=np.int64)
    for b, n in enumerate([7, 20, t]):
        ids[b, 0] = tc.bos_token_id
        ids[b, 1:n - 1] = rng.integers(0, tc.vocab_size - 2, n - 2)
        mask[b, :n] = 1
    px = rng.standard_normal((3, vc.num_channels, vc.image_size, vc.image_size)).astype(np.float32)
    with torch.no_grad():
        h, e = model.encode_text(torch.from_numpy(ids), torch.from_numpy(mask))
        hv, ev = model.encode_image(torch.from_numpy(px))
    save(out, [("input_ids", ids), ("attention_mask", mask), ("pixel_values", px),
               ("text_last_hidden_state", h.numpy()), ("text_embeds", e.numpy()),
               ("vision_last_hidden_state", hv.numpy()), ("image_embeds", ev.numpy())])


if __name__ == "__main__":
    main()
