#!/usr/bin/python3
"""train_tiny.py: a plan, and the skeleton of the loop, for training a tiny SigLIP on the
project's generated scenes with the sigmoid loss. It does not train a usable model yet;
``--smoke`` runs a few steps on testdata/scenes to show that the pieces fit together.

    /usr/bin/python3 scripts/pysiglip/train_tiny.py --smoke [--steps 5] [--out DIR]

The plan (what a real run needs; scripts/train_default/ is the CLIP recipe it follows):

1. Data. The same scenes as the built-in CLIP model: ``go run ./internal/scenes/cmd/gendata``
   writes images.npy (uint8 [N, S, S, 3]), labels.npy (uint8 [N, S, S], 0 background, k+1
   object k) and scenes.jsonl (caption, words, refs word -> object). train_default/train.py's
   ``gendata`` and ``Scenes`` read them; a SigLIP run would reuse them with this folder's
   tokenizer in place of CLIP's BPE (SiglipTokenizer over a spiece.model trained on the
   grammar's captions, ``siglip.train_spiece``; ids padded with </s> to 64, or to a shorter
   fixed length: pooling reads the LAST position, so every caption must be padded to the
   same length the Go side uses).
2. Model. ``siglip.SigLIP`` with train_default's sizes (64 pixels, patch 8, vision 64 wide x
   4 layers, text 64 wide x 2 layers, 4 heads; the head's width is the joint width).
   Preprocessing is SiglipImageProcessor's (resize to 64x64, mean = std = 0.5), so the
   scenes' pixels map to [-1, 1].
3. Losses, on the quantities the Go program uses for its joint-space maps:
     t_i  = normalize(text_model.head(text last_hidden_state[i]))   per token
     p_j  = normalize(patch_embeds(vision last_hidden_state)[j])    per patch (the pooling
            head's value path: out_proj(v_proj(x)), then + mlp(layernorm(.)))
     S_ij = exp(logit_scale) * t_i . p_j + logit_bias
   * pooled: the sigmoid loss (``sigmoid_loss`` below): every image-caption pair of the
     batch is its own binary problem, positive on the diagonal and where two captions are
     identical, negative elsewhere; -sum(log sigmoid(z * logits)) / batch. logit_scale
     starts at log 10 and logit_bias at -10, as the SigLIP paper does;
   * dense text -> image and image -> text: train_default's cross-entropies over S_ij become
     per-pair sigmoid terms (a named word's patches positive, the other patches negative;
     an owned patch's colour and shape words positive, the other content words negative),
     since the Go side scores SigLIP with sigmoids, each label on its own;
   * the auxiliary colour/shape classifier on the post_layernorm states, which the CLIP
     recipe needed before shapes were learned, probably again.
4. Schedule: train_default's (AdamW, warm-up then cosine, batch 128, two processes with the
   pooled loss over both halves: the sigmoid loss needs every pair across processes, so
   gather the other half's embeddings with their gradients, as train.py's ``gather`` does).
5. Export: ``siglip.write_safetensors`` + ``export_text_onnx``/``export_vision_onnx`` +
   config/preprocessor/tokenizer files, as testdata/tinysiglip/generate.py writes them;
   evaluate with ``condition models eval`` (zero-shot over the 40 prompts by sigmoid score,
   text -> image peaks, image -> text).
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))

from pysiglip import siglip  # noqa: E402

COLOURS = ["red", "green", "blue", "yellow", "purple", "orange", "white", "black"]
SHAPES = ["circle", "square", "triangle", "star", "cross"]
RELATIONS = ["above", "below", "left of", "right of", "and"]


def sigmoid_loss(image_embeds, text_embeds, logit_scale, logit_bias, same=None):
    """SigLIP's pairwise sigmoid loss: logits [B, B] = exp(scale) * cos + bias; labels +1
    on the diagonal (and where ``same`` [B, B] bool says two captions are identical), -1
    elsewhere; -sum(log sigmoid(labels * logits)) / B."""
    logits = siglip.SigLIP.logits_from(image_embeds, text_embeds, logit_scale, logit_bias)
    pos = torch.eye(len(logits), dtype=torch.bool, device=logits.device)
    if same is not None:
        pos = pos | same
    labels = torch.where(pos, 1.0, -1.0)
    return -F.logsigmoid(labels * logits).sum() / len(logits)


def grammar_corpus():
    out = []
    for i, c in enumerate(COLOURS):
        for j, s in enumerate(SHAPES):
            art = "an" if c[0] in "aeiou" else "a"
            out.append(f"{art} {c} {s}")
            for k, r in enumerate(RELATIONS):
                c2, s2 = COLOURS[(i + k + 1) % len(COLOURS)], SHAPES[(j + k + 2) % len(SHAPES)]
                art2 = "an" if c2[0] in "aeiou" else "a"
                out.append(f"{art} {c} {s} {r} {art2} {c2} {s2}")
    return out


def load_smoke_scenes(size):
    """testdata/scenes: 12 PNGs and their captions -> (pixel_values [N, 3, size, size], captions)."""
    from PIL import Image

    folder = os.path.join(REPO, "testdata", "scenes")
    px, caps = [], []
    with open(os.path.join(folder, "captions.txt"), encoding="utf-8") as f:
        for line in f:
            name, cap = line.rstrip("\n").split("\t", 1)
            px.append(siglip.pixel_values(Image.open(os.path.join(folder, "images", name)), size, size))
            caps.append(cap)
    return torch.from_numpy(np.stack(px)), caps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="a few steps on testdata/scenes")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", default=None, help="with --smoke: export the result here")
    ap.add_argument("--seed", type=int, default=20261202)
    args = ap.parse_args()
    if not args.smoke:
        raise SystemExit("train_tiny: only --smoke is implemented; the docstring is the plan")

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    sp = siglip.train_spiece(grammar_corpus() * 4, 80)
    tok = siglip.Tokenizer(sp, model_max_length=16)
    cfg = siglip.SiglipConfig(
        text_config=siglip.TextConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=256,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      max_position_embeddings=16),
        vision_config=siglip.VisionConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=4,
                                          num_attention_heads=4, image_size=64, patch_size=8),
        logit_scale_init=math.log(10.0), logit_bias_init=-10.0)
    model = siglip.SigLIP(cfg).init_random(args.seed).train()
    px, caps = load_smoke_scenes(cfg.vision_config.image_size)
    ids = torch.from_numpy(tok.batch(caps))
    same = torch.tensor([[a == b for b in caps] for a in caps])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    t0 = time.time()
    for step in range(args.steps):
        _, te = model.encode_text(ids)
        _, ie = model.encode_image(px)
        loss = sigmoid_loss(ie, te, model.logit_scale, model.logit_bias, same)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        print(f"train_tiny: step {step + 1}/{args.steps}: sigmoid loss {loss.item():.4f}", flush=True)
    print(f"train_tiny: {args.steps} steps on {len(caps)} scenes in {time.time() - t0:.1f} s")
    if args.out:
        model.eval()
        siglip.write_config(args.out, cfg)
        siglip.write_preprocessor_config(args.out, cfg.vision_config.image_size)
        siglip.write_tokenizer_files(args.out, sp, model_max_length=16)
        siglip.write_safetensors(os.path.join(args.out, "model.safetensors"), model.hf_state_dict(),
                                 {"format": "pt"})
        siglip.export_text_onnx(model, os.path.join(args.out, "onnx", "text_model.onnx"))
        siglip.export_vision_onnx(model, os.path.join(args.out, "onnx", "vision_model.onnx"))
        print(f"train_tiny: exported to {args.out}")


if __name__ == "__main__":
    main()
