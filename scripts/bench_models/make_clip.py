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
  vit-bigg-14  OpenCLIP ViT-bigG-14 (laion/CLIP-ViT-bigG-14-laion2B-39B-b160k): vision width
             1664, 48 layers, 16 heads, MLP 8192, patch 14, 224 px; text width 1280, 32
             layers, 20 heads, MLP 5120; projection 1280; gelu (erf) in both towers.
             2.54 G parameters, 10.2 GB of float32: only with --no-onnx (the torch model,
             its state dict and the exports would need several times that in memory).

Preprocessing is CLIPImageProcessor's defaults for these repositories: resize the
shortest edge to 224 (bicubic), centre crop 224x224, rescale 1/255, normalise with
the CLIP mean and std.

Tokenizer: the real CLIP vocabulary and merges are read AT RUN TIME from the
project's shared data folder (../shared/clip relative to the repository root,
or --tokenizer DIR) and copied into the output folder. Nothing this script
writes belongs in the repository (hundreds of megabytes); only the script is
committed.

Usage (needs torch, numpy, onnx; /usr/bin/python3 on the development machine):

    /usr/bin/python3 scripts/bench_models/make_clip.py [--preset vit-b-32] [--out DIR] [--seed N] [--no-onnx]

--no-onnx writes config.json, preprocessor_config.json, the tokenizer files and
model.safetensors only (the checkpoint for `condition models build`, which makes
the graphs itself): no torch model, no export. The weights are then drawn with
numpy (the same distributions as pyclip's init_random, another generator, so not
the bytes of the torch path) and streamed into the file a chunk at a time: the
peak memory is a few hundred MB whatever the preset.

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
  vit-bigg-14  --no-onnx: 2539.6 M parameters; model.safetensors 9688 MiB; 72 s, 0.33 GB peak memory.
"""

import argparse
import json
import math
import os
import resource
import struct
import sys
import tempfile
import time

import numpy as np
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
PRESETS = ("vit-b-32", "vit-b-16", "vit-l-14", "vit-bigg-14")
# Presets too large for the torch path (model, state dict and exports in memory).
NUMPY_ONLY = ("vit-bigg-14",)


def preset_config(name: str) -> clip.CLIPConfig:
    """The CLIPConfig of a public checkpoint (HF openai/clip-* and laion/CLIP-ViT-bigG-14
    config.json values)."""
    act = "quick_gelu"
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
    elif name == "vit-bigg-14":
        text = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32,
                    num_attention_heads=20, projection_dim=1280)
        vision = dict(hidden_size=1664, intermediate_size=8192, num_hidden_layers=48,
                      num_attention_heads=16, patch_size=14, projection_dim=1280)
        proj, act = 1280, "gelu"
    else:
        raise SystemExit(f"make_clip: unknown preset {name!r}: want one of {', '.join(PRESETS)}")
    return clip.CLIPConfig(
        text_config=clip.TextConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=77,
                                    hidden_act=act, pad_token_id=1,
                                    bos_token_id=BOS_ID, eos_token_id=EOS_ID, **text),
        vision_config=clip.VisionConfig(image_size=224, hidden_act=act, **vision),
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


def hf_shapes(cfg: clip.CLIPConfig) -> dict:
    """name -> (shape, numpy dtype) of every tensor of pyclip's CLIP.hf_state_dict()
    for cfg (Hugging Face CLIPModel names), without building the model."""
    tc, vc = cfg.text_config, cfg.vision_config
    f32, i64 = np.dtype("float32"), np.dtype("int64")
    out = {"logit_scale": ((), f32)}

    def norm(prefix, d):
        out[prefix + ".weight"] = ((d,), f32)
        out[prefix + ".bias"] = ((d,), f32)

    def linear(prefix, o, i, bias=True):
        out[prefix + ".weight"] = ((o, i), f32)
        if bias:
            out[prefix + ".bias"] = ((o,), f32)

    def encoder(prefix, c):
        d, m = c.hidden_size, c.intermediate_size
        for i in range(c.num_hidden_layers):
            p = f"{prefix}.encoder.layers.{i}"
            for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                linear(f"{p}.self_attn.{n}", d, d)
            norm(f"{p}.layer_norm1", d)
            linear(f"{p}.mlp.fc1", m, d)
            linear(f"{p}.mlp.fc2", d, m)
            norm(f"{p}.layer_norm2", d)

    out["text_model.embeddings.token_embedding.weight"] = ((tc.vocab_size, tc.hidden_size), f32)
    out["text_model.embeddings.position_embedding.weight"] = ((tc.max_position_embeddings, tc.hidden_size), f32)
    out["text_model.embeddings.position_ids"] = ((1, tc.max_position_embeddings), i64)
    encoder("text_model", tc)
    norm("text_model.final_layer_norm", tc.hidden_size)
    n = (vc.image_size // vc.patch_size) ** 2 + 1
    out["vision_model.embeddings.class_embedding"] = ((vc.hidden_size,), f32)
    out["vision_model.embeddings.patch_embedding.weight"] = (
        (vc.hidden_size, vc.num_channels, vc.patch_size, vc.patch_size), f32)
    out["vision_model.embeddings.position_embedding.weight"] = ((n, vc.hidden_size), f32)
    out["vision_model.embeddings.position_ids"] = ((1, n), i64)
    norm("vision_model.pre_layrnorm", vc.hidden_size)
    encoder("vision_model", vc)
    norm("vision_model.post_layernorm", vc.hidden_size)
    linear("text_projection", cfg.projection_dim, tc.hidden_size, bias=False)
    linear("visual_projection", cfg.projection_dim, vc.hidden_size, bias=False)
    return out


def check_hf_shapes() -> None:
    """Checks hf_shapes against the torch model's state dict on a small config of the
    same structure (two layers per tower, gelu), so that the numpy path writes the
    names and shapes the torch path would."""
    small = clip.CLIPConfig(
        text_config=clip.TextConfig(vocab_size=99, hidden_size=16, intermediate_size=24,
                                    num_hidden_layers=2, num_attention_heads=2,
                                    max_position_embeddings=7, hidden_act="gelu", projection_dim=8),
        vision_config=clip.VisionConfig(hidden_size=12, intermediate_size=20, num_hidden_layers=2,
                                        num_attention_heads=3, image_size=28, patch_size=14,
                                        hidden_act="gelu", projection_dim=8),
        projection_dim=8)
    want = {k: (tuple(v.shape), np.dtype(str(v.dtype).replace("torch.", "")))
            for k, v in clip.CLIP(small).hf_state_dict().items()}
    got = hf_shapes(small)
    if got != want:
        diff = sorted(set(got.items()) ^ set(want.items()))
        raise SystemExit(f"make_clip: hf_shapes disagrees with pyclip's CLIP on {diff[:6]}")


def random_values(rng: np.random.Generator, name: str, shape: tuple, cfg: clip.CLIPConfig,
                  n: int) -> np.ndarray:
    """n float32 values of tensor name (shape), in the distributions of pyclip's
    CLIP.init_random: normal / sqrt(fan_in) for weights, 0.2 normal for embeddings,
    1 + 0.1 normal for LayerNorm weights, 0.1 normal for biases."""
    if name == "logit_scale":
        return np.full(n, cfg.logit_scale_init_value, np.float32)
    x = rng.standard_normal(n, dtype=np.float32)
    if "norm" in name and name.endswith("weight"):
        return x * np.float32(0.1) + np.float32(1)
    if name.endswith("bias"):
        return x * np.float32(0.1)
    if "embedding" in name:
        return x * np.float32(0.2)
    fan_in = int(np.prod(shape[1:])) if len(shape) >= 2 else shape[0]
    return x * np.float32(1 / math.sqrt(fan_in))


def write_random_safetensors(path: str, cfg: clip.CLIPConfig, seed: int, metadata: dict,
                             chunk: int = 1 << 23) -> int:
    """Writes path, a safetensors file of every tensor of hf_shapes(cfg) with random
    values (random_values; position_ids 0..n-1), streamed chunk values at a time
    (32 MiB of float32), atomically. Returns the parameter count."""
    shapes = hf_shapes(cfg)
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    off = 0
    for name in sorted(shapes):
        shape, dt = shapes[name]
        nb = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        header[name] = {"dtype": "F32" if dt == np.float32 else "I64", "shape": list(shape),
                        "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    rng = np.random.default_rng(seed)
    params = 0
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for name in sorted(shapes):
                shape, dt = shapes[name]
                total = int(np.prod(shape, dtype=np.int64))
                if dt == np.int64:
                    f.write(np.arange(total, dtype="<i8").tobytes())
                    continue
                params += total
                for start in range(0, total, chunk):
                    k = min(chunk, total - start)
                    random_values(rng, name, shape, cfg, k).astype("<f4", copy=False).tofile(f)
            f.flush()
            os.fsync(f.fileno())
        if os.path.getsize(tmp) != 8 + len(h) + off:
            raise SystemExit(f"make_clip: {tmp}: wrote {os.path.getsize(tmp)} bytes, expected {8 + len(h) + off}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return params


# The channels plant_outliers makes large (fixed, so that every run plants the same).
OUTLIER_CHANNELS = (37, 301, 590)


def plant_outliers(model: "clip.CLIP", factor: float) -> None:
    """Multiplies the gains (weights) of layer_norm1 and layer_norm2 of vision layers 3
    to the last (1-based) at OUTLIER_CHANNELS by factor: those channels of every
    input of the q, k, v projections and of fc1 become factor times the others:
    activation outliers, which one quantization scale per row or per tensor cannot
    keep faithful."""
    with torch.no_grad():
        for layer in model.vision_model.encoder.layers[2:]:
            for norm in (layer.layer_norm1, layer.layer_norm2):
                for c in OUTLIER_CHANNELS:
                    norm.weight[c] *= factor


def peak_gb() -> float:
    """This process's peak resident set so far, in GB (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def mib(path: str) -> str:
    return f"{os.path.getsize(path) / 2**20:.0f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="vit-b-32", choices=PRESETS)
    ap.add_argument("--out", default=None, help="output folder (default /tmp/condition-<preset>)")
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "..", "shared", "clip"),
                    help="folder with the real CLIP vocab.json, merges.txt, tokenizer.json, "
                         "tokenizer_config.json (default ../shared/clip from the repository root)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--no-onnx", action="store_true",
                    help="write config, preprocessor config, tokenizer files and model.safetensors only "
                         "(weights drawn with numpy and streamed: no torch model, no export), for "
                         "`condition models build`")
    ap.add_argument("--outliers", type=float, default=0,
                    help="plant outlier channels: multiply the gains of both layer norms of vision "
                         "layers 3 to the last at OUTLIER_CHANNELS by this factor (say 40): a few "
                         "activation channels far larger than the rest; default "
                         "folder /tmp/condition-<preset>-outliers")
    args = ap.parse_args()
    out = args.out or f"/tmp/condition-{args.preset}" + ("-outliers" if args.outliers else "")
    if os.path.realpath(out).startswith(os.path.realpath(REPO) + os.sep):
        raise SystemExit(f"make_clip: --out {out} is inside the repository; these files are "
                         "hundreds of MB and must not be committed: write them elsewhere")
    if args.outliers and args.no_onnx:
        raise SystemExit("make_clip: --outliers plants its channels in the torch model; --no-onnx draws "
                         "the weights with numpy and does not take it")
    if args.preset in NUMPY_ONLY and not args.no_onnx:
        raise SystemExit(f"make_clip: --preset {args.preset} is written with --no-onnx only: its torch "
                         "model, state dict and exports would need several times its 10 GB in memory")

    t0 = time.time()
    torch.manual_seed(args.seed)
    cfg = preset_config(args.preset)
    os.makedirs(out, exist_ok=True)
    copy_tokenizer(os.path.normpath(args.tokenizer), out)

    if args.no_onnx:
        check_hf_shapes()
        clip.write_config(out, cfg)
        clip.write_preprocessor_config(out, cfg.vision_config.image_size, cfg.vision_config.image_size)
        st = os.path.join(out, "model.safetensors")
        params = write_random_safetensors(st, cfg, args.seed, {
            "format": "pt",
            "note": f"random weights ({args.preset} architecture, seed {args.seed}, numpy) for speed "
                    "measurements only; outputs mean nothing",
        })
        print(f"make_clip: wrote {out} ({args.preset}: {params / 1e6:.1f} M parameters, random, seed "
              f"{args.seed}; model.safetensors {mib(st)}; no onnx/) in {time.time() - t0:.0f} s, peak "
              f"memory {peak_gb():.2f} GB; weights are random: for speed measurements only")
        return

    model = clip.CLIP(cfg).init_random(args.seed).eval()
    if args.outliers:
        plant_outliers(model, args.outliers)
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
