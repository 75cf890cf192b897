#!/usr/bin/python3
"""Generates testdata/tinysiglip: a tiny SigLIP with random weights in the Hugging Face
layout, its ONNX exports, and torch's outputs for fixed inputs, which the Go tests
compare ONNX Runtime's outputs (and the Go tokenizer and preprocessing) against.

Run from anywhere (needs torch, numpy, onnx, sentencepiece, PIL; /usr/bin/python3 on
the dev machine):

    /usr/bin/python3 testdata/tinysiglip/generate.py

The output is deterministic for a given torch and sentencepiece version. Files:

  config.json                  SiglipConfig: text 32 wide, 2 layers, 4 heads, MLP 64, 64
                               positions, head 32 -> 32; vision 24 wide, 2 layers, 4 heads,
                               MLP 64, 32x32 pixels, patch 8 (4x4 grid, 16 rows, no CLS);
                               gelu_pytorch_tanh, layer_norm_eps 1e-6
  preprocessor_config.json     SiglipImageProcessor: resize to 32x32 (bicubic), no crop,
                               rescale 1/255, mean = std = 0.5
  spiece.model                 a small Unigram sentencepiece model (nmt_nfkc) laid out as
                               google/siglip-*'s: <pad> 0, </s> 1, <unk> 2, no <s>
  tokenizer_config.json,       SiglipTokenizer, model_max_length 64, eos = pad = </s>
  special_tokens_map.json
  model.safetensors            the full state dict, Hugging Face SiglipModel names, float32
  onnx/text_model.onnx         input_ids int64 [batch_size, 64] -> last_hidden_state float32
                               [batch_size, 64, 32], pooler_output float32 [batch_size, 32]
  onnx/vision_model.onnx       pixel_values float32 [batch_size, 3, 32, 32] -> last_hidden_state
                               float32 [batch_size, 16, 24] (after post_layernorm),
                               pooler_output float32 [batch_size, 24]
  onnx/bad/vision_no_lhs.onnx  a hand-made graph with the vision interface but pooler_output
                               only (no last_hidden_state): for the error path
  golden/prompts.json          the prompts, their tokens and ids as SiglipTokenizer makes them
  golden/*.npy                 inputs and torch outputs (see GOLDEN below)
  golden/images/{square,wide}.png   two small images; embed_* are torch's outputs for them
                               after SiglipImageProcessor-style preprocessing
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from pysiglip import siglip  # noqa: E402

SEED = 20261202
MAX_LENGTH = 64
VOCAB_SIZE = 200

COLOURS = ["red", "orange", "yellow", "green", "blue", "purple", "black", "white"]
SHAPES = ["circle", "square", "triangle", "star", "cross", "car", "cat", "dog", "house"]
RELATIONS = ["above", "below", "left of", "right of", "next to", "and"]


def corpus():
    """Caption-like sentences: the synthetic scenes' words and a few photo phrases."""
    out = []
    for i, c in enumerate(COLOURS):
        for j, s in enumerate(SHAPES):
            for k, r in enumerate(RELATIONS):
                c2 = COLOURS[(i + j + k + 1) % len(COLOURS)]
                s2 = SHAPES[(i * 2 + j + k + 3) % len(SHAPES)]
                out.append(f"a {c} {s} {r} a {c2} {s2}")
            out.append(f"a photo of a {c} {s}")
            out.append(f"a picture of the {s} in {c}")
            out.append(f"two {c} {s}s playing in the grass")
    out += ["a cat sitting on a red mat", "two dogs playing in the grass",
            "a red car parked on the street", "the cat and the dog", "a picture of a house",
            "an orange triangle and a yellow cross", "it is a dog's life",
            "leading and trailing spaces", "full width letters", "a cafe in the city"] * 8
    return out


# Cases for the Go tokenizer: case, punctuation, spaces, digits and letters the model
# lacks, NFKC (full-width letters and "!" kept by the punctuation filter, then
# normalised by sentencepiece), a literal </s> inside the text, the empty prompt, and
# one longer than 64 tokens (truncated, </s> kept last).
PROMPTS = [
    "a photo of a cat",
    "a red car",
    "Two DOGS playing, in the grass!",
    "an orange triangle and a yellow cross",
    "a  black \t  star",
    "   leading and trailing spaces   ",
    "zebra 42",
    "it's a dog's life",
    "Ｆｕｌｌ ｗｉｄｔｈ！ café",
    "a cat</s> and a dog",
    "",
    " ".join(["a red circle above a blue square"] * 12),
]


def write_pooled_only_vision(path, cfg):
    """A hand-made stand-in for a vision export with pooler_output only (the real one
    would add 100 KiB): pixel_values float32 [batch_size, 3, 32, 32] in, pooler_output
    float32 [batch_size, 24] out, no last_hidden_state. For the error path only."""
    import onnx
    from onnx import TensorProto, helper

    vc = cfg.vision_config
    c, s, d = vc.num_channels, vc.image_size, vc.hidden_size
    w = np.linspace(-1, 1, c * d, dtype=np.float32).reshape(c, d)
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["pixel_values"], ["m"], axes=[2, 3], keepdims=0),
         helper.make_node("MatMul", ["m", "w"], ["pooler_output"])],
        "vision_pooled_only",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch_size", c, s, s])],
        [helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch_size", d])],
        [helper.make_tensor("w", TensorProto.FLOAT, [c, d], w.ravel().tolist())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    siglip._atomic_write(path, m.SerializeToString())


def write_images(golden):
    """Two small PNGs: a 32x32 one (resizing is the identity) and a 48x40 one
    (squeezed to 32x32: SigLIP resizes to exactly height x width, no crop)."""
    from PIL import Image

    rng = np.random.default_rng(SEED)
    os.makedirs(os.path.join(golden, "images"), exist_ok=True)
    sq = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:40, 0:48]
    wide = np.stack([xx * 5, yy * 6, (xx + yy) * 3], axis=-1).astype(np.int64)
    wide = np.clip(wide + rng.integers(-20, 21, wide.shape), 0, 255).astype(np.uint8)
    paths = []
    for name, a in (("square.png", sq), ("wide.png", wide)):
        p = os.path.join(golden, "images", name)
        Image.fromarray(a, "RGB").save(p, optimize=True)
        paths.append(p)
    return paths


def save(golden, name, a):
    np.save(os.path.join(golden, name + ".npy"), np.ascontiguousarray(a))


def main():
    torch.manual_seed(SEED)
    sp = siglip.train_spiece(corpus(), VOCAB_SIZE)
    siglip.write_tokenizer_files(HERE, sp, model_max_length=MAX_LENGTH)
    tok = siglip.Tokenizer(sp, model_max_length=MAX_LENGTH)

    cfg = siglip.tiny_config(len(tok))
    model = siglip.SigLIP(cfg).init_random(SEED).eval()
    siglip.write_config(HERE, cfg)
    siglip.write_preprocessor_config(HERE, 32, 32, resample=3)
    siglip.write_safetensors(os.path.join(HERE, "model.safetensors"), model.hf_state_dict(),
                             {"format": "pt"})
    onnxdir = os.path.join(HERE, "onnx")
    siglip.export_text_onnx(model, os.path.join(onnxdir, "text_model.onnx"))
    siglip.export_vision_onnx(model, os.path.join(onnxdir, "vision_model.onnx"))
    write_pooled_only_vision(os.path.join(onnxdir, "bad", "vision_no_lhs.onnx"), cfg)

    # The safetensors file round-trips into a fresh model with the same outputs.
    back = siglip.SigLIP(cfg)
    back.load_hf_state_dict(siglip.read_safetensors(os.path.join(HERE, "model.safetensors"))[0])
    back.eval()

    # GOLDEN: inputs and torch outputs.
    golden = os.path.join(HERE, "golden")
    os.makedirs(golden, exist_ok=True)
    tokens = [tok.tokenize(p) for p in PROMPTS]
    unpadded = [tok.encode(p, pad=False) for p in PROMPTS]
    siglip.write_json(os.path.join(golden, "prompts.json"), {
        "max_length": MAX_LENGTH,
        "pad_id": tok.pad_id,
        "eos_id": tok.eos_id,
        "prompts": PROMPTS,
        "tokens": tokens,
        "input_ids": unpadded,
        "note": "tokens: SiglipTokenizer.tokenize; input_ids: tokenizer(prompt, truncation=True) "
                "(</s> appended, at most 64); text_input_ids.npy pads them with </s> (id 1) to 64, "
                "as padding='max_length' does. Made by scripts/pysiglip (a transcription of "
                "SiglipTokenizer over the sentencepiece library).",
    })
    with torch.no_grad():
        ids = tok.batch(PROMPTS)
        h, e = model.encode_text(torch.from_numpy(ids))
        hb, eb = back.encode_text(torch.from_numpy(ids))
        assert torch.equal(h, hb) and torch.equal(e, eb), "safetensors round trip differs"
        save(golden, "text_input_ids", ids)
        save(golden, "text_last_hidden_state", h.numpy())
        save(golden, "text_pooler_output", e.numpy())

        g = torch.Generator().manual_seed(SEED + 1)
        px = torch.randn(3, 3, 32, 32, generator=g) * 0.8
        px[2] = torch.linspace(-1.0, 1.0, 3 * 32 * 32).view(3, 32, 32)  # a smooth ramp
        hv, ev = model.encode_image(px)
        pe = model.patch_embeds(hv)
        siglip.check_patch_embeds(model, hv)
        logits = model.logits(ev, e)
        save(golden, "vision_pixel_values", px.numpy())
        save(golden, "vision_last_hidden_state", hv.numpy())
        save(golden, "vision_pooler_output", ev.numpy())
        save(golden, "vision_patch_embeds", pe.numpy())
        save(golden, "logits_per_image", logits.numpy())
        save(golden, "probs_per_image", torch.sigmoid(logits).numpy())

        # End to end: PNG files -> SiglipImageProcessor -> vision model, against the prompts.
        from PIL import Image

        pv = np.stack([siglip.pixel_values(Image.open(p), 32, 32, resample=3) for p in write_images(golden)])
        hi, ie = model.encode_image(torch.from_numpy(pv))
        siglip.check_patch_embeds(model, hi)
        li = model.logits(ie, e)
        save(golden, "embed_pixel_values", pv)
        save(golden, "embed_last_hidden_state", hi.numpy())
        save(golden, "embed_pooler_output", ie.numpy())
        save(golden, "embed_patch_embeds", model.patch_embeds(hi).numpy())
        save(golden, "embed_logits_per_image", li.numpy())
        save(golden, "embed_probs_per_image", torch.sigmoid(li).numpy())

    total = 0
    for root, _, files in os.walk(HERE):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    print(f"tinysiglip: vocabulary {len(tok)} pieces; folder {total / 1024:.0f} KiB")
    print(json.dumps({p: u for p, u in zip(PROMPTS, unpadded)}, ensure_ascii=False)[:2000])


if __name__ == "__main__":
    main()
