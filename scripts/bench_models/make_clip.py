#!/usr/bin/python3
"""make_clip.py: a real-size CLIP with RANDOM weights, for speed measurements.

What it makes: a model directory in the Hugging Face layout that `condition`
loads like any CLIP export (config.json, preprocessor_config.json, the real CLIP
tokenizer files, model.safetensors, onnx/text_model.onnx, onnx/vision_model.onnx
with last_hidden_state and the embeds), with the ARCHITECTURE of a public
checkpoint -- the thing that sets the speed -- and weights drawn from a fixed
seed. The weights are random: the model is for measuring speed only (for
example `condition bench pipeline --model DIR`); its embeddings, scores and
attention maps mean nothing. There is no real checkpoint on the development
machine and no way to download one, which is why this exists.

Presets (the configs of the openai/clip-* hub repositories):

  vit-b-32   openai/clip-vit-base-patch32: vision 224 px, patch 32 (7x7 grid, 50 tokens),
             width 768, 12 layers, 12 heads, MLP 3072; text width 512, 12 layers,
             8 heads, MLP 2048, 77 positions, vocabulary 49408; projection 512;
             quick_gelu. ~4.4 GFLOP per image in the vision tower (multiply-adds
             counted as two operations).
  vit-b-16   openai/clip-vit-base-patch16: the same with patch 16 (14x14 grid, 197 tokens).
  vit-l-14   openai/clip-vit-large-patch14: vision width 1024, 24 layers, 16 heads,
             MLP 4096, patch 14 (16x16 grid, 257 tokens); text width 768, 12 layers,
             12 heads, MLP 3072; projection 768.

Preprocessing is CLIPImageProcessor's defaults for these repositories: resize the
shortest edge to 224 (bicubic), centre crop 224x224, rescale 1/255, normalise with
the CLIP mean and std.

Tokenizer: the real CLIP vocabulary and merges are read AT RUN TIME from the
project's shared data folder (../shared/clip relative to the repository root,
or --tokenizer DIR) and copied into the output folder. Nothing this script
writes belongs in the repository (hundreds of megabytes); only the script is
committed.

Usage (needs torch, numpy, onnx; /usr/bin/python3 on the development machine):

    /usr/bin/python3 scripts/bench_models/make_clip.py [--preset vit-b-32] [--out DIR] [--seed N]

--out defaults to /tmp/condition-<preset> (/tmp/condition-vit-b-32). The weights are
the same on every run for a given torch version (fixed seed; model.safetensors is
byte-identical).

Sizes and times (measured on the 2-core development machine, torch 1.13, while
other work shared it; the peak memory is the Python process's):

  vit-b-32   151.3 M parameters; model.safetensors 577 MiB, onnx/vision_model.onnx
             335 MiB, onnx/text_model.onnx 242 MiB; 113 s, 3.2 GB peak memory.
  vit-b-16   149.6 M parameters; 571 MiB, 329 MiB, 242 MiB; 79 s, 3.2 GB.
  vit-l-14   427.6 M parameters; 1631 MiB, 1160 MiB, 472 MiB; 273 s, 8.6 GB.
             (each graph stays below protobuf's 2 GiB, so no external data is needed)
"""

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))

from pyclip import clip  # noqa: E402

SEED = 20261129

# The tokenizer files of a CLIP hub repository, as ../shared/clip holds them.
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
VOCAB_SIZE = 49408
BOS_ID, EOS_ID = 49406, 49407


def preset_config(name: str) -> clip.CLIPConfig:
    """The CLIPConfig of a public checkpoint (HF openai/clip-* config.json values)."""
    if name in ("vit-b-32", "vit-b-16"):
        text = dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=12,
                    num_attention_heads=8, projection_dim=512)
        vision = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                      num_attention_heads=12, patch_size=32 if name == "vit-b-32" else 16,
                      projection_dim=512)
        proj = 512
    elif name == "vit-l-14":
        text = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                    num_attention_heads=12, projection_dim=768)
        vision = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                      num_attention_heads=16, patch_size=14, projection_dim=768)
        proj = 768
    else:
        raise SystemExit(f"make_clip: unknown preset {name!r}: want vit-b-32, vit-b-16 or vit-l-14")
    return clip.CLIPConfig(
        text_config=clip.TextConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=77,
                                    hidden_act="quick_gelu", pad_token_id=1,
                                    bos_token_id=BOS_ID, eos_token_id=EOS_ID, **text),
        vision_config=clip.VisionConfig(image_size=224, hidden_act="quick_gelu", **vision),
        projection_dim=proj)


def copy_tokenizer(src: str, out: str) -> None:
    """Copies the real CLIP tokenizer files from src into out, after checking that
    they are the 49,408-entry vocabulary the config expects."""
    missing = [f for f in TOKENIZER_FILES if not os.path.isfile(os.path.join(src, f))]
    if missing:
        raise SystemExit(f"make_clip: tokenizer folder {src} lacks {', '.join(missing)} "
                         "(want the real CLIP vocabulary; pass --tokenizer DIR)")
    with open(os.path.join(src, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    if len(vocab) != VOCAB_SIZE or vocab.get(clip.BOS) != BOS_ID or vocab.get(clip.EOS) != EOS_ID:
        raise SystemExit(f"make_clip: {src}/vocab.json has {len(vocab)} entries, bos "
                         f"{vocab.get(clip.BOS)}, eos {vocab.get(clip.EOS)}; want {VOCAB_SIZE}, "
                         f"{BOS_ID}, {EOS_ID}")
    for f in TOKENIZER_FILES:
        with open(os.path.join(src, f), "rb") as r:
            clip._atomic_write(os.path.join(out, f), r.read())


def mib(path: str) -> str:
    return f"{os.path.getsize(path) / 2**20:.0f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="vit-b-32", choices=["vit-b-32", "vit-b-16", "vit-l-14"])
    ap.add_argument("--out", default=None, help="output folder (default /tmp/condition-<preset>)")
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "..", "shared", "clip"),
                    help="folder with the real CLIP vocab.json, merges.txt, tokenizer.json, "
                         "tokenizer_config.json (default ../shared/clip from the repository root)")
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    out = args.out or f"/tmp/condition-{args.preset}"
    if os.path.realpath(out).startswith(os.path.realpath(REPO) + os.sep):
        raise SystemExit(f"make_clip: --out {out} is inside the repository; these files are "
                         "hundreds of MB and must not be committed: write them elsewhere")

    t0 = time.time()
    torch.manual_seed(args.seed)
    cfg = preset_config(args.preset)
    os.makedirs(out, exist_ok=True)
    copy_tokenizer(os.path.normpath(args.tokenizer), out)

    model = clip.CLIP(cfg).init_random(args.seed).eval()
    params = sum(p.numel() for p in model.parameters())
    print(f"make_clip: {args.preset}: {params / 1e6:.1f} M parameters (random, seed {args.seed})",
          flush=True)

    clip.write_config(out, cfg)
    clip.write_preprocessor_config(out, cfg.vision_config.image_size, cfg.vision_config.image_size)
    clip.write_safetensors(os.path.join(out, "model.safetensors"), model.hf_state_dict(), {
        "format": "pt",
        "note": f"random weights ({args.preset} architecture, seed {args.seed}) for speed "
                "measurements only; outputs mean nothing",
    })
    onnx_dir = os.path.join(out, "onnx")
    for name, export in (("text_model.onnx", clip.export_text_onnx),
                         ("vision_model.onnx", clip.export_vision_onnx)):
        p = os.path.join(onnx_dir, name)
        t = time.time()
        export(model, p)
        clip.compact_onnx(p)
        print(f"make_clip: {p}: {mib(p)} in {time.time() - t:.0f} s", flush=True)

    # A quick sanity check of what was built (torch only; the Go side checks the graphs).
    with torch.no_grad():
        s = cfg.vision_config.image_size
        h, e = model.encode_image(torch.zeros(1, 3, s, s))
        grid = s // cfg.vision_config.patch_size
        assert h.shape == (1, 1 + grid * grid, cfg.vision_config.hidden_size), h.shape
        assert e.shape == (1, cfg.projection_dim), e.shape

    print(f"make_clip: wrote {out} (model.safetensors {mib(os.path.join(out, 'model.safetensors'))}) "
          f"in {time.time() - t0:.0f} s; weights are random: for speed measurements only")


if __name__ == "__main__":
    main()
