#!/usr/bin/python3
"""torch_golden.py: torch's outputs of a CLIP model folder on fixed inputs, to check the
graphs `condition models build` writes (internal/graphbuild's TestBuildRealSize reads them).

    /usr/bin/python3 scripts/graphbuild/torch_golden.py MODEL_DIR OUT_DIR

MODEL_DIR holds config.json and model.safetensors (Hugging Face names); the model runs as
scripts/pyclip transcribes CLIP. OUT_DIR gets, as .npy:

  input_ids, attention_mask    int64 [3, 77]: prompts of 7, 20 and 77 tokens (BOS, random ids,
                               EOS, then EOS as padding), from a fixed seed
  pixel_values                 float32 [3, 3, S, S], standard normal, from a fixed seed
  text_last_hidden_state       [3, 77, d_t]   text_embeds [3, d_p]
  vision_last_hidden_state     [3, 1+P, d_v]  image_embeds [3, d_p]
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from pyclip import clip  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model_dir, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
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
    os.makedirs(out, exist_ok=True)
    with torch.no_grad():
        h, e = model.encode_text(torch.from_numpy(ids), torch.from_numpy(mask))
        hv, ev = model.encode_image(torch.from_numpy(px))
    for name, a in [("input_ids", ids), ("attention_mask", mask), ("pixel_values", px),
                    ("text_last_hidden_state", h.numpy()), ("text_embeds", e.numpy()),
                    ("vision_last_hidden_state", hv.numpy()), ("image_embeds", ev.numpy())]:
        np.save(os.path.join(out, name + ".npy"), np.ascontiguousarray(a))
    print(f"torch_golden: wrote {out}")


if __name__ == "__main__":
    main()
