#!/usr/bin/python3
"""PEARL's readout (CVPR 2026, arXiv 2603.21528) in float64 torch, transcribed from the
paper's equations (not from any code), and the goldens of testdata/tinyclip it gives.

Run from anywhere (needs torch and numpy; /usr/bin/python3 on the dev machine):

    /usr/bin/python3 scripts/pyclip/pearl_reference.py

It reads testdata/tinyclip (config.json, model.safetensors, golden/vision_pixel_values.npy,
[3, 3, 32, 32]) through testdata/tinyclip/make_readout_golden.py's loaders, and
testdata/tinymetaclip2 (config.json, model.safetensors, golden/embed_pixel_values.npy,
[2, 3, 32, 32]; MetaCLIP 2's vision tower is CLIP's), and writes only the three files below.
The output is deterministic.

The readout changes only the last encoder layer, as ClearCLIP's does: h = layer_norm1(x),
x the layer's input [B, N, d] (N = 1 class token + P patches); no residual, no MLP; per head
(d_h = d / heads, s = d_h^-1/2), with q, k, v = q_proj(h), k_proj(h), v_proj(h) [N, d_h]:

  w_i   = ||q_i|| for patch tokens, 0 for the class token;  w = w / (sum(w) + EPS_W)
  q_bar = sum_i w_i q_i,  k_bar = sum_i w_i k_i;  q_c = q - q_bar,  k_c = k - k_bar
  M     = k_c^T q_c                                     [d_h, d_h], over all N rows
  X_0   = M / (||M||_F + EPS_M)
  X     <- 1.5 X - 0.5 X X^T X, NS_STEPS times (the cubic Newton-Schulz iteration for the
           polar factor); R = X (the Procrustes rotation taking keys to queries)
  A     = softmax_keys( (q s)(k R)^T + GAMMA (k_c k_c^T) s )
  o     = A v, heads concatenated, then out_proj

then patch_embeds = L2-normalise(visual_projection(post_layernorm(hidden[:, 1:]))).

Files (float64, '<f8'):
  testdata/tinyclip/golden/readout_pearl_hidden.npy          [3, 17, 24]  out_proj output, all rows
  testdata/tinyclip/golden/readout_pearl_patch_embeds.npy    [3, 16, 16]
  testdata/tinymetaclip2/golden/readout_pearl_patch_embeds.npy  [2, 16, 16]
"""

import importlib.util
import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "testdata", "tinyclip")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

EPS_W = 1e-6     # added to the sum of the query norms
EPS_M = 1e-6     # added to M's Frobenius norm
NS_STEPS = 5     # Newton-Schulz steps (the authors' default)
GAMMA = 0.08     # weight of the centred key-key term


def newton_schulz(m, steps=NS_STEPS):
    """The polar factor of m [..., n, n] by the cubic Newton-Schulz iteration."""
    fro = torch.sqrt((m * m).sum(dim=(-2, -1), keepdim=True))
    x = m / (fro + EPS_M)
    for _ in range(steps):
        x = 1.5 * x - 0.5 * x @ x.transpose(-1, -2) @ x
    return x


def pearl_probs(q, k, cls=1):
    """A [B, H, N, N] from q, k [B, H, N, d_h] (unscaled), cls class rows first."""
    scale = q.shape[-1] ** -0.5
    w = q.norm(dim=-1, keepdim=True)                  # [B, H, N, 1]
    w[:, :, :cls] = 0
    w = w / (w.sum(dim=-2, keepdim=True) + EPS_W)
    qc = q - (w * q).sum(dim=-2, keepdim=True)
    kc = k - (w * k).sum(dim=-2, keepdim=True)
    r = newton_schulz(kc.transpose(-1, -2) @ qc)     # [B, H, d_h, d_h]
    logits = (q * scale) @ (k @ r).transpose(-1, -2) + GAMMA * (kc @ kc.transpose(-1, -2)) * scale
    return torch.softmax(logits, dim=-1), r


def pearl_readout(layer, x, cls=1):
    """out_proj(A v) on layer_norm1(x): no residual, no MLP. -> ([B, N, d], A, R)."""
    attn = layer.self_attn
    h = layer.layer_norm1(x)
    b, n, d = h.shape
    split = lambda t: t.view(b, n, attn.heads, d // attn.heads).transpose(1, 2)
    q, k, v = split(attn.q_proj(h)), split(attn.k_proj(h)), split(attn.v_proj(h))
    a, r = pearl_probs(q, k, cls)
    return attn.out_proj((a @ v).transpose(1, 2).reshape(b, n, d)), a, r


def tiny_module():
    spec = importlib.util.spec_from_file_location("tinyclip_readout", os.path.join(TINY, "make_readout_golden.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def checks(q_like):
    """Independent checks of the pieces, on random matrices (float64)."""
    g = torch.Generator().manual_seed(0)
    # Newton-Schulz converges to the SVD's polar factor U V^T given enough steps.
    m = torch.randn(6, 6, generator=g, dtype=torch.float64) + 3 * torch.eye(6, dtype=torch.float64)
    u, _, vt = torch.linalg.svd(m)
    err = (newton_schulz(m, 60) - u @ vt).abs().max().item()
    assert err < 1e-10, f"Newton-Schulz(60) vs SVD polar factor: {err}"
    print(f"check Newton-Schulz(60 steps) == U V^T of the SVD: max |diff| {err:.1e}")
    # The weights sum to 1 over the patches and are zero at the class token.
    q, k = q_like
    w = q.norm(dim=-1, keepdim=True)
    w[:, :, :1] = 0
    w = w / (w.sum(dim=-2, keepdim=True) + EPS_W)
    err = (w.sum(dim=-2) - 1).abs().max().item()
    assert err < 1e-6, f"weights sum {err}"
    print(f"check query-norm weights sum to 1 (within EPS_W): max |sum - 1| {err:.1e}")


def load_model(folder):
    """A tiny CLIP-layout model (CLIP or MetaCLIP 2: the same vision tower) from folder's
    config.json and model.safetensors, in float64."""
    from pyclip import clip
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    keep = lambda cls, d: cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
    cfg = clip.CLIPConfig(text_config=keep(clip.TextConfig, c["text_config"]),
                          vision_config=keep(clip.VisionConfig, c["vision_config"]),
                          projection_dim=c["projection_dim"],
                          logit_scale_init_value=c["logit_scale_init_value"])
    model = clip.CLIP(cfg)
    sd, _ = clip.read_safetensors(os.path.join(folder, "model.safetensors"))
    model.load_hf_state_dict(sd)
    return model.eval().double()


def metaclip2(tiny):
    """PEARL's patch_embeds of testdata/tinymetaclip2 on its golden embed_pixel_values."""
    folder = os.path.join(ROOT, "testdata", "tinymetaclip2")
    model = load_model(folder)
    vm = model.vision_model
    px = torch.from_numpy(np.load(os.path.join(folder, "golden", "embed_pixel_values.npy"))).double()
    with torch.no_grad():
        x = vm.pre_layrnorm(vm.embeddings(px))
        for layer in vm.encoder.layers[:-1]:
            x = layer(x)
        lhs, _ = model.encode_image(px)
        raw = np.load(os.path.join(folder, "golden", "readout_raw_patch_embeds.npy"))
        err = np.abs(tiny.patch_embeds(model, lhs).numpy() - raw).max()
        assert err < 1e-12, f"MetaCLIP 2 raw patch_embeds differ from generate.py's by {err}"
        hidden, _, _ = pearl_readout(vm.encoder.layers[-1], x)
        return tiny.patch_embeds(model, hidden)


def main():
    tiny = tiny_module()
    model = tiny.load_model().double()
    vm = model.vision_model
    px = torch.from_numpy(np.load(os.path.join(TINY, "golden", "vision_pixel_values.npy"))).double()
    with torch.no_grad():
        x = vm.pre_layrnorm(vm.embeddings(px))
        for layer in vm.encoder.layers[:-1]:
            x = layer(x)
        want_x = torch.from_numpy(np.load(os.path.join(TINY, "golden", "readout_layer_input.npy")))
        err = (x - want_x).abs().max().item()
        assert err < 1e-12, f"layer input differs from readout_layer_input.npy by {err}"
        last = vm.encoder.layers[-1]
        hidden, a, r = pearl_readout(last, x)
        b, n, d = x.shape
        heads = last.self_attn.heads
        h = last.layer_norm1(x)
        split = lambda t: t.view(b, n, heads, d // heads).transpose(1, 2)
        checks((split(last.self_attn.q_proj(h)), split(last.self_attn.k_proj(h))))
        orth = (r @ r.transpose(-1, -2) - torch.eye(r.shape[-1], dtype=torch.float64)).abs().max().item()
        print(f"R after {NS_STEPS} steps on the tiny model: max |R R^T - I| {orth:.3e} (not converged: the authors' default)")
        err = (a.sum(dim=-1) - 1).abs().max().item()
        assert err < 1e-12
        emb = tiny.patch_embeds(model, hidden)
    meta = metaclip2(tiny)
    print("writing:")
    for folder, name, t in (("tinyclip", "readout_pearl_hidden", hidden), ("tinyclip", "readout_pearl_patch_embeds", emb),
                            ("tinymetaclip2", "readout_pearl_patch_embeds", meta)):
        arr = np.ascontiguousarray(t.detach().numpy(), dtype="<f8")
        np.save(os.path.join(ROOT, "testdata", folder, "golden", name + ".npy"), arr)
        print(f"  testdata/{folder}/golden/{name}.npy  {list(arr.shape)}  {arr.dtype.str}")


if __name__ == "__main__":
    main()
