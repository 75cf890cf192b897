"""pysiglip: SigLIP's two towers in PyTorch with Hugging Face ``SiglipModel`` parameter names.

A transcription of transformers' modeling_siglip.py (SiglipTextTransformer,
SiglipVisionTransformer, SiglipMultiheadAttentionPoolingHead, SiglipModel's
logits) and tokenization_siglip.py (SiglipTokenizer, on top of the official
sentencepiece library), for the generator scripts of the ``condition`` project
(testdata/tinysiglip/generate.py, scripts/bench_models/make_siglip.py). It
depends on torch, numpy, onnx and sentencepiece; it does not need
``transformers``, ``safetensors`` or ``tokenizers``. File helpers (safetensors,
atomic writes, ONNX compaction) come from scripts/pyclip.

The semantics the Go code relies on:

* ``SigLIP(config)`` has exactly the parameter names of ``transformers.SiglipModel``:
  ``text_model.embeddings.token_embedding.weight``, ``...position_embedding.weight``,
  ``text_model.encoder.layers.N.self_attn.{q,k,v,out}_proj.{weight,bias}``,
  ``...layer_norm1``, ``...layer_norm2``, ``...mlp.fc1``, ``...mlp.fc2``,
  ``text_model.final_layer_norm``, ``text_model.head``;
  ``vision_model.embeddings.patch_embedding.{weight,bias}`` (a convolution with a
  bias), ``vision_model.embeddings.position_embedding.weight``,
  ``vision_model.encoder...``, ``vision_model.post_layernorm``,
  ``vision_model.head.probe`` [1, 1, D], ``vision_model.head.attention.in_proj_weight``
  [3D, D] and ``in_proj_bias`` [3D] (q, k, v blocks in that order),
  ``vision_model.head.attention.out_proj``, ``vision_model.head.layernorm``,
  ``vision_model.head.mlp.fc1/fc2``; ``logit_scale`` [1] and ``logit_bias`` [1].
* Activation ``gelu_pytorch_tanh`` (GELU, tanh approximation); every LayerNorm uses
  the config's ``layer_norm_eps`` (1e-6 for the released checkpoints).
* Text: no causal mask (an optional key padding mask, which the released models do
  not use: they are fed 64 positions padded with ``</s>``); ``last_hidden_state`` is
  after ``final_layer_norm``; the pooled state is the LAST position of the (padded)
  sequence, then ``head``: ``pooler_output = head(last_hidden_state[:, -1])``.
* Vision: no CLS token, every row is a patch (row-major over the grid);
  ``last_hidden_state`` is AFTER ``post_layernorm``; ``pooler_output`` is the
  attention-pooling head over all patches: a learned probe as the only query,
  torch.nn.MultiheadAttention(probe, x, x), then ``h + mlp(layernorm(h))``.
* A patch's joint-space vector (``patch_embeds``) is the pooling head applied to
  that patch alone: with a single key the softmax is 1, so the attention output is
  ``out_proj(v_proj(x))`` (v_proj = the third block of in_proj), then
  ``h = o + mlp(layernorm(o))``.
* Scores: ``logits = exp(logit_scale) * cos(image_embeds, text_embeds) + logit_bias``;
  probabilities ``sigmoid(logits)``, each label on its own.

Public interface:

    TextConfig, VisionConfig, SiglipConfig    dataclasses, HF field names and defaults
    SigLIP(config)                            torch.nn.Module
      .init_random(seed)                      seeded, non-trivial random weights
      .encode_text(input_ids, attention_mask=None) -> (last_hidden_state [B,T,D], pooler_output [B,P])
      .encode_image(pixel_values)             -> (last_hidden_state [B,N,D], pooler_output [B,D])
      .patch_embeds(last_hidden_state)        -> [B, N, D]
      .logits(image_embeds, text_embeds)      -> logits_per_image [Bi, Bt]
      SigLIP.logits_from(i, t, scale, bias)   the same with given scalars (training)
      .hf_state_dict(), .load_hf_state_dict(sd)
    check_patch_embeds(model, last_hidden_state)   asserts the single-key identity above
    export_text_onnx(model, path, ...), export_vision_onnx(model, path, ...)
    Tokenizer(spiece_path)                    SiglipTokenizer's ids (lower-case, punctuation
                                              removed, </s> appended, padded with </s>)
    train_spiece(sentences, vocab_size, pad_to=None) -> bytes   a SigLIP-layout spiece.model
    write_config(dir, config, diff=False), write_preprocessor_config(dir, ...),
    write_tokenizer_files(dir, model_max_length=64)
    pixel_values(image, height, width, resample=3)  SiglipImageProcessor on a PIL image

Self-check: ``/usr/bin/python3 scripts/pysiglip/siglip.py --selftest``. train_tiny.py in this
folder is the plan (and a smoke-test loop) for training a tiny SigLIP with the sigmoid loss.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import re
import string
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

_SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _SCRIPTS not in sys.path:
    sys.path.insert(0, _SCRIPTS)

from pyclip.clip import (  # noqa: E402  (file helpers shared with the CLIP scripts)
    _atomic_write,
    compact_onnx,
    read_safetensors,
    write_json,
    write_safetensors,
)

__all__ = [
    "TextConfig", "VisionConfig", "SiglipConfig", "SigLIP", "check_patch_embeds",
    "export_text_onnx", "export_vision_onnx", "compact_onnx", "Tokenizer", "train_spiece",
    "write_config", "write_preprocessor_config", "write_tokenizer_files", "write_safetensors",
    "read_safetensors", "write_json", "pixel_values",
]

# --------------------------------------------------------------------------
# Configuration (Hugging Face SiglipConfig field names and defaults)
# --------------------------------------------------------------------------


@dataclasses.dataclass
class TextConfig:
    """SiglipTextConfig. Defaults are Hugging Face's (google/siglip-base-patch16-224)."""

    vocab_size: int = 32000
    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    max_position_embeddings: int = 64
    hidden_act: str = "gelu_pytorch_tanh"
    layer_norm_eps: float = 1e-6
    attention_dropout: float = 0.0
    # Width of text_model.head's output; None means hidden_size (HF's default).
    projection_size: Optional[int] = None

    @property
    def head_size(self) -> int:
        return self.projection_size or self.hidden_size

    def to_dict(self, diff: bool = False) -> dict:
        return _config_dict(self, TextConfig(), "siglip_text_model", diff)


@dataclasses.dataclass
class VisionConfig:
    """SiglipVisionConfig. Defaults are Hugging Face's (google/siglip-base-patch16-224)."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    num_channels: int = 3
    image_size: int = 224
    patch_size: int = 16
    hidden_act: str = "gelu_pytorch_tanh"
    layer_norm_eps: float = 1e-6
    attention_dropout: float = 0.0

    @property
    def grid(self) -> int:
        return self.image_size // self.patch_size

    def to_dict(self, diff: bool = False) -> dict:
        return _config_dict(self, VisionConfig(), "siglip_vision_model", diff)


def _config_dict(cfg, default, model_type: str, diff: bool) -> dict:
    d = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if v is None or (diff and v == getattr(default, f.name)):
            continue
        d[f.name] = v
    d["model_type"] = model_type
    return dict(sorted(d.items()))


@dataclasses.dataclass
class SiglipConfig:
    """SiglipConfig: text_config, vision_config; the initial logit_scale and logit_bias
    (not config.json fields: they set the weights ``init_random`` draws)."""

    text_config: TextConfig = dataclasses.field(default_factory=TextConfig)
    vision_config: VisionConfig = dataclasses.field(default_factory=VisionConfig)
    logit_scale_init: float = 0.0
    logit_bias_init: float = 0.0

    def to_dict(self, diff: bool = False) -> dict:
        """config.json. ``diff`` writes only what differs from the defaults, as
        ``save_pretrained`` does (the released google/siglip-* files look like that)."""
        return {
            "architectures": ["SiglipModel"],
            "initializer_factor": 1.0,
            "model_type": "siglip",
            "text_config": self.text_config.to_dict(diff),
            "torch_dtype": "float32",
            "vision_config": self.vision_config.to_dict(diff),
        }


# --------------------------------------------------------------------------
# Model (HF parameter names)
# --------------------------------------------------------------------------


def _act(name: str):
    if name in ("gelu_pytorch_tanh", "gelu_new"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu
    if name == "quick_gelu":
        return lambda x: x * torch.sigmoid(1.702 * x)
    raise ValueError(f"pysiglip: unsupported hidden_act {name!r}")


class SiglipAttention(nn.Module):
    """Multi-head self-attention with q_proj/k_proj/v_proj/out_proj (HF names), no causal mask."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"pysiglip: hidden_size {hidden} not divisible by {heads} heads")
        self.heads = heads
        self.head_dim = hidden // heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.q_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, allowed: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x [B, T, D]; allowed: bool [B, 1, 1, T] (True = may attend) or None."""
        b, t, d = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        s = torch.matmul(q, k.transpose(2, 3)) * self.scale  # [B, H, T, T]
        if allowed is not None:
            s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
        p = torch.softmax(s, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(o)


class SiglipMLP(nn.Module):
    def __init__(self, hidden: int, inter: int, act: str):
        super().__init__()
        self.act = _act(act)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SiglipEncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = SiglipAttention(cfg.hidden_size, cfg.num_attention_heads)
        self.layer_norm1 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.mlp = SiglipMLP(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_act)
        self.layer_norm2 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x, allowed=None):
        x = x + self.self_attn(self.layer_norm1(x), allowed)
        return x + self.mlp(self.layer_norm2(x))


class SiglipEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList(SiglipEncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, x, allowed=None):
        for layer in self.layers:
            x = layer(x, allowed)
        return x


class SiglipTextEmbeddings(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.token_embedding = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embedding = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        return self.token_embedding(input_ids) + self.position_embedding.weight[:t].unsqueeze(0)


class SiglipTextTransformer(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = SiglipTextEmbeddings(cfg)
        self.encoder = SiglipEncoder(cfg)
        self.final_layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.head = nn.Linear(cfg.hidden_size, cfg.head_size)

    def forward(self, input_ids, attention_mask=None):
        """input_ids [B, T], attention_mask [B, T] or None -> (last_hidden_state [B, T, D]
        after final_layer_norm, pooler_output [B, P] = head(last_hidden_state[:, -1]))."""
        input_ids = input_ids.long()
        b, t = input_ids.shape
        allowed = None
        if attention_mask is not None:
            allowed = (attention_mask != 0).view(b, 1, 1, t)
        x = self.final_layer_norm(self.encoder(self.embeddings(input_ids), allowed))
        # The last position, not the first </s>: SigLIP was trained on sequences padded
        # with </s> to max_position_embeddings ("sticky" EOS).
        return x, self.head(x[:, -1, :])


class SiglipVisionEmbeddings(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.patch_embedding = nn.Conv2d(cfg.num_channels, cfg.hidden_size, cfg.patch_size,
                                         stride=cfg.patch_size)  # padding 0 = HF's "valid"
        self.position_embedding = nn.Embedding(cfg.grid * cfg.grid, cfg.hidden_size)

    def forward(self, pixel_values):
        p = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)  # [B, N, D], row-major
        return p + self.position_embedding.weight.unsqueeze(0)


class SiglipMultiheadAttentionPoolingHead(nn.Module):
    """The vision pooling head: a learned probe attends over all patches
    (torch.nn.MultiheadAttention, as HF uses it), then a residual MLP."""

    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.probe = nn.Parameter(torch.randn(1, 1, cfg.hidden_size))
        self.attention = nn.MultiheadAttention(cfg.hidden_size, cfg.num_attention_heads, batch_first=True)
        self.layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.mlp = SiglipMLP(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_act)

    def forward(self, x):
        """x [B, N, D] (after post_layernorm) -> [B, D]."""
        probe = self.probe.repeat(x.shape[0], 1, 1)
        h = self.attention(probe, x, x)[0]
        h = h + self.mlp(self.layernorm(h))
        return h[:, 0]

    def single_patch(self, x):
        """x [B, N, D] -> [B, N, D]: the head applied to each patch alone. With one key
        the softmax weight is exactly 1 whatever the query, so the probe and the q/k
        projections drop out: o = out_proj(v_proj(x)), h = o + mlp(layernorm(o))."""
        d = x.shape[-1]
        w, b = self.attention.in_proj_weight, self.attention.in_proj_bias
        v = F.linear(x, w[2 * d:3 * d], b[2 * d:3 * d])
        o = self.attention.out_proj(v)
        return o + self.mlp(self.layernorm(o))


class SiglipVisionTransformer(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = SiglipVisionEmbeddings(cfg)
        self.encoder = SiglipEncoder(cfg)
        self.post_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.head = SiglipMultiheadAttentionPoolingHead(cfg)

    def forward(self, pixel_values):
        """pixel_values [B, C, H, W] -> (last_hidden_state [B, N, D] after post_layernorm,
        pooler_output [B, D] = head(last_hidden_state))."""
        x = self.post_layernorm(self.encoder(self.embeddings(pixel_values)))
        return x, self.head(x)


class SigLIP(nn.Module):
    """SiglipModel with Hugging Face parameter names."""

    def __init__(self, config: SiglipConfig):
        super().__init__()
        self.config = config
        self.text_model = SiglipTextTransformer(config.text_config)
        self.vision_model = SiglipVisionTransformer(config.vision_config)
        self.logit_scale = nn.Parameter(torch.tensor([float(config.logit_scale_init)]))
        self.logit_bias = nn.Parameter(torch.tensor([float(config.logit_bias_init)]))

    def init_random(self, seed: int = 0, std: float = 0.02) -> "SigLIP":
        """Re-initialises every parameter from a seeded generator (normal / sqrt(fan_in)
        for matrices, 1 +- 0.1 for LayerNorm weights, 0.1-scale noise for biases, 0.2 for
        embeddings, unit normal for the probe), so that a tiny random model gives
        non-trivial, reproducible outputs. logit_scale and logit_bias get the config's
        initial values."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name == "logit_scale":
                    p.fill_(float(self.config.logit_scale_init))
                elif name == "logit_bias":
                    p.fill_(float(self.config.logit_bias_init))
                elif name.endswith("probe"):
                    p.copy_(torch.randn(p.shape, generator=g))
                elif "norm" in name and name.endswith("weight"):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
                elif name.endswith("bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
                elif "embedding" in name and p.dim() == 2:
                    p.copy_(std * 10 * torch.randn(p.shape, generator=g))
                else:
                    fan_in = int(np.prod(p.shape[1:]))
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
        return self

    def encode_text(self, input_ids, attention_mask=None):
        """-> (last_hidden_state [B, T, D], pooler_output [B, P]) (HF SiglipTextModel)."""
        return self.text_model(input_ids, attention_mask)

    def encode_image(self, pixel_values):
        """-> (last_hidden_state [B, N, D], pooler_output [B, D]) (HF SiglipVisionModel)."""
        return self.vision_model(pixel_values)

    def patch_embeds(self, last_hidden_state):
        """vision last_hidden_state [B, N, D] -> each patch in the joint space [B, N, D]
        (the pooling head applied to that patch alone; see check_patch_embeds)."""
        return self.vision_model.head.single_patch(last_hidden_state)

    def logits(self, image_embeds, text_embeds):
        """-> logits_per_image [Bi, Bt] = exp(logit_scale) * cos + logit_bias
        (HF SiglipModel; probabilities are sigmoid(logits))."""
        return self.logits_from(image_embeds, text_embeds, self.logit_scale, self.logit_bias)

    @staticmethod
    def logits_from(image_embeds, text_embeds, logit_scale, logit_bias):
        """logits with the given scale and bias: [Bi, D], [Bt, D] -> [Bi, Bt]."""
        i = image_embeds / image_embeds.norm(p=2, dim=-1, keepdim=True)
        t = text_embeds / text_embeds.norm(p=2, dim=-1, keepdim=True)
        return i @ t.t() * logit_scale.exp() + logit_bias

    def forward(self, input_ids, pixel_values):
        _, t = self.encode_text(input_ids)
        _, i = self.encode_image(pixel_values)
        return self.logits(i, t)

    def hf_state_dict(self) -> Dict[str, torch.Tensor]:
        """The state dict as Hugging Face SiglipModel names it (position_ids are
        non-persistent buffers there, so not in the file)."""
        return {k: v.detach().clone().contiguous() for k, v in self.state_dict().items()}

    def load_hf_state_dict(self, sd: Dict[str, "torch.Tensor | np.ndarray"]) -> None:
        sd = {k: torch.as_tensor(np.asarray(v)) if isinstance(v, np.ndarray) else v
              for k, v in sd.items() if not k.endswith("position_ids")}
        self.load_state_dict(sd)


def check_patch_embeds(model: SigLIP, last_hidden_state: torch.Tensor, atol: float = 1e-5) -> float:
    """Asserts that patch_embeds equals running the pooling head's own
    nn.MultiheadAttention with that one patch as the only key and value (the probe
    as the query), then the head's layernorm and MLP: the closed form
    out_proj(v_proj(x)) is not a separate definition, only a faster way to compute
    the head on a one-patch input. Returns the largest difference."""
    head = model.vision_model.head
    b, n, d = last_hidden_state.shape
    with torch.no_grad():
        got = model.patch_embeds(last_hidden_state)
        kv = last_hidden_state.reshape(b * n, 1, d)
        probe = head.probe.repeat(b * n, 1, 1)
        o = head.attention(probe, kv, kv)[0]
        want = (o + head.mlp(head.layernorm(o)))[:, 0].reshape(b, n, d)
        diff = float((got - want).abs().max())
    assert torch.allclose(got, want, atol=atol, rtol=1e-5), f"patch_embeds: max diff {diff}"
    return diff


# --------------------------------------------------------------------------
# ONNX export (names as transformers.js' / optimum's split exports use them)
# --------------------------------------------------------------------------


class _TextGraph(nn.Module):
    def __init__(self, model: SigLIP, hidden: bool, pooled: bool):
        super().__init__()
        self.m, self.hidden, self.pooled = model, hidden, pooled

    def forward(self, input_ids):
        h, e = self.m.encode_text(input_ids)
        return tuple(x for x, keep in ((h, self.hidden), (e, self.pooled)) if keep)


class _VisionGraph(nn.Module):
    def __init__(self, model: SigLIP, hidden: bool, pooled: bool):
        super().__init__()
        self.m, self.hidden, self.pooled = model, hidden, pooled

    def forward(self, pixel_values):
        h, e = self.m.encode_image(pixel_values)
        return tuple(x for x, keep in ((h, self.hidden), (e, self.pooled)) if keep)


def export_text_onnx(model: SigLIP, path: str, hidden: bool = True, pooled: bool = True,
                     opset: int = 17, compact: bool = True) -> None:
    """Exports the text tower (HF SiglipTextModel) to ``path``.

    Input ``input_ids`` int64 [batch_size, max_position_embeddings] (the sequence is
    fixed: pooling reads the last of the 64 padded positions). Outputs
    ``last_hidden_state`` float32 [batch_size, T, D] (when ``hidden``) and
    ``pooler_output`` float32 [batch_size, P] (when ``pooled``). No attention_mask
    input, as in optimum's and transformers.js' SigLIP exports. Atomic."""
    if not (hidden or pooled):
        raise ValueError("pysiglip: export_text_onnx needs hidden or pooled")
    tc = model.config.text_config
    ids = torch.ones(2, tc.max_position_embeddings, dtype=torch.int64)
    outs, axes = [], {"input_ids": {0: "batch_size"}}
    if hidden:
        outs.append("last_hidden_state")
        axes["last_hidden_state"] = {0: "batch_size"}
    if pooled:
        outs.append("pooler_output")
        axes["pooler_output"] = {0: "batch_size"}
    _export(_TextGraph(model.eval(), hidden, pooled).eval(), (ids,), path, ["input_ids"], outs,
            axes, opset, compact)


def export_vision_onnx(model: SigLIP, path: str, hidden: bool = True, pooled: bool = True,
                       opset: int = 17, compact: bool = True) -> None:
    """Exports the vision tower (HF SiglipVisionModel) to ``path``.

    Input ``pixel_values`` float32 [batch_size, C, H, W] (H = W = image_size). Outputs
    ``last_hidden_state`` float32 [batch_size, N, D] (after post_layernorm; when
    ``hidden``) and ``pooler_output`` float32 [batch_size, D] (when ``pooled``). Atomic."""
    if not (hidden or pooled):
        raise ValueError("pysiglip: export_vision_onnx needs hidden or pooled")
    vc = model.config.vision_config
    x = torch.zeros(2, vc.num_channels, vc.image_size, vc.image_size)
    outs, axes = [], {"pixel_values": {0: "batch_size"}}
    if hidden:
        outs.append("last_hidden_state")
        axes["last_hidden_state"] = {0: "batch_size"}
    if pooled:
        outs.append("pooler_output")
        axes["pooler_output"] = {0: "batch_size"}
    _export(_VisionGraph(model.eval(), hidden, pooled).eval(), (x,), path, ["pixel_values"], outs,
            axes, opset, compact)


def _export(g, args, path, inputs, outputs, axes, opset, compact):
    import tempfile

    import onnx

    with torch.no_grad():
        shapes = [tuple(t.shape) for t in g(*args)]
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.no_grad():
            torch.onnx.export(g, args, tmp, input_names=inputs, output_names=outputs,
                              dynamic_axes=axes, opset_version=opset, do_constant_folding=True)
        # The exporter names the fixed output dimensions after internal values
        # ("LayerNormalizationlast_hidden_state_dim_1"); state them: batch_size, then
        # the sizes torch produced.
        m = onnx.load(tmp)
        for out, shape in zip(m.graph.output, shapes):
            dims = out.type.tensor_type.shape.dim
            for k, dim in enumerate(dims):
                if k == 0:
                    dim.dim_param = "batch_size"
                else:
                    dim.dim_value = shape[k]
        onnx.save(m, tmp)
        del m
        # Check by path: graphs near protobuf's 2 GiB limit cannot be checked in memory.
        onnx.checker.check_model(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    if compact:
        compact_onnx(path)


# --------------------------------------------------------------------------
# Tokenizer: SiglipTokenizer on top of sentencepiece
# --------------------------------------------------------------------------

SPIECE_UNDERLINE = "\u2581"
PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
# google/siglip-* spiece.model (T5's layout): <pad> 0, </s> 1, <unk> 2, no <s>.
PAD_ID, EOS_ID, UNK_ID = 0, 1, 2


def _load_processor(model_bytes: bytes):
    """A SentencePieceProcessor over the model with add_dummy_prefix turned off, as
    SiglipTokenizer.get_spm_processor does (it prepends the "▁" itself)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    m.ParseFromString(model_bytes)
    m.normalizer_spec.add_dummy_prefix = False
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(m.SerializeToString())
    return sp


class Tokenizer:
    """transformers' SiglipTokenizer (the slow, sentencepiece one; SigLIP ships no
    tokenizer.json), step by step:

    1. "▁" + text (with any "▁" in it turned into a space);
    2. lower-case (do_lower_case), then split around the special tokens </s> and <unk>
       (they lstrip/rstrip: the spaces next to them go);
    3. each other piece: canonicalize_text (remove string.punctuation, collapse
       whitespace runs to one space, strip), then sentencepiece on "<unk>" + piece with
       add_dummy_prefix off, dropping the pieces "<unk>" alone makes;
    4. a leading lone "▁" before a special token is dropped; pieces -> ids (unknown
       pieces -> <unk>);
    5. truncate to model_max_length - 1, append </s> unless the ids already end with
       it, pad with </s> (the pad token) to model_max_length (padding="max_length", as
       the model was trained).
    """

    def __init__(self, spiece: "str | bytes", model_max_length: int = 64, do_lower_case: bool = True):
        if isinstance(spiece, str):
            with open(spiece, "rb") as f:
                spiece = f.read()
        self.sp = _load_processor(spiece)
        self.model_max_length = model_max_length
        self.do_lower_case = do_lower_case
        self.eos_id = self.sp.piece_to_id(EOS)
        self.unk_id = self.sp.piece_to_id(UNK)
        self.pad_id = self.eos_id  # SiglipTokenizer's pad_token is "</s>"
        self.specials = [EOS, UNK]
        self._unk_len = len(self.sp.encode(UNK, out_type=str))

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    @staticmethod
    def canonicalize_text(text: str) -> str:
        text = text.translate(str.maketrans("", "", string.punctuation))
        return re.sub(r"\s+", " ", text).strip()

    def _tokenize(self, text: str) -> List[str]:
        text = self.canonicalize_text(text)
        tokens = self.sp.encode(UNK + text, out_type=str)
        return tokens[self._unk_len:] if len(tokens) >= self._unk_len else tokens

    def _split_specials(self, text: str) -> List[Tuple[str, bool]]:
        pat = "(" + "|".join(re.escape(s) for s in sorted(self.specials, key=len, reverse=True)) + ")"
        parts = re.split(pat, text)
        out: List[Tuple[str, bool]] = []
        for i, p in enumerate(parts):
            special = i % 2 == 1
            if not special:
                if i > 0:
                    p = p.lstrip()  # the special token before it has rstrip=True
                if i < len(parts) - 1:
                    p = p.rstrip()  # the one after it has lstrip=True
                if not p:
                    continue
            out.append((p, special))
        return out

    def tokenize(self, text: str) -> List[str]:
        text = SPIECE_UNDERLINE + text.replace(SPIECE_UNDERLINE, " ")
        if self.do_lower_case:
            text = text.lower()
        tokens: List[str] = []
        for part, special in self._split_specials(text):
            tokens.extend([part] if special else self._tokenize(part))
        if len(tokens) > 1 and tokens[0] == SPIECE_UNDERLINE and tokens[1] in self.specials:
            tokens = tokens[1:]
        return tokens

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> List[int]:
        return [self.sp.piece_to_id(t) for t in tokens]

    def encode(self, text: str, max_length: Optional[int] = None, pad: bool = True,
               truncation: bool = True) -> List[int]:
        """Ids as ``tokenizer(text, padding="max_length", truncation=True)`` gives them."""
        n = max_length or self.model_max_length
        ids = self.convert_tokens_to_ids(self.tokenize(text))
        if truncation and len(ids) + 1 > n:
            ids = ids[:n - 1]
        if not ids or ids[-1] != self.eos_id:
            ids = ids + [self.eos_id]
        if pad:
            ids = ids + [self.pad_id] * (n - len(ids))
        return ids

    def batch(self, texts: Sequence[str], max_length: Optional[int] = None) -> np.ndarray:
        """-> input_ids int64 [N, max_length] padded with </s>."""
        return np.array([self.encode(t, max_length) for t in texts], dtype=np.int64)


def train_spiece(sentences: Sequence[str], vocab_size: int, pad_to: Optional[int] = None,
                 seed_pieces: Sequence[str] = ()) -> bytes:
    """Trains a Unigram sentencepiece model laid out as google/siglip-*'s spiece.model
    (T5's): <pad> 0, </s> 1, <unk> 2, no <s>; nmt_nfkc normalisation, a dummy prefix,
    whitespace runs removed. Deterministic (one thread, no file names stored). With
    ``pad_to``, filler pieces (never chosen: score -1e4, made of characters the text
    never has) are appended until the model has that many pieces, so that a small
    trained vocabulary can stand for a real-size one (32000). Returns the model bytes."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(sentences)), model_writer=out, model_type="unigram",
        vocab_size=vocab_size, character_coverage=1.0, normalization_rule_name="nmt_nfkc",
        pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1, pad_piece=PAD, eos_piece=EOS,
        unk_piece=UNK, num_threads=1, hard_vocab_limit=False, split_digits=False,
        user_defined_symbols=list(seed_pieces), minloglevel=2)
    m = pb.ModelProto()
    m.ParseFromString(out.getvalue())
    if pad_to is not None:
        have = {p.piece for p in m.pieces}
        i = 0
        while len(m.pieces) < pad_to:
            piece = "\u2581\u3400" + _filler(i)
            i += 1
            if piece in have:
                continue
            p = m.pieces.add()
            p.piece, p.score, p.type = piece, -1e4, pb.ModelProto.SentencePiece.NORMAL
    # Drop what depends on the machine or the run, so the bytes are reproducible.
    m.trainer_spec.ClearField("input")
    m.trainer_spec.model_prefix = ""
    m.trainer_spec.num_threads = 1
    return m.SerializeToString()


def _filler(i: int) -> str:
    """A distinct string of CJK Extension A characters for filler piece i."""
    s = ""
    while True:
        s += chr(0x3401 + i % 4000)
        i //= 4000
        if i == 0:
            return s


def write_tokenizer_files(directory: str, spiece: bytes, model_max_length: int = 64) -> None:
    """spiece.model, tokenizer_config.json and special_tokens_map.json in the layout of
    google/siglip-base-patch16-224 (SiglipTokenizer; eos and pad are </s>, unk <unk>)."""
    _atomic_write(os.path.join(directory, "spiece.model"), spiece)

    def tok(content):
        return {"content": content, "lstrip": True, "normalized": False, "rstrip": True,
                "single_word": False}

    write_json(os.path.join(directory, "tokenizer_config.json"), {
        "added_tokens_decoder": {
            str(EOS_ID): dict(tok(EOS), special=True),
            str(UNK_ID): dict(tok(UNK), special=True),
        },
        "additional_special_tokens": [],
        "clean_up_tokenization_spaces": True,
        "do_lower_case": True,
        "eos_token": EOS,
        "model_input_names": ["input_ids"],
        "model_max_length": model_max_length,
        "pad_token": EOS,
        "processor_class": "SiglipProcessor",
        "sp_model_kwargs": {},
        "tokenizer_class": "SiglipTokenizer",
        "unk_token": UNK,
    })
    write_json(os.path.join(directory, "special_tokens_map.json"), {
        "eos_token": tok(EOS), "pad_token": tok(EOS), "unk_token": tok(UNK)})


# --------------------------------------------------------------------------
# Files: config.json, preprocessor_config.json; preprocessing
# --------------------------------------------------------------------------

SIGLIP_MEAN = [0.5, 0.5, 0.5]
SIGLIP_STD = [0.5, 0.5, 0.5]


def write_config(directory: str, config: SiglipConfig, diff: bool = False) -> None:
    """Writes directory/config.json (SiglipConfig)."""
    write_json(os.path.join(directory, "config.json"), config.to_dict(diff))


def write_preprocessor_config(directory: str, height: int, width: Optional[int] = None,
                              resample: int = 3) -> None:
    """Writes directory/preprocessor_config.json (SiglipImageProcessor): resize to
    exactly height x width (resample 3 = bicubic for google/siglip-*, 2 = bilinear
    for google/siglip2-*), no crop, rescale 1/255, normalise with mean = std = 0.5."""
    write_json(os.path.join(directory, "preprocessor_config.json"), {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": SIGLIP_MEAN,
        "image_processor_type": "SiglipImageProcessor",
        "image_std": SIGLIP_STD,
        "processor_class": "SiglipProcessor",
        "resample": resample,
        "rescale_factor": 1 / 255,
        "size": {"height": height, "width": width or height},
    })


def pixel_values(img, height: int, width: Optional[int] = None, resample: int = 3) -> np.ndarray:
    """SiglipImageProcessor on a PIL image, as transformers does it: RGB; resize to
    exactly (height, width) with PIL (aspect ratio not kept, no crop); rescale by 1/255
    in float64, cast to float32; normalise (x - 0.5) / 0.5 in float32.
    Returns [3, height, width] float32."""
    img = img.convert("RGB")
    img = img.resize((width or height, height), resample=resample)
    a = (np.asarray(img).astype(np.float64) * (1 / 255)).astype(np.float32)
    a = (a - np.array(SIGLIP_MEAN, dtype=np.float32)) / np.array(SIGLIP_STD, dtype=np.float32)
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def tiny_config(vocab_size: int) -> SiglipConfig:
    """The configuration of testdata/tinysiglip."""
    return SiglipConfig(
        text_config=TextConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=2, num_attention_heads=4,
                               max_position_embeddings=64, projection_size=24),
        vision_config=VisionConfig(hidden_size=24, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, image_size=32, patch_size=8),
        logit_scale_init=math.log(20.0), logit_bias_init=4.0)


def _selftest() -> None:
    cfg = tiny_config(100)
    m = SigLIP(cfg).init_random(0).eval()
    ids = torch.randint(3, 100, (2, 64))
    with torch.no_grad():
        h, e = m.encode_text(ids)
        assert h.shape == (2, 64, 32) and e.shape == (2, 24)
        hv, ev = m.encode_image(torch.randn(3, 3, 32, 32))
        assert hv.shape == (3, 16, 24) and ev.shape == (3, 24)
        assert m.patch_embeds(hv).shape == (3, 16, 24)
        assert m.logits(ev, e).shape == (3, 2)
    print(f"patch_embeds = head on one patch: max diff {check_patch_embeds(m, hv):.2g}")
    sp = train_spiece(["a photo of a cat", "a red car on the street", "two dogs"] * 20, 60)
    tok = Tokenizer(sp)
    assert tok.eos_id == EOS_ID and tok.unk_id == UNK_ID and tok.sp.piece_to_id(PAD) == PAD_ID
    for t in ("", " ", SPIECE_UNDERLINE, " " + SPIECE_UNDERLINE):
        assert tok.tokenize(t) == [], (t, tok.tokenize(t))
    assert tok.tokenize("</s>>") == [EOS]
    assert tok.encode("hi</s>") == tok.encode("hi")
    assert tok.encode("A photo, of a CAT!") == tok.encode("a photo of a cat")
    print("tokenizer and model: ok")


if __name__ == "__main__":
    if "--selftest" in sys.argv:
        _selftest()
    else:
        print(__doc__)
