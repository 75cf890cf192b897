#!/usr/bin/python3
"""Writes the dense-readout goldens of testdata/tinyclip: the patch vectors of the vision
tower read out four ways (raw, ClearCLIP, NACLIP, MaskCLIP), computed in float64 torch from
the tiny model's weights (config.json, model.safetensors), independently of the Go code.

Run from anywhere (needs torch and numpy; /usr/bin/python3 on the dev machine):

    /usr/bin/python3 testdata/tinyclip/make_readout_golden.py

It reads config.json, model.safetensors and golden/vision_pixel_values.npy ([3, 3, 32, 32])
and writes only the files below (generate.py is not run). The output is deterministic.

Definitions (layer = the last encoder layer L-1, x = its input = hidden_states[-2],
[B, S=1+P, d]; h = layer_norm1(x); q, k, v = q_proj(h), k_proj(h), v_proj(h) with biases;
per head (d_h = d / heads) o = A v, heads concatenated; hidden = out_proj(o), with NO
residual and NO MLP):

  raw        last_hidden_state of the normal tower (no readout)
  clearclip  A = softmax(q qᵀ d_h^-½) over all S tokens (class token included)
  naclip     A = softmax(k kᵀ d_h^-½ + G), G[(i,j),(k,l)] = exp(-((i-k)² + (j-l)²) / (2σ²)),
             σ = 5, over the 4x4 patch grid (patch r = i*W + j at index 1+r), zero in the
             class token's row and column
  maskclip   A = identity, so o = v

then, for every kind, patch_embeds = L2-normalise(visual_projection(post_layernorm(
hidden[:, 1:]))).

Transcribed from the published code (fetched snapshots):
  ClearCLIP  github.com/mc-lan/ClearCLIP  open_clip/transformer.py, VisionTransformer.forward
             (ignore_residual=True: output = custom_attn(blk.attn, blk.ln_1(x)), no MLP,
             then ln_post and proj) and VisionTransformer.custom_attn, model_type 'ClearCLIP'
             (softmax(q qᵀ · scale)) and 'MaskCLIP' (softmax of a mask that is 0 on the
             diagonal and -inf elsewhere, i.e. identity attention).
  NACLIP     github.com/sinahmr/NACLIP  clip/model.py, VisionTransformer.forward with
             arch='reduced' (x = custom_attn(blk.attn, blk.ln_1(x)), no residual, no MLP),
             custom_attn with attn_strategy='naclip' (softmax(k kᵀ · scale + omega)),
             gaussian_window and get_attention_addition; naclip.py uses gaussian_std=5 and
             L2-normalises ln_post(x)[:, 1:] @ proj.
  The spec above agrees with both. Details: NACLIP's Gaussian is unnormalised (no 1/(2πσ²)),
  as here; NACLIP builds G by convolving one-hot grids with a (2H-1)x(2W-1) window built in
  float32 and casts it to the model dtype, while here G is computed from the formula in
  float64 (checked equal to the transcribed construction, in float64, below). The published
  code uses OpenAI's fused in_proj; the HF q_proj/k_proj/v_proj are its three chunks.

Files (float64, '<f8'):
  golden/readout_layer_input.npy           [3, 17, 24]  x, the input of the last layer
  golden/readout_<kind>_hidden.npy         [3, 17, 24]  out_proj output, all rows, before
                                                        post_layernorm (clearclip, naclip, maskclip)
  golden/readout_<kind>_patch_embeds.npy   [3, 16, 16]  raw, clearclip, naclip, maskclip
  golden/readout_naclip_bias.npy           [17, 17]     G
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

from pyclip import clip  # noqa: E402

SIGMA = 5.0


def load_model():
    """The tiny CLIP from config.json and model.safetensors (float32)."""
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
    return model.eval()


def naclip_bias(gh, gw, sigma):
    """G [1+P, 1+P] from the definition (float64)."""
    i, j = torch.meshgrid(torch.arange(gh, dtype=torch.float64),
                          torch.arange(gw, dtype=torch.float64), indexing="ij")
    i, j = i.reshape(-1), j.reshape(-1)  # patch r = i*W + j
    d2 = (i[:, None] - i[None, :]) ** 2 + (j[:, None] - j[None, :]) ** 2
    return F.pad(torch.exp(-d2 / (2 * sigma ** 2)), (1, 0, 1, 0))  # zero class row/column


def naclip_bias_published(gh, gw, sigma):
    """G as NACLIP's gaussian_window + get_attention_addition build it (in float64)."""
    c = 1 / (sigma * math.sqrt(2))
    ks = [torch.linspace(-(n - 1) * c, (n - 1) * c, 2 * n - 1, dtype=torch.float64) for n in (gh, gw)]
    window = torch.exp(-(torch.stack(torch.meshgrid(*ks, indexing="ij")) ** 2).sum(0))
    m = torch.einsum("ij,kl->ijkl", torch.eye(gh, dtype=torch.float64), torch.eye(gw, dtype=torch.float64))
    m = m.permute(0, 3, 1, 2).contiguous()
    out = F.conv2d(m.view(-1, gh, gw).unsqueeze(1), window[None, None], padding="same").squeeze(1)
    return F.pad(out.view(gh * gw, gh * gw), (1, 0, 1, 0))


def attention_probs(attn, h, kind, bias=None):
    """A [B, heads, S, S] of the readout (the published custom_attn's attn_weights)."""
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


def readout(layer, x, kind, bias=None):
    """out_proj(A v) on layer_norm1(x): no residual, no MLP. -> ([B, S, d], A)."""
    attn = layer.self_attn
    h = layer.layer_norm1(x)
    b, s, d = h.shape
    a = attention_probs(attn, h, kind, bias)
    v = attn.v_proj(h).view(b, s, attn.heads, d // attn.heads).transpose(1, 2)
    return attn.out_proj((a @ v).transpose(1, 2).reshape(b, s, d)), a


def patch_embeds(model, hidden):
    e = model.visual_projection(model.vision_model.post_layernorm(hidden[:, 1:]))
    return e / e.norm(dim=-1, keepdim=True)


def layer_own_probs(attn, h):
    """The attention probabilities pyclip's CLIPAttention computes (its torch.softmax call)."""
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


def save(name, a):
    a = np.ascontiguousarray(a.detach().numpy(), dtype="<f8")
    np.save(os.path.join(GOLDEN, name + ".npy"), a)
    print(f"  golden/{name}.npy  {list(a.shape)}  {a.dtype.str}")


def main():
    model32 = load_model()
    model = copy.deepcopy(model32).double()
    vm = model.vision_model
    vc = model.config.vision_config
    grid = vc.image_size // vc.patch_size
    px = torch.from_numpy(np.load(os.path.join(GOLDEN, "vision_pixel_values.npy")))

    with torch.no_grad():
        # x = hidden_states[-2], the input of the last layer.
        x = vm.pre_layrnorm(vm.embeddings(px.double()))
        for layer in vm.encoder.layers[:-1]:
            x = layer(x)
        last = vm.encoder.layers[-1]
        lhs, _ = model.encode_image(px.double())
        assert torch.allclose(last(x), lhs, rtol=0, atol=1e-12), "layer input does not give last_hidden_state"

        G = naclip_bias(grid, grid, SIGMA)
        err = (G - naclip_bias_published(grid, grid, SIGMA)).abs().max().item()
        assert err < 1e-14, f"G differs from NACLIP's construction by {err}"
        print(f"check G == NACLIP gaussian_window/get_attention_addition (float64): max |diff| {err:.1e}")

        out = {"raw": (None, patch_embeds(model, lhs))}
        for kind in ("clearclip", "naclip", "maskclip"):
            hidden, _ = readout(last, x, kind, G)
            out[kind] = (hidden, patch_embeds(model, hidden))

        # Check 1: raw == the float32 pyclip model run normally.
        lhs32, _ = model32.encode_image(px)
        e32 = patch_embeds(model32, lhs32).double()
        err = (out["raw"][1] - e32).abs().max().item()
        assert err < 1e-5, f"raw patch_embeds differ from float32 pyclip by {err}"
        print(f"check raw patch_embeds vs float32 pyclip: max |diff| {err:.2e} (< 1e-5)")

        # Check 2: with k_proj := q_proj, ClearCLIP's probabilities are the layer's own.
        qk = copy.deepcopy(last)
        qk.self_attn.k_proj.load_state_dict(qk.self_attn.q_proj.state_dict())
        h = qk.layer_norm1(x)
        own_p, own_out = layer_own_probs(qk.self_attn, h)
        hidden, p = readout(qk, x, "clearclip")
        err_p = (p - own_p).abs().max().item()
        err_o = (hidden - own_out).abs().max().item()
        assert err_p < 1e-12 and err_o < 1e-12, f"clearclip vs layer attention: {err_p}, {err_o}"
        print(f"check clearclip probs vs layer's own with k_proj := q_proj: max |diff| probs "
              f"{err_p:.1e}, out_proj output {err_o:.1e}")

        # Check 3: MaskCLIP (identity attention) == out_proj(v_proj(layer_norm1(x))).
        a = last.self_attn
        err = (out["maskclip"][0] - a.out_proj(a.v_proj(last.layer_norm1(x)))).abs().max().item()
        assert err < 1e-12, f"maskclip hidden differs from out_proj(v_proj(ln1(x))) by {err}"
        print(f"check maskclip hidden vs out_proj(v_proj(layer_norm1(x))): max |diff| {err:.1e}")

    print("writing:")
    save("readout_layer_input", x)
    for kind, (hidden, emb) in out.items():
        if hidden is not None:
            save(f"readout_{kind}_hidden", hidden)
        save(f"readout_{kind}_patch_embeds", emb)
    save("readout_naclip_bias", G)


if __name__ == "__main__":
    main()
