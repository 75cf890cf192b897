#!/usr/bin/python3
"""Writes the dense-readout goldens of testdata/tinysiglip: the patch rows of the vision
tower read out three ways (ClearCLIP, NACLIP, MaskCLIP) besides the raw last_hidden_state,
computed in float64 torch from the tiny model's weights (config.json, model.safetensors)
through scripts/pysiglip (a transcription of transformers' SiglipVisionModel), independently
of the Go code. The definitions are the same as testdata/tinyclip/make_readout_golden.py's
(transcribed there from ClearCLIP's and NACLIP's published code), written here for SigLIP's
layout: no class token, and last_hidden_state after post_layernorm.

Run from anywhere (needs torch and numpy; /usr/bin/python3 on the dev machine):

    /usr/bin/python3 testdata/tinysiglip/make_readout_golden.py

It reads config.json, model.safetensors and golden/vision_pixel_values.npy ([3, 3, 32, 32])
and writes only the files below (generate.py is not run). The output is deterministic.

Definitions (layer = the last encoder layer L-1, x = its input, [B, S=P, d], every row a
patch of the 4x4 grid, row-major; h = layer_norm1(x); q, k, v = q_proj(h), k_proj(h),
v_proj(h) with biases; per head (d_h = d / heads) o = A v, heads concatenated;
hidden = post_layernorm(out_proj(o)), with NO residual and NO MLP):

  raw        last_hidden_state of the normal tower (no readout; after post_layernorm)
  clearclip  A = softmax(q qᵀ d_h^-½) over all P patches
  naclip     A = softmax(k kᵀ d_h^-½ + G), G[(i,j),(k,l)] = exp(-((i-k)² + (j-l)²) / (2σ²)),
             σ = 5, over the 4x4 patch grid (patch r = i*W + j; no class row or column)
  maskclip   A = identity, so o = v

post_layernorm is applied because SigLIP's last_hidden_state (the rows a readout stands in
for) is after it; the engine takes any such rows to the joint space through the pooling
head's value path, patch_embeds = pysiglip's SigLIP.patch_embeds (the head on each patch
alone: o = out_proj(v_proj(row)), o + mlp(layernorm(o))), written here for every kind too.

Files (float64, '<f8', except the pixels):
  golden/readout_pixel_values.npy          [3, 3, 32, 32] float32, the input (a copy of
                                                          vision_pixel_values.npy)
  golden/readout_layer_input.npy           [3, 16, 24]  x, the input of the last layer
  golden/readout_<kind>_hidden.npy         [3, 16, 24]  post_layernorm(out_proj output)
                                                        (clearclip, naclip, maskclip)
  golden/readout_<kind>_patch_embeds.npy   [3, 16, 24]  raw, clearclip, naclip, maskclip
  golden/readout_naclip_bias.npy           [16, 16]     G
"""

import copy
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from pysiglip import siglip  # noqa: E402

SIGMA = 5.0


def load_model():
    """The tiny SigLIP from config.json and model.safetensors (float32)."""
    with open(os.path.join(HERE, "config.json")) as f:
        c = json.load(f)
    keep = lambda cls, d: cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
    cfg = siglip.SiglipConfig(text_config=keep(siglip.TextConfig, c["text_config"]),
                              vision_config=keep(siglip.VisionConfig, c["vision_config"]))
    model = siglip.SigLIP(cfg)
    model.load_hf_state_dict(siglip.read_safetensors(os.path.join(HERE, "model.safetensors"))[0])
    return model.eval()


def naclip_bias(gh, gw, sigma):
    """G [P, P] from the definition (float64); no class token."""
    i, j = torch.meshgrid(torch.arange(gh, dtype=torch.float64),
                          torch.arange(gw, dtype=torch.float64), indexing="ij")
    i, j = i.reshape(-1), j.reshape(-1)  # patch r = i*W + j
    d2 = (i[:, None] - i[None, :]) ** 2 + (j[:, None] - j[None, :]) ** 2
    return torch.exp(-d2 / (2 * sigma ** 2))


def naclip_bias_published(gh, gw, sigma):
    """G as NACLIP's gaussian_window + get_attention_addition build it (in float64),
    without the class token's zero row and column."""
    c = 1 / (sigma * math.sqrt(2))
    ks = [torch.linspace(-(n - 1) * c, (n - 1) * c, 2 * n - 1, dtype=torch.float64) for n in (gh, gw)]
    window = torch.exp(-(torch.stack(torch.meshgrid(*ks, indexing="ij")) ** 2).sum(0))
    m = torch.einsum("ij,kl->ijkl", torch.eye(gh, dtype=torch.float64), torch.eye(gw, dtype=torch.float64))
    m = m.permute(0, 3, 1, 2).contiguous()
    out = F.conv2d(m.view(-1, gh, gw).unsqueeze(1), window[None, None], padding="same").squeeze(1)
    return out.view(gh * gw, gh * gw)


def attention_probs(attn, h, kind, bias=None):
    """A [B, heads, S, S] of the readout."""
    b, s, d = h.shape
    heads = attn.heads
    split = lambda t: t.view(b, s, heads, d // heads).transpose(1, 2)  # [B, H, S, d_h]
    scale = (d // heads) ** -0.5
    if kind == "clearclip":
        q = split(attn.q_proj(h))
        return F.softmax(q @ q.transpose(-1, -2) * scale, dim=-1)
    if kind == "naclip":
        k = split(attn.k_proj(h))
        return F.softmax(k @ k.transpose(-1, -2) * scale + bias, dim=-1)
    if kind == "maskclip":
        mask = torch.full((s, s), float("-inf"), dtype=h.dtype).fill_diagonal_(0)
        return F.softmax(mask, dim=-1).expand(b, heads, s, s)
    raise ValueError(kind)


def attention_out(layer, x, kind, bias=None):
    """out_proj(A v) on layer_norm1(x): no residual, no MLP. -> ([B, S, d], A)."""
    attn = layer.self_attn
    h = layer.layer_norm1(x)
    b, s, d = h.shape
    a = attention_probs(attn, h, kind, bias)
    v = attn.v_proj(h).view(b, s, attn.heads, d // attn.heads).transpose(1, 2)
    return attn.out_proj((a @ v).transpose(1, 2).reshape(b, s, d)), a


def layer_own_probs(attn, h):
    """The attention probabilities pysiglip's SiglipAttention computes (its torch.softmax call)."""
    seen, softmax = [], torch.softmax

    def recording(*a, **k):
        seen.append(softmax(*a, **k))
        return seen[-1]

    torch.softmax = recording
    try:
        out = attn(h)
    finally:
        torch.softmax = softmax
    return seen[0], out


def save(name, a, dtype="<f8"):
    a = np.ascontiguousarray(a.detach().numpy(), dtype=dtype)
    np.save(os.path.join(GOLDEN, name + ".npy"), a)
    print(f"  golden/{name}.npy  {list(a.shape)}  {a.dtype.str}")


def main():
    model32 = load_model()
    model = copy.deepcopy(model32).double()
    vm = model.vision_model
    grid = vm.config.grid
    px = torch.from_numpy(np.load(os.path.join(GOLDEN, "vision_pixel_values.npy")))
    assert px.dtype == torch.float32 and list(px.shape) == [3, 3, 32, 32], (px.dtype, px.shape)

    with torch.no_grad():
        # x, the input of the last layer.
        x = vm.embeddings(px.double())
        for layer in vm.encoder.layers[:-1]:
            x = layer(x)
        last = vm.encoder.layers[-1]
        post = vm.post_layernorm
        lhs, _ = model.encode_image(px.double())
        err = (post(last(x)) - lhs).abs().max().item()
        assert err < 1e-12, f"the layer input does not give last_hidden_state: {err}"
        print(f"check post_layernorm(last layer(x)) vs last_hidden_state (float64): max |diff| {err:.1e}")

        G = naclip_bias(grid, grid, SIGMA)
        err = (G - naclip_bias_published(grid, grid, SIGMA)).abs().max().item()
        assert err < 1e-14, f"G differs from NACLIP's construction by {err}"
        print(f"check G == NACLIP gaussian_window/get_attention_addition (float64): max |diff| {err:.1e}")

        out = {"raw": (None, model.patch_embeds(lhs))}
        for kind in ("clearclip", "naclip", "maskclip"):
            o, _ = attention_out(last, x, kind, G)
            hidden = post(o)
            out[kind] = (hidden, model.patch_embeds(hidden))

        # Check 1: raw == the float32 pysiglip model run normally, and the committed
        # golden of generate.py.
        lhs32, _ = model32.encode_image(px)
        err = (lhs - lhs32.double()).abs().max().item()
        assert err < 1e-5, f"last_hidden_state differs from float32 pysiglip by {err}"
        gold = torch.from_numpy(np.load(os.path.join(GOLDEN, "vision_last_hidden_state.npy"))).double()
        errg = (lhs - gold).abs().max().item()
        assert errg < 1e-5, f"last_hidden_state differs from golden/vision_last_hidden_state by {errg}"
        print(f"check raw last_hidden_state vs float32 pysiglip: max |diff| {err:.2e}, "
              f"vs golden/vision_last_hidden_state: {errg:.2e} (< 1e-5)")
        # patch_embeds of a readout's rows is the pooling head run on each row alone.
        siglip.check_patch_embeds(model, out["clearclip"][0], atol=1e-12)

        # Check 2: with k_proj := q_proj, ClearCLIP's probabilities and output are the
        # layer's own attention's.
        qk = copy.deepcopy(last)
        qk.self_attn.k_proj.load_state_dict(qk.self_attn.q_proj.state_dict())
        h = qk.layer_norm1(x)
        own_p, own_out = layer_own_probs(qk.self_attn, h)
        o, p = attention_out(qk, x, "clearclip")
        err_p = (p - own_p).abs().max().item()
        err_o = (o - own_out).abs().max().item()
        assert err_p < 1e-12 and err_o < 1e-12, f"clearclip vs layer attention: {err_p}, {err_o}"
        print(f"check clearclip probs vs layer's own with k_proj := q_proj: max |diff| probs "
              f"{err_p:.1e}, out_proj output {err_o:.1e}")

        # Check 3: MaskCLIP (identity attention) == post_layernorm(out_proj(v_proj(layer_norm1(x)))).
        a = last.self_attn
        err = (out["maskclip"][0] - post(a.out_proj(a.v_proj(last.layer_norm1(x))))).abs().max().item()
        assert err < 1e-12, f"maskclip hidden differs from post_layernorm(out_proj(v_proj(ln1(x)))) by {err}"
        print(f"check maskclip hidden vs post_layernorm(out_proj(v_proj(layer_norm1(x)))): max |diff| {err:.1e}")

        # Check 4: NACLIP with G = 0 is ClearCLIP with q := k.
        kk = copy.deepcopy(last)
        kk.self_attn.q_proj.load_state_dict(kk.self_attn.k_proj.state_dict())
        err = (attention_out(last, x, "naclip", torch.zeros_like(G))[0]
               - attention_out(kk, x, "clearclip")[0]).abs().max().item()
        assert err < 1e-12, f"naclip with G = 0 differs from clearclip with q := k by {err}"
        print(f"check naclip with G = 0 vs clearclip with q_proj := k_proj: max |diff| {err:.1e}")

    print("writing:")
    save("readout_pixel_values", px, "<f4")
    save("readout_layer_input", x)
    for kind, (hidden, emb) in out.items():
        if hidden is not None:
            save(f"readout_{kind}_hidden", hidden)
        save(f"readout_{kind}_patch_embeds", emb)
    save("readout_naclip_bias", G)


if __name__ == "__main__":
    main()
