"""pytips: TIPSv2's text and vision towers in PyTorch with Hugging Face ``Tipsv2Model``
parameter names, for the generator scripts of the ``condition`` project.

A transcription of transformers' src/transformers/models/tipsv2/modeling_tipsv2.py and
configuration_tipsv2.py (the files generated from modular_tipsv2.py). It needs torch and
numpy only. What the towers compute:

Text (``Tipsv2TextModel``, prefix ``text_model.``):

* ``embeddings.token_embedding.weight`` [V, D]; the token vectors are multiplied by √D
  (``scale_sqrt_depth``) and a sinusoidal table is added: not a parameter (a non-persistent
  buffer, absent from model.safetensors), sin over the first D/2 columns and cos over the
  rest, frequency i being exp(-i · ln(10000) / (D/2 - 1)), computed in float32; position
  ids 0 .. T-1, T ≤ ``max_position_embeddings``.
* ``encoder.layers.N.`` CLIP's pre-LN block without a causal mask: ``layer_norm1``,
  ``self_attn.{q,k,v,out}_proj``, residual, ``layer_norm2``, ``mlp.fc1`` (ReLU) ``mlp.fc2``,
  residual. With ``attention_mask`` [B, T] the padded keys get the lowest float32 before the
  softmax; padded queries are computed all the same.
* ``final_layer_norm`` (eps ``layer_norm_eps``, 1e-5 by default) gives ``last_hidden_state``
  [B, T, D]; the pooled output [B, D] is the masked mean: Σ_t h_t·m_t / (Σ_t m_t +
  ``pooling_epsilon``) (the plain mean over T without a mask). No projection.

Vision (``Tipsv2VisionModel``, DINOv2 with registers, prefix ``vision_model.``):

* ``embeddings.patch_embeddings.projection`` a Conv2d (p×p, stride p, with bias) →
  [B, h·w, D] row-major over the h×w patch grid (h = H // p, w = W // p).
* ``embeddings.cls_token`` [1, 1, D] is put first, then ``embeddings.position_embeddings``
  [1, 1+N, D] is added to the 1+h·w rows (the class row gets row 0). When h·w ≠ N or the
  image is not square (H ≠ W), rows 1.. are resized from their √N×√N grid to h×w with
  ``F.interpolate(mode="bilinear", antialias=interpolate_antialias, size=(h, w))``
  (align_corners False) in float32; ``interpolate_offset`` ≠ 0 asks for a scale factor
  instead of a size.
* Then ``embeddings.register_tokens`` [1, R, D] are inserted after the class row, with no
  position: the sequence is [class, R registers, h·w patches]. ``embeddings.mask_token`` is
  in the state dict but only used in pretraining.
* ``encoder.layer.N.``: ``norm1``; ``attention.attention.{query,key,value}`` (bias when
  ``qkv_bias``), ``attention.output.dense``; times ``layer_scale1.lambda1`` [D]; residual;
  ``norm2``; ``mlp.fc1`` (D → int(D·mlp_ratio), ``hidden_act`` gelu: the erf form)
  ``mlp.fc2``; times ``layer_scale2.lambda1``; residual. With ``use_swiglu_ffn`` (the g14
  size) the MLP is a SwiGLU instead: F = (int(int(D·mlp_ratio)·2/3) + 7) // 8 · 8,
  ``mlp.weights_in`` (D → 2F), its output cut in two halves x1, x2, silu(x1)·x2,
  ``mlp.weights_out`` (F → D).
* ``layernorm`` (eps 1e-6 by default) gives ``last_hidden_state`` [B, 1+R+h·w, D]; the pooled
  output is its row 0 (the first class token; rows 1..R are the registers, the second class
  token of the model card). No projection.

Joint space: ``Tipsv2Model`` L2-normalises both pooled outputs and divides their dot
products by ``temperature`` (a config float). TIPSv2 is trained for dense patch–text
alignment with no head in between, so a patch's vector in the joint space is its row of
``last_hidden_state``, rows 1+R.. (``patch_embeds`` here), compared with the pooled text
output after both are L2-normalised.

Public interface:

    TextConfig, VisionConfig, Config       dataclasses, Hugging Face field names
    Tips(config)                           torch.nn.Module, Tipsv2Model's state-dict names
      .init_random(seed)                   seeded random weights (every parameter non-trivial)
      .encode_text(input_ids, attention_mask=None) -> (last_hidden_state, pooled)
      .encode_image(pixel_values)          -> (last_hidden_state, pooled, patch_embeds)
      .positions(h, w, height, width)      -> [1, 1+h·w, D] the positions the image gets
      .encode_image_values(pixel_values)   -> [B, P, D] the value-attention readout's patch rows
    sinusoids(n, d)                        the text's position table [n, d]
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pyclip.clip import write_json, write_safetensors  # noqa: E402,F401  (re-exported for generators)


@dataclasses.dataclass
class TextConfig:
    """Tipsv2TextConfig (defaults are transformers')."""

    vocab_size: int = 32000
    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    max_position_embeddings: int = 64
    hidden_act: str = "relu"
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 0
    scale_sqrt_depth: bool = True
    pooling_epsilon: float = 1e-8

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["model_type"] = "tipsv2_text_model"
        return d


@dataclasses.dataclass
class VisionConfig:
    """Tipsv2VisionConfig (defaults are transformers')."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    mlp_ratio: float = 4.0
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-6
    image_size: int = 448
    patch_size: int = 14
    num_channels: int = 3
    qkv_bias: bool = True
    layerscale_value: float = 1.0
    use_swiglu_ffn: bool = False
    num_register_tokens: int = 1
    interpolate_antialias: bool = True
    interpolate_offset: float = 0.0

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["model_type"] = "tipsv2_vision_model"
        return d

    @property
    def mlp_size(self) -> int:
        return int(self.hidden_size * self.mlp_ratio)


@dataclasses.dataclass
class Config:
    """Tipsv2Config: the two towers and the temperature."""

    text_config: TextConfig = dataclasses.field(default_factory=TextConfig)
    vision_config: VisionConfig = dataclasses.field(default_factory=VisionConfig)
    temperature: float = 0.01

    def to_dict(self) -> dict:
        return {"architectures": ["Tipsv2Model"], "model_type": "tipsv2",
                "temperature": self.temperature, "text_config": self.text_config.to_dict(),
                "vision_config": self.vision_config.to_dict(), "torch_dtype": "float32"}


def _act(name: str):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise ValueError(f"pytips: hidden_act {name!r} is not transcribed")


def sinusoids(n: int, d: int) -> torch.Tensor:
    """The text's position table [n, d] in float32 (tensor2tensor's layout: sin, then cos)."""
    half = d // 2
    step = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.int64).float() * -step)
    ang = torch.arange(n, dtype=torch.int64).float().unsqueeze(1) * freq.unsqueeze(0)
    t = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).view(n, -1)
    if d % 2 == 1:
        t = torch.cat([t, torch.zeros(n, 1)], dim=1)
    return t


def _attend(q, k, v, heads, bias=None):
    """Scaled dot-product attention of q, k, v [B, T, D] in heads, bias [B, 1, 1, T]."""
    b, t, d = q.shape
    hd = d // heads
    q = q.view(b, t, heads, hd).transpose(1, 2)
    k = k.view(b, t, heads, hd).transpose(1, 2)
    v = v.view(b, t, heads, hd).transpose(1, 2)
    s = torch.matmul(q, k.transpose(-1, -2)) * hd ** -0.5
    if bias is not None:
        s = s + bias
    a = torch.softmax(s, dim=-1)
    return torch.matmul(a, v).transpose(1, 2).reshape(b, t, d)


# --- text ---------------------------------------------------------------------------------

class TextAttention(nn.Module):
    def __init__(self, c: TextConfig):
        super().__init__()
        d = c.hidden_size
        self.heads = c.num_attention_heads
        self.k_proj, self.v_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.q_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x, bias):
        return self.out_proj(_attend(self.q_proj(x), self.k_proj(x), self.v_proj(x), self.heads, bias))


class TextMLP(nn.Module):
    def __init__(self, c: TextConfig):
        super().__init__()
        self.act = _act(c.hidden_act)
        self.fc1 = nn.Linear(c.hidden_size, c.intermediate_size)
        self.fc2 = nn.Linear(c.intermediate_size, c.hidden_size)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TextLayer(nn.Module):
    def __init__(self, c: TextConfig):
        super().__init__()
        self.self_attn = TextAttention(c)
        self.layer_norm1 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.mlp = TextMLP(c)
        self.layer_norm2 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x, bias):
        x = x + self.self_attn(self.layer_norm1(x), bias)
        return x + self.mlp(self.layer_norm2(x))


class TextEmbeddings(nn.Module):
    def __init__(self, c: TextConfig):
        super().__init__()
        self.token_embedding = nn.Embedding(c.vocab_size, c.hidden_size)
        self.register_buffer("positions", sinusoids(c.max_position_embeddings, c.hidden_size), persistent=False)
        self.scale = math.sqrt(c.hidden_size) if c.scale_sqrt_depth else 1.0

    def forward(self, ids):
        t = ids.shape[-1]
        if t > self.positions.shape[0]:
            raise ValueError(f"pytips: {t} tokens, more than max_position_embeddings {self.positions.shape[0]}")
        return self.token_embedding(ids) * self.scale + self.positions[:t]


class TextEncoder(nn.Module):
    def __init__(self, c: TextConfig):
        super().__init__()
        self.layers = nn.ModuleList([TextLayer(c) for _ in range(c.num_hidden_layers)])


class TextModel(nn.Module):
    def __init__(self, c: TextConfig):
        super().__init__()
        self.config = c
        self.embeddings = TextEmbeddings(c)
        self.encoder = TextEncoder(c)
        self.final_layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, ids, mask=None):
        x = self.embeddings(ids)
        bias = None
        if mask is not None:
            bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.encoder.layers:
            x = layer(x, bias)
        h = self.final_layer_norm(x)
        if mask is None:
            return h, h.mean(dim=1)
        pooled = (h * mask[..., None]).sum(dim=1) / (mask.sum(dim=1, keepdim=True) + self.config.pooling_epsilon)
        return h, pooled


# --- vision -------------------------------------------------------------------------------

class PatchEmbeddings(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.projection = nn.Conv2d(c.num_channels, c.hidden_size, kernel_size=c.patch_size, stride=c.patch_size)

    def forward(self, px):
        return self.projection(px).flatten(2).transpose(1, 2)


class VisionEmbeddings(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.config = c
        d = c.hidden_size
        n = (c.image_size // c.patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.mask_token = nn.Parameter(torch.zeros(1, d))
        self.register_tokens = nn.Parameter(torch.zeros(1, c.num_register_tokens, d))
        self.patch_embeddings = PatchEmbeddings(c)
        self.position_embeddings = nn.Parameter(torch.zeros(1, n + 1, d))

    def positions(self, h, w, height, width):
        """The positions [1, 1+h·w, D] an image of height×width pixels (h×w patches) gets."""
        table = self.position_embeddings
        n = table.shape[1] - 1
        if h * w == n and height == width:
            return table
        c = self.config
        side = int(n ** 0.5)
        d = table.shape[-1]
        grid = table[:, 1:].float().reshape(1, side, side, d).permute(0, 3, 1, 2)
        if c.interpolate_offset:
            kw = {"scale_factor": ((h + c.interpolate_offset) / side, (w + c.interpolate_offset) / side)}
        else:
            kw = {"size": (h, w)}
        grid = F.interpolate(grid, mode="bilinear", antialias=c.interpolate_antialias, **kw)
        if grid.shape[-2:] != (h, w):
            raise ValueError(f"pytips: positions resized to {tuple(grid.shape[-2:])}, expected {(h, w)}")
        grid = grid.permute(0, 2, 3, 1).reshape(1, -1, d)
        return torch.cat((table[:, :1], grid), dim=1)

    def forward(self, px):
        b, _, height, width = px.shape
        p = self.config.patch_size
        x = self.patch_embeddings(px)
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)
        x = x + self.positions(height // p, width // p, height, width)
        return torch.cat((x[:, :1], self.register_tokens.expand(b, -1, -1), x[:, 1:]), dim=1)


class SelfAttention(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        d = c.hidden_size
        self.heads = c.num_attention_heads
        self.query = nn.Linear(d, d, bias=c.qkv_bias)
        self.key = nn.Linear(d, d, bias=c.qkv_bias)
        self.value = nn.Linear(d, d, bias=c.qkv_bias)

    def forward(self, x):
        return _attend(self.query(x), self.key(x), self.value(x), self.heads)


class SelfOutput(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)


class Attention(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.attention = SelfAttention(c)
        self.output = SelfOutput(c)

    def forward(self, x):
        return self.output.dense(self.attention(x))


class LayerScale(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.lambda1 = nn.Parameter(c.layerscale_value * torch.ones(c.hidden_size))

    def forward(self, x):
        return x * self.lambda1


class VisionMLP(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.act = _act(c.hidden_act)
        self.fc1 = nn.Linear(c.hidden_size, c.mlp_size)
        self.fc2 = nn.Linear(c.mlp_size, c.hidden_size)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class VisionSwiGLU(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        f = (int(c.mlp_size * 2 / 3) + 7) // 8 * 8
        self.weights_in = nn.Linear(c.hidden_size, 2 * f)
        self.weights_out = nn.Linear(f, c.hidden_size)

    def forward(self, x):
        x1, x2 = self.weights_in(x).chunk(2, dim=-1)
        return self.weights_out(F.silu(x1) * x2)


class VisionLayer(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.attention = Attention(c)
        self.layer_scale1 = LayerScale(c)
        self.norm2 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.mlp = VisionSwiGLU(c) if c.use_swiglu_ffn else VisionMLP(c)
        self.layer_scale2 = LayerScale(c)

    def forward(self, x):
        x = self.layer_scale1(self.attention(self.norm1(x))) + x
        return self.layer_scale2(self.mlp(self.norm2(x))) + x


class VisionEncoder(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.layer = nn.ModuleList([VisionLayer(c) for _ in range(c.num_hidden_layers)])


class VisionModel(nn.Module):
    def __init__(self, c: VisionConfig):
        super().__init__()
        self.config = c
        self.embeddings = VisionEmbeddings(c)
        self.encoder = VisionEncoder(c)
        self.layernorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, px):
        x = self.embeddings(px)
        for layer in self.encoder.layer:
            x = layer(x)
        h = self.layernorm(x)
        return h, h[:, 0]


# --- the model ----------------------------------------------------------------------------

class Tips(nn.Module):
    """Tipsv2Model's towers: ``text_model.*`` and ``vision_model.*``, as its state dict names
    them (the temperature is a config value, not a tensor)."""

    def __init__(self, config: Config):
        super().__init__()
        if config.text_config.hidden_size != config.vision_config.hidden_size:
            raise ValueError("pytips: text_config.hidden_size and vision_config.hidden_size must match")
        self.config = config
        self.text_model = TextModel(config.text_config)
        self.vision_model = VisionModel(config.vision_config)

    def init_random(self, seed: int = 0) -> "Tips":
        """Re-initialises every parameter from a seeded generator: normal / sqrt(fan_in) for
        matrices and convolutions, 1 ± 0.1 for LayerNorm weights, 0.1-scale noise for biases,
        0.5 ± 0.2 for the layer scales, unit normal for the token, class, register, mask and
        position vectors, so that a tiny model gives non-trivial, reproducible outputs."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "norm" in name and name.endswith("weight"):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
                elif name.endswith("lambda1"):
                    p.copy_(0.5 + 0.2 * torch.randn(p.shape, generator=g))
                elif name.endswith("bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
                elif "embedding" in name and "patch_embeddings" not in name or name.endswith("_token") \
                        or name.endswith("_tokens"):
                    p.copy_(torch.randn(p.shape, generator=g))
                else:
                    fan_in = int(np.prod(p.shape[1:]))
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
        return self

    def encode_text(self, input_ids, attention_mask=None):
        """-> (last_hidden_state [B, T, D], pooled [B, D]) (Tipsv2TextModel)."""
        return self.text_model(input_ids, attention_mask)

    def encode_image(self, pixel_values):
        """-> (last_hidden_state [B, 1+R+P, D], pooled [B, D], patch_embeds [B, P, D])."""
        h, pooled = self.vision_model(pixel_values)
        return h, pooled, h[:, 1 + self.config.vision_config.num_register_tokens:]

    def positions(self, h, w, height, width):
        return self.vision_model.embeddings.positions(h, w, height, width)

    def encode_image_values(self, pixel_values):
        """-> the patch rows [B, P, D] of the value-attention readout, as the TIPS authors'
        zero-shot segmentation evaluation computes them (google-deepmind/tips,
        pytorch/TIPSv2_Segmentation.ipynb, encode_image_value_attention): every block but the
        last as it is; in the last, the attention replaced by its value path
        (output.dense(value(norm1(x))), no query or key), times layer_scale1, plus the
        residual, then the MLP branch as it is; then the final layernorm."""
        vm = self.vision_model
        x = vm.embeddings(pixel_values)
        layers = list(vm.encoder.layer)
        for layer in layers[:-1]:
            x = layer(x)
        last = layers[-1]
        v = last.attention.output.dense(last.attention.attention.value(last.norm1(x)))
        x = last.layer_scale1(v) + x
        x = last.layer_scale2(last.mlp(last.norm2(x))) + x
        return vm.layernorm(x)[:, 1 + self.config.vision_config.num_register_tokens:]
