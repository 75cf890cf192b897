#!/usr/bin/python3
"""Writes testdata/tinyclip/golden/job: what `condition run --xattn joint` must write for
the two golden images and two prompts, computed in float64 torch from the tiny model's
weights (model.safetensors), independently of the Go code and of ONNX Runtime.
pipeline/golden_test.go compares the job's outputs against these files.

Run from anywhere (needs torch and numpy; /usr/bin/python3 on the dev machine):

    /usr/bin/python3 testdata/tinyclip/make_job_golden.py

It reads config.json, model.safetensors, merges.txt, golden/images/{square,wide}.png and
golden/prompts.json (to check the tokenizer) of this folder and rewrites nothing else
(generate.py is not run; it would rewrite every fixture). The output is deterministic.

How each tensor is computed (README "Outputs" and "The joint space"; attention is
softmax(Q K^T / sqrt(d_k)) V with the queries and keys below):

  pixel_values      CLIPImageProcessor on the PNG (generate.py's hf_pixel_values: shortest
                    edge 32 with PIL bicubic, centre crop 32x32, rescale, normalise),
                    checked equal to golden/embed_pixel_values.npy
  vision            the model's vision tower in float64: last_hidden_state [1+P, d_v]
                    (before post_layernorm), image_embeds [d_p]
  text              the text tower in float64 on the prompt's unpadded ids BOS..EOS (no
                    padding, so no mask needed): last_hidden_state [T, d_t], text_embeds [d_p]
  patches (joint)   X = normalize(visual_projection(post_layernorm(h[1:]))) [P, d_p]
  tokens (joint)    Y = normalize(text_projection(last_hidden_state)) [T, d_p]
  s                 exp(logit_scale)
  image_to_text     softmax_rows(s X Yᵀ) [P, T];  conditioned_patches = image_to_text Y [P, d_p]
  text_to_image     softmax_rows(s Y Xᵀ) [T, P];  conditioned_tokens  = text_to_image X [T, d_p]
  scores            s cos(image_embeds, text_embeds) per prompt [prompts]

Files (float64 safetensors, tensor names as the job writes them; __metadata__ holds
"prompts" as JSON and a note):

  golden/job/square.safetensors, golden/job/wide.safetensors
      patch_features [P, d_v]               last_hidden_state rows 1..P (no class token)
      image_embeds [d_p]
      scores [prompts]
      prompt.k.input_ids [T] (int64)
      prompt.k.image_to_text [P, T], prompt.k.conditioned_patches [P, d_p]
      prompt.k.text_to_image [T, P], prompt.k.conditioned_tokens [T, d_p]
      for k = 0, 1: PROMPTS[k]; P = 16 (4x4 grid), d_v = 24, d_p = 16
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)

from pyclip import clip  # noqa: E402
from generate import hf_pixel_values  # noqa: E402  (a function; importing runs nothing)

PROMPTS = ["a photo of a cat", "a red car"]
IMAGES = ["square", "wide"]


def load_model():
    """The tiny CLIP from config.json and model.safetensors, in float64."""
    with open(os.path.join(HERE, "config.json")) as f:
        c = json.load(f)
    keep = lambda cls, d: cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
    cfg = clip.CLIPConfig(text_config=keep(clip.TextConfig, c["text_config"]),
                          vision_config=keep(clip.VisionConfig, c["vision_config"]),
                          projection_dim=c["projection_dim"],
                          logit_scale_init_value=c["logit_scale_init_value"])
    model = clip.CLIP(cfg)
    sd, _ = clip.read_safetensors(os.path.join(HERE, "model.safetensors"))
    model.load_hf_state_dict(sd)
    return model.double().eval()


def normalize(x):
    return x / x.norm(dim=-1, keepdim=True)


def main():
    from PIL import Image

    model = load_model()
    vocab = clip.Vocab.read(HERE)
    golden = os.path.join(HERE, "golden")
    with open(os.path.join(golden, "prompts.json")) as f:
        known = json.load(f)
    ids = [vocab.encode(p) for p in PROMPTS]
    for p, i in zip(PROMPTS, ids):
        if p in known["prompts"] and known["input_ids"][known["prompts"].index(p)] != i:
            raise SystemExit(f"make_job_golden: ids of {p!r} differ from golden/prompts.json")

    want_px = np.load(os.path.join(golden, "embed_pixel_values.npy"))
    want_ie = np.load(os.path.join(golden, "embed_image_embeds.npy"))
    with torch.no_grad():
        s = model.logit_scale.exp()
        texts = []
        for i in ids:
            h, e = model.encode_text(torch.tensor([i], dtype=torch.int64))
            y = normalize(model.text_projection(h[0]))  # [T, d_p]
            texts.append((h[0], e[0], y))
        for n, name in enumerate(IMAGES):
            px = hf_pixel_values(Image.open(os.path.join(golden, "images", name + ".png")), 32, 32)
            if not np.array_equal(px, want_px[n]):
                raise SystemExit(f"make_job_golden: pixel_values of {name} differ from embed_pixel_values.npy")
            hv, ie = model.encode_image(torch.from_numpy(px).double().unsqueeze(0))
            if np.abs(ie[0].numpy() - want_ie[n]).max() > 1e-5:
                raise SystemExit(f"make_job_golden: image_embeds of {name} differ from embed_image_embeds.npy "
                                 "(model.safetensors is not the model generate.py made?)")
            patches = hv[0, 1:]  # [P, d_v]
            x = normalize(model.visual_projection(model.vision_model.post_layernorm(patches)))  # [P, d_p]
            out = {"patch_features": patches, "image_embeds": ie[0]}
            scores = []
            for k, (i, (_, te, y)) in enumerate(zip(ids, texts)):
                pre = f"prompt.{k}."
                i2t = torch.softmax(s * x @ y.T, dim=-1)  # [P, T]
                t2i = torch.softmax(s * y @ x.T, dim=-1)  # [T, P]
                out[pre + "input_ids"] = np.array(i, dtype=np.int64)
                out[pre + "image_to_text"] = i2t
                out[pre + "conditioned_patches"] = i2t @ y
                out[pre + "text_to_image"] = t2i
                out[pre + "conditioned_tokens"] = t2i @ x
                scores.append(s * torch.dot(normalize(ie[0]), normalize(te)))
            out["scores"] = torch.stack(scores)
            path = os.path.join(golden, "job", name + ".safetensors")
            clip.write_safetensors(path, out, {
                "prompts": json.dumps(PROMPTS),
                "note": "float64 torch reference for condition run --xattn joint; "
                        "made by testdata/tinyclip/make_job_golden.py"})
            print(f"make_job_golden: {os.path.relpath(path, HERE)} ({len(out)} tensors)")


if __name__ == "__main__":
    main()
