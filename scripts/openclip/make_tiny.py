#!/usr/bin/python3
"""Writes testdata/tinyopenclip: a tiny random-weight CLIP in OpenCLIP's layout
(open_clip_config.json + open_clip_model.safetensors, OpenCLIP's tensor names;
no config.json), the CLIP BPE files of the built-in tiny model, two images,
and goldens from an independent float64 transcription of OpenCLIP's CLIP
forward (open_clip.model.CLIP.encode_image / encode_text, VisionTransformer
and TextTransformer with nn.MultiheadAttention), for the Go tests.

Run: /usr/bin/python3 scripts/openclip/make_tiny.py   (torch 1.13, numpy, PIL)
"""
import html, json, os, re, shutil, struct
import numpy as np
import torch
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "testdata", "tinyopenclip")
EMB = os.path.join(ROOT, "models", "embedded", "model")

EMBED, IMG, PATCH, VW, VL, HEADW = 24, 32, 8, 32, 2, 16
CTX, VOCAB, TW, TH, TL = 16, 594, 32, 2, 2
MLP = 4.0

cfg = {
    "model_cfg": {
        "embed_dim": EMBED,
        "vision_cfg": {"image_size": IMG, "layers": VL, "width": VW, "patch_size": PATCH, "head_width": HEADW, "mlp_ratio": MLP},
        "text_cfg": {"context_length": CTX, "vocab_size": VOCAB, "width": TW, "heads": TH, "layers": TL, "mlp_ratio": MLP},
    },
    "preprocess_cfg": {"mean": [0.5, 0.4, 0.3], "std": [0.2, 0.25, 0.3], "interpolation": "bicubic", "resize_mode": "shortest"},
}

g = torch.Generator().manual_seed(20261207)


def rnd(*shape, scale=0.2):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale)


def tensors():
    t = {}
    t["visual.conv1.weight"] = rnd(VW, 3, PATCH, PATCH, scale=0.1)
    t["visual.class_embedding"] = rnd(VW)
    t["visual.positional_embedding"] = rnd(1 + (IMG // PATCH) ** 2, VW)
    for n in ["ln_pre", "ln_post"]:
        t[f"visual.{n}.weight"] = 1 + rnd(VW, scale=0.1)
        t[f"visual.{n}.bias"] = rnd(VW, scale=0.1)
    t["token_embedding.weight"] = rnd(VOCAB, TW)
    t["positional_embedding"] = rnd(CTX, TW)
    t["ln_final.weight"] = 1 + rnd(TW, scale=0.1)
    t["ln_final.bias"] = rnd(TW, scale=0.1)
    for pre, w, layers in [("visual.transformer", VW, VL), ("transformer", TW, TL)]:
        inner = int(w * MLP)
        for i in range(layers):
            b = f"{pre}.resblocks.{i}."
            for n in ["ln_1", "ln_2"]:
                t[b + n + ".weight"] = 1 + rnd(w, scale=0.1)
                t[b + n + ".bias"] = rnd(w, scale=0.1)
            t[b + "attn.in_proj_weight"] = rnd(3 * w, w)
            t[b + "attn.in_proj_bias"] = rnd(3 * w, scale=0.1)
            t[b + "attn.out_proj.weight"] = rnd(w, w)
            t[b + "attn.out_proj.bias"] = rnd(w, scale=0.1)
            t[b + "mlp.c_fc.weight"] = rnd(inner, w)
            t[b + "mlp.c_fc.bias"] = rnd(inner, scale=0.1)
            t[b + "mlp.c_proj.weight"] = rnd(w, inner, scale=0.1)
            t[b + "mlp.c_proj.bias"] = rnd(w, scale=0.1)
    t["visual.proj"] = rnd(VW, EMBED)       # x @ proj
    t["text_projection"] = rnd(TW, EMBED)   # x @ text_projection
    t["logit_scale"] = torch.tensor(np.log(1 / 0.07), dtype=torch.float64)
    # float32 as stored; the transcription runs on these values in float64.
    return {k: v.float() for k, v in t.items()}


def write_safetensors(path, ts):
    header, blobs, off = {}, [], 0
    for k in sorted(ts):
        a = ts[k].numpy().astype("<f4")
        b = a.tobytes()
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# --- the forward, transcribed from OpenCLIP (float64) ---

def ln(x, w, b):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + 1e-5) * w + b


def gelu(x):  # nn.GELU (exact), OpenCLIP's act_layer without quick_gelu
    return 0.5 * x * (1 + torch.erf(x / np.sqrt(2)))


def mha(x, P, b, heads, mask):
    """nn.MultiheadAttention(x, x, x, attn_mask=mask), batch first."""
    B, T, D = x.shape
    hd = D // heads
    qkv = x @ P[b + "attn.in_proj_weight"].T + P[b + "attn.in_proj_bias"]
    q, k, v = qkv.split(D, dim=-1)
    sh = lambda a: a.reshape(B, T, heads, hd).transpose(1, 2)
    q, k, v = sh(q), sh(k), sh(v)
    s = (q / np.sqrt(hd)) @ k.transpose(-1, -2)
    if mask is not None:
        s = s + mask
    a = torch.softmax(s, -1) @ v
    a = a.transpose(1, 2).reshape(B, T, D)
    return a @ P[b + "attn.out_proj.weight"].T + P[b + "attn.out_proj.bias"]


def block(x, P, b, heads, mask):
    """ResidualAttentionBlock: pre-norm attention, then pre-norm MLP."""
    x = x + mha(ln(x, P[b + "ln_1.weight"], P[b + "ln_1.bias"]), P, b, heads, mask)
    h = ln(x, P[b + "ln_2.weight"], P[b + "ln_2.bias"])
    h = gelu(h @ P[b + "mlp.c_fc.weight"].T + P[b + "mlp.c_fc.bias"])
    return x + h @ P[b + "mlp.c_proj.weight"].T + P[b + "mlp.c_proj.bias"]


def encode_image(P, px):
    x = torch.nn.functional.conv2d(px, P["visual.conv1.weight"], stride=PATCH)  # [B, W, g, g]
    x = x.reshape(x.shape[0], x.shape[1], -1).transpose(1, 2)                     # [B, P, W]
    cls = P["visual.class_embedding"].expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], 1) + P["visual.positional_embedding"]
    x = ln(x, P["visual.ln_pre.weight"], P["visual.ln_pre.bias"])
    for i in range(VL):
        x = block(x, P, f"visual.transformer.resblocks.{i}.", VW // HEADW, None)
    pooled = ln(x[:, 0], P["visual.ln_post.weight"], P["visual.ln_post.bias"])
    return pooled @ P["visual.proj"]


def encode_text(P, ids):
    x = P["token_embedding.weight"][ids] + P["positional_embedding"][: ids.shape[1]]
    mask = torch.full((ids.shape[1],) * 2, float("-inf"), dtype=torch.float64).triu(1)
    for i in range(TL):
        x = block(x, P, f"transformer.resblocks.{i}.", TH, mask)
    x = ln(x, P["ln_final.weight"], P["ln_final.bias"])
    pooled = x[torch.arange(x.shape[0]), ids.argmax(dim=-1)]   # text_global_pool 'argmax'
    return pooled @ P["text_projection"]


# --- OpenCLIP's SimpleTokenizer, transcribed (ASCII prompts: ftfy and
# html.unescape leave them as they are) over the tiny CLIP BPE files ---

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tokenize(texts, vocab, merges):
    ranks = {tuple(m.split()): i for i, m in enumerate(merges)}
    b2u = bytes_to_unicode()
    sot, eot = vocab["<|startoftext|>"], vocab["<|endoftext|>"]

    def bpe(token):
        word = tuple(token[:-1]) + (token[-1] + "</w>",)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if best not in ranks:
                break
            out, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = tuple(out)
        return word

    pat = re.compile(r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[a-zA-Z]+|[0-9]|[^\sa-zA-Z0-9]+", re.IGNORECASE)
    out = np.zeros((len(texts), CTX), dtype=np.int64)  # OpenCLIP pads with 0
    for r, text in enumerate(texts):
        # basic_clean (ftfy.fix_text, a no-op on this ASCII text; html.unescape
        # twice; strip), whitespace_clean, lower.
        text = html.unescape(html.unescape(text)).strip()
        text = re.sub(r"\s+", " ", text).strip().lower()
        ids = [sot]
        for tok in pat.findall(text):
            tok = "".join(b2u[b] for b in tok.encode("utf-8"))
            ids += [vocab[p] for p in bpe(tok)]
        ids = ids[: CTX - 1] + [eot]
        out[r, : len(ids)] = ids
    return out


def main():
    os.makedirs(os.path.join(OUT, "golden"), exist_ok=True)
    with open(os.path.join(OUT, "open_clip_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    ts = tensors()
    write_safetensors(os.path.join(OUT, "open_clip_model.safetensors"), ts)
    for n in ["vocab.json", "merges.txt", "tokenizer_config.json"]:
        shutil.copy(os.path.join(EMB, n), os.path.join(OUT, n))
    P = {k: v.double() for k, v in ts.items()}

    # Three images: one the model's size, one 48x40 (resize shortest side
    # to 32 bicubic: 38x32, centre crop 32: 3 columns off each side), one
    # 44x40 (35x32: torchvision's crop starts at column round(1.5) = 2,
    # where flooring the offset gives 1).
    rng = np.random.default_rng(7)
    ims = []
    for name, (w, h) in [("square.png", (IMG, IMG)), ("wide.png", (48, 40)), ("odd.png", (44, 40))]:
        a = (rng.random((h, w, 3)) * 255).astype(np.uint8)
        Image.fromarray(a).save(os.path.join(OUT, "golden", name))
        ims.append(Image.fromarray(a))
    mean, std = np.array(cfg["preprocess_cfg"]["mean"]), np.array(cfg["preprocess_cfg"]["std"])
    px = []
    for im in ims:
        w, h = im.size
        s = IMG / min(w, h)
        # torchvision Resize(IMG) on a PIL image: the short side IMG, the
        # long one int(IMG * long / short), Pillow's bicubic.
        size = (IMG, int(IMG * h / w)) if w <= h else (int(IMG * w / h), IMG)
        im = im.resize(size, Image.BICUBIC)
        w, h = im.size
        top, left = int(round((h - IMG) / 2.0)), int(round((w - IMG) / 2.0))
        im = im.crop((left, top, left + IMG, top + IMG))
        a = np.asarray(im, dtype=np.float64) / 255.0
        px.append(((a - mean) / std).transpose(2, 0, 1))
    px = torch.tensor(np.stack(px))

    prompts = ["a photo of a cat", "Two  dogs, running!", "salt &amp; pepper"]
    vocab = json.load(open(os.path.join(OUT, "vocab.json")))
    merges = open(os.path.join(OUT, "merges.txt")).read().split("\n")[1:]
    merges = [m for m in merges if m.strip()]
    ids = tokenize(prompts, vocab, merges)

    img = encode_image(P, px)
    txt = encode_text(P, torch.tensor(ids))
    imn = img / img.norm(dim=-1, keepdim=True)
    txn = txt / txt.norm(dim=-1, keepdim=True)
    logits = P["logit_scale"].exp() * imn @ txn.T

    gd = os.path.join(OUT, "golden")
    np.save(os.path.join(gd, "pixel_values.npy"), px.numpy().astype(np.float32))
    np.save(os.path.join(gd, "input_ids.npy"), ids)
    np.save(os.path.join(gd, "image_embeds.npy"), img.numpy().astype(np.float32))
    np.save(os.path.join(gd, "text_embeds.npy"), txt.numpy().astype(np.float32))
    np.save(os.path.join(gd, "logits_per_image.npy"), logits.numpy().astype(np.float32))
    with open(os.path.join(gd, "prompts.json"), "w") as f:
        json.dump(prompts, f)
    print("wrote", OUT, "ids", ids.tolist())


if __name__ == "__main__":
    main()
