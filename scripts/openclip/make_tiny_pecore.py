#!/usr/bin/python3
"""Writes testdata/tinypecore and testdata/tinypecore-nocls: tiny random-weight
PE-Core models (Meta's Perception Encoder) in OpenCLIP's layout, with the
tensor names and config keys OpenCLIP gives its PE-Core-* configs
(CustomTextCLIP: the timm tower under visual.trunk., the CLIP text tower
under text.), and goldens from an independent float64 transcription of the
forward OpenCLIP and timm compute for them:

- vision (timm's Eva as vit_pe_core_* builds it, OpenCLIP's TimmModel with
  timm_pool "map" and timm_proj null): patch Conv without bias, class token
  (none when class_token is false, as PE-Core-bigG), absolute position
  table, norm_pre, blocks whose q and k get 2-D RoPE on the patch rows
  (RotaryEmbeddingCat: bands 1/10000^(i/(d_h/4)), grid "xy" so the first
  half of each head turns with the column and the second with the row, the
  grid offset and ref_feat_shape scaling, interleaved pairs; the class
  token is not rotated), norm, the attention-pooling head
  (AttentionPoolLatent: a latent query through q, k and v from kv, its
  own heads, proj, then y + mlp(norm(y))), and the head Linear (with bias);
  a patch's joint-space vector is its row through the trunk's norm, the
  pool's value path and the head; the readouts (clearclip, naclip,
  maskclip, pearl, the last from scripts/pyclip/pearl_reference.py)
  recompute the last block from its input with q and k turned by the
  block's RoPE, then take the same path;
- text: OpenCLIP's TextTransformer (causal mask, argmax pooling, no
  projection bias), as make_tiny.py transcribes it.

The vision sizes come from timm_model_kwargs, which OpenCLIP forwards to
timm.create_model over the named model's own arguments.

Run: /usr/bin/python3 scripts/openclip/make_tiny_pecore.py   (torch 1.13, numpy, PIL)
"""
import json, os, shutil, sys
import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny as mt  # noqa: E402  (ln, gelu, block, tokenize, write_safetensors)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyclip"))
import pearl_reference as pearl  # noqa: E402  (pearl_probs: PEARL from the paper's equations)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EMB = os.path.join(ROOT, "models", "embedded", "model")

EMBED, PATCH, VW, VL, VH, POOLH = 24, 8, 32, 2, 2, 4
CTX, VOCAB, TW, TH, TL = 16, 594, 32, 2, 2
MLP = 4.0

# name: (image size, ref_feat_shape, class token, rope grid offset)
VARIANTS = {
    "tinypecore": (32, 4, True, 1.0),        # the grid is the reference grid (PE-Core T, S, B, L)
    "tinypecore-nocls": (48, 4, False, 0.0),  # no class token, offset 0 (PE-Core bigG); grid 6 scaled to 4
}


def config(size, ref, cls, offset):
    kw = {"img_size": size, "patch_size": PATCH, "embed_dim": VW, "depth": VL, "num_heads": VH,
          "ref_feat_shape": [ref, ref], "attn_pool_num_heads": POOLH}
    if not cls:
        kw["class_token"] = False
    kw["rope_grid_offset"] = offset
    return {
        "model_cfg": {
            "embed_dim": EMBED,
            "vision_cfg": {"image_size": size, "timm_model_name": "vit_pe_core_tiny_patch16_384",
                           "timm_model_pretrained": False, "timm_pool": "map", "timm_proj": None,
                           "timm_model_kwargs": kw},
            "text_cfg": {"context_length": CTX, "vocab_size": VOCAB, "width": TW, "heads": TH, "layers": TL},
            "custom_text": True,
        },
        "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bilinear", "resize_mode": "squash"},
    }


def tensors(g, size, cls):
    def rnd(*shape, scale=0.2):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale

    grid = size // PATCH
    t = {}
    v = "visual.trunk."
    t[v + "patch_embed.proj.weight"] = rnd(VW, 3, PATCH, PATCH, scale=0.1)
    if cls:
        t[v + "cls_token"] = rnd(1, 1, VW)
    t[v + "pos_embed"] = rnd(1, grid * grid + (1 if cls else 0), VW)
    for n in ["norm_pre", "norm", "attn_pool.norm"]:
        t[v + n + ".weight"] = 1 + rnd(VW, scale=0.1)
        t[v + n + ".bias"] = rnd(VW, scale=0.1)
    inner = int(VW * MLP)
    for i in range(VL):
        b = f"{v}blocks.{i}."
        for n in ["norm1", "norm2"]:
            t[b + n + ".weight"] = 1 + rnd(VW, scale=0.1)
            t[b + n + ".bias"] = rnd(VW, scale=0.1)
        t[b + "attn.qkv.weight"] = rnd(3 * VW, VW)
        t[b + "attn.qkv.bias"] = rnd(3 * VW, scale=0.1)
        t[b + "attn.proj.weight"] = rnd(VW, VW)
        t[b + "attn.proj.bias"] = rnd(VW, scale=0.1)
        t[b + "mlp.fc1.weight"] = rnd(inner, VW)
        t[b + "mlp.fc1.bias"] = rnd(inner, scale=0.1)
        t[b + "mlp.fc2.weight"] = rnd(VW, inner, scale=0.1)
        t[b + "mlp.fc2.bias"] = rnd(VW, scale=0.1)
    p = v + "attn_pool."
    t[p + "latent"] = rnd(1, 1, VW, scale=0.5)
    t[p + "q.weight"] = rnd(VW, VW)
    t[p + "q.bias"] = rnd(VW, scale=0.1)
    t[p + "kv.weight"] = rnd(2 * VW, VW)
    t[p + "kv.bias"] = rnd(2 * VW, scale=0.1)
    t[p + "proj.weight"] = rnd(VW, VW)
    t[p + "proj.bias"] = rnd(VW, scale=0.1)
    t[p + "mlp.fc1.weight"] = rnd(inner, VW)
    t[p + "mlp.fc1.bias"] = rnd(inner, scale=0.1)
    t[p + "mlp.fc2.weight"] = rnd(VW, inner, scale=0.1)
    t[p + "mlp.fc2.bias"] = rnd(VW, scale=0.1)
    t[v + "head.weight"] = rnd(EMBED, VW)
    t[v + "head.bias"] = rnd(EMBED, scale=0.1)

    t["text.token_embedding.weight"] = rnd(VOCAB, TW)
    t["text.positional_embedding"] = rnd(CTX, TW)
    t["text.ln_final.weight"] = 1 + rnd(TW, scale=0.1)
    t["text.ln_final.bias"] = rnd(TW, scale=0.1)
    inner = int(TW * MLP)
    for i in range(TL):
        b = f"text.transformer.resblocks.{i}."
        for n in ["ln_1", "ln_2"]:
            t[b + n + ".weight"] = 1 + rnd(TW, scale=0.1)
            t[b + n + ".bias"] = rnd(TW, scale=0.1)
        t[b + "attn.in_proj_weight"] = rnd(3 * TW, TW)
        t[b + "attn.in_proj_bias"] = rnd(3 * TW, scale=0.1)
        t[b + "attn.out_proj.weight"] = rnd(TW, TW)
        t[b + "attn.out_proj.bias"] = rnd(TW, scale=0.1)
        t[b + "mlp.c_fc.weight"] = rnd(inner, TW)
        t[b + "mlp.c_fc.bias"] = rnd(inner, scale=0.1)
        t[b + "mlp.c_proj.weight"] = rnd(TW, inner, scale=0.1)
        t[b + "mlp.c_proj.bias"] = rnd(TW, scale=0.1)
    t["text.text_projection"] = rnd(TW, EMBED)
    t["logit_scale"] = torch.tensor(np.log(1 / 0.07), dtype=torch.float64)
    return {k: x.float() for k, x in t.items()}


# --- the vision forward, transcribed from timm's Eva (float64) ---

def rope_tables(grid, ref, offset, hd):
    """RotaryEmbeddingCat(in_pixels=False, grid_indexing='xy'): sin, cos [grid², hd]."""
    nb = hd // 4
    bands = 1.0 / (10000.0 ** (np.arange(nb, dtype=np.float64) / nb))
    t = (np.arange(grid, dtype=np.float64) + offset) / grid * ref  # x and y alike (square)
    rows = []
    for i in range(grid):          # row (y)
        for j in range(grid):      # column (x)
            rows.append(np.concatenate([t[j] * bands, t[i] * bands]))
    pos = np.repeat(np.array(rows), 2, axis=-1)  # interleaved pairs
    return torch.tensor(np.sin(pos)), torch.tensor(np.cos(pos))


def rot(x):
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def pe_block(x, P, b, heads, npt, sin, cos):
    B, N, D = x.shape
    hd = D // heads
    h = mt.ln(x, P[b + "norm1.weight"], P[b + "norm1.bias"])
    qkv = h @ P[b + "attn.qkv.weight"].T + P[b + "attn.qkv.bias"]
    q, k, v = qkv.reshape(B, N, 3, heads, hd).permute(2, 0, 3, 1, 4)
    q = torch.cat([q[:, :, :npt], q[:, :, npt:] * cos + rot(q[:, :, npt:]) * sin], 2)
    k = torch.cat([k[:, :, :npt], k[:, :, npt:] * cos + rot(k[:, :, npt:]) * sin], 2)
    a = torch.softmax((q * hd ** -0.5) @ k.transpose(-1, -2), -1) @ v
    a = a.transpose(1, 2).reshape(B, N, D)
    x = x + a @ P[b + "attn.proj.weight"].T + P[b + "attn.proj.bias"]
    h = mt.ln(x, P[b + "norm2.weight"], P[b + "norm2.bias"])
    h = mt.gelu(h @ P[b + "mlp.fc1.weight"].T + P[b + "mlp.fc1.bias"])
    return x + h @ P[b + "mlp.fc2.weight"].T + P[b + "mlp.fc2.bias"]


def pool_tail(y, P, p):
    """AttentionPoolLatent after the attention: proj, then y + mlp(norm(y))."""
    y = y @ P[p + "proj.weight"].T + P[p + "proj.bias"]
    h = mt.ln(y, P[p + "norm.weight"], P[p + "norm.bias"])
    h = mt.gelu(h @ P[p + "mlp.fc1.weight"].T + P[p + "mlp.fc1.bias"])
    return y + h @ P[p + "mlp.fc2.weight"].T + P[p + "mlp.fc2.bias"]


def attn_pool(x, P, p):
    B, N, D = x.shape
    hd = D // POOLH
    q = (P[p + "latent"] @ P[p + "q.weight"].T + P[p + "q.bias"]).reshape(1, 1, POOLH, hd).transpose(1, 2)
    kv = (x @ P[p + "kv.weight"].T + P[p + "kv.bias"]).reshape(B, N, 2, POOLH, hd).permute(2, 0, 3, 1, 4)
    k, v = kv[0], kv[1]
    a = torch.softmax((q * hd ** -0.5) @ k.transpose(-1, -2), -1) @ v   # [B, heads, 1, hd]
    a = a.transpose(1, 2).reshape(B, 1, D)
    return pool_tail(a, P, p)[:, 0]


def encode_image(P, px, size, ref, cls, offset):
    v = "visual.trunk."
    grid = size // PATCH
    x = torch.nn.functional.conv2d(px, P[v + "patch_embed.proj.weight"], stride=PATCH)
    x = x.reshape(x.shape[0], VW, -1).transpose(1, 2)
    if cls:
        x = torch.cat([P[v + "cls_token"].expand(x.shape[0], 1, -1), x], 1)
    x = x + P[v + "pos_embed"]
    x = mt.ln(x, P[v + "norm_pre.weight"], P[v + "norm_pre.bias"])
    sin, cos = rope_tables(grid, ref, offset, VW // VH)
    for i in range(VL):
        if i == VL - 1:
            last_in = x
        x = pe_block(x, P, f"{v}blocks.{i}.", VH, 1 if cls else 0, sin, cos)
    hidden = x
    pooled = attn_pool(mt.ln(x, P[v + "norm.weight"], P[v + "norm.bias"]), P, v + "attn_pool.")
    emb = pooled @ P[v + "head.weight"].T + P[v + "head.bias"]
    npt = 1 if cls else 0
    readouts = {k: joint_patches(P, readout(P, last_in, k, npt, grid, sin, cos), npt)
                for k in ["clearclip", "naclip", "maskclip", "pearl"]}
    return hidden, emb, joint_patches(P, hidden, npt), readouts


def joint_patches(P, hidden, npt):
    """A patch's joint-space vector: the trunk's norm, then the pooling
    head's value path on that row alone (one key: the softmax is 1), then
    the head."""
    v = "visual.trunk."
    p = v + "attn_pool."
    rows = mt.ln(hidden, P[v + "norm.weight"], P[v + "norm.bias"])[:, npt:]
    val = rows @ P[p + "kv.weight"][VW:].T + P[p + "kv.bias"][VW:]
    return pool_tail(val, P, p) @ P[v + "head.weight"].T + P[v + "head.bias"]


def naclip_bias(npt, grid, sigma=5.0):
    n = npt + grid * grid
    g = torch.zeros(n, n, dtype=torch.float64)
    for a in range(grid * grid):
        for b in range(grid * grid):
            d2 = (a // grid - b // grid) ** 2 + (a % grid - b % grid) ** 2
            g[npt + a, npt + b] = np.exp(-d2 / (2 * sigma * sigma))
    return g


def readout(P, x, kind, npt, grid, sin, cos):
    """The last block recomputed from its input x as readout kind, q and k
    turned by the block's own RoPE (the class token's not): proj of the
    attention output, no residual, no MLP."""
    b = f"visual.trunk.blocks.{VL - 1}."
    B, N, D = x.shape
    hd = D // VH
    h = mt.ln(x, P[b + "norm1.weight"], P[b + "norm1.bias"])
    qkv = h @ P[b + "attn.qkv.weight"].T + P[b + "attn.qkv.bias"]
    q, k, v = qkv.reshape(B, N, 3, VH, hd).permute(2, 0, 3, 1, 4)
    q = torch.cat([q[:, :, :npt], q[:, :, npt:] * cos + rot(q[:, :, npt:]) * sin], 2)
    k = torch.cat([k[:, :, :npt], k[:, :, npt:] * cos + rot(k[:, :, npt:]) * sin], 2)
    s = hd ** -0.5
    if kind == "maskclip":
        o = v
    elif kind == "clearclip":
        o = torch.softmax(q @ q.transpose(-1, -2) * s, -1) @ v
    elif kind == "naclip":
        o = torch.softmax(k @ k.transpose(-1, -2) * s + naclip_bias(npt, grid), -1) @ v
    else:
        a, _ = pearl.pearl_probs(q, k, npt)
        o = a @ v
    o = o.transpose(1, 2).reshape(B, N, D)
    return o @ P[b + "attn.proj.weight"].T + P[b + "attn.proj.bias"]


def encode_text(P, ids):
    x = P["text.token_embedding.weight"][ids] + P["text.positional_embedding"][: ids.shape[1]]
    mask = torch.full((ids.shape[1],) * 2, float("-inf"), dtype=torch.float64).triu(1)
    for i in range(TL):
        x = mt.block(x, P, f"text.transformer.resblocks.{i}.", TH, mask)
    x = mt.ln(x, P["text.ln_final.weight"], P["text.ln_final.bias"])
    pooled = x[torch.arange(x.shape[0]), ids.argmax(dim=-1)]
    return x, pooled @ P["text.text_projection"]


def make(name, size, ref, cls, offset, seed):
    out = os.path.join(ROOT, "testdata", name)
    gd = os.path.join(out, "golden")
    os.makedirs(gd, exist_ok=True)
    cfg = config(size, ref, cls, offset)
    with open(os.path.join(out, "open_clip_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    ts = tensors(torch.Generator().manual_seed(seed), size, cls)
    mt.write_safetensors(os.path.join(out, "open_clip_model.safetensors"), ts)
    for n in ["vocab.json", "merges.txt", "tokenizer_config.json"]:
        shutil.copy(os.path.join(EMB, n), os.path.join(out, n))
    P = {k: x.double() for k, x in ts.items()}

    # OpenCLIP's PE transform: Resize((size, size)) bilinear (Pillow's, on
    # a PIL image), ToTensor, Normalize(0.5, 0.5).
    rng = np.random.default_rng(seed)
    px = []
    for fname, (w, h) in [("square.png", (size, size)), ("wide.png", (48, 40)), ("odd.png", (29, 44))]:
        a = (rng.random((h, w, 3)) * 255).astype(np.uint8)
        Image.fromarray(a).save(os.path.join(gd, fname))
        im = Image.fromarray(a).resize((size, size), Image.BILINEAR)
        a = np.asarray(im, dtype=np.float64) / 255.0
        px.append(((a - 0.5) / 0.5).transpose(2, 0, 1))
    px = torch.tensor(np.stack(px))

    prompts = ["a photo of a cat", "Two  dogs, running!", "salt &amp; pepper"]
    vocab = json.load(open(os.path.join(out, "vocab.json")))
    merges = [m for m in open(os.path.join(out, "merges.txt")).read().split("\n")[1:] if m.strip()]
    ids = mt.tokenize(prompts, vocab, merges)

    hidden, img, patch, readouts = encode_image(P, px, size, ref, cls, offset)
    tok, txt = encode_text(P, torch.tensor(ids))
    imn = img / img.norm(dim=-1, keepdim=True)
    txn = txt / txt.norm(dim=-1, keepdim=True)
    logits = P["logit_scale"].exp() * imn @ txn.T

    f32 = lambda x: x.numpy().astype(np.float32)
    np.save(os.path.join(gd, "pixel_values.npy"), f32(px))
    np.save(os.path.join(gd, "input_ids.npy"), ids)
    np.save(os.path.join(gd, "image_embeds.npy"), f32(img))
    np.save(os.path.join(gd, "text_embeds.npy"), f32(txt))
    np.save(os.path.join(gd, "token_states.npy"), f32(tok))
    np.save(os.path.join(gd, "last_hidden_state.npy"), f32(hidden))
    np.save(os.path.join(gd, "patch_embeds.npy"), f32(patch))
    for k, r in readouts.items():
        np.save(os.path.join(gd, f"readout_{k}_patch_embeds.npy"), f32(r))
    np.save(os.path.join(gd, "logits_per_image.npy"), f32(logits))
    with open(os.path.join(gd, "prompts.json"), "w") as f:
        json.dump(prompts, f)
    print("wrote", out, "ids", ids.tolist())


def main():
    for i, (name, (size, ref, cls, offset)) in enumerate(VARIANTS.items()):
        make(name, size, ref, cls, offset, 20261207 + i)


if __name__ == "__main__":
    main()
