#!/usr/bin/python3
"""Generates testdata/tinytips: a tiny TIPSv2 (model_type tipsv2) with random weights in the
Hugging Face layout, and torch's outputs for fixed inputs, which the Go tests compare the
graphs this program builds from model.safetensors against.

The towers are scripts/pytips/tips.py's (a transcription of transformers' modeling_tipsv2.py).
The graph goldens take random ids with their attention masks; the end-to-end goldens (embed_*)
take prompts through the folder's tokenizer and PNG images through its image processor:

  - tokenizer.model: a SentencePiece Unigram of at most 100 pieces (the model's vocab_size) trained
    here with the official library on synthetic lower-case captions, in T5's id layout
    (<pad>=0 </s>=1 <unk>=2), as Tipsv2Tokenizer reads it: the text lower-cased with Python's
    str.lower, then sp.encode; no BOS or EOS; truncated to the 16 positions and padded with 0
    (transformers' Tipsv2Processor pads to 64; the tiny model has 16 positions);
  - preprocessor_config.json: Tipsv2ImageProcessor at 16x16; its arithmetic transcribed
    below (pixel_values): Pillow's bilinear resize (the arithmetic of torchvision's uint8
    antialiased resize on CPUs with AVX2, a port of Pillow-SIMD), then the uint8 values times
    1/255 in float32 as torch multiplies them. resize_report() measures how far torch's float
    path (F.interpolate bilinear antialias on the float image, rounded back to uint8: what
    torchvision does where its uint8 kernel is not used) is from Pillow's.

Run from anywhere (needs torch, numpy, Pillow and sentencepiece: /usr/bin/python3 on the dev
machine, with Debian's python3-sentencepiece):

    /usr/bin/python3 testdata/tinytips/generate.py

Files:
  config.json          Tipsv2Config, temperature 0.01:
                       text 32 wide, 2 layers, 4 heads, MLP 64 (relu), 16 positions, vocabulary
                       100, layer_norm_eps 1e-5, pooling_epsilon 1e-8;
                       vision 32 wide, 2 layers, 4 heads, mlp_ratio 1.75 (MLP 56, gelu),
                       image 16, patch 4 (a 4x4 position grid), 2 register tokens,
                       layer_norm_eps 1e-6, antialiased positions, no offset
  model.safetensors    the state dict, Hugging Face names, float32
  golden/*.npy         float32 unless said:
    text_input_ids, text_attention_mask int64 [3, 16]   three prompts of random ids, 16, 5 and
                       1 long, padded with 0 (mask 0 there)
    text_last_hidden_state [3, 16, 32], text_pooled [3, 32]   (the masked mean)
    short_input_ids, short_attention_mask int64 [2, 7], short_last_hidden_state [2, 7, 32],
    short_pooled [2, 32]   a shorter sequence (positions 0..6 of the table)
    For each image set S (pixels in [-1, 1)):
      vision    [2, 3, 16, 16]   the position grid's own size: positions used as they are
      wide      [2, 3, 24, 20]   a 6x5 grid: positions upscaled, not square
      small     [1, 3, 14, 9]    a 3x2 grid (the remainder pixels dropped by the
                                 convolution): positions downscaled, antialiased
    S_pixel_values, S_positions [1+h·w, 32] (what the image's rows got added),
    S_last_hidden_state [B, 1+2+h·w, 32] (class, 2 registers, patches), S_pooled [B, 32]
    (row 0), S_patch_embeds [B, h·w, 32] (rows 3..), S_values_patch_embeds [B, h·w, 32] (the
    value-attention readout's patch rows: Tips.encode_image_values)
  tokenizer.model, tokenizer_config.json, preprocessor_config.json   (see above)
  golden/prompts.json, golden/images/{wide,tall}.png   the end-to-end inputs
  golden/tokenizer.jsonl   {"text", "ids"} per line: sp.encode(text.lower()) for the prompts and
                       TOKENIZER_CASES, the ids Tipsv2Tokenizer gives before truncation
  golden/embed_*.npy   embed_input_ids, embed_attention_mask int64 [5, 16] (the library's ids,
                       padded to the longest prompt, which is cut at 16), embed_text_last_hidden_state
                       [5, 16, 32], embed_text_embeds [5, 32]; embed_pixel_values [2, 3, 16, 16],
                       embed_vision_last_hidden_state [2, 19, 32], embed_image_embeds [2, 32],
                       embed_patch_embeds [2, 16, 32], embed_values_patch_embeds [2, 16, 32]
                       (the value-attention readout's); embed_logits_per_image [2, 5]
                       (cosine / temperature, Tipsv2Model's)
  swiglu/              the same sizes with use_swiglu_ffn (the g14 size's MLP: F = 40,
                       mlp.weights_in 32 -> 80, mlp.weights_out 40 -> 32), its own seed:
                       config.json, model.safetensors, golden/ with the vision and text sets
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from pytips import tips  # noqa: E402

SEED = 20261204
IMAGES = [("vision", 2, 16, 16), ("wide", 2, 24, 20), ("small", 1, 14, 9)]


def save(golden, name, a):
    np.save(os.path.join(golden, name + ".npy"), np.ascontiguousarray(a))


def make(out, seed, swiglu):
    """Writes a tiny model with its goldens into out."""
    tc = tips.TextConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=16)
    vc = tips.VisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=1.75,
                           image_size=16, patch_size=4, num_register_tokens=2, use_swiglu_ffn=swiglu)
    config = tips.Config(tc, vc, temperature=0.01)
    model = tips.Tips(config).init_random(seed).eval()

    os.makedirs(out, exist_ok=True)
    tips.write_json(os.path.join(out, "config.json"), config.to_dict())
    tips.write_safetensors(os.path.join(out, "model.safetensors"),
                           {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                           {"format": "pt"})

    golden = os.path.join(out, "golden")
    os.makedirs(golden, exist_ok=True)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, lengths, t in [("text", [16, 5, 1], 16), ("short", [7, 3], 7)]:
            ids = torch.zeros(len(lengths), t, dtype=torch.int64)
            mask = torch.zeros(len(lengths), t, dtype=torch.int64)
            for b, k in enumerate(lengths):
                ids[b, :k] = torch.randint(1, tc.vocab_size, (k,), generator=g)
                mask[b, :k] = 1
            h, pooled = model.encode_text(ids, mask)
            save(golden, name + "_input_ids", ids.numpy())
            save(golden, name + "_attention_mask", mask.numpy())
            save(golden, name + "_last_hidden_state", h.numpy())
            save(golden, name + "_pooled", pooled.numpy())
        p = vc.patch_size
        for name, b, height, width in IMAGES:
            px = torch.rand(b, 3, height, width, generator=g) * 2 - 1
            h, pooled, patches = model.encode_image(px)
            pos = model.positions(height // p, width // p, height, width)
            save(golden, name + "_pixel_values", px.numpy())
            save(golden, name + "_positions", pos[0].numpy())
            save(golden, name + "_last_hidden_state", h.numpy())
            save(golden, name + "_pooled", pooled.numpy())
            save(golden, name + "_patch_embeds", patches.numpy())
            save(golden, name + "_values_patch_embeds", model.encode_image_values(px).numpy())


PROMPTS = [
    "a photo of a cat",
    "A Red CAR parked on the Street.",
    "two dogs, one cat and a bird",
    "café in the snow 猫",
    "a small wooden boat on a lake near the old house with a red door and a tall tree",
]

# Strings whose ids golden/tokenizer.jsonl holds: case (Python's str.lower: final sigma,
# dotted capital I), spaces, NFKC, characters outside the vocabulary.
TOKENIZER_CASES = [
    "", " ", "A", "THE CAT", "The Cat Sat On The Mat", "  leading and trailing  ", "tab\tand\nnewline",
    "ΟΔΟΣ", "ΣΑΣ ΣΑΣ", "İstanbul", "ǅungla", "ﬁsh", "Ｆｕｌｌ ｗｉｄｔｈ", "café CAFÉ", "二匹の猫",
    "dogs!!! and cats???", "a  b   c", "x" * 40, "Ǆ Ǉ Ǌ", "ẞ straße",
]

WORDS = """a the of on in with and near photo picture cat cats dog dogs bird car cars red blue green
small large old wooden boat lake house door tree street parked two one three sitting running
snow sky city cafe cafes white black tall""".split()


def train_tokenizer(out):
    """Trains tokenizer.model (100 pieces, T5's special ids) on synthetic lower-case captions."""
    import random
    import tempfile

    import sentencepiece as spm

    rng = random.Random(SEED)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(3000)]
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "corpus.txt")
        with open(text, "w") as f:
            f.write("\n".join(lines) + "\n")
        prefix = os.path.join(tmp, "tok")
        spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, model_type="unigram", vocab_size=100,
                                       pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1,
                                       character_coverage=1.0, hard_vocab_limit=False,
                                       minloglevel=2)
        from sentencepiece import sentencepiece_model_pb2 as model_pb2

        proto = model_pb2.ModelProto()
        with open(prefix + ".model", "rb") as f:
            proto.ParseFromString(f.read())
        # The temporary paths out of the trainer spec: the file is the same on every run.
        del proto.trainer_spec.input[:]
        proto.trainer_spec.input.append("corpus.txt")
        proto.trainer_spec.model_prefix = "tokenizer"
        model = proto.SerializeToString()
    with open(os.path.join(out, "tokenizer.model"), "wb") as f:
        f.write(model)
    tips.write_json(os.path.join(out, "tokenizer_config.json"), {
        "tokenizer_class": "Tipsv2Tokenizer", "do_lower_case": True, "model_max_length": 16,
        "pad_token": "<pad>", "unk_token": "<unk>", "bos_token": None, "eos_token": None,
    })
    return spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))


def tokenize(sp, prompts, n):
    """Tipsv2Tokenizer: str.lower, sp.encode, no BOS/EOS, cut at n; padded with 0 to the
    longest. -> ids, mask int64 [len(prompts), T]."""
    seqs = [sp.encode(p.lower())[:n] for p in prompts]
    t = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), t), dtype=np.int64)
    mask = np.zeros((len(seqs), t), dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = 1
    return ids, mask


def pixel_values(img, h, w):
    """Tipsv2ImageProcessor on a PIL image: RGB; Pillow's bilinear resize to h x w; the uint8
    values times 1/255 in float32 (torch's uint8 tensor times a Python float). -> [3, h, w]."""
    from PIL import Image

    a = np.asarray(img.convert("RGB").resize((w, h), resample=Image.BILINEAR))
    a = a.astype(np.float32) * np.float32(1 / 255)
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def torch_resize(img, h, w):
    """torchvision's resize where its uint8 kernel is not used: the uint8 image as float,
    F.interpolate(bilinear, antialias=True, align_corners=False), rounded, clamped to uint8.
    -> uint8 [h, w, 3]."""
    x = torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1)[None].float()
    y = torch.nn.functional.interpolate(x, size=(h, w), mode="bilinear", antialias=True, align_corners=False)
    return y.round().clamp(0, 255).to(torch.uint8)[0].permute(1, 2, 0).numpy()


def resize_report(paths):
    """Prints, per image and size, how many uint8 values Pillow's bilinear resize and torch's
    float path give differently, and the largest difference."""
    from PIL import Image

    rng = np.random.default_rng(SEED)
    yy, xx = np.mgrid[0:600, 0:800]
    photo = np.clip(np.stack([xx * 0.3, yy * 0.4, (xx + yy) * 0.15], -1) + rng.normal(0, 25, (600, 800, 3)), 0, 255)
    imgs = [(os.path.basename(p), Image.open(p)) for p in paths]
    imgs.append(("gradient+noise 800x600", Image.fromarray(photo.astype(np.uint8), "RGB")))
    for name, img in imgs:
        for h, w in [(16, 16), (448, 448), (224, 336)]:
            a = np.asarray(img.convert("RGB").resize((w, h), resample=Image.BILINEAR)).astype(int)
            b = torch_resize(img, h, w).astype(int)
            d = np.abs(a - b)
            print(f"resize {name} -> {h}x{w}: {np.mean(d != 0) * 100:.2f}% of values differ, "
                  f"largest {d.max()}, mean |d| {d.mean():.4f}")


def write_images(golden):
    """A 48x24 image (squeezed to 16x16) and a 20x44 one."""
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


def make_embed(out, seed):
    """The end-to-end goldens of the folder's model (see the module doc)."""
    from PIL import Image

    config = tips.Config(tips.TextConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, max_position_embeddings=16),
                         tips.VisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=1.75,
                                           image_size=16, patch_size=4, num_register_tokens=2),
                         temperature=0.01)
    model = tips.Tips(config).init_random(seed).eval()
    tips.write_json(os.path.join(out, "preprocessor_config.json"), {
        "image_processor_type": "Tipsv2ImageProcessor", "processor_class": "Tipsv2Processor",
        "do_resize": True, "size": {"height": 16, "width": 16}, "resample": 2, "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": False, "do_convert_rgb": True,
    })
    sp = train_tokenizer(out)
    golden = os.path.join(out, "golden")
    tips.write_json(os.path.join(golden, "prompts.json"), PROMPTS)
    paths = write_images(golden)
    ids, mask = tokenize(sp, PROMPTS, 16)
    pv = np.stack([pixel_values(Image.open(p), 16, 16) for p in paths])
    with torch.no_grad():
        th, te = model.encode_text(torch.from_numpy(ids), torch.from_numpy(mask))
        vh, ve, vp = model.encode_image(torch.from_numpy(pv))
        vv = model.encode_image_values(torch.from_numpy(pv))
        tn = te / te.norm(dim=-1, keepdim=True)
        vn = ve / ve.norm(dim=-1, keepdim=True)
        logits = (vn @ tn.t()) / config.temperature
    for name, a in [("input_ids", ids), ("attention_mask", mask), ("text_last_hidden_state", th.numpy()),
                    ("text_embeds", te.numpy()), ("pixel_values", pv), ("vision_last_hidden_state", vh.numpy()),
                    ("image_embeds", ve.numpy()), ("patch_embeds", vp.numpy()), ("values_patch_embeds", vv.numpy()),
                    ("logits_per_image", logits.numpy())]:
        save(golden, "embed_" + name, a)
    print("prompts:", [sp.encode(p.lower(), out_type=str) for p in PROMPTS])
    with open(os.path.join(golden, "tokenizer.jsonl"), "w") as f:
        for text in PROMPTS + TOKENIZER_CASES:
            f.write(json.dumps({"text": text, "ids": sp.encode(text.lower())}, ensure_ascii=False) + "\n")
    resize_report(paths)


def main():
    make(HERE, SEED, False)
    make_embed(HERE, SEED)
    make(os.path.join(HERE, "swiglu"), SEED + 10, True)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(HERE) for f in fs)
    print(f"tinytips: folder {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
