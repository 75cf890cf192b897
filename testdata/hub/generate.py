#!/usr/bin/python3
"""Generates testdata/hub: pooled-only ONNX exports of testdata/tinyclip's model, the way
several hub repositories ship CLIP (split text_model.onnx / vision_model.onnx whose only
outputs are text_embeds / image_embeds), for `condition models expose` to rewrite.

Run (needs torch, numpy, onnx; /usr/bin/python3 on the dev machine) after
testdata/tinyclip/generate.py:

    /usr/bin/python3 testdata/hub/generate.py

Files (weights are testdata/tinyclip/model.safetensors, so the rewritten graphs' outputs
can be compared with testdata/tinyclip/onnx/{text,vision}_model.onnx):

  pooled_only/text_model.onnx          opset 17: input_ids, attention_mask -> text_embeds
                                       (the EOS gather exported as Flatten/Gather/Reshape)
  pooled_only/vision_model_opset14.onnx opset 14: pixel_values -> image_embeds, with
                                       post_layernorm decomposed (ReduceMean, Sub, Pow,
                                       Sqrt, Div, Mul, Add), as pre-opset-17 exports have it
The vision export at opset 17 (LayerNormalization) is testdata/tinyclip/onnx/pooled_only.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "tinyclip")
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from pyclip import clip  # noqa: E402


def load_tiny():
    with open(os.path.join(TINY, "config.json")) as f:
        c = json.load(f)
    fields = lambda cls, d: {k: v for k, v in d.items() if k in cls.__dataclass_fields__}  # noqa: E731
    cfg = clip.CLIPConfig(
        text_config=clip.TextConfig(**fields(clip.TextConfig, c["text_config"])),
        vision_config=clip.VisionConfig(**fields(clip.VisionConfig, c["vision_config"])),
        projection_dim=c["projection_dim"],
        logit_scale_init_value=c.get("logit_scale_init_value", 2.6592))
    model = clip.CLIP(cfg)
    sd, _ = clip.read_safetensors(os.path.join(TINY, "model.safetensors"))
    model.load_hf_state_dict(sd)
    return model.eval()


def main():
    model = load_tiny()
    out = os.path.join(HERE, "pooled_only")
    os.makedirs(out, exist_ok=True)
    p = os.path.join(out, "text_model.onnx")
    clip.export_text_onnx(model, p, hidden=False)
    clip.compact_onnx(p)
    p = os.path.join(out, "vision_model_opset14.onnx")
    clip.export_vision_onnx(model, p, hidden=False, opset=14)
    clip.compact_onnx(p)
    for f in sorted(os.listdir(out)):
        print(f"hub/pooled_only/{f}: {os.path.getsize(os.path.join(out, f)) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
