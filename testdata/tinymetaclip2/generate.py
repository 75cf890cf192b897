#!/usr/bin/python3
"""Generates testdata/tinymetaclip2: a tiny MetaCLIP 2 with random weights in the Hugging Face
layout (model_type metaclip_2; no ONNX graphs: this program builds them from
model.safetensors, as it does for a MetaCLIP 2 checkpoint from the hub), and torch's outputs
for fixed inputs, which the Go tests compare against.

MetaCLIP 2 is CLIP's architecture and weight layout (transformers' modular_metaclip_2.py
subclasses CLIP's modules) with two differences this folder exercises:
  - the text is pooled at the FIRST position holding eos_token_id, always: its XLM-V EOS is
    id 2, where CLIP's code takes the position of the largest id instead (a legacy rule for
    CLIP configs with eos_token_id 2); scripts/pyclip pools at the first EOS, so it is the
    transcription of MetaCLIP 2's text tower as it is of CLIP's;
  - the tokenizer is XLM-V's (XLMRobertaTokenizer, a SentencePiece Unigram in a
    tokenizer.json): here text/testdata/xlmr_json's, made by the Hugging Face tokenizers
    library from a trained SentencePiece model in XLM-RoBERTa's layout (<s>=0 <pad>=1 </s>=2
    <unk>=3), and the prompts' ids come from that library (scripts/tokenizers/encode.js).
The image processor is CLIPImageProcessor with size {"height", "width"}, as MetaCLIP 2's
checkpoints ship it: the image is resized to the square, not cropped.

Run from the repository root (needs torch, numpy, Pillow: /usr/bin/python3 on the dev machine;
and node with the tokenizers npm package 0.23.2):

    NODE_PATH=/tmp/tok-node/node_modules /usr/bin/python3 testdata/tinymetaclip2/generate.py

Files:
  config.json, preprocessor_config.json   MetaClip2Config (text 32 wide over the 3002-token
                                          vocabulary, vision 24 wide, projection 16, 2 layers,
                                          4 heads, 16 positions), CLIPImageProcessor (32x32)
  tokenizer.json, tokenizer_config.json   text/testdata/xlmr_json's
  model.safetensors                       the full state dict, Hugging Face names
  golden/prompts.json                     the prompts
  golden/images/{wide,tall}.png           two small images
  golden/*.npy                            (float32 unless said)
    text_input_ids, text_attention_mask   int64 [5, 16]: the library's ids, truncated and
                                          padded with <pad> to 16, and the masks
    text_last_hidden_state [5, 16, 32]    text_embeds [5, 16]
    embed_pixel_values [2, 3, 32, 32]     the images through CLIPImageProcessor (Pillow)
    vision_last_hidden_state [2, 17, 24]  image_embeds [2, 16]
    logits_per_image [2, 5]
    readout_raw_patch_embeds,             float64 [2, 16, 16]: the patches' unit joint-space
    readout_clearclip_patch_embeds        vectors read raw and by ClearCLIP (as
                                          testdata/tinyclip/make_readout_golden.py defines them)
"""

import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from pyclip import clip  # noqa: E402

SEED = 20261204
MAX_LENGTH = 16
XLMR = os.path.join(ROOT, "text", "testdata", "xlmr_json")
PROMPTS = [
    "a photo of a cat",
    "eine Katze auf dem Sofa",
    "沙发上的猫",
    "кошка на диване",
    "a red car parked on the street near the old house with a small dog",
]


def library_ids(prompts):
    """The tokenizers library's ids and masks, truncated and padded with <pad> (1)."""
    out = subprocess.run(
        ["node", os.path.join(ROOT, "scripts", "tokenizers", "encode.js"), os.path.join(HERE, "tokenizer.json"),
         str(MAX_LENGTH), "1"],
        input=json.dumps(prompts).encode(), stdout=subprocess.PIPE, check=True).stdout
    r = json.loads(out)
    return np.array(r["ids"], dtype=np.int64), np.array(r["mask"], dtype=np.int64)


def pixel_values(img, size):
    """CLIPImageProcessor with size {"height": size, "width": size} on a PIL image: RGB;
    resize to size x size with PIL bicubic; the centre crop of size keeps it all; rescale
    by 1/255 in float64, cast to float32; normalise in float32. -> [3, size, size]."""
    from PIL import Image

    a = np.asarray(img.convert("RGB").resize((size, size), resample=Image.BICUBIC))
    a = (a.astype(np.float64) * (1 / 255)).astype(np.float32)
    a = (a - np.array(clip.CLIP_MEAN, dtype=np.float32)) / np.array(clip.CLIP_STD, dtype=np.float32)
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def write_images(golden):
    """A 48x24 image (squeezed to 32x32) and a 20x44 one (stretched)."""
    from PIL import Image

    rng = np.random.default_rng(SEED)
    os.makedirs(os.path.join(golden, "images"), exist_ok=True)
    yy, xx = np.mgrid[0:24, 0:48]
    wide = np.stack([xx * 5, yy * 9, (xx + yy) * 3], axis=-1)
    tall = rng.integers(0, 256, (44, 20, 3))
    paths = []
    for name, a in (("wide.png", wide), ("tall.png", tall)):
        a = np.clip(a + rng.integers(-20, 21, a.shape), 0, 255).astype(np.uint8)
        p = os.path.join(golden, "images", name)
        Image.fromarray(a, "RGB").save(p, optimize=True)
        paths.append(p)
    return paths


def readout_module():
    spec = importlib.util.spec_from_file_location(
        "tinyclip_readout", os.path.join(ROOT, "testdata", "tinyclip", "make_readout_golden.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def save(golden, name, a):
    np.save(os.path.join(golden, name + ".npy"), np.ascontiguousarray(a))


def main():
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(XLMR, f), os.path.join(HERE, f))
    with open(os.path.join(HERE, "tokenizer.json")) as f:
        vocab_size = len(json.load(f)["model"]["vocab"])
    cfg = clip.CLIPConfig(
        text_config=clip.TextConfig(
            vocab_size=vocab_size, hidden_size=32, intermediate_size=64, projection_dim=16,
            num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=MAX_LENGTH,
            pad_token_id=1, bos_token_id=0, eos_token_id=2),
        vision_config=clip.VisionConfig(
            hidden_size=24, intermediate_size=48, projection_dim=16, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8),
        projection_dim=16)
    model = clip.CLIP(cfg).init_random(SEED).eval()

    c = cfg.to_dict()
    c["architectures"] = ["MetaClip2Model"]
    c["model_type"] = "metaclip_2"
    c["text_config"]["model_type"] = "metaclip_2_text_model"
    c["vision_config"]["model_type"] = "metaclip_2_vision_model"
    clip.write_json(os.path.join(HERE, "config.json"), c)
    clip.write_json(os.path.join(HERE, "preprocessor_config.json"), {
        "crop_size": {"height": 32, "width": 32},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": clip.CLIP_MEAN,
        "image_processor_type": "CLIPImageProcessor",
        "image_std": clip.CLIP_STD,
        "processor_class": "CLIPProcessor",
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"height": 32, "width": 32},
    })
    clip.write_safetensors(os.path.join(HERE, "model.safetensors"), model.hf_state_dict(), {"format": "pt"})

    golden = os.path.join(HERE, "golden")
    os.makedirs(golden, exist_ok=True)
    clip.write_json(os.path.join(golden, "prompts.json"), {"max_length": MAX_LENGTH, "prompts": PROMPTS})
    ids, mask = library_ids(PROMPTS)
    first = (ids == 2).argmax(1)
    largest = ids.argmax(1)
    assert (first != largest).all(), "a prompt whose first EOS is its largest id tests nothing"
    assert mask[-1].all() and ids[-1, -1] == 2, "the last prompt is not cut at 16"
    with torch.no_grad():
        h, e = model.encode_text(torch.from_numpy(ids), torch.from_numpy(mask))
        save(golden, "text_input_ids", ids)
        save(golden, "text_attention_mask", mask)
        save(golden, "text_last_hidden_state", h.numpy())
        save(golden, "text_embeds", e.numpy())

        from PIL import Image

        pv = np.stack([pixel_values(Image.open(p), 32) for p in write_images(golden)])
        hv, ev = model.encode_image(torch.from_numpy(pv))
        save(golden, "embed_pixel_values", pv)
        save(golden, "vision_last_hidden_state", hv.numpy())
        save(golden, "image_embeds", ev.numpy())
        save(golden, "logits_per_image", model(torch.from_numpy(ids), torch.from_numpy(pv),
                                               torch.from_numpy(mask)).numpy())

        # The patch joint vectors, raw and by ClearCLIP, in float64.
        ro = readout_module()
        m64 = copy.deepcopy(model).double()
        vm = m64.vision_model
        px = torch.from_numpy(pv).double()
        x = vm.pre_layrnorm(vm.embeddings(px))
        for layer in vm.encoder.layers[:-1]:
            x = layer(x)
        lhs, _ = m64.encode_image(px)
        hidden, _ = ro.readout(vm.encoder.layers[-1], x, "clearclip")
        for kind, hid in (("raw", lhs), ("clearclip", hidden)):
            save(golden, f"readout_{kind}_patch_embeds", ro.patch_embeds(m64, hid).numpy().astype("<f8"))

    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(HERE) for f in fs)
    print(f"tinymetaclip2: vocabulary {vocab_size} tokens; first EOS at {first.tolist()}, "
          f"largest id at {largest.tolist()}; folder {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
