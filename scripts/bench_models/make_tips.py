#!/usr/bin/python3
"""make_tips.py: a real-size TIPSv2 with RANDOM weights, to check the graphs `graphbuild.BuildTips`
writes at the size of a public checkpoint (and to time them).

What it makes: a folder with config.json (Tipsv2Config, transformers' field names) and
model.safetensors (Tipsv2Model's state-dict names, float32), weights drawn from a fixed seed by
scripts/pytips/tips.py's init_random. No tokenizer, no preprocessor config, no onnx/: the graphs
are built from the checkpoint, and scripts/graphbuild/torch_golden.py gives torch's outputs.
The weights are random: the model's embeddings and scores mean nothing.

Presets:

  tipsv2-b14    google/tipsv2-b14 as transformers' defaults describe it: vision 448 px, patch 14
                (a 32x32 grid, 1024 patches), width 768, 12 layers, 12 heads, mlp_ratio 4,
                1 register token, gelu, layer_norm_eps 1e-6; text width 768, 12 layers,
                12 heads, MLP 3072 (relu), 64 positions, vocabulary 32000, layer_norm_eps 1e-5

Nothing this script writes belongs in the repository (about 790 MB); only the script is committed.

Usage (needs torch and numpy; /usr/bin/python3 on the development machine):

    /usr/bin/python3 scripts/bench_models/make_tips.py [--preset tipsv2-b14] [--out DIR] [--seed N]

--out defaults to /tmp/condition-<preset>.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from pytips import tips  # noqa: E402

PRESETS = {
    "tipsv2-b14": (
        tips.TextConfig(vocab_size=32000, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                        num_attention_heads=12, max_position_embeddings=64),
        tips.VisionConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4.0,
                          image_size=448, patch_size=14, num_register_tokens=1),
    ),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="tipsv2-b14", choices=sorted(PRESETS))
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args()
    out = a.out or f"/tmp/condition-{a.preset}"
    os.makedirs(out, exist_ok=True)
    start = time.time()
    tc, vc = PRESETS[a.preset]
    config = tips.Config(tc, vc, temperature=0.01)
    model = tips.Tips(config).init_random(a.seed).eval()
    tips.write_json(os.path.join(out, "config.json"), config.to_dict())
    tips.write_safetensors(os.path.join(out, "model.safetensors"),
                           {k: v.detach().contiguous() for k, v in model.state_dict().items()}, {"format": "pt"})
    n = sum(p.numel() for p in model.parameters())
    print(f"make_tips: {a.preset}: {n / 1e6:.1f} M parameters in {out} ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
