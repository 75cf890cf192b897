"""pyclip: a small CLIP in PyTorch with Hugging Face ``CLIPModel`` parameter names.

This module is a reusable building block for the generator scripts of the
``condition`` project (testdata/tinyclip/generate.py, the default-model
trainer).  It depends only on torch, numpy and onnx; it does not need
``transformers``, ``safetensors`` or ``tokenizers``.

Everything here mirrors the Hugging Face semantics the Go code relies on:

* ``CLIP(config)`` has exactly the parameter names of ``transformers.CLIPModel``
  (``text_model.embeddings.token_embedding.weight``, ``text_model.encoder.layers.0.
  self_attn.q_proj.weight``, ``vision_model.pre_layrnorm.weight`` (sic),
  ``vision_model.post_layernorm.weight``, ``text_projection.weight``,
  ``visual_projection.weight``, ``logit_scale`` ...), so ``state_dict()`` loads
  into ``CLIPModel`` and back.
* Text: causal self-attention plus a key padding mask; ``last_hidden_state`` is
  after ``final_layer_norm``; the pooled state is the one at the first
  ``eos_token_id`` of each row; ``text_embeds = text_projection(pooled)``.
* Vision: ``last_hidden_state`` is *before* ``post_layernorm``;
  ``image_embeds = visual_projection(post_layernorm(last_hidden_state[:, 0]))``.

Public interface (kept stable; other scripts import it):

    TextConfig, VisionConfig, CLIPConfig      dataclasses, HF field names
    CLIP(config)                              torch.nn.Module
      .encode_text(input_ids, attention_mask=None) -> (last_hidden_state [B,T,dt], text_embeds [B,dp])
      .encode_image(pixel_values)                   -> (last_hidden_state [B,1+P,dv], image_embeds [B,dp])
      .forward(input_ids, pixel_values, attention_mask=None) -> logits_per_image [Bi, Bt]
    export_text_onnx(model, path, ...)        ONNX export of the text tower
    export_vision_onnx(model, path, ...)      ONNX export of the vision tower
    compact_onnx(path)                        shorter internal names (smaller file, same graph)
    write_safetensors(path, tensors, metadata=None)
    read_safetensors(path) -> (dict name -> np.ndarray, metadata)
    write_config(dir, config)                 config.json (CLIPConfig)
    write_preprocessor_config(dir, size, crop=None, ...)   preprocessor_config.json
    bytes_to_unicode()                        CLIP's byte -> symbol table
    learn_bpe(texts, num_merges)              CLIP-style BPE merges from a corpus
    Vocab(merges)                             a CLIP vocabulary from a merges list
      .encode(text, max_length=None, pad=False) -> list of ids (HF fast-tokenizer semantics)
      .write(dir, model_max_length=77)       vocab.json, merges.txt, tokenizer.json, tokenizer_config.json
    save_pretrained(dir, model, vocab, image_size, ...)    all of the above in the HF layout

Self-check (tokenizer against /work/shared/clip when present, model shapes):
``/usr/bin/python3 scripts/pyclip/clip.py --selftest``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import struct
import tempfile
import unicodedata
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# --------------------------------------------------------------------------
# Configuration (Hugging Face CLIPConfig field names and defaults)
# --------------------------------------------------------------------------


@dataclasses.dataclass
class TextConfig:
    """CLIPTextConfig. Defaults are Hugging Face's (ViT-B/32 text tower)."""

    vocab_size: int = 49408
    hidden_size: int = 512
    intermediate_size: int = 2048
    projection_dim: int = 512
    num_hidden_layers: int = 12
    num_attention_heads: int = 8
    max_position_embeddings: int = 77
    hidden_act: str = "quick_gelu"
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    bos_token_id: int = 49406
    eos_token_id: int = 49407

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["model_type"] = "clip_text_model"
        return d


@dataclasses.dataclass
class VisionConfig:
    """CLIPVisionConfig. Defaults are Hugging Face's (ViT-B/32)."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    projection_dim: int = 512
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    num_channels: int = 3
    image_size: int = 224
    patch_size: int = 32
    hidden_act: str = "quick_gelu"
    layer_norm_eps: float = 1e-5

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["model_type"] = "clip_vision_model"
        return d


@dataclasses.dataclass
class CLIPConfig:
    """CLIPConfig: text_config, vision_config, projection_dim, logit_scale_init_value."""

    text_config: TextConfig = dataclasses.field(default_factory=TextConfig)
    vision_config: VisionConfig = dataclasses.field(default_factory=VisionConfig)
    projection_dim: int = 512
    logit_scale_init_value: float = 2.6592

    def to_dict(self) -> dict:
        return {
            "architectures": ["CLIPModel"],
            "model_type": "clip",
            "initializer_factor": 1.0,
            "logit_scale_init_value": self.logit_scale_init_value,
            "projection_dim": self.projection_dim,
            "text_config": self.text_config.to_dict(),
            "vision_config": self.vision_config.to_dict(),
            "torch_dtype": "float32",
        }


# --------------------------------------------------------------------------
# Model (HF parameter names)
# --------------------------------------------------------------------------


def _act(name: str):
    if name == "quick_gelu":
        return lambda x: x * torch.sigmoid(1.702 * x)
    if name == "gelu":
        return F.gelu
    if name == "gelu_new":
        return lambda x: F.gelu(x, approximate="tanh")
    raise ValueError(f"pyclip: unsupported hidden_act {name!r}")


class CLIPAttention(nn.Module):
    """Multi-head self-attention with q_proj/k_proj/v_proj/out_proj (HF names)."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"pyclip: hidden_size {hidden} not divisible by {heads} heads")
        self.heads = heads
        self.head_dim = hidden // heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, allowed: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x [B, T, D]; allowed: bool [B or 1, 1, T, T] (True = may attend) or None."""
        b, t, d = x.shape
        q = (self.q_proj(x) * self.scale).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        s = torch.matmul(q, k.transpose(-1, -2))  # [B, H, T, T]
        if allowed is not None:
            s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
        p = torch.softmax(s, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(o)


class CLIPMLP(nn.Module):
    def __init__(self, hidden: int, inter: int, act: str):
        super().__init__()
        self.act = _act(act)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class CLIPEncoderLayer(nn.Module):
    def __init__(self, hidden: int, inter: int, heads: int, act: str, eps: float):
        super().__init__()
        self.self_attn = CLIPAttention(hidden, heads)
        self.layer_norm1 = nn.LayerNorm(hidden, eps=eps)
        self.mlp = CLIPMLP(hidden, inter, act)
        self.layer_norm2 = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x, allowed=None):
        x = x + self.self_attn(self.layer_norm1(x), allowed)
        return x + self.mlp(self.layer_norm2(x))


class CLIPEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList(
            CLIPEncoderLayer(cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads,
                             cfg.hidden_act, cfg.layer_norm_eps)
            for _ in range(cfg.num_hidden_layers))

    def forward(self, x, allowed=None):
        for layer in self.layers:
            x = layer(x, allowed)
        return x


class CLIPTextEmbeddings(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.token_embedding = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embedding = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        return self.token_embedding(input_ids) + self.position_embedding.weight[:t].unsqueeze(0)


class CLIPTextTransformer(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = CLIPTextEmbeddings(cfg)
        self.encoder = CLIPEncoder(cfg)
        self.final_layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, input_ids, attention_mask=None):
        """input_ids [B, T] (any int dtype), attention_mask [B, T] or None.

        Returns (last_hidden_state [B, T, D] after final_layer_norm, pooled [B, D]).
        """
        input_ids = input_ids.long()
        b, t = input_ids.shape
        x = self.embeddings(input_ids)
        idx = torch.arange(t, device=input_ids.device)
        allowed = (idx.unsqueeze(0) <= idx.unsqueeze(1)).view(1, 1, t, t)  # causal
        if attention_mask is not None:
            allowed = allowed & (attention_mask != 0).view(b, 1, 1, t)
        x = self.final_layer_norm(self.encoder(x, allowed))
        # HF (eos_token_id != 2): the first position holding eos_token_id.
        eos = (input_ids == self.config.eos_token_id).int().argmax(dim=-1)
        pooled = x[torch.arange(b, device=x.device), eos]
        return x, pooled


class CLIPVisionEmbeddings(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.class_embedding = nn.Parameter(torch.randn(cfg.hidden_size))
        self.patch_embedding = nn.Conv2d(cfg.num_channels, cfg.hidden_size, cfg.patch_size,
                                         stride=cfg.patch_size, bias=False)
        n = (cfg.image_size // cfg.patch_size) ** 2 + 1
        self.position_embedding = nn.Embedding(n, cfg.hidden_size)

    def forward(self, pixel_values):
        b = pixel_values.shape[0]
        p = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)  # [B, P, D]
        c = self.class_embedding.view(1, 1, -1).expand(b, 1, -1)
        return torch.cat([c, p], dim=1) + self.position_embedding.weight.unsqueeze(0)


class CLIPVisionTransformer(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = CLIPVisionEmbeddings(cfg)
        self.pre_layrnorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)  # sic (HF)
        self.encoder = CLIPEncoder(cfg)
        self.post_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, pixel_values):
        """pixel_values [B, C, H, W] -> (last_hidden_state [B, 1+P, D] before post_layernorm,
        pooled [B, D] = post_layernorm(last_hidden_state[:, 0]))."""
        x = self.encoder(self.pre_layrnorm(self.embeddings(pixel_values)))
        return x, self.post_layernorm(x[:, 0, :])


class CLIP(nn.Module):
    """CLIPModel with Hugging Face parameter names."""

    def __init__(self, config: CLIPConfig):
        super().__init__()
        self.config = config
        self.text_model = CLIPTextTransformer(config.text_config)
        self.vision_model = CLIPVisionTransformer(config.vision_config)
        self.text_projection = nn.Linear(config.text_config.hidden_size, config.projection_dim, bias=False)
        self.visual_projection = nn.Linear(config.vision_config.hidden_size, config.projection_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(float(config.logit_scale_init_value)))

    def init_random(self, seed: int = 0, std: float = 0.02) -> "CLIP":
        """Re-initialise every parameter from a seeded generator (normal(0, std) for
        weights, 1 +- small noise for LayerNorm weights, small noise for biases), so
        that a tiny random model gives non-trivial, reproducible outputs."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name == "logit_scale":
                    p.fill_(float(self.config.logit_scale_init_value))
                elif "norm" in name and name.endswith("weight"):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
                elif name.endswith("bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
                elif "embedding" in name:
                    p.copy_(std * 10 * torch.randn(p.shape, generator=g))
                else:
                    fan_in = p.shape[1] if p.dim() >= 2 else p.shape[0]
                    if p.dim() == 4:
                        fan_in = p.shape[1] * p.shape[2] * p.shape[3]
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
        return self

    def encode_text(self, input_ids, attention_mask=None):
        """-> (last_hidden_state [B, T, dt], text_embeds [B, dp]) (HF CLIPTextModelWithProjection)."""
        h, pooled = self.text_model(input_ids, attention_mask)
        return h, self.text_projection(pooled)

    def encode_image(self, pixel_values):
        """-> (last_hidden_state [B, 1+P, dv], image_embeds [B, dp]) (HF CLIPVisionModelWithProjection)."""
        h, pooled = self.vision_model(pixel_values)
        return h, self.visual_projection(pooled)

    def forward(self, input_ids, pixel_values, attention_mask=None):
        """-> logits_per_image [Bi, Bt] = exp(logit_scale) * cos(image_embeds, text_embeds)."""
        _, t = self.encode_text(input_ids, attention_mask)
        _, i = self.encode_image(pixel_values)
        t = t / t.norm(dim=-1, keepdim=True)
        i = i / i.norm(dim=-1, keepdim=True)
        return self.logit_scale.exp() * i @ t.t()

    def hf_state_dict(self) -> Dict[str, torch.Tensor]:
        """The state dict as Hugging Face CLIPModel names it (plus its position_ids buffers)."""
        sd = {k: v.detach().clone().contiguous() for k, v in self.state_dict().items()}
        tc, vc = self.config.text_config, self.config.vision_config
        sd["text_model.embeddings.position_ids"] = torch.arange(tc.max_position_embeddings).view(1, -1)
        n = (vc.image_size // vc.patch_size) ** 2 + 1
        sd["vision_model.embeddings.position_ids"] = torch.arange(n).view(1, -1)
        return sd

    def load_hf_state_dict(self, sd: Dict[str, "torch.Tensor | np.ndarray"]) -> None:
        """Loads a Hugging Face CLIPModel state dict (position_ids buffers are ignored)."""
        sd = {k: torch.as_tensor(np.asarray(v)) if isinstance(v, np.ndarray) else v
              for k, v in sd.items() if not k.endswith("position_ids")}
        self.load_state_dict(sd)


# --------------------------------------------------------------------------
# ONNX export
# --------------------------------------------------------------------------


class _TextGraph(nn.Module):
    def __init__(self, model: CLIP, with_mask: bool, hidden: bool, pooled: bool):
        super().__init__()
        self.m, self.with_mask, self.hidden, self.pooled = model, with_mask, hidden, pooled

    def forward(self, input_ids, attention_mask=None):
        h, e = self.m.encode_text(input_ids, attention_mask if self.with_mask else None)
        out = []
        if self.hidden:
            out.append(h)
        if self.pooled:
            out.append(e)
        return tuple(out)


class _VisionGraph(nn.Module):
    def __init__(self, model: CLIP, hidden: bool, pooled: bool):
        super().__init__()
        self.m, self.hidden, self.pooled = model, hidden, pooled

    def forward(self, pixel_values):
        h, e = self.m.encode_image(pixel_values)
        out = []
        if self.hidden:
            out.append(h)
        if self.pooled:
            out.append(e)
        return tuple(out)


def export_text_onnx(model: CLIP, path: str, ids_dtype=torch.int64, with_mask: bool = True,
                     hidden: bool = True, pooled: bool = True, opset: int = 17) -> None:
    """Exports the text tower to ``path``.

    Inputs: ``input_ids`` [batch, sequence] (``ids_dtype``: torch.int64 or torch.int32) and,
    when ``with_mask``, ``attention_mask`` [batch, sequence] of the same dtype.
    Outputs: ``last_hidden_state`` [batch, sequence, d_t] (when ``hidden``) and
    ``text_embeds`` [batch, d_p] (when ``pooled``); batch and sequence are dynamic.
    The file is written atomically, with all weights inside it (no external data).
    """
    if not (hidden or pooled):
        raise ValueError("pyclip: export_text_onnx needs hidden or pooled")
    model = model.eval()
    g = _TextGraph(model, with_mask, hidden, pooled).eval()
    t = min(7, model.config.text_config.max_position_embeddings)
    ids = torch.full((2, t), 0, dtype=ids_dtype)
    ids[:, -1] = model.config.text_config.eos_token_id
    args: Tuple = (ids,)
    names = ["input_ids"]
    axes = {"input_ids": {0: "batch", 1: "sequence"}}
    if with_mask:
        args = (ids, torch.ones_like(ids))
        names.append("attention_mask")
        axes["attention_mask"] = {0: "batch", 1: "sequence"}
    outs = []
    if hidden:
        outs.append("last_hidden_state")
        axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    if pooled:
        outs.append("text_embeds")
        axes["text_embeds"] = {0: "batch"}
    _export(g, args, path, names, outs, axes, opset)


def export_vision_onnx(model: CLIP, path: str, hidden: bool = True, pooled: bool = True,
                       opset: int = 17) -> None:
    """Exports the vision tower to ``path``.

    Input: ``pixel_values`` [batch, C, H, W] float32 (H = W = image_size).
    Outputs: ``last_hidden_state`` [batch, 1+P, d_v] (before post_layernorm; when ``hidden``)
    and ``image_embeds`` [batch, d_p] (when ``pooled``); batch is dynamic.
    """
    if not (hidden or pooled):
        raise ValueError("pyclip: export_vision_onnx needs hidden or pooled")
    model = model.eval()
    vc = model.config.vision_config
    g = _VisionGraph(model, hidden, pooled).eval()
    x = torch.zeros(2, vc.num_channels, vc.image_size, vc.image_size)
    outs, axes = [], {"pixel_values": {0: "batch"}}
    if hidden:
        outs.append("last_hidden_state")
        axes["last_hidden_state"] = {0: "batch"}
    if pooled:
        outs.append("image_embeds")
        axes["image_embeds"] = {0: "batch"}
    _export(g, (x,), path, ["pixel_values"], outs, axes, opset)


def compact_onnx(path: str) -> None:
    """Shrinks an exported ONNX file in place without changing what it computes:
    drops node names and doc strings and renames intermediate values to short
    names (graph inputs, outputs and initializers keep their names)."""
    import onnx

    m = onnx.load(path)
    g = m.graph
    keep = {v.name for v in g.input} | {v.name for v in g.output} | {i.name for i in g.initializer}
    ren: Dict[str, str] = {}

    def r(name: str) -> str:
        if not name or name in keep:
            return name
        if name not in ren:
            ren[name] = f"v{len(ren)}"
        return ren[name]

    for n in g.node:
        n.name = ""
        n.doc_string = ""
        for i, x in enumerate(n.input):
            n.input[i] = r(x)
        for i, x in enumerate(n.output):
            n.output[i] = r(x)
    for vi in g.value_info:
        vi.name = r(vi.name)
    g.doc_string = ""
    m.doc_string = ""
    onnx.checker.check_model(m)
    _atomic_write(path, m.SerializeToString())


def _export(g, args, path, inputs, outputs, axes, opset):
    import onnx  # imported here so that the model code works without onnx

    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.no_grad():
            torch.onnx.export(g, args, tmp, input_names=inputs, output_names=outputs,
                              dynamic_axes=axes, opset_version=opset, do_constant_folding=True)
        m = onnx.load(tmp)
        onnx.checker.check_model(m)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# --------------------------------------------------------------------------
# Files: safetensors, config.json, preprocessor_config.json
# --------------------------------------------------------------------------

_ST_DTYPES = {
    np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("float64"): "F64",
    np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("int16"): "I16",
    np.dtype("int8"): "I8", np.dtype("uint8"): "U8", np.dtype("bool"): "BOOL",
}
_ST_NP = {v: k for k, v in _ST_DTYPES.items()}


def _atomic_write(path: str, data: bytes) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_safetensors(path: str, tensors: Dict[str, "np.ndarray | torch.Tensor"],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes tensors (numpy arrays or torch tensors) to a .safetensors file, by hand:
    8-byte little-endian header length, JSON header (names sorted, data_offsets relative
    to the data section, ``__metadata__`` string map), padded with spaces to 8 bytes,
    then the raw little-endian data. Atomic."""
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for name in sorted(tensors):
        a = tensors[name]
        if isinstance(a, torch.Tensor):
            a = a.detach().cpu().numpy()
        a = np.ascontiguousarray(a)
        if a.dtype not in _ST_DTYPES:
            raise ValueError(f"pyclip: safetensors: tensor {name!r} has unsupported dtype {a.dtype}")
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _ST_DTYPES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    _atomic_write(path, struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Reads a .safetensors file -> (name -> numpy array, __metadata__)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        dt = _ST_NP[info["dtype"]].newbyteorder("<")
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(info["shape"]).copy()
    return out, meta


def write_json(path: str, obj) -> None:
    """Writes obj as indented JSON (atomic, trailing newline)."""
    _atomic_write(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


def write_config(directory: str, config: CLIPConfig) -> None:
    """Writes directory/config.json in the Hugging Face CLIPConfig layout."""
    write_json(os.path.join(directory, "config.json"), config.to_dict())


CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def write_preprocessor_config(directory: str, size: int, crop: Optional[int] = None,
                              mean: Sequence[float] = CLIP_MEAN, std: Sequence[float] = CLIP_STD,
                              resample: int = 3) -> None:
    """Writes directory/preprocessor_config.json (CLIPImageProcessor): resize the shortest
    edge to ``size`` (bicubic = 3), centre-crop ``crop`` (default ``size``), rescale 1/255,
    normalise with ``mean``/``std``."""
    crop = size if crop is None else crop
    write_json(os.path.join(directory, "preprocessor_config.json"), {
        "crop_size": {"height": crop, "width": crop},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(mean),
        "image_processor_type": "CLIPImageProcessor",
        "image_std": list(std),
        "resample": resample,
        "rescale_factor": 1 / 255,
        "size": {"shortest_edge": size},
    })


# --------------------------------------------------------------------------
# Tokenizer: CLIP's byte-level BPE, in the Hugging Face file formats
# --------------------------------------------------------------------------

BOS = "<|startoftext|>"
EOS = "<|endoftext|>"

# The CLIP pre-tokenizer pattern. Python's re has no \p{L}/\p{N}; [^\W\d_] is "letter"
# and \d is "decimal digit" (\p{N} also has other numerals: exact for ASCII and most text).
_SPLIT_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"
_SPLIT_RE = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d|[^\W\d_]+|\d|(?:[^\s\w]|_)+")


def bytes_to_unicode() -> Dict[int, str]:
    """CLIP/GPT-2's reversible byte -> printable symbol table, in vocabulary order
    (printable Latin-1 bytes first, then the rest mapped to U+0100...)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def normalize(text: str) -> str:
    """HF CLIP fast-tokenizer normaliser: NFC, whitespace runs -> one space, lowercase."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).lower()


_B2U = bytes_to_unicode()


def pre_tokenize(text: str) -> List[str]:
    """Normalised text -> words as byte-level symbol strings (no </w> yet)."""
    b2u = _B2U
    return ["".join(b2u[b] for b in w.encode("utf-8")) for w in _SPLIT_RE.findall(normalize(text))]


def learn_bpe(texts: Iterable[str], num_merges: int) -> List[Tuple[str, str]]:
    """Learns up to ``num_merges`` CLIP-style merges (words end in ``</w>``) from texts,
    most frequent pair first (ties: the lexicographically smallest pair), the way
    CLIP's vocabulary was built. Returns the merges as (left, right) pairs."""
    words = Counter()
    for t in texts:
        for w in pre_tokenize(t):
            words[tuple(w[:-1]) + (w[-1] + "</w>",)] += 1
    merges: List[Tuple[str, str]] = []
    for _ in range(num_merges):
        pairs = Counter()
        for w, c in words.items():
            for i in range(len(w) - 1):
                pairs[(w[i], w[i + 1])] += c
        if not pairs:
            break
        top = max(pairs.values())
        best = min(p for p, c in pairs.items() if c == top)
        merges.append(best)
        nw = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i < len(w) - 1 and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] += c
        words = nw
    return merges


class Vocab:
    """A CLIP vocabulary built from merges: ids 0..255 the byte symbols (in
    bytes_to_unicode order), 256..511 their ``</w>`` forms, then one token per merge, then
    ``<|startoftext|>`` and ``<|endoftext|>`` (bos = len-2, eos = pad = unk = len-1).
    A merge whose token already exists adds no new id."""

    def __init__(self, merges: Sequence[Tuple[str, str]]):
        self.merges = [tuple(m) for m in merges]
        syms = list(bytes_to_unicode().values())
        tokens = syms + [s + "</w>" for s in syms] + ["".join(m) for m in self.merges] + [BOS, EOS]
        self.encoder: Dict[str, int] = {}
        for tok in tokens:
            # Two merges can spell the same token ("ab"+"c", "a"+"bc"); it keeps its first id.
            if tok not in self.encoder:
                self.encoder[tok] = len(self.encoder)
        self.ranks = {m: i for i, m in enumerate(self.merges)}
        self.bos_id = self.encoder[BOS]
        self.eos_id = self.encoder[EOS]
        self._bpe_cache: Dict[str, List[str]] = {}

    def __len__(self) -> int:
        return len(self.encoder)

    def _bpe(self, word: str) -> List[str]:
        """The word's tokens (remembered: a word always merges the same way)."""
        w = self._bpe_cache.get(word)
        if w is None:
            w = self._bpe_cache[word] = self._merge(word)
        return w

    def _merge(self, word: str) -> List[str]:
        w = list(word[:-1]) + [word[-1] + "</w>"]
        while len(w) > 1:
            pairs = [(self.ranks.get((w[i], w[i + 1]), math.inf), i) for i in range(len(w) - 1)]
            r, _ = min(pairs)
            if r == math.inf:
                break
            pair = self.merges[r]
            out, i = [], 0
            while i < len(w):
                if i < len(w) - 1 and (w[i], w[i + 1]) == pair:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            w = out
        return w

    def encode(self, text: str, max_length: Optional[int] = None, pad: bool = False) -> List[int]:
        """Token ids with BOS and EOS, as the HF fast tokenizer gives them. With
        ``max_length``: truncate to max_length-2 content tokens; with ``pad`` also pad with
        EOS (the pad token) to max_length."""
        ids = [self.encoder[t] for w in pre_tokenize(text) for t in self._bpe(w)]
        if max_length is not None:
            ids = ids[:max_length - 2]
        ids = [self.bos_id] + ids + [self.eos_id]
        if pad and max_length is not None:
            ids += [self.eos_id] * (max_length - len(ids))
        return ids

    def batch(self, texts: Sequence[str], max_length: int) -> Tuple[np.ndarray, np.ndarray]:
        """-> (input_ids int64 [N, max_length] padded with EOS, attention_mask int64 [N, max_length])."""
        ids = np.full((len(texts), max_length), self.eos_id, dtype=np.int64)
        mask = np.zeros((len(texts), max_length), dtype=np.int64)
        for i, t in enumerate(texts):
            e = self.encode(t, max_length=max_length)
            ids[i, :len(e)] = e
            mask[i, :len(e)] = 1
        return ids, mask

    def write(self, directory: str, model_max_length: int = 77) -> None:
        """Writes vocab.json, merges.txt, tokenizer.json and tokenizer_config.json in the
        layout of the CLIP hub repositories (same structure as openai/clip-vit-base-patch32)."""
        write_json(os.path.join(directory, "vocab.json"), self.encoder)
        _atomic_write(os.path.join(directory, "merges.txt"),
                      ("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in self.merges)).encode())
        write_json(os.path.join(directory, "tokenizer_config.json"), {
            "model_max_length": model_max_length, "pad_token": EOS, "bos_token": BOS,
            "eos_token": EOS, "unk_token": EOS, "do_lower_case": True,
            "tokenizer_class": "CLIPTokenizer"})
        tj = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": self.bos_id, "content": BOS, "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": True, "special": True},
                {"id": self.eos_id, "content": EOS, "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": False, "special": True},
            ],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "NFC"},
                {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
                {"type": "Lowercase"}]},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": _SPLIT_PATTERN}, "behavior": "Removed",
                 "invert": True},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": False}]},
            "post_processor": {"type": "RobertaProcessing", "sep": [EOS, self.eos_id],
                               "cls": [BOS, self.bos_id], "trim_offsets": False,
                               "add_prefix_space": False},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": EOS,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "</w>",
                      "fuse_unk": False, "byte_fallback": False,
                      "vocab": self.encoder, "merges": [f"{a} {b}" for a, b in self.merges]},
        }
        write_json(os.path.join(directory, "tokenizer.json"), tj)

    @classmethod
    def read(cls, directory: str) -> "Vocab":
        """Reads merges.txt from a directory written by write (or a real CLIP repo)."""
        with open(os.path.join(directory, "merges.txt"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(l.split(" ")) for l in lines[1:] if l]
        return cls(merges)


# --------------------------------------------------------------------------
# Everything together
# --------------------------------------------------------------------------


def save_pretrained(directory: str, model: CLIP, vocab: Vocab, image_size: Optional[int] = None,
                    metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes a complete model directory in the Hugging Face layout: config.json,
    preprocessor_config.json, vocab.json, merges.txt, tokenizer.json,
    tokenizer_config.json, model.safetensors (full state dict, HF names) and
    onnx/text_model.onnx + onnx/vision_model.onnx (int64 input_ids + attention_mask;
    last_hidden_state and the embeds)."""
    vc = model.config.vision_config
    tc = model.config.text_config
    if len(vocab) != tc.vocab_size:
        raise ValueError(f"pyclip: vocabulary has {len(vocab)} tokens, text_config.vocab_size is {tc.vocab_size}")
    if vocab.eos_id != tc.eos_token_id or vocab.bos_id != tc.bos_token_id:
        raise ValueError("pyclip: text_config bos/eos ids do not match the vocabulary")
    write_config(directory, model.config)
    write_preprocessor_config(directory, image_size or vc.image_size, vc.image_size)
    vocab.write(directory, model_max_length=tc.max_position_embeddings)
    write_safetensors(os.path.join(directory, "model.safetensors"), model.hf_state_dict(),
                      metadata or {"format": "pt"})
    export_text_onnx(model, os.path.join(directory, "onnx", "text_model.onnx"))
    export_vision_onnx(model, os.path.join(directory, "onnx", "vision_model.onnx"))


def tiny_config(vocab_size: int, width: int = 32, layers: int = 2, heads: int = 4,
                image_size: int = 32, patch_size: int = 8, max_length: int = 16,
                projection_dim: int = 16) -> CLIPConfig:
    """A small CLIPConfig whose bos/eos ids are the last two of a ``vocab_size`` vocabulary."""
    return CLIPConfig(
        text_config=TextConfig(vocab_size=vocab_size, hidden_size=width, intermediate_size=2 * width,
                               projection_dim=projection_dim, num_hidden_layers=layers,
                               num_attention_heads=heads, max_position_embeddings=max_length,
                               pad_token_id=vocab_size - 1, bos_token_id=vocab_size - 2,
                               eos_token_id=vocab_size - 1),
        vision_config=VisionConfig(hidden_size=width, intermediate_size=2 * width,
                                   projection_dim=projection_dim, num_hidden_layers=layers,
                                   num_attention_heads=heads, image_size=image_size,
                                   patch_size=patch_size),
        projection_dim=projection_dim)


def _selftest() -> None:
    # Tokenizer against the real CLIP vocabulary, when available.
    shared = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "clip")
    if os.path.exists(os.path.join(shared, "merges.txt")):
        v = Vocab.read(shared)
        with open(os.path.join(shared, "vocab.json"), encoding="utf-8") as f:
            assert v.encoder == json.load(f), "vocab.json differs from the one rebuilt from merges"
        n = bad = 0
        with open(os.path.join(shared, "golden.jsonl"), encoding="utf-8") as f:
            for line in f:
                g = json.loads(line)
                n += 1
                if v.encode(g["text"]) != g["hf"]:
                    bad += 1
        note = " (Python's re approximates \\p{L}/\\p{N}; see _SPLIT_RE)" if bad else ""
        print(f"tokenizer: {n - bad}/{n} golden strings of ../shared/clip/golden.jsonl match{note}")
    cfg = tiny_config(600)
    m = CLIP(cfg).init_random(0).eval()
    ids = torch.randint(0, 598, (2, 5))
    ids[:, -1] = 599
    h, e = m.encode_text(ids, torch.ones_like(ids))
    assert h.shape == (2, 5, 32) and e.shape == (2, 16)
    h, e = m.encode_image(torch.randn(3, 3, 32, 32))
    assert h.shape == (3, 17, 32) and e.shape == (3, 16)
    print("model: ok")


if __name__ == "__main__":
    import sys

    if "--selftest" in sys.argv:
        _selftest()
    else:
        print(__doc__)
