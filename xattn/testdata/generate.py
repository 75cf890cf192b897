#!/usr/bin/python3
"""Make the golden files of the xattn CLI test with PyTorch.

Builds a small diffusers-style cross-attention layer (attn2: d_q=40,
d_kv=24, 2 heads, inner 32, to_out with bias, to_q/k/v without), runs it
the way diffusers' Attention with AttnProcessor does (q = to_q(x),
k = to_k(ctx), v = to_v(ctx), split heads, softmax(q kᵀ · scale) v with the
padded keys masked out, merge heads, to_out) and writes:

  attn2.safetensors       the weights under PREFIX (safetensors written by hand)
  query.npy               [1, 13, 40] float32 (a leading batch dim of 1)
  kv.npy                  [9, 24] float32
  mask.npy                [1, 9] int64, 1 = attend (Hugging Face attention_mask)
  output.npy              [13, 40] torch's layer output
  attention.npy           [13, 9] probabilities averaged over heads
  attention_heads.npy     [2, 13, 9] probabilities per head

and, for CLIP's joint space (Hugging Face CLIPModel names, random heads):

  joint.safetensors       text_projection.weight [8, 12], visual_projection.weight [8, 10],
                          vision_model.post_layernorm.{weight,bias} [10], logit_scale []
  joint_patches.npy       [5, 10] patch states, joint_tokens.npy [4, 12] token states
  joint_i2t_output.npy    [5, 8] patches attending to tokens, joint_i2t_attention.npy [5, 4]
  joint_t2i_output.npy    [4, 8] tokens attending to patches, joint_t2i_attention.npy [4, 5]

Run with Debian's python3 (torch 1.13): /usr/bin/python3 generate.py
"""
import json
import struct

import numpy as np
import torch

PREFIX = "down_blocks.0.attentions.0.transformer_blocks.0.attn2."
DQ, DKV, HEADS, INNER, TQ, TK = 40, 24, 2, 32, 13, 9


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt", "source": "xattn/testdata/generate.py"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    torch.manual_seed(20240611)
    to_q = torch.nn.Linear(DQ, INNER, bias=False)
    to_k = torch.nn.Linear(DKV, INNER, bias=False)
    to_v = torch.nn.Linear(DKV, INNER, bias=False)
    to_out = torch.nn.Linear(INNER, DQ, bias=True)
    x = torch.randn(1, TQ, DQ)
    ctx = torch.randn(1, TK, DKV)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0, 0]], dtype=torch.int64)

    hd = INNER // HEADS
    scale = hd ** -0.5
    with torch.no_grad():
        q, k, v = to_q(x), to_k(ctx), to_v(ctx)

        def split(t):  # [1, T, inner] -> [heads, T, hd]
            return t.reshape(t.shape[1], HEADS, hd).permute(1, 0, 2)

        q, k, v = split(q), split(k), split(v)
        scores = torch.bmm(q, k.transpose(1, 2)) * scale  # [heads, TQ, TK]
        scores = scores.masked_fill(mask[0].bool().logical_not()[None, None, :], float("-inf"))
        probs = scores.softmax(dim=-1)
        o = torch.bmm(probs, v)  # [heads, TQ, hd]
        o = o.permute(1, 0, 2).reshape(1, TQ, INNER)
        out = to_out(o)[0]

    write_safetensors("attn2.safetensors", {
        PREFIX + "to_q.weight": to_q.weight.detach().numpy(),
        PREFIX + "to_k.weight": to_k.weight.detach().numpy(),
        PREFIX + "to_v.weight": to_v.weight.detach().numpy(),
        PREFIX + "to_out.0.weight": to_out.weight.detach().numpy(),
        PREFIX + "to_out.0.bias": to_out.bias.detach().numpy(),
    })
    np.save("query.npy", x.numpy().astype(np.float32))
    np.save("kv.npy", ctx[0].numpy().astype(np.float32))
    np.save("mask.npy", mask.numpy())
    np.save("output.npy", out.numpy().astype(np.float32))
    np.save("attention.npy", probs.mean(dim=0).numpy().astype(np.float32))
    np.save("attention_heads.npy", probs.numpy().astype(np.float32))



def joint():
    torch.manual_seed(7)
    dp, dt, dv, P, T = 8, 12, 10, 5, 4
    text_projection = torch.randn(dp, dt) / dt ** 0.5
    visual_projection = torch.randn(dp, dv) / dv ** 0.5
    ln = torch.nn.LayerNorm(dv, eps=1e-5)
    with torch.no_grad():
        ln.weight.copy_(1 + 0.1 * torch.randn(dv))
        ln.bias.copy_(0.1 * torch.randn(dv))
    logit_scale = torch.tensor(np.log(1 / 0.07), dtype=torch.float32)
    patches = torch.randn(P, dv)
    tokens = torch.randn(T, dt)
    with torch.no_grad():
        img = ln(patches) @ visual_projection.T
        img = img / img.norm(dim=-1, keepdim=True)
        txt = tokens @ text_projection.T
        txt = txt / txt.norm(dim=-1, keepdim=True)
        s = logit_scale.exp()
        i2t = (s * img @ txt.T).softmax(dim=-1)
        t2i = (s * txt @ img.T).softmax(dim=-1)
    write_safetensors("joint.safetensors", {
        "text_projection.weight": text_projection.numpy(),
        "visual_projection.weight": visual_projection.numpy(),
        "vision_model.post_layernorm.weight": ln.weight.detach().numpy(),
        "vision_model.post_layernorm.bias": ln.bias.detach().numpy(),
        "logit_scale": logit_scale.numpy(),
    })
    np.save("joint_patches.npy", patches.numpy())
    np.save("joint_tokens.npy", tokens.numpy())
    np.save("joint_i2t_output.npy", (i2t @ txt).numpy())
    np.save("joint_i2t_attention.npy", i2t.numpy())
    np.save("joint_t2i_output.npy", (t2i @ img).numpy())
    np.save("joint_t2i_attention.npy", t2i.numpy())


if __name__ == "__main__":
    main()
    joint()
