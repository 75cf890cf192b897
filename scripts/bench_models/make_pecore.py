#!/usr/bin/python3
"""make_pecore.py: a real-size PE-Core (Meta's Perception Encoder) with RANDOM
weights, in OpenCLIP's layout, for speed measurements.

What it makes: a folder that `condition` opens like a PE-Core checkpoint
downloaded from the hub (open_clip_config.json, open_clip_model.safetensors in
the tensor names OpenCLIP gives its PE-Core-* configs: the timm tower under
visual.trunk., the text tower under text.; the real CLIP tokenizer files),
with the ARCHITECTURE of OpenCLIP's PE-Core-<size> config and timm's
vit_pe_core_* tower, and weights drawn from a fixed seed. The weights are
random: the model is for measuring speed only; its embeddings mean nothing.
The graphs are built by `condition models build DIR` (or on first open).

Presets (open_clip's model_configs/PE-Core-*.json and timm's eva.py):

  b-16     PE-Core-B-16: vision 224 px, patch 16 (14x14 grid + class token), width
           768, 12 blocks, 12 heads, MLP 3072, RoPE ref grid 14, attention pool with
           8 heads; text width 1024, 24 layers, 16 heads, context 32; joint space 1024.
  l-14     PE-Core-L-14-336: vision 336 px, patch 14, width 1024, 24 blocks, 16 heads.
  t-16     PE-Core-T-16-384: vision 384 px, patch 16, width 192, 12 blocks, 3 heads;
           text 512 wide, 12 layers; joint space 512.

--text-layers N keeps the text tower's width and vocabulary and gives it N
layers (default: the preset's): the vision encoder's speed does not depend on
it, and a 2-layer text tower makes a B/16 folder of about 0.6 GB instead of
1.6 GB.

Tokenizer: the real CLIP vocab.json, merges.txt and tokenizer_config.json,
copied from the folder make_clip.py reads them from, or --tokenizer DIR.
Nothing this script writes belongs in the repository.

Usage: /usr/bin/python3 scripts/bench_models/make_pecore.py [--preset b-16] [--out DIR] [--text-layers N]
"""
import argparse, json, math, os, shutil, struct, tempfile
import numpy as np

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

PRESETS = {
    # embed, vision (size, patch, width, depth, heads, timm name), text (width, heads, layers, context)
    "b-16": (1024, (224, 16, 768, 12, 12, "vit_pe_core_base_patch16_224"), (1024, 16, 24, 32)),
    "l-14": (1024, (336, 14, 1024, 24, 16, "vit_pe_core_large_patch14_336"), (1024, 16, 24, 32)),
    "t-16": (512, (384, 16, 192, 12, 3, "vit_pe_core_tiny_patch16_384"), (512, 8, 12, 32)),
}
VOCAB = 49408


def shapes(embed, vision, text):
    size, patch, w, depth, _, _ = vision
    tw, _, tl, ctx = text
    grid = size // patch
    s = {}
    v = "visual.trunk."
    s[v + "patch_embed.proj.weight"] = (w, 3, patch, patch)
    s[v + "cls_token"] = (1, 1, w)
    s[v + "pos_embed"] = (1, 1 + grid * grid, w)
    for n in ["norm_pre", "norm", "attn_pool.norm"]:
        s[v + n + ".weight"] = (w,)
        s[v + n + ".bias"] = (w,)
    for i in range(depth):
        b = f"{v}blocks.{i}."
        for n in ["norm1", "norm2"]:
            s[b + n + ".weight"], s[b + n + ".bias"] = (w,), (w,)
        s[b + "attn.qkv.weight"], s[b + "attn.qkv.bias"] = (3 * w, w), (3 * w,)
        s[b + "attn.proj.weight"], s[b + "attn.proj.bias"] = (w, w), (w,)
        s[b + "mlp.fc1.weight"], s[b + "mlp.fc1.bias"] = (4 * w, w), (4 * w,)
        s[b + "mlp.fc2.weight"], s[b + "mlp.fc2.bias"] = (w, 4 * w), (w,)
    p = v + "attn_pool."
    s[p + "latent"] = (1, 1, w)
    s[p + "q.weight"], s[p + "q.bias"] = (w, w), (w,)
    s[p + "kv.weight"], s[p + "kv.bias"] = (2 * w, w), (2 * w,)
    s[p + "proj.weight"], s[p + "proj.bias"] = (w, w), (w,)
    s[p + "mlp.fc1.weight"], s[p + "mlp.fc1.bias"] = (4 * w, w), (4 * w,)
    s[p + "mlp.fc2.weight"], s[p + "mlp.fc2.bias"] = (w, 4 * w), (w,)
    s[v + "head.weight"], s[v + "head.bias"] = (embed, w), (embed,)
    s["text.token_embedding.weight"] = (VOCAB, tw)
    s["text.positional_embedding"] = (ctx, tw)
    s["text.ln_final.weight"], s["text.ln_final.bias"] = (tw,), (tw,)
    for i in range(tl):
        b = f"text.transformer.resblocks.{i}."
        for n in ["ln_1", "ln_2"]:
            s[b + n + ".weight"], s[b + n + ".bias"] = (tw,), (tw,)
        s[b + "attn.in_proj_weight"], s[b + "attn.in_proj_bias"] = (3 * tw, tw), (3 * tw,)
        s[b + "attn.out_proj.weight"], s[b + "attn.out_proj.bias"] = (tw, tw), (tw,)
        s[b + "mlp.c_fc.weight"], s[b + "mlp.c_fc.bias"] = (4 * tw, tw), (4 * tw,)
        s[b + "mlp.c_proj.weight"], s[b + "mlp.c_proj.bias"] = (tw, 4 * tw), (tw,)
    s["text.text_projection"] = (tw, embed)
    s["logit_scale"] = ()
    return s


def values(rng, name, shape, n):
    """n float32 values: normal / sqrt(fan_in) for weights, 1 + 0.1 normal for
    LayerNorm weights, 0.1 normal for biases, 0.2 normal for embeddings and tokens."""
    if name == "logit_scale":
        return np.full(n, math.log(1 / 0.07), np.float32)
    x = rng.standard_normal(n, dtype=np.float32)
    if ("norm" in name or "ln_" in name) and name.endswith("weight"):
        return x * np.float32(0.1) + np.float32(1)
    if name.endswith("bias"):
        return x * np.float32(0.1)
    if "embed" in name or name.endswith(("cls_token", "latent")):
        return x * np.float32(0.2)
    fan_in = shape[-1] if name != "text.text_projection" else shape[0]
    if len(shape) == 4:
        fan_in = int(np.prod(shape[1:]))
    return x * np.float32(1 / math.sqrt(fan_in))


def write(path, shp, seed, chunk=1 << 23):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(shp):
        nb = int(np.prod(shp[name], dtype=np.int64)) * 4
        header[name] = {"dtype": "F32", "shape": list(shp[name]), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    rng = np.random.default_rng(seed)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for name in sorted(shp):
                total = int(np.prod(shp[name], dtype=np.int64))
                for start in range(0, total, chunk):
                    values(rng, name, shp[name], min(chunk, total - start)).astype("<f4").tofile(f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return sum(int(np.prod(s, dtype=np.int64)) for s in shp.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="b-16", choices=sorted(PRESETS))
    ap.add_argument("--out", default="")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--text-layers", type=int, default=0)
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "..", "shared", "clip"))
    args = ap.parse_args()
    embed, vision, text = PRESETS[args.preset]
    if args.text_layers > 0:
        text = (text[0], text[1], args.text_layers, text[3])
    out = args.out or f"/tmp/condition-pecore-{args.preset}"
    os.makedirs(out, exist_ok=True)
    size, patch, w, depth, heads, timm = vision
    tw, th, tl, ctx = text
    cfg = {
        "model_cfg": {
            "embed_dim": embed,
            "vision_cfg": {"image_size": size, "timm_model_name": timm, "timm_model_pretrained": False,
                           "timm_pool": "map", "timm_proj": None},
            "text_cfg": {"context_length": ctx, "vocab_size": VOCAB, "width": tw, "heads": th, "layers": tl},
            "custom_text": True,
        },
        "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bilinear", "resize_mode": "squash"},
    }
    with open(os.path.join(out, "open_clip_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for n in ["vocab.json", "merges.txt", "tokenizer_config.json"]:
        shutil.copy(os.path.join(args.tokenizer, n), os.path.join(out, n))
    n = write(os.path.join(out, "open_clip_model.safetensors"), shapes(embed, vision, text), args.seed)
    print(f"wrote {out}: PE-Core {args.preset} ({timm}), {n / 1e6:.1f} M parameters, text {tl} layers")


if __name__ == "__main__":
    main()
