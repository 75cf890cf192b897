#!/usr/bin/python3
"""Generates testdata/tinyclip: a tiny CLIP with random weights in the Hugging Face
layout, its ONNX exports (and variants for the encoders' error and dtype paths),
and torch's outputs for fixed inputs, which the Go tests compare ONNX Runtime's
outputs against.

Run from anywhere (needs torch, numpy, onnx; /usr/bin/python3 on the dev machine):

    /usr/bin/python3 testdata/tinyclip/generate.py

The output is deterministic for a given torch version. Files:

  config.json, preprocessor_config.json      CLIPConfig (text 32 wide, vision 24 wide,
                                             projection 16, 2 layers, 4 heads, 16 positions),
                                             CLIPImageProcessor (32x32, patches 8x8 -> 4x4 grid)
  tokenizer.json, vocab.json, merges.txt,    a small CLIP-format vocabulary (256 byte symbols,
  tokenizer_config.json                      their </w> forms, a few merges, bos, eos)
  model.safetensors                          the full state dict, Hugging Face names
  onnx/text_model.onnx                       input_ids int64 [batch, sequence], attention_mask
                                             int64; last_hidden_state, text_embeds
  onnx/vision_model.onnx                     pixel_values float32 [batch, 3, 32, 32];
                                             last_hidden_state [batch, 17, 24], image_embeds
  onnx/variants/text_model_int32.onnx        input_ids and attention_mask as int32
  onnx/variants/text_model_nomask.onnx       no attention_mask input
  onnx/pooled_only/vision_model.onnx         the real export with image_embeds only
  onnx/pooled_only/text_model.onnx           a hand-made graph with text_embeds only (the same
                                             interface as a pooled-only export, 1/300 the size)
  onnx/bad/text_float_ids.onnx               hand-made graphs with odd input types: float
  onnx/bad/vision_float16.onnx               input_ids (refused); float16 pixel_values (accepted
                                             since the encoders convert; the folder name is old)
  golden/prompts.json                        the prompts and their unpadded token ids
  golden/*.npy                               inputs and torch outputs (see GOLDEN below)
  golden/images/{square,wide}.png            two small images; embed_* are torch's outputs for
                                             them after CLIPImageProcessor-style preprocessing
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from pyclip import clip  # noqa: E402

CORPUS = [
    "a photo of a cat",
    "a photo of a dog",
    "a cat sitting on a red mat",
    "two dogs playing in the grass",
    "a red car parked on the street",
    "the cat and the dog",
    "a picture of a house",
]

PROMPTS = [
    "a photo of a cat",
    "a red car",
    "Two DOGS playing, in the grass!",
    "zebra 42",
]

MAX_LENGTH = 16
SEED = 20240601


def write_bad_graphs(outdir, cfg):
    """Tiny hand-made graphs whose inputs have the wrong element type."""
    import onnx
    from onnx import TensorProto, helper

    tc, vc = cfg.text_config, cfg.vision_config
    # input_ids as float: outputs have the right names and types.
    g = helper.make_graph(
        [helper.make_node("Cast", ["input_ids"], ["ids_f"], to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["ids_f", "axes2"], ["last_hidden_state"]),
         helper.make_node("Identity", ["ids_f"], ["text_embeds"])],
        "text_float_ids",
        [helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", 1]),
         helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["batch", "sequence"])],
        [helper.make_tensor("axes2", TensorProto.INT64, [1], [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    clip._atomic_write(os.path.join(outdir, "text_float_ids.onnx"), m.SerializeToString())

    s = vc.image_size
    g = helper.make_graph(
        [helper.make_node("Cast", ["pixel_values"], ["px"], to=TensorProto.FLOAT),
         helper.make_node("Flatten", ["px"], ["last_hidden_state"], axis=2),
         helper.make_node("ReduceMean", ["px"], ["image_embeds"], axes=[2, 3], keepdims=0)],
        "vision_float16",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT16, ["batch", 3, s, s])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", 3, s * s]),
         helper.make_tensor_value_info("image_embeds", TensorProto.FLOAT, ["batch", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    clip._atomic_write(os.path.join(outdir, "vision_float16.onnx"), m.SerializeToString())


def write_pooled_text_graph(path, cfg):
    """A hand-made stand-in for a pooled-only text export (the real one would add
    150 KiB): input_ids and attention_mask in, text_embeds [batch, projection_dim] out."""
    import onnx
    from onnx import TensorProto, helper

    d = cfg.projection_dim
    g = helper.make_graph(
        [helper.make_node("Cast", ["input_ids"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("ReduceMean", ["f"], ["m"], axes=[1], keepdims=1),
         helper.make_node("Expand", ["m", "shape"], ["text_embeds"])],
        "text_pooled_only",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["batch", d])],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [1, d])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    clip._atomic_write(path, m.SerializeToString())


def hf_pixel_values(img, size, crop):
    """CLIPImageProcessor on a PIL image, step by step as transformers does it:
    RGB; resize the shortest edge to size with PIL bicubic (the long edge int(size *
    long / short)); centre crop (top = (h - crop) // 2); rescale by 1/255 in float64,
    cast to float32; normalise in float32. Returns [3, crop, crop] float32."""
    from PIL import Image

    img = img.convert("RGB")
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    nw, nh = (new_short, new_long) if w <= h else (new_long, new_short)
    img = img.resize((nw, nh), resample=Image.BICUBIC)
    a = np.asarray(img)  # [h, w, 3] uint8
    top, left = (nh - crop) // 2, (nw - crop) // 2
    a = a[top:top + crop, left:left + crop]
    a = (a.astype(np.float64) * (1 / 255)).astype(np.float32)
    mean = np.array(clip.CLIP_MEAN, dtype=np.float32)
    std = np.array(clip.CLIP_STD, dtype=np.float32)
    a = (a - mean) / std
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def write_images(golden):
    """Two small PNGs: a 32x32 one (preprocessing is the identity but for the
    normalisation) and a 48x40 one (resized to 38x32, then cropped)."""
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
    vocab = clip.Vocab(clip.learn_bpe(CORPUS, 48))
    cfg = clip.CLIPConfig(
        text_config=clip.TextConfig(
            vocab_size=len(vocab), hidden_size=32, intermediate_size=64, projection_dim=16,
            num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=MAX_LENGTH,
            pad_token_id=vocab.eos_id, bos_token_id=vocab.bos_id, eos_token_id=vocab.eos_id),
        vision_config=clip.VisionConfig(
            hidden_size=24, intermediate_size=48, projection_dim=16, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8),
        projection_dim=16)
    model = clip.CLIP(cfg).init_random(SEED).eval()

    clip.save_pretrained(HERE, model, vocab)
    onnxdir = os.path.join(HERE, "onnx")
    clip.compact_onnx(os.path.join(onnxdir, "text_model.onnx"))
    clip.compact_onnx(os.path.join(onnxdir, "vision_model.onnx"))
    variants = {
        "variants/text_model_int32.onnx": lambda p: clip.export_text_onnx(model, p, ids_dtype=torch.int32),
        "variants/text_model_nomask.onnx": lambda p: clip.export_text_onnx(model, p, with_mask=False),
        "pooled_only/vision_model.onnx": lambda p: clip.export_vision_onnx(model, p, hidden=False),
    }
    for rel, export in variants.items():
        p = os.path.join(onnxdir, rel)
        export(p)
        clip.compact_onnx(p)
    os.makedirs(os.path.join(onnxdir, "bad"), exist_ok=True)
    write_bad_graphs(os.path.join(onnxdir, "bad"), cfg)
    write_pooled_text_graph(os.path.join(onnxdir, "pooled_only", "text_model.onnx"), cfg)

    # GOLDEN: inputs and torch outputs.
    golden = os.path.join(HERE, "golden")
    os.makedirs(golden, exist_ok=True)
    unpadded = [vocab.encode(p, max_length=MAX_LENGTH) for p in PROMPTS]
    clip.write_json(os.path.join(golden, "prompts.json"), {
        "max_length": MAX_LENGTH,
        "prompts": PROMPTS,
        "input_ids": unpadded,
        "note": "ids from scripts/pyclip Vocab.encode (Hugging Face fast-tokenizer semantics) "
                "with this folder's vocabulary; padded tensors below use eos as the pad id",
    })
    with torch.no_grad():
        # Padded to max_length (the usual case).
        ids, mask = vocab.batch(PROMPTS, MAX_LENGTH)
        h, e = model.encode_text(torch.from_numpy(ids), torch.from_numpy(mask))
        save(golden, "text_input_ids", ids)
        save(golden, "text_attention_mask", mask)
        save(golden, "text_last_hidden_state", h.numpy())
        save(golden, "text_embeds", e.numpy())
        # Without the mask (the no-attention_mask graph): padding positions differ.
        hn, en = model.encode_text(torch.from_numpy(ids), None)
        save(golden, "text_nomask_last_hidden_state", hn.numpy())
        save(golden, "text_nomask_embeds", en.numpy())
        # Padded only to the longest prompt (dynamic sequence length).
        t = max(len(u) for u in unpadded)
        ids_s, mask_s = vocab.batch(PROMPTS, t)
        hs, es = model.encode_text(torch.from_numpy(ids_s), torch.from_numpy(mask_s))
        save(golden, "text_short_input_ids", ids_s)
        save(golden, "text_short_attention_mask", mask_s)
        save(golden, "text_short_last_hidden_state", hs.numpy())
        save(golden, "text_short_embeds", es.numpy())

        g = torch.Generator().manual_seed(SEED + 1)
        px = torch.randn(3, 3, 32, 32, generator=g) * 0.8
        px[2] = torch.linspace(-1.8, 2.1, 3 * 32 * 32).view(3, 32, 32)  # a smooth ramp
        hv, ev = model.encode_image(px)
        save(golden, "vision_pixel_values", px.numpy())
        save(golden, "vision_last_hidden_state", hv.numpy())
        save(golden, "image_embeds", ev.numpy())
        logits = model(torch.from_numpy(ids), px, torch.from_numpy(mask))
        save(golden, "logits_per_image", logits.numpy())

        # End to end (condition embed): PNG files -> CLIPImageProcessor -> vision model,
        # against the prompts above.
        from PIL import Image

        pv = np.stack([hf_pixel_values(Image.open(p), 32, 32) for p in write_images(golden)])
        _, ie = model.encode_image(torch.from_numpy(pv))
        save(golden, "embed_pixel_values", pv)
        save(golden, "embed_image_embeds", ie.numpy())
        save(golden, "embed_logits_per_image", model(torch.from_numpy(ids), torch.from_numpy(pv),
                                                     torch.from_numpy(mask)).numpy())

    total = 0
    for root, _, files in os.walk(HERE):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    print(f"tinyclip: vocabulary {len(vocab)} tokens; folder {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
