"""naflex: SigLIP 2's NaFlex vision tower in PyTorch with Hugging Face ``Siglip2VisionModel``
parameter names, on top of pysiglip.siglip's encoder and pooling head.

A transcription of transformers' modular_siglip2.py (Siglip2VisionEmbeddings with
resize_positional_embeddings, Siglip2VisionTransformer, Siglip2MultiheadAttentionPoolingHead),
for the generator scripts of the ``condition`` project. What differs from SigLIP's vision tower:

* Input: ``pixel_values`` [B, M, C·p²] (the image cut into p×p patches, row-major, each patch's
  pixels channel-last as Siglip2ImageProcessor lays them out, zero rows after the image's own
  patches up to M = max_num_patches), ``pixel_attention_mask`` [B, M] (1 for the image's
  patches), ``spatial_shapes`` [B, 2] (the image's patch grid, rows and columns).
* The patch embedding is ``nn.Linear(C·p², D)`` (``vision_model.embeddings.patch_embedding``).
* The learned positions ``vision_model.embeddings.position_embedding.weight`` [N, D] are a
  side×side grid (side = √N), resized per image to its spatial shape with
  ``F.interpolate(mode="bilinear", align_corners=False, antialias=True)`` in float32, laid out
  row-major over the image's grid, and the rows past h·w filled with the first resized row.
* The encoder's self-attention and the pooling head's attention see only the image's patches
  (a key padding mask from ``pixel_attention_mask``: the padding keys get the dtype's lowest
  value before the softmax; padding queries are computed all the same).
* ``last_hidden_state`` [B, M, D] after post_layernorm (the padding rows included, as
  transformers returns them); ``pooler_output`` [B, D].

Public interface:

    NaFlexVisionConfig                 dataclass: Siglip2VisionConfig's fields
    NaFlexVision(config)               torch.nn.Module (parameters named as in the file, without
                                       the ``vision_model.`` prefix)
      .positions(spatial_shapes, m)    -> [B, M, D] the resized, padded positions
      .forward(pixel_values, mask, spatial_shapes) -> (last_hidden_state, pooler_output)
      .layer_input(...)                -> the last encoder layer's input [B, M, D]
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from pysiglip.siglip import SiglipEncoder, SiglipMultiheadAttentionPoolingHead


@dataclasses.dataclass
class NaFlexVisionConfig:
    """Siglip2VisionConfig. Defaults are Hugging Face's (google/siglip2-base-patch16-naflex)."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    num_channels: int = 3
    num_patches: int = 256
    patch_size: int = 16
    hidden_act: str = "gelu_pytorch_tanh"
    layer_norm_eps: float = 1e-6
    attention_dropout: float = 0.0

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["model_type"] = "siglip2_vision_model"
        return d


class NaFlexEmbeddings(nn.Module):
    def __init__(self, cfg: NaFlexVisionConfig):
        super().__init__()
        self.side = int(math.isqrt(cfg.num_patches))
        if self.side * self.side != cfg.num_patches:
            raise ValueError(f"naflex: num_patches {cfg.num_patches} is not a square")
        self.patch_embedding = nn.Linear(cfg.num_channels * cfg.patch_size * cfg.patch_size, cfg.hidden_size)
        self.position_embedding = nn.Embedding(cfg.num_patches, cfg.hidden_size)

    def positions(self, spatial_shapes, m):
        """spatial_shapes [B, 2] -> [B, m, D]: the position grid resized to each image's grid
        (float32, bilinear with antialiasing), row-major, padded with its first row."""
        table = self.position_embedding.weight
        d = table.shape[-1]
        grid = table.reshape(self.side, self.side, d).permute(2, 0, 1).unsqueeze(0).to(torch.float32)
        out = torch.empty((spatial_shapes.shape[0], m, d), dtype=table.dtype)
        for i, (h, w) in enumerate(spatial_shapes.tolist()):
            if h <= 0 or w <= 0 or h * w > m:
                raise ValueError(f"naflex: spatial shape {h}x{w} for {m} patches")
            r = F.interpolate(grid, size=(h, w), mode="bilinear", align_corners=False, antialias=True)
            r = r.reshape(d, h * w).transpose(0, 1).to(table.dtype)
            out[i, :h * w] = r
            out[i, h * w:] = r[0]
        return out

    def forward(self, pixel_values, spatial_shapes):
        x = self.patch_embedding(pixel_values.to(self.patch_embedding.weight.dtype))
        return x + self.positions(spatial_shapes, pixel_values.shape[1])


class NaFlexHead(SiglipMultiheadAttentionPoolingHead):
    """The pooling head with the key padding mask (torch.nn.MultiheadAttention's attn_mask
    [B·heads, 1, M], the dtype's lowest value on padding keys)."""

    def __init__(self, cfg: NaFlexVisionConfig):
        super().__init__(cfg)
        self.heads = cfg.num_attention_heads

    def forward(self, x, mask=None):
        b, m, _ = x.shape
        probe = self.probe.repeat(b, 1, 1)
        attn_mask = None
        if mask is not None:
            lowest = torch.finfo(x.dtype).min
            attn_mask = torch.zeros((b, 1, 1, m), dtype=x.dtype).masked_fill(mask.view(b, 1, 1, m) == 0, lowest)
            attn_mask = attn_mask.repeat(1, self.heads, 1, 1).reshape(-1, 1, m)
        h = self.attention(probe, x, x, attn_mask=attn_mask)[0]
        h = h + self.mlp(self.layernorm(h))
        return h[:, 0]


class NaFlexVision(nn.Module):
    def __init__(self, cfg: NaFlexVisionConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = NaFlexEmbeddings(cfg)
        self.encoder = SiglipEncoder(cfg)
        self.post_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.head = NaFlexHead(cfg)

    def _allowed(self, mask):
        b, m = mask.shape
        return (mask != 0).view(b, 1, 1, m)

    def layer_input(self, pixel_values, mask, spatial_shapes):
        """The last encoder layer's input [B, M, D] (hidden_states[-2])."""
        x = self.embeddings(pixel_values, spatial_shapes)
        allowed = self._allowed(mask)
        for layer in self.encoder.layers[:-1]:
            x = layer(x, allowed)
        return x

    def forward(self, pixel_values, mask, spatial_shapes):
        """-> (last_hidden_state [B, M, D] after post_layernorm, pooler_output [B, D])."""
        x = self.embeddings(pixel_values, spatial_shapes)
        x = self.post_layernorm(self.encoder(x, self._allowed(mask)))
        return x, self.head(x, mask)
