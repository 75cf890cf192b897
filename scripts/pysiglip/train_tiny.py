#!/usr/bin/python3
"""train_tiny.py: trains the tiny SigLIP of testdata/siglip-scenes on the generated scenes
of internal/scenes with the sigmoid loss, and measures it.

Usage (from the repository root; Debian's python3-torch, python3-numpy, python3-onnx,
python3-sentencepiece; Go):

    scripts/train_default/run.sh --script scripts/pysiglip/train_tiny.py [--steps N] [--out DIR]
    scripts/train_default/run.sh --script scripts/pysiglip/train_tiny.py --eval-only [--write-eval]

run.sh puts OpenBLAS under torch and trains in two processes, one per core, as the
built-in CLIP model's recipe does (scripts/train_default/README.md); this script reuses
that recipe's data, batching, data-parallel training and held-out evaluations
(train.py), with SigLIP in place of CLIP:

* Tokenizer: a SentencePiece Unigram model (``siglip.train_spiece``) learned from the
  captions of the training scenes, read as transformers' SiglipTokenizer reads it
  (lower case, punctuation removed, ``</s>`` appended, padded with ``</s>`` to the 16
  positions of the text tower). Every word of the caption grammar is one piece; the
  commas of three-object captions are removed by the tokenizer.
* Model: SigLIP's architecture at the built-in CLIP's sizes: vision 64 wide, 4 layers,
  4 heads, 64x64 pixels in 8x8 patches (an 8x8 grid, no class token), the attention
  pooling head; text 64 wide, 2 layers, 4 heads, 16 positions, its head 64 -> 64;
  gelu_pytorch_tanh; SiglipImageProcessor (mean = std = 0.5).
* Start: the built-in CLIP model's weights (models/embedded/model), carried over
  tensor by tensor where SigLIP has the same tensor (``from_clip``): the vision and text
  transformer layers, the patch and position embeddings (CLIP's pre-layernorm folded into
  them with its mean scale, as SigLIP has none), the post-layernorm, the projections
  (the text head takes text_projection; the pooling head's value path takes
  visual_projection, with an identity output projection and a zero MLP, so a patch's
  joint-space vector starts as CLIP's), the token embeddings of the grammar's words;
  the pooling head's probe and query/key projections start random, logit_bias at
  SigLIP's -10 (with CLIP's scale of 31 a pair starts positive above a cosine of
  0.32); the two learn ten times faster than the rest. Training from random weights needs the eight stages of the CLIP recipe (an
  hour to two on two cores); from CLIP's weights one stage of 4000 steps re-learns the
  towers for SigLIP's architecture (31 minutes on an AMD EPYC Zen 5's two cores).
* Losses: the sigmoid loss on the pooled embeddings (every image-caption pair of the
  whole batch its own binary problem: positive where the captions are the same, the
  hard negatives of the CLIP recipe as extra negative captions), the zero-shot prompts
  as sigmoid terms (each image against all 40 prompts, positive on its own), and the
  CLIP recipe's dense losses on the joint-space maps the Go program draws (token t_i =
  normalize(head(text last_hidden_state)), patch p_j = normalize(pooling head on that
  patch alone)), whose argmaxes the evaluation ranks; an auxiliary colour and shape
  classifier on the patches, not exported.
* Evaluation: train.py's definitions on both renderers (zero-shot top-1 over the 40
  prompts by the sigmoid score, text -> image peak inside, image -> text own word), the
  figures ``condition models eval testdata/siglip-scenes`` is compared with
  (cmd/internal/eval's tests read eval.json).
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "scripts", "train_default"))

from pyclip import clip as pc  # noqa: E402
from pysiglip import siglip  # noqa: E402
import train as recipe  # noqa: E402  (scripts/train_default/train.py)
import trainsettings  # noqa: E402

COLOURS, SHAPES = recipe.COLOURS, recipe.SHAPES
CLIP_MODEL = os.path.join(REPO, "models", "embedded", "model")


# --------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------


class SceneText:
    """SiglipTokenizer over the scenes' SentencePiece model, with what train.py's
    Scenes, hard negatives and evaluations ask of a vocabulary."""

    cache_tag = "-siglip"

    def __init__(self, spiece: bytes, length: int):
        self.spiece = spiece
        self.tok = siglip.Tokenizer(spiece, model_max_length=length)
        self.pad_to = length
        self.pad_id, self.eos_id = self.tok.pad_id, self.tok.eos_id
        self.merges = hashlib.sha256(spiece).hexdigest()  # the derived arrays' cache key
        self.colour_ids = [self.word_id(c) for c in COLOURS]
        self.shape_ids = [self.word_id(s) for s in SHAPES]
        self.a_id, self.an_id, self.orange_id = self.word_id("a"), self.word_id("an"), self.word_id("orange")

    def __len__(self):
        return len(self.tok)

    def encode(self, text):
        """-> the ids of text padded to the text tower's length, as the model reads them."""
        return self.tok.encode(text, max_length=self.pad_to)

    def word_id(self, word):
        ids = self.tok.encode(word, pad=False)
        if len(ids) != 2:
            raise ValueError(f"train_tiny: word {word!r} is {len(ids) - 1} pieces, not one")
        return ids[0]

    def caption_ids(self, caption, words):
        """-> (ids without padding, the token position of each word; None for the
        punctuation the tokenizer removes)."""
        ids = self.tok.encode(caption, max_length=self.pad_to, pad=False)
        at, j = [], 0
        for w in words:
            if siglip.Tokenizer.canonicalize_text(w):
                at.append(j)
                j += 1
            else:
                at.append(None)
        if len(ids) != j + 1:
            raise ValueError(f"train_tiny: caption {caption!r} is not one piece per word")
        return ids, at


GRAMMAR = ["a", "an", "and", "above", "below", "to", "the", "left", "right", "of",
           "on", "at", "top", "bottom", "in", "middle"] + COLOURS + SHAPES


def scene_tokenizer(folders, length, seed):
    """-> SceneText over a SentencePiece Unigram model learned from the distinct
    captions of the training scenes in folders, the 40 prompts, and 20 000 lines of
    six of the grammar's words drawn at random (seeded): from the captions alone the
    trainer keeps "top", "bottom" and "middle" in pieces; with the random lines
    every word of the grammar is one piece."""
    caps = set()
    for folder in folders:
        with open(os.path.join(folder, "scenes.jsonl"), encoding="utf-8") as f:
            caps.update(json.loads(l)["caption"] for l in f)
    caps.update(recipe.prompt(c, s) for c in COLOURS for s in SHAPES)
    rng = np.random.default_rng(seed)
    lines = [" ".join(GRAMMAR[k] for k in rng.integers(len(GRAMMAR), size=6)) for _ in range(20000)]
    text = SceneText(siglip.train_spiece(sorted(caps) + lines, 100), length)
    for w in GRAMMAR:
        text.word_id(w)
    return text


class SiglipScenes(recipe.Scenes):
    MEAN, STD = siglip.SIGLIP_MEAN, siglip.SIGLIP_STD


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------


class TinySiglip(siglip.SigLIP):
    """SigLIP with train.py's ``joint`` (token and patch features in the joint space)."""

    def joint(self, ids, pixels):
        """-> (t [B, T, D], p [B, N, D], normalised; text_embeds [B, D], image_embeds [B, D])."""
        th, te = self.encode_text(ids)
        vh, ie = self.encode_image(pixels)
        return (F.normalize(self.text_model.head(th), dim=-1), F.normalize(self.patch_embeds(vh), dim=-1),
                te, ie)


def config(settings, vocab):
    m = settings["model"]
    return siglip.SiglipConfig(
        text_config=siglip.TextConfig(
            vocab_size=len(vocab), hidden_size=m["text_width"], intermediate_size=m["mlp_ratio"] * m["text_width"],
            num_hidden_layers=m["text_layers"], num_attention_heads=m["text_heads"],
            max_position_embeddings=settings["train"]["text_length"], projection_size=m["vision_width"]),
        vision_config=siglip.VisionConfig(
            hidden_size=m["vision_width"], intermediate_size=m["mlp_ratio"] * m["vision_width"],
            num_hidden_layers=m["vision_layers"], num_attention_heads=m["vision_heads"],
            image_size=settings["data"]["image_size"], patch_size=m["patch_size"]),
        logit_scale_init=math.log(10.0), logit_bias_init=-10.0)


def build(settings, vocab):
    return TinySiglip(config(settings, vocab)).init_random(settings["seed"], std=0.002)


@torch.no_grad()
def from_clip(model, vocab, folder, pixels):
    """Carries the CLIP model in folder over into model (see the module doc); pixels
    [N, 3, S, S] in CLIP's normalisation measure the scale its pre-layernorm had.
    Returns the names of the SigLIP tensors that were set."""
    sd, _ = pc.read_safetensors(os.path.join(folder, "model.safetensors"))
    sd = {k: torch.from_numpy(v.astype(np.float32)) for k, v in sd.items()}
    own = model.state_dict()
    done = set()

    def put(name, value):
        own[name].copy_(value.reshape(own[name].shape))
        done.add(name)

    for k, v in sd.items():
        if ".encoder.layers." in k or k.endswith(("final_layer_norm.weight", "final_layer_norm.bias",
                                                   "post_layernorm.weight", "post_layernorm.bias")):
            put(k, v)
    # Vision embeddings: CLIP computes pre_layrnorm(conv(x) + pos) per token. Its
    # centring is linear and its scale is taken as the mean over the scenes, so
    # ln(e) ~ w * C e / s + b folds into the conv and the position embeddings.
    v = "vision_model."
    W, pos = sd[v + "embeddings.patch_embedding.weight"], sd[v + "embeddings.position_embedding.weight"]
    lw, lb = sd[v + "pre_layrnorm.weight"], sd[v + "pre_layrnorm.bias"]
    e = F.conv2d(pixels, W, stride=W.shape[-1]).flatten(2).transpose(1, 2) + pos[1:]  # [N, P, D]
    s = e.std(-1, unbiased=False).mean()
    d = W.shape[0]
    C = torch.eye(d) - 1.0 / d
    A = (lw / s).unsqueeze(1) * C  # [D, D]
    put(v + "embeddings.patch_embedding.weight", (A @ W.reshape(d, -1)).reshape(W.shape))
    put(v + "embeddings.patch_embedding.bias", lb)
    put(v + "embeddings.position_embedding.weight", pos[1:] @ A.t())
    # The pooling head's value path is visual_projection; the rest adds nothing yet.
    h = v + "head."
    inw = own[h + "attention.in_proj_weight"]
    inw[2 * d:3 * d] = sd["visual_projection.weight"]
    own[h + "attention.in_proj_bias"][2 * d:3 * d] = 0
    done.update([h + "attention.in_proj_weight", h + "attention.in_proj_bias"])
    put(h + "attention.out_proj.weight", torch.eye(d))
    put(h + "attention.out_proj.bias", torch.zeros(d))
    put(h + "mlp.fc2.weight", torch.zeros_like(own[h + "mlp.fc2.weight"]))
    put(h + "mlp.fc2.bias", torch.zeros(d))
    # Text: the head is text_projection; SigLIP's position j is CLIP's j + 1 (no BOS).
    put("text_model.head.weight", sd["text_projection.weight"])
    put("text_model.head.bias", torch.zeros(own["text_model.head.bias"].shape))
    n = own["text_model.embeddings.position_embedding.weight"].shape[0]
    put("text_model.embeddings.position_embedding.weight", sd["text_model.embeddings.position_embedding.weight"][1:n + 1])
    clip_vocab = recipe.make_vocab()
    emb, cemb = own["text_model.embeddings.token_embedding.weight"], sd["text_model.embeddings.token_embedding.weight"]
    for w in GRAMMAR:
        emb[vocab.word_id(w)] = cemb[clip_vocab.encode(w)[1]]
    emb[vocab.eos_id] = cemb[clip_vocab.eos_id]
    done.add("text_model.embeddings.token_embedding.weight")
    put("logit_scale", sd["logit_scale"])
    model.load_state_dict(own)
    return done


# --------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------


def pair_loss(logits, positive):
    """SigLIP's loss over a block of pairs: -sum(log sigmoid(z * logits)) / rows, z = +1
    for positive pairs and -1 for the others."""
    z = torch.where(positive, 1.0, -1.0)
    return -F.logsigmoid(z * logits).sum() / len(logits)


def losses(model, ds, idx, settings, prompts, aux):
    ids = torch.from_numpy(ds.ids[idx])
    th, te = model.encode_text(ids)
    vh, ie = model.encode_image(ds.pixels(idx))
    t = F.normalize(model.text_model.head(th), dim=-1)
    p = F.normalize(model.patch_embeds(vh), dim=-1)
    scale, bias = model.logit_scale.exp(), model.logit_bias
    # Sigmoid loss: this process's images against every process's captions (the
    # columns gathered with their gradients: over the processes every pair once),
    # and against their hard negatives.
    ten, ien = F.normalize(te, dim=-1), F.normalize(ie, dim=-1)
    cols, colids = recipe.gather(ten), recipe.gather(ids, grad=False)
    neg = recipe.negatives(ds, idx, settings)
    if neg is not None:
        _, ne = model.encode_text(neg)
        cols = torch.cat([cols, recipe.gather(F.normalize(ne, dim=-1))])
        colids = torch.cat([colids, recipe.gather(neg, grad=False)])
    same = (ids.unsqueeze(1) == colids.unsqueeze(0)).all(-1)
    l_sig = pair_loss(scale * ien @ cols.t() + bias, same)
    S = scale * torch.einsum("btd,bpd->btp", t, p)
    l_t2i, l_i2t, owner, owned = recipe.dense_maps(ds, idx, S)
    ph, pe = model.encode_text(prompts)  # [40, T, D], [40, D]
    T = prompts.shape[1]
    tp = F.normalize(model.text_model.head(ph), dim=-1).view(len(COLOURS), len(SHAPES), T, -1)
    l_words, cls, oc, of = recipe.grammar_words(ds, idx, p, scale, tp, owner, owned, 1, 2)
    # Single-object scenes against the 40 prompts, each its own binary problem.
    one = torch.from_numpy(ds.nobj[idx] == 1)
    if one.any():
        target = cls[one, 0, 0] * len(SHAPES) + cls[one, 0, 1]
        logits = scale * ien[one] @ F.normalize(pe, dim=-1).t() + bias
        l_cls = pair_loss(logits, F.one_hot(target, len(prompts)).bool())
    else:
        l_cls = torch.zeros(())
    nc = len(COLOURS)
    ap = aux(vh)
    la = (F.cross_entropy(ap[..., :nc].reshape(-1, nc), oc[..., 0].reshape(-1), reduction="none")
          + F.cross_entropy(ap[..., nc:].reshape(-1, len(SHAPES)), oc[..., 1].reshape(-1), reduction="none"))
    l_aux = (la * of).sum() / of.sum().clamp_min(1)
    w = settings["train"]
    total = (w["loss_contrastive"] * l_sig + w["loss_text_to_image"] * l_t2i + w["loss_image_to_text"] * l_i2t
             + w["loss_patch_words"] * l_words + w["loss_prompt_class"] * l_cls + w["loss_aux"] * l_aux)
    return total, (l_sig.item(), l_t2i.item(), l_i2t.item(), l_words.item(), l_cls.item(), l_aux.item())


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def independent(args, d):
    """-> the independent renderer's held-out folders, preprocessed as --out's
    preprocessor_config.json (SigLIP's) says, in folders of their own."""
    return recipe.independent(args, d, tag="-siglip")


def export(model, vocab, settings, out, logf):
    model.eval()
    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    cfg = model.config
    siglip.write_config(out, cfg)
    siglip.write_preprocessor_config(out, cfg.vision_config.image_size)
    siglip.write_tokenizer_files(out, vocab.spiece, model_max_length=vocab.pad_to)
    siglip.write_safetensors(os.path.join(out, "model.safetensors"), model.hf_state_dict(),
                             {"format": "pt", "source": "scripts/pysiglip/train_tiny.py",
                              "settings": json.dumps(settings, sort_keys=True)})
    siglip.export_text_onnx(model, os.path.join(out, "onnx", "text_model.onnx"))
    siglip.export_vision_onnx(model, os.path.join(out, "onnx", "vision_model.onnx"))
    for root, _, files in os.walk(out):
        for f in sorted(files):
            path = os.path.join(root, f)
            recipe.log(logf, f"export {os.path.relpath(path, out)} {os.path.getsize(path)} bytes")


@torch.no_grad()
def write_golden(model, vocab, out):
    """out/golden/classify.json: for each image of testdata/scenes, preprocessed as
    SiglipImageProcessor does (Pillow), torch's sigmoid probability of each of the 40
    prompts and of each of the folder's captions, and its caption's ids; the Go tests
    compare Classify with them."""
    from PIL import Image

    model.eval()
    folder = os.path.join(REPO, "testdata", "scenes")
    prompts = [recipe.prompt(c, s) for c in COLOURS for s in SHAPES]
    ids = torch.tensor([vocab.encode(p) for p in prompts])
    _, te = model.encode_text(ids)
    size = model.config.vision_config.image_size
    with open(os.path.join(folder, "captions.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t", 1) for line in f]
    _, ce = model.encode_text(torch.tensor([vocab.encode(c) for _, c in lines]))
    images = []
    for name, caption in lines:
        px = siglip.pixel_values(Image.open(os.path.join(folder, "images", name)), size)
        _, ie = model.encode_image(torch.from_numpy(px).unsqueeze(0))
        probs = torch.sigmoid(model.logits(ie, te))[0]
        images.append({"image": "testdata/scenes/images/" + name, "caption": caption,
                       "caption_ids": vocab.encode(caption),
                       "probs": {p: float(v) for p, v in zip(prompts, probs)},
                       "caption_probs": [float(v) for v in torch.sigmoid(model.logits(ie, ce))[0]]})
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    pc.write_json(os.path.join(out, "golden", "classify.json"), {
        "logit_scale": float(model.logit_scale), "logit_bias": float(model.logit_bias), "images": images})


def load_exported(settings, vocab, folder):
    model = build(settings, vocab)
    sd, _ = pc.read_safetensors(os.path.join(folder, "model.safetensors"))
    model.load_hf_state_dict({k: v.astype(np.float32) for k, v in sd.items()})
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", default=os.path.join(HERE, "settings_tiny.json"))
    ap.add_argument("--data", default="/tmp/condition-scenes")
    ap.add_argument("--work", default="/tmp/condition-train-siglip")
    ap.add_argument("--out", default=os.path.join(REPO, "testdata", "siglip-scenes"))
    ap.add_argument("--log", default=os.path.join(HERE, "train_tiny.log"))
    ap.add_argument("--eval-json", default=None, help="default: --out's eval.json")
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--write-eval", action="store_true", help="with --eval-only: write --eval-json")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--procs", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    args.eval_json = args.eval_json or os.path.join(args.out, "eval.json")
    settings = trainsettings.load_args(args)
    torch.set_num_threads(settings["threads"])
    d = settings["data"]
    tdir, sdir, pdir, plain_dir = recipe.data_dirs(args, d)
    recipe.gendata(tdir, d["train_seed"], d["train_scenes"], d["image_size"], variety=d.get("variety", False))
    recipe.gendata(plain_dir, d["train_seed"], d["train_scenes"], d["image_size"])
    recipe.gendata(sdir, d["eval_single_seed"], d["eval_scenes"], d["image_size"], 1, 1, distinct=True)
    recipe.gendata(pdir, d["eval_pair_seed"], d["eval_scenes"], d["image_size"], 2, 2, distinct=True)
    if args.eval_only:
        vocab = SceneText(open(os.path.join(args.out, "spiece.model"), "rb").read(), settings["train"]["text_length"])
        model = load_exported(settings, vocab, args.out)
        T, patch = settings["train"]["text_length"], settings["model"]["patch_size"]
        single, pair = SiglipScenes(sdir, vocab, T, patch), SiglipScenes(pdir, vocab, T, patch)
        m = {"training_renderer": recipe.evaluate(model, vocab, single, pair, T),
             "independent_renderer": recipe.evaluate_vec(model, vocab, *independent(args, d))}
        print(json.dumps(m, indent=1))
        write_golden(model, vocab, args.out)
        if args.write_eval:
            pc.write_json(args.eval_json, m)
            with open(args.log, "a") as logf:
                for k, f in m.items():
                    recipe.log(logf, f"eval {k} (exported model, all held-out scenes): {json.dumps(f)}")
        return
    recipe.spawn(train_process, args, settings)


def train_process(rank, procs, port, args, settings):
    """Trains (one of procs processes; rank 0 evaluates, logs and exports)."""
    d, tr = settings["data"], settings["train"]
    T, patch = tr["text_length"], settings["model"]["patch_size"]
    torch.set_num_threads(settings["threads"])
    torch.manual_seed(settings["seed"])
    if rank != 0:
        sys.stdout = open(os.devnull, "w")
    if procs > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=procs)
    logf = open(args.log, "a") if rank == 0 else None
    if rank == 0:
        os.makedirs(args.work, exist_ok=True)
        os.makedirs(args.out, exist_ok=True)  # the independent renderer's scenes read its preprocessing
        siglip.write_preprocessor_config(args.out, d["image_size"])
    recipe.log(logf, f"settings {json.dumps(settings, sort_keys=True)}")
    recipe.log(logf, f"torch {torch.__version__} threads {torch.get_num_threads()} procs {procs}")
    tdir, sdir, pdir, plain_dir = recipe.data_dirs(args, d)
    t0 = time.time()
    vocab = scene_tokenizer((tdir, plain_dir), T, settings["seed"])
    varied = SiglipScenes(tdir, vocab, T, patch)
    train = varied.concat(SiglipScenes(plain_dir, vocab, T, patch))
    single = SiglipScenes(sdir, vocab, T, patch) if rank == 0 else None
    pair = SiglipScenes(pdir, vocab, T, patch) if rank == 0 else None
    recipe.log(logf, f"data: {train.n} training scenes ({varied.n} varied, {d['mix_plain']:.0%} of each batch plain), "
                     f"vocabulary {len(vocab)} pieces ({time.time() - t0:.0f}s)")
    model = build(settings, vocab)
    rng = np.random.default_rng(settings["seed"])
    probe = rng.choice(train.n, 512, replace=False)
    x = torch.from_numpy(np.ascontiguousarray(train.images[np.sort(probe)])).float().div_(255.0).permute(0, 3, 1, 2)
    clip_px = (x - torch.tensor(pc.CLIP_MEAN).view(1, 3, 1, 1)) / torch.tensor(pc.CLIP_STD).view(1, 3, 1, 1)
    done = from_clip(model, vocab, CLIP_MODEL, clip_px)
    with torch.no_grad():
        model.logit_bias.fill_(tr["logit_bias_init"])
    recipe.log(logf, f"model: {sum(p.numel() for p in model.parameters())} parameters, {len(done)} tensors from "
                     f"{os.path.relpath(CLIP_MODEL, REPO)}; logit_scale {model.logit_scale.exp().item():.1f}, "
                     f"logit_bias {model.logit_bias.item():.2f}")
    if rank == 0:
        m = recipe.evaluate(model, vocab, single, pair, T, limit=300)
        recipe.log(logf, f"eval step 0: {json.dumps(m)}")
    aux = recipe.new_aux(settings)
    # logit_scale and logit_bias learn head_lr_scale times faster than the rest:
    # Adam moves a scalar by about the learning rate a step, and the bias has
    # to travel several units within the schedule.
    heads = [model.logit_scale, model.logit_bias]
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embedding" not in n] + list(aux.parameters())
    no_decay = [p for n, p in model.named_parameters()
                if not (p.dim() >= 2 and "embedding" not in n) and n not in ("logit_scale", "logit_bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tr["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0},
                             {"params": heads, "weight_decay": 0.0, "lr_scale": tr["head_lr_scale"]}], lr=tr["lr"])
    params = list(model.parameters()) + list(aux.parameters())
    prompts = torch.tensor([vocab.encode(recipe.prompt(c, s)) for c in COLOURS for s in SHAPES])
    steps, B = tr["steps"], tr["batch"]
    bp = int(round(B * d["mix_plain"]))
    streams = recipe.batch_streams(rng, [[np.arange(varied.n), B - bp], [varied.n + np.arange(train.n - varied.n), bp]])
    t0 = time.time()
    acc = np.zeros(7)
    for step in range(1, steps + 1):
        lr = recipe.learning_rate(tr, step, steps)
        for gr in opt.param_groups:
            gr["lr"] = lr * gr.get("lr_scale", 1.0)
        idx = recipe.next_batch(rng, streams)[rank::procs]
        loss, terms = losses(model, train, idx, settings, prompts, aux)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if procs > 1:
            recipe.average_gradients(params, procs)
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, tr["max_logit_scale"])
        acc += np.array([loss.item(), *terms])
        if step % tr["log_every"] == 0:
            a = acc / tr["log_every"]
            acc[:] = 0
            el = time.time() - t0
            recipe.log(logf, f"step {step}/{steps} loss {a[0]:.4f} (sigmoid {a[1]:.4f} t2i {a[2]:.4f} i2t {a[3]:.4f} "
                             f"words {a[4]:.4f} prompts {a[5]:.4f} aux {a[6]:.4f}) scale {model.logit_scale.exp().item():.1f} "
                             f"bias {model.logit_bias.item():.2f} lr {lr:.2e} {el:.0f}s {step * B / el:.0f} img/s")
        if rank == 0 and (step % tr["eval_every"] == 0 or step == steps):
            m = recipe.evaluate(model, vocab, single, pair, T, limit=None if step == steps else 300)
            recipe.log(logf, f"eval step {step}: {json.dumps(m)}")
            torch.save({"model": model.state_dict(), "aux": aux.state_dict()}, os.path.join(args.work, "checkpoint.pt"))
            if step == steps:
                export(model, vocab, settings, args.out, logf)
                write_golden(model, vocab, args.out)
            mv = recipe.evaluate_vec(model, vocab, *independent(args, d))
            recipe.log(logf, f"eval step {step}, independent renderer: {json.dumps(mv)}")
    if rank == 0:
        recipe.log(logf, f"training took {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
