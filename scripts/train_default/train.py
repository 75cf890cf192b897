"""Trains the embedded default model of `condition`: a tiny CLIP on generated scenes.

Usage (from the repository root, with Debian's python3-torch):

    /usr/bin/python3 scripts/train_default/train.py [--settings scripts/train_default/settings.json]
        [--data /tmp/condition-scenes] [--work /tmp/condition-train] [--out models/embedded/model]
    /usr/bin/python3 scripts/train_default/train.py --eval-only    # metrics of --out on held-out scenes

The scenes come from the Go generator (internal/scenes), written as .npy files by
`go run ./tools/gendata` (run here when --data lacks them), so the Go
evaluation (pipeline/eval_test.go) sees the same distribution. Every setting, the seed
included, is in settings.json or a file based on one (trainsettings.py reads them); the run
is deterministic up to floating-point reduction order (threads).

Losses, all on the quantities the Go program uses for its "joint space" maps:
  t_i = normalize(text_projection(text last_hidden_state[i]))
  p_j = normalize(visual_projection(post_layernorm(vision last_hidden_state[1+j])))
  S_ij = exp(logit_scale) * t_i . p_j
* contrastive: CLIP's symmetric cross-entropy on the pooled embeds (captions that are
  identical in a batch share the target mass);
* text -> image: for every colour or shape word of the caption, cross-entropy of
  softmax_j S_ij towards the patches of the named object (weighted by how much of the
  patch it covers);
* image -> text: for every patch at least half covered by an object, cross-entropy
  of softmax_i S_ij over the caption's tokens (BOS..EOS; padding masked) towards
  that object's colour and shape words (equal mass);
* hard negatives: image -> text also ranks each caption with one object's shape or
  colour swapped (settings train.hard_negatives);
* words: each owned patch against every colour word and every shape word of the
  grammar (from the prompts "a/an <colour> <shape>"), not only the caption's;
* prompts: single-object scenes classified over the 40 prompts by the pooled embeds;
* aux: a linear colour/shape classifier on post_layernorm states (class token and
  owned patches) that is not exported; without it shapes were not learned in the
  budget (colour alone satisfies the other losses at first).

Training runs in settings' "procs" processes of "threads" threads each, every
process taking its share of every batch: the contrastive loss gathers every
process's embeds (with their gradients), so it is the one-process loss; the
other losses are means over each process's share; gradients are averaged
before clipping and the optimiser's step, so every process keeps the same
weights and rank 0 evaluates, logs and exports.

Metrics (the same definitions as pipeline/eval_test.go):
* zero-shot: single-object held-out scenes, prompts "a/an <colour> <shape>" for all
  colour x shape pairs, top-1 of cos(image_embeds, text_embeds); correct when both
  colour and shape match.
* text->image peak: two-object held-out scenes; for each colour or shape word of the
  caption, the patch with the largest S_ij is "inside" the named object when the
  object covers at least 25% of that patch's pixels (64x64 label map, 8x8 patches).
  Words whose object covers no patch to 25% are skipped (counted).
* image->text: two-object held-out scenes; for every patch at least 50% covered by
  an object, among the caption's content-word tokens (the colour and shape words of
  both objects) the one with the largest S_ij belongs to that object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from pyclip import clip as pc  # noqa: E402
import trainsettings  # noqa: E402  (this folder: train.py's settings files)

COLOURS = ["red", "green", "blue", "yellow", "purple", "orange", "white", "black"]
SHAPES = ["circle", "square", "triangle", "star", "cross"]
PATCH_INSIDE = 0.25  # text->image: the peak patch is inside when covered this much
PATCH_OWNED = 0.5  # image->text and the dense loss: patches covered this much


def log(f, msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    if f is not None:
        f.write(line + "\n")
        f.flush()


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


def gendata(out, seed, n, size, min_obj=1, max_obj=3, distinct=False, variety=False):
    if all(os.path.exists(os.path.join(out, f)) for f in ("images.npy", "labels.npy", "scenes.jsonl")):
        return
    cmd = ["go", "run", "./tools/gendata", "-seed", str(seed), "-n", str(n),
           "-size", str(size), "-min-objects", str(min_obj), "-max-objects", str(max_obj), "-out", out]
    if distinct:
        cmd.append("-distinct")
    if variety:
        cmd.append("-variety")
    subprocess.run(cmd, cwd=ROOT, check=True)


def prompt(colour, shape):
    return ("an " if colour[0] in "aeiou" else "a ") + colour + " " + shape


def caption_ids(vocab, caption, words):
    """-> (ids, positions): the caption's token ids without padding, and the token
    position of each of its words (None for a word the tokenizer drops). CLIP's BPE:
    BOS, one token per word, EOS. A vocabulary with a ``caption_ids`` method of its
    own (another tokenizer: scripts/pysiglip/train_tiny.py) decides for itself."""
    own = getattr(vocab, "caption_ids", None)
    if own is not None:
        return own(caption, words)
    e = vocab.encode(caption)
    if len(e) != len(words) + 2:
        raise ValueError(f"train: caption {caption!r} is not one token per word")
    return e, [k + 1 for k in range(len(words))]


class Scenes:
    """A folder written by gendata, tokenized and reduced to patch coverage.

    The arrays derived from a whole folder are cached beside it
    (derived-T<text_length>-p<patch>.npz), keyed by the vocabulary and the
    sizes and times of the folder's files: every training stage reads the
    same scenes again. A folder that cannot be written is derived each time."""

    MEAN, STD = pc.CLIP_MEAN, pc.CLIP_STD  # pixels(): the model's normalisation
    ARRAYS = ("cov", "ids", "lengths", "ref_pos", "ref_obj", "ref_ok", "obj_tok", "ref_names",
              "tok_names", "nobj", "obj_class")

    def __init__(self, folder, vocab, text_length, patch, limit=None):
        self.folder, self.vocab, self._parts = folder, vocab, None
        self.images = np.load(os.path.join(folder, "images.npy"), mmap_mode="r")
        self.grid = self.images.shape[1] // patch
        if limit is not None:
            self._derive(vocab, text_length, patch, limit)
            return
        tag = getattr(vocab, "cache_tag", "")  # another tokenizer's arrays, in a file of their own
        cache, key = os.path.join(folder, f"derived{tag}-T{text_length}-p{patch}.npz"), self._key(vocab)
        if os.path.exists(cache):
            with np.load(cache) as z:
                if str(z["key"]) == key:
                    for k in self.ARRAYS:
                        setattr(self, k, z[k])
                    self.n, self._scenes = len(self.ids), None
                    return
        self._derive(vocab, text_length, patch, limit)
        tmp = cache + f".{os.getpid()}.tmp.npz"
        try:
            np.savez(tmp, key=np.array(key), **{k: getattr(self, k) for k in self.ARRAYS})
            os.replace(tmp, cache)
        except OSError:
            if os.path.exists(tmp):
                os.remove(tmp)

    def _key(self, vocab):
        """-> what the derived arrays depend on besides text_length and patch."""
        files = []
        for f in ("images.npy", "labels.npy", "scenes.jsonl"):
            st = os.stat(os.path.join(self.folder, f))
            files.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
        words = COLOURS + SHAPES + ["a", "an"]
        key = {"files": files, "merges": vocab.merges, "ids": [vocab.encode(w) for w in words]}
        if hasattr(vocab, "pad_id"):
            key["pad"] = vocab.pad_id
        return json.dumps(key)

    @property
    def scenes(self):
        """-> the scenes.jsonl records (read on first use; a concatenation's are its parts')."""
        if self._scenes is None:
            if self._parts is not None:
                self._scenes = self._parts[0].scenes + self._parts[1].scenes
            else:
                with open(os.path.join(self.folder, "scenes.jsonl"), encoding="utf-8") as f:
                    self._scenes = [json.loads(l) for l in f][:self.n]
        return self._scenes

    def _derive(self, vocab, text_length, patch, limit):
        labels = np.load(os.path.join(self.folder, "labels.npy"), mmap_mode="r")
        with open(os.path.join(self.folder, "scenes.jsonl"), encoding="utf-8") as f:
            scenes = [json.loads(l) for l in f]
        n = len(scenes) if limit is None else min(limit, len(scenes))
        self._scenes = scenes = scenes[:n]
        self.images = self.images[:n]
        g = self.grid
        # Coverage [N, 3, P]: fraction of each patch covered by object k.
        cov = np.zeros((n, 3, g * g), dtype=np.float32)
        lab = np.asarray(labels[:n]).reshape(n, g, patch, g, patch)
        for k in range(3):
            # Counts in uint16, divided once: the same values as a float mean, faster.
            cov[:, k] = ((lab == k + 1).sum(axis=(2, 4), dtype=np.uint16) / np.float32(patch * patch)).reshape(n, g * g)
        self.cov = cov
        T = text_length
        self.ids = np.full((n, T), getattr(vocab, "pad_id", vocab.eos_id), dtype=np.int64)
        self.lengths = np.zeros(n, dtype=np.int64)
        self.ref_pos = np.zeros((n, 6), dtype=np.int64)  # token position of a colour/shape word
        self.ref_obj = np.zeros((n, 6), dtype=np.int64)
        self.ref_ok = np.zeros((n, 6), dtype=bool)
        self.obj_tok = np.zeros((n, 3, 2), dtype=np.int64)  # colour, shape token positions
        # ref_names[i, r, k]: ref r's word names object k too (objects may share a colour
        # or a shape); tok_names[i, k, t]: token t is a colour or shape word of object k.
        self.ref_names = np.zeros((n, 6, 3), dtype=np.float32)
        self.tok_names = np.zeros((n, 3, T), dtype=np.float32)
        self.nobj = np.zeros(n, dtype=np.int64)
        self.obj_class = np.zeros((n, 3, 2), dtype=np.int64)  # colour index, shape index
        cache = {}
        for i, s in enumerate(scenes):
            e = cache.get(s["caption"])
            if e is None:
                e = cache[s["caption"]] = caption_ids(vocab, s["caption"], s["words"])
            e, at = e
            if len(e) > T:
                raise ValueError(f"train: caption {s['caption']!r} longer than {T} tokens")
            self.ids[i, :len(e)] = e
            self.lengths[i] = len(e)
            self.nobj[i] = len(s["objects"])
            for r, ref in enumerate(s["refs"]):
                self.ref_pos[i, r] = at[ref["word"]]
                self.ref_obj[i, r] = ref["object"]
                self.ref_ok[i, r] = True
                self.obj_tok[i, ref["object"], 0 if ref["kind"] == "colour" else 1] = at[ref["word"]]
            objs = s["objects"]
            for k, o in enumerate(objs):
                self.obj_class[i, k] = (COLOURS.index(o["colour"]), SHAPES.index(o["shape"]))
            for r, ref in enumerate(s["refs"]):
                for k, o in enumerate(objs):
                    if s["words"][ref["word"]] == o[ref["kind"]]:
                        self.ref_names[i, r, k] = 1
                        self.tok_names[i, k, at[ref["word"]]] = 1
        self.n = n

    def concat(self, other):
        """-> the scenes of self followed by those of other (images in memory)."""
        out = type(self).__new__(type(self))
        for k in self.ARRAYS + ("images",):
            setattr(out, k, np.concatenate([np.asarray(getattr(self, k)), np.asarray(getattr(other, k))]))
        out.grid, out.vocab, out.folder = self.grid, self.vocab, None
        out._scenes, out._parts = None, (self, other)
        out.n = self.n + other.n
        return out

    def pixels(self, idx):
        x = torch.from_numpy(np.ascontiguousarray(self.images[idx])).float().div_(255.0)
        x = x.permute(0, 3, 1, 2)
        mean = torch.tensor(self.MEAN).view(1, 3, 1, 1)
        std = torch.tensor(self.STD).view(1, 3, 1, 1)
        return (x - mean) / std


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------


def build(settings, vocab):
    m = settings["model"]
    cfg = pc.CLIPConfig(
        text_config=pc.TextConfig(
            vocab_size=len(vocab), hidden_size=m["text_width"],
            intermediate_size=m["mlp_ratio"] * m["text_width"], projection_dim=m["projection_dim"],
            num_hidden_layers=m["text_layers"], num_attention_heads=m["text_heads"],
            max_position_embeddings=m["max_position_embeddings"],
            pad_token_id=vocab.eos_id, bos_token_id=vocab.bos_id, eos_token_id=vocab.eos_id),
        vision_config=pc.VisionConfig(
            hidden_size=m["vision_width"], intermediate_size=m["mlp_ratio"] * m["vision_width"],
            projection_dim=m["projection_dim"], num_hidden_layers=m["vision_layers"],
            num_attention_heads=m["vision_heads"], image_size=settings["data"]["image_size"],
            patch_size=m["patch_size"]),
        projection_dim=m["projection_dim"])
    model = pc.CLIP(cfg)
    g = torch.Generator().manual_seed(settings["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "logit_scale":
                p.fill_(cfg.logit_scale_init_value)
            elif "norm" in name or "layrnorm" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            elif name.startswith("vision_model.embeddings.") and name != "vision_model.embeddings.patch_embedding.weight":
                # OpenAI CLIP's init: class and position embeddings at width^-1/2, so
                # that patches know where they are from the start (with 0.01 the
                # tokens of a plain-coloured region are all alike and shape is not
                # learned within the training budget).
                p.copy_(p.shape[-1] ** -0.5 * torch.randn(p.shape, generator=g))
            elif "position_embedding" in name:
                p.copy_(0.01 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
    return model


def joint(model, ids, pixels):
    """-> (t [B,T,dp] normalised token features, p [B,P,dp] normalised patch features,
    text_embeds, image_embeds). A model with a ``joint`` method of its own (another
    family: scripts/pysiglip/train_tiny.py) computes them itself."""
    if hasattr(model, "joint"):
        return model.joint(ids, pixels)
    th, te = model.encode_text(ids)
    vh, ie = model.encode_image(pixels)
    t = F.normalize(model.text_projection(th), dim=-1)
    p = F.normalize(model.visual_projection(model.vision_model.post_layernorm(vh[:, 1:])), dim=-1)
    return t, p, te, ie


class _Gather(torch.autograd.Function):
    """All processes' rows of x, concatenated in rank order; the gradient of
    the local rows is the sum of every process's gradient for them (data
    parallel training: each process holds batch/procs of the scenes)."""

    @staticmethod
    def forward(ctx, x):
        ctx.rank, ctx.rows = dist.get_rank(), x.shape[0]
        out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(out, x.contiguous())
        return torch.cat(out)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        dist.all_reduce(g)
        return g[ctx.rank * ctx.rows:(ctx.rank + 1) * ctx.rows]


def gather(x, grad=True):
    """-> x of every process, concatenated (x itself when training in one process)."""
    if not dist.is_initialized():
        return x
    if grad:
        return _Gather.apply(x)
    out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(out, x.contiguous())
    return torch.cat(out)


_NEG_RNG = None


def negatives(ds, idx, settings):
    """-> input_ids [K*B, T]: for each caption, K = train.hard_negatives copies with one
    object's shape (even copies) or colour (odd copies) replaced by another; a colour
    change also fixes the article ("a"/"an")."""
    global _NEG_RNG
    k = settings["train"].get("hard_negatives", 0)
    if k <= 0:
        return None
    if _NEG_RNG is None:
        _NEG_RNG = np.random.default_rng(settings["seed"] + 1 + (dist.get_rank() if dist.is_initialized() else 0))
    v = ds.vocab
    out = []
    for c in range(k):
        neg = ds.ids[idx].copy()
        for b, i in enumerate(idx):
            o = _NEG_RNG.integers(ds.nobj[i])
            if c % 2 == 0:
                pos = ds.obj_tok[i, o, 1]
                old = neg[b, pos]
                choices = [t for t in v.shape_ids if t != old]
                neg[b, pos] = choices[_NEG_RNG.integers(len(choices))]
            else:
                pos = ds.obj_tok[i, o, 0]
                old = neg[b, pos]
                choices = [t for t in v.colour_ids if t != old]
                new = choices[_NEG_RNG.integers(len(choices))]
                neg[b, pos] = new
                neg[b, pos - 1] = v.an_id if new == v.orange_id else v.a_id
        out.append(neg)
    return torch.from_numpy(np.concatenate(out))


def dense_maps(ds, idx, S):
    """-> (text -> image loss, image -> text loss, owner [B, P], owned [B, P]) of the
    scenes idx from S [B, T, P], the scaled token-patch scores: each colour or shape
    word's softmax over the patches towards the patches of its object; each owned
    patch's softmax over the caption's tokens towards its object's words."""
    T = S.shape[1]
    # Text -> image.
    ref_pos = torch.from_numpy(ds.ref_pos[idx])
    ref_obj = torch.from_numpy(ds.ref_obj[idx])
    ref_ok = torch.from_numpy(ds.ref_ok[idx]).float()
    cov = torch.from_numpy(ds.cov[idx])  # [B, 3, P]
    Sr = torch.gather(S, 1, ref_pos.unsqueeze(-1).expand(-1, -1, S.shape[2]))  # [B, 6, P]
    target = torch.einsum("brk,bkp->brp", torch.from_numpy(ds.ref_names[idx]), cov)
    target = target / target.sum(-1, keepdim=True).clamp_min(1e-6)
    l_t2i = (-(target * F.log_softmax(Sr, -1)).sum(-1) * ref_ok).sum() / ref_ok.sum().clamp_min(1)
    # Image -> text.
    lengths = torch.from_numpy(ds.lengths[idx])
    valid = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)  # [B, T]
    St = S.transpose(1, 2).masked_fill(~valid.unsqueeze(1), -1e4)  # [B, P, T]
    lsm = F.log_softmax(St, -1)
    best, owner = cov.max(1)  # [B, P]
    owned = (best >= PATCH_OWNED).float()
    names = torch.from_numpy(ds.tok_names[idx])  # [B, 3, T]
    want = torch.gather(names, 1, owner.unsqueeze(-1).expand(-1, -1, T))  # [B, P, T]
    want = want / want.sum(-1, keepdim=True).clamp_min(1)
    l_i2t = -(want * lsm).sum(-1)
    l_i2t = (l_i2t * owned).sum() / owned.sum().clamp_min(1)
    return l_t2i, l_i2t, owner, owned


def grammar_words(ds, idx, p, scale, tp, owner, owned, colour_at, shape_at):
    """-> (loss, classes [B, 3, 2], the owned patches' classes [B, P, 2], owned [B*P]):
    each owned patch (p [B, P, dp], normalised) against every colour word and every
    shape word of the grammar. tp [colours, shapes, T, dp] are the prompts' normalised
    token features, the colour word at position colour_at and the shape word at
    shape_at."""
    cls = torch.from_numpy(ds.obj_class[idx])  # [B, 3, 2]
    oc = torch.gather(cls, 1, owner.unsqueeze(-1).expand(-1, -1, 2))  # [B, P, 2]
    col_f = tp[:, 0, colour_at]  # [8, dp]
    l_col = F.cross_entropy((scale * p @ col_f.t()).reshape(-1, len(COLOURS)), oc[..., 0].reshape(-1),
                            reduction="none")
    shp_f = tp[oc[..., 0], :, shape_at]  # [B, P, 5, dp]: shape words after the patch's colour
    l_shp = F.cross_entropy((scale * torch.einsum("bpd,bpsd->bps", p, shp_f)).reshape(-1, len(SHAPES)),
                            oc[..., 1].reshape(-1), reduction="none")
    of = owned.reshape(-1)
    return ((l_col + l_shp) * of).sum() / of.sum().clamp_min(1), cls, oc, of


def losses(model, ds, idx, settings, aux=None):
    ids = torch.from_numpy(ds.ids[idx])
    pix = ds.pixels(idx)
    th, te = model.encode_text(ids)
    vh, ie = model.encode_image(pix)
    t = F.normalize(model.text_projection(th), dim=-1)
    vpl = model.vision_model.post_layernorm(vh)
    p = F.normalize(model.visual_projection(vpl[:, 1:]), dim=-1)
    scale = model.logit_scale.exp()
    B, T, _ = t.shape
    # Contrastive, with identical captions sharing the target. Image -> text also
    # ranks hard negatives: each caption with one object's shape, or its colour,
    # swapped for another (colour alone tells most captions of a batch apart).
    # In data-parallel training the rows are this process's scenes and the
    # columns every process's (gathered), so the loss is the one-process loss.
    ten, ien = F.normalize(te, dim=-1), F.normalize(ie, dim=-1)
    ten_all, ien_all, ids_all = gather(ten), gather(ien), gather(ids, grad=False)
    same = (ids.unsqueeze(1) == ids_all.unsqueeze(0)).all(-1).float()
    tgt = same / same.sum(1, keepdim=True)
    logits = scale * ien @ ten_all.t()  # [rows, columns]
    # text -> image rows (with one process, exactly the transpose)
    logits_t = logits.t() if ten_all is ten else scale * ten @ ien_all.t()
    neg = negatives(ds, idx, settings)
    if neg is not None:
        _, ne = model.encode_text(neg)
        cols = torch.cat([ten_all, gather(F.normalize(ne, dim=-1))])
        allids = torch.cat([ids_all, gather(neg, grad=False)])
        same_all = (ids.unsqueeze(1) == allids.unsqueeze(0)).all(-1).float()
        tgt_all = same_all / same_all.sum(1, keepdim=True)
        l_i = -(tgt_all * F.log_softmax(scale * ien @ cols.t(), 1)).sum(1).mean()
    else:
        l_i = -(tgt * F.log_softmax(logits, 1)).sum(1).mean()
    l_con = 0.5 * (l_i - (tgt * F.log_softmax(logits_t, 1)).sum(1).mean())
    S = scale * torch.einsum("btd,bpd->btp", t, p)  # [B, T, P]
    l_t2i, l_i2t, owner, owned = dense_maps(ds, idx, S)
    # Colour and shape words against the whole grammar, not only the caption's (a
    # caption's words can be told apart by colour alone): the prompts "a/an <colour>
    # <shape>" give each colour word (token 2) and each shape word (token 3).
    if _PROMPTS is None:
        _init_prompts(ds.vocab)
    ph, pe = model.encode_text(_PROMPTS)  # [40, 5, dt], [40, dp]
    tp = F.normalize(model.text_projection(ph), dim=-1).view(len(COLOURS), len(SHAPES), 5, -1)
    l_words, cls, oc, of = grammar_words(ds, idx, p, scale, tp, owner, owned, 2, 3)
    # Single-object scenes: zero-shot classification over all prompts, pooled embeds.
    one = torch.from_numpy(ds.nobj[idx] == 1)
    if one.any():
        pen = F.normalize(pe, dim=-1)
        target = cls[one, 0, 0] * len(SHAPES) + cls[one, 0, 1]
        l_cls = F.cross_entropy(scale * ien[one] @ pen.t(), target)
    else:
        l_cls = torch.zeros(())
    # Auxiliary classifier (not exported): colour and shape of each owned patch and,
    # in single-object scenes, of the class token, from post_layernorm states. It
    # is one-sided, so it gets the vision tower out of the saddle where neither
    # tower separates shapes (colour alone satisfies the other losses at first).
    l_aux = torch.zeros(())
    if aux is not None:
        ap = aux(vpl[:, 1:])  # [B, P, 13]
        nc = len(COLOURS)
        la = (F.cross_entropy(ap[..., :nc].reshape(-1, nc), oc[..., 0].reshape(-1), reduction="none")
              + F.cross_entropy(ap[..., nc:].reshape(-1, len(SHAPES)), oc[..., 1].reshape(-1), reduction="none"))
        l_aux = (la * of).sum() / of.sum().clamp_min(1)
        if one.any():
            ac = aux(vpl[one, 0])
            l_aux = l_aux + F.cross_entropy(ac[:, :nc], cls[one, 0, 0]) + F.cross_entropy(ac[:, nc:], cls[one, 0, 1])
    w = settings["train"]
    total = (w.get("loss_aux", 0) * l_aux + w["loss_contrastive"] * l_con + w["loss_text_to_image"] * l_t2i + w["loss_image_to_text"] * l_i2t
             + w.get("loss_patch_words", 0) * l_words + w.get("loss_prompt_class", 0) * l_cls)
    return total, (l_con.item(), l_t2i.item(), l_i2t.item(), l_words.item(), l_cls.item(), l_aux.item())


_PROMPTS = None


def _init_prompts(vocab):
    global _PROMPTS
    _PROMPTS = torch.tensor([vocab.encode(prompt(c, s)) for c in COLOURS for s in SHAPES])


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------


@torch.no_grad()
def prompt_embeds(model, vocab):
    """-> the 40 (colour, shape) pairs of the zero-shot prompts and their
    normalised text embeds [40, projection_dim]."""
    prompts = [(c, s) for c in COLOURS for s in SHAPES]
    _, te = model.encode_text(torch.tensor([vocab.encode(prompt(c, s)) for c, s in prompts]))
    return prompts, F.normalize(te, dim=-1)


def load_weights(model, folder):
    """Loads the weights of the model exported in folder (its model.safetensors) into model."""
    sd, _ = pc.read_safetensors(os.path.join(folder, "model.safetensors"))
    model.load_hf_state_dict({k: v.astype(np.float32) for k, v in sd.items()})


def load_exported(settings, vocab, folder):
    """-> the model exported in folder (its model.safetensors), in eval mode."""
    model = build(settings, vocab)
    load_weights(model, folder)
    return model.eval()


@torch.no_grad()
def evaluate(model, vocab, single, pair, T, limit=None):
    model.eval()
    out = {}
    # Zero-shot on single-object scenes.
    prompts, te = prompt_embeds(model, vocab)
    n = single.n if limit is None else min(limit, single.n)
    correct = 0
    confusion = np.zeros((len(SHAPES), len(SHAPES)), dtype=np.int64)
    for a in range(0, n, 250):
        idx = np.arange(a, min(n, a + 250))
        _, ie = model.encode_image(single.pixels(idx))
        pred = (F.normalize(ie, dim=-1) @ te.t()).argmax(1)
        for i, k in zip(idx, pred.tolist()):
            o = single.scenes[i]["objects"][0]
            correct += prompts[k] == (o["colour"], o["shape"])
            confusion[SHAPES.index(o["shape"]), SHAPES.index(prompts[k][1])] += 1
    out["zero_shot_top1"] = correct / n
    out["zero_shot_n"] = n
    out["shape_confusion"] = confusion.tolist()
    # Dense maps on two-object scenes.
    n = pair.n if limit is None else min(limit, pair.n)
    t2i_ok = t2i_n = t2i_skip = i2t_ok = i2t_n = 0
    for a in range(0, n, 250):
        idx = np.arange(a, min(n, a + 250))
        t, p, _, _ = joint(model, torch.from_numpy(pair.ids[idx]), pair.pixels(idx))
        S = torch.einsum("btd,bpd->btp", t, p).numpy()  # the scale does not change argmaxes
        for b, i in enumerate(idx):
            cov = pair.cov[i]
            for r in range(6):
                if not pair.ref_ok[i, r]:
                    continue
                k = pair.ref_obj[i, r]
                if cov[k].max() < PATCH_INSIDE:
                    t2i_skip += 1
                    continue
                j = S[b, pair.ref_pos[i, r]].argmax()
                t2i_n += 1
                t2i_ok += cov[k, j] >= PATCH_INSIDE
            content = [pair.ref_pos[i, r] for r in range(6) if pair.ref_ok[i, r]]
            owner_of = {pair.ref_pos[i, r]: pair.ref_obj[i, r] for r in range(6) if pair.ref_ok[i, r]}
            best = cov.max(0)
            owner = cov.argmax(0)
            for j in np.nonzero(best >= PATCH_OWNED)[0]:
                tok = content[int(np.argmax(S[b, content, j]))]
                i2t_n += 1
                i2t_ok += owner_of[tok] == owner[j]
    out["text_to_image_peak_inside"] = t2i_ok / max(1, t2i_n)
    out["text_to_image_words"] = t2i_n
    out["text_to_image_skipped"] = t2i_skip
    out["image_to_text_own_word"] = i2t_ok / max(1, i2t_n)
    out["image_to_text_patches"] = i2t_n
    model.train()
    return out


def vecdata(out, seed, objects, n, preprocessor):
    """The independent renderer's held-out scenes (internal/vecscenes), as the Go
    evaluation preprocesses them."""
    if all(os.path.exists(os.path.join(out, f)) for f in ("pixels.npy", "scenes.jsonl")):
        return
    subprocess.run(["go", "run", "./tools/evaldata", "-seed", str(seed), "-objects", str(objects),
                    "-n", str(n), "-preprocessor", preprocessor, "-out", out], cwd=ROOT, check=True)


@torch.no_grad()
def evaluate_vec(model, vocab, sdir, pdir):
    """The figures of evaluate() on the independent renderer's scenes: pixel_values
    as the Go pipeline computes them, coverage of the input's patches from evaldata
    (vecscenes.Scene.Coverage, as the Go evaluation)."""
    model.eval()
    out = {}
    prompts, te = prompt_embeds(model, vocab)
    px = np.load(os.path.join(sdir, "pixels.npy"))
    with open(os.path.join(sdir, "scenes.jsonl"), encoding="utf-8") as f:
        sc = [json.loads(l) for l in f]
    n = len(sc)
    correct = 0
    confusion = np.zeros((len(SHAPES), len(SHAPES)), dtype=np.int64)
    for a in range(0, n, 250):
        idx = np.arange(a, min(n, a + 250))
        _, ie = model.encode_image(torch.from_numpy(px[idx]))
        pred = (F.normalize(ie, dim=-1) @ te.t()).argmax(1)
        for i, k in zip(idx, pred.tolist()):
            o = sc[i]["objects"][0]
            correct += prompts[k] == (o["colour"], o["shape"])
            confusion[SHAPES.index(o["shape"]), SHAPES.index(prompts[k][1])] += 1
    out["zero_shot_top1"] = correct / n
    out["zero_shot_n"] = n
    out["shape_confusion"] = confusion.tolist()
    px = np.load(os.path.join(pdir, "pixels.npy"))
    with open(os.path.join(pdir, "scenes.jsonl"), encoding="utf-8") as f:
        sc = [json.loads(l) for l in f]
    n = len(sc)
    t2i_ok = t2i_n = t2i_skip = i2t_ok = i2t_n = 0
    for a in range(0, n, 250):
        idx = np.arange(a, min(n, a + 250))
        enc = [caption_ids(vocab, sc[i]["caption"], sc[i]["words"]) for i in idx]
        T = getattr(vocab, "pad_to", None) or max(len(e) for e, _ in enc)
        ids = np.full((len(idx), T), getattr(vocab, "pad_id", vocab.eos_id), dtype=np.int64)
        for b, (e, _) in enumerate(enc):
            ids[b, :len(e)] = e
        t, p, _, _ = joint(model, torch.from_numpy(ids), torch.from_numpy(px[idx]))
        S = torch.einsum("btd,bpd->btp", t, p).numpy()
        for b, i in enumerate(idx):
            s = sc[i]
            cov = np.array(s["coverage"])
            refs = [(enc[b][1][r["word"]], r["object"]) for r in s["refs"]]
            for pos, k in refs:
                if cov[k].max() < PATCH_INSIDE:
                    t2i_skip += 1
                    continue
                j = S[b, pos].argmax()
                t2i_n += 1
                t2i_ok += cov[k, j] >= PATCH_INSIDE
            best, owner = cov.max(0), cov.argmax(0)
            for j in np.nonzero(best >= PATCH_OWNED)[0]:
                r = int(np.argmax([S[b, pos, j] for pos, _ in refs]))
                i2t_n += 1
                i2t_ok += refs[r][1] == owner[j]
    out["text_to_image_peak_inside"] = t2i_ok / max(1, t2i_n)
    out["text_to_image_words"] = t2i_n
    out["text_to_image_skipped"] = t2i_skip
    out["image_to_text_own_word"] = i2t_ok / max(1, i2t_n)
    out["image_to_text_patches"] = i2t_n
    model.train()
    return out


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def independent(args, d, tag=""):
    """-> the independent renderer's held-out single- and two-object folders,
    written when missing (preprocessed as --out's, else the committed model's,
    preprocessor_config.json says: both are the same for one image size).
    tag ends the folders' names: another model family's preprocessing
    (scripts/pysiglip/train_tiny.py's "-siglip") keeps folders of its own."""
    v = d["independent"]
    vs = os.path.join(args.data, f"vec-single-s{v['single_seed']}-n{v['scenes']}{tag}")
    vp = os.path.join(args.data, f"vec-pair-s{v['pair_seed']}-n{v['scenes']}{tag}")
    pre = os.path.join(args.out, "preprocessor_config.json")
    if not os.path.exists(pre):
        pre = os.path.join(ROOT, "models", "embedded", "model", "preprocessor_config.json")
    vecdata(vs, v["single_seed"], 1, v["scenes"], pre)
    vecdata(vp, v["pair_seed"], 2, v["scenes"], pre)
    return vs, vp


def data_dirs(args, d):
    """-> the folders of the training scenes (varied ones when the settings say
    so), the held-out single- and two-object scenes and the plain training
    scenes."""
    plain = os.path.join(args.data, f"train-s{d['train_seed']}-n{d['train_scenes']}")
    return (plain + ("-variety" if d.get("variety") else ""),
            os.path.join(args.data, f"single-s{d['eval_single_seed']}-n{d['eval_scenes']}"),
            os.path.join(args.data, f"pair-s{d['eval_pair_seed']}-n{d['eval_scenes']}"),
            plain)


def make_vocab():
    # Every word of the caption grammar, once: the merges are learned until no pair
    # is left, so each word ends as one token.
    words = ["a", "an", "and", "above", "below", "to", "the", "left", "right", "of",
             "on", "at", "top", "bottom", "in", "middle"] + COLOURS + SHAPES
    merges = pc.learn_bpe([" ".join(words)], 10000)
    vocab = pc.Vocab(merges)
    for w in words + [","]:
        if len(vocab.encode(w)) != 3:
            raise ValueError(f"train: word {w!r} is not one token")
    vocab.colour_ids = [vocab.encode(c)[1] for c in COLOURS]
    vocab.shape_ids = [vocab.encode(c)[1] for c in SHAPES]
    vocab.a_id, vocab.an_id = vocab.encode("a")[1], vocab.encode("an")[1]
    vocab.orange_id = vocab.encode("orange")[1]
    return vocab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--settings", default=os.path.join(HERE, "settings.json"))
    ap.add_argument("--data", default="/tmp/condition-scenes")
    ap.add_argument("--work", default="/tmp/condition-train")
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "embedded", "model"))
    ap.add_argument("--log", default=os.path.join(HERE, "train.log"))
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--eval-json", default=os.path.join(HERE, "eval.json"),
                    help="where the final held-out figures go (pipeline/eval_test.go compares with them)")
    ap.add_argument("--write-eval", action="store_true", help="with --eval-only: write --eval-json")
    ap.add_argument("--steps", type=int, default=None, help="override settings (for trials)")
    ap.add_argument("--init", default=None, help="start from this checkpoint.pt (a second stage)")
    ap.add_argument("--init-model", default=None,
                    help="start from the weights of an exported model folder (model.safetensors), "
                         "a new auxiliary classifier")
    ap.add_argument("--export-checkpoint", default=None,
                    help="export this checkpoint.pt to --out and stop (a stage cut short)")
    ap.add_argument("--init-aux", action="store_true",
                    help="with --init: also take the auxiliary classifier from the checkpoint")
    ap.add_argument("--data-only", action="store_true",
                    help="write the settings' training scenes into --data and stop")
    ap.add_argument("--threads", type=int, default=None, help="override settings' threads (per process)")
    ap.add_argument("--procs", type=int, default=None,
                    help="override settings' procs: training processes, each with its share of every batch")
    ap.add_argument("--stop-after", type=int, default=None,
                    help="stop after this many steps of the schedule (checkpoint saved, no export)")
    args = ap.parse_args()
    settings = trainsettings.load_args(args)
    torch.manual_seed(settings["seed"])
    np.random.seed(settings["seed"] % 2**32)
    torch.set_num_threads(settings["threads"])
    d, tr = settings["data"], settings["train"]
    T = tr["text_length"]
    patch = settings["model"]["patch_size"]
    os.makedirs(args.work, exist_ok=True)
    logf = open(args.log, "a") if not (args.eval_only or args.data_only) else None
    log(logf, f"settings {json.dumps(settings, sort_keys=True)}")
    log(logf, f"torch {torch.__version__} threads {torch.get_num_threads()}")

    tdir, sdir, pdir, plain_dir = data_dirs(args, d)
    mix = d.get("mix_plain", 0.0) if d.get("variety") else 0.0
    if args.data_only:
        gendata(tdir, d["train_seed"], d["train_scenes"], d["image_size"], variety=d.get("variety", False))
        if mix > 0:
            gendata(plain_dir, d["train_seed"], d["train_scenes"], d["image_size"])
        return
    gendata(sdir, d["eval_single_seed"], d["eval_scenes"], d["image_size"], 1, 1, distinct=True)
    gendata(pdir, d["eval_pair_seed"], d["eval_scenes"], d["image_size"], 2, 2, distinct=True)
    vocab = make_vocab()

    if args.export_checkpoint:
        model = build(settings, vocab)
        ck = torch.load(args.export_checkpoint)
        model.load_state_dict(ck["model"] if "model" in ck else ck)
        log(logf, f"export of {args.export_checkpoint}")
        export(model, vocab, settings, args.out, logf)
        return

    if args.eval_only:
        model = load_exported(settings, vocab, args.out)
        vs, vp = independent(args, d)
        single, pair = Scenes(sdir, vocab, T, patch), Scenes(pdir, vocab, T, patch)
        m = {"training_renderer": evaluate(model, vocab, single, pair, T),
             "independent_renderer": evaluate_vec(model, vocab, vs, vp)}
        print(json.dumps(m, indent=1))
        if args.write_eval:
            pc.write_json(args.eval_json, m)
            with open(args.log, "a") as logf:
                for k, f in m.items():
                    log(logf, f"eval {k} (exported model, all held-out scenes): {json.dumps(f)}")
        return

    gendata(tdir, d["train_seed"], d["train_scenes"], d["image_size"], variety=d.get("variety", False))
    if mix > 0:
        gendata(plain_dir, d["train_seed"], d["train_scenes"], d["image_size"])
    if logf is not None:
        logf.close()
    spawn(train_process, args, settings)


def spawn(target, args, settings):
    """Runs target(rank, procs, port, args, settings) in settings' "procs" processes
    (data parallel: one process per core, each with batch/procs of every batch's
    scenes; OpenBLAS's own threads are slower here, 99 against 184 images/s for two
    threads against one), or in this one."""
    procs = settings.get("procs", 1)
    if procs > 1:
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        mp.spawn(target, args=(procs, port, args, settings), nprocs=procs)
    else:
        target(0, 1, 0, args, settings)


def new_aux(settings):
    """-> the auxiliary colour and shape classifier (not exported), seeded."""
    aux = nn.Linear(settings["model"]["vision_width"], len(COLOURS) + len(SHAPES))
    with torch.no_grad():
        aux.weight.copy_(0.02 * torch.randn(aux.weight.shape, generator=torch.Generator().manual_seed(settings["seed"] + 2)))
        aux.bias.zero_()
    return aux


def learning_rate(tr, step, steps):
    """-> the learning rate of step (from 1) of steps: linear warm-up, then cosine."""
    if step <= tr["warmup"]:
        return tr["lr"] * step / tr["warmup"]
    q = (step - tr["warmup"]) / max(1, steps - tr["warmup"])
    return tr["min_lr"] + 0.5 * (tr["lr"] - tr["min_lr"]) * (1 + math.cos(math.pi * q))


def batch_streams(rng, streams):
    """-> streams of scene indices to draw batches from: each [indices, per batch]
    becomes [indices, per batch, order, position], its first order drawn from rng."""
    for st in streams:
        st += [rng.permutation(st[0]), 0]
    return streams


def next_batch(rng, streams):
    """-> the scene indices of the next batch, sorted: each stream's next "per batch"
    indices of its order (a new order from rng when the old one runs out)."""
    parts = []
    for st in streams:
        ids_, k, order, pos = st
        if pos + k > len(ids_):
            order, pos = rng.permutation(ids_), 0
        parts.append(order[pos:pos + k])
        st[2], st[3] = order, pos + k
    return np.sort(np.concatenate(parts))


def train_process(rank, procs, port, args, settings):
    """Trains (one of procs processes; rank 0 evaluates, logs and exports)."""
    d, tr = settings["data"], settings["train"]
    T = tr["text_length"]
    patch = settings["model"]["patch_size"]
    torch.set_num_threads(settings["threads"])
    torch.manual_seed(settings["seed"])
    if rank != 0:
        sys.stdout = open(os.devnull, "w")  # rank 0 logs
    if procs > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=procs)
    logf = open(args.log, "a") if rank == 0 else None
    tdir, sdir, pdir, plain_dir = data_dirs(args, d)
    mix = d.get("mix_plain", 0.0) if d.get("variety") else 0.0
    vocab = make_vocab()
    # The held-out scenes, for rank 0's evaluations.
    single = Scenes(sdir, vocab, T, patch) if rank == 0 else None
    pair = Scenes(pdir, vocab, T, patch) if rank == 0 else None
    t0 = time.time()
    train = Scenes(tdir, vocab, T, patch)
    # mix_plain: with variety on, this fraction of every batch comes from the
    # generator's one drawing (the same seed's plain scenes), the rest from the
    # varied ones.
    nvaried = train.n
    if mix > 0:
        train = train.concat(Scenes(plain_dir, vocab, T, patch))
    if rank == 0:
        log(logf, f"data: {train.n} training scenes ({nvaried} of them {'varied' if d.get('variety') else 'plain'}"
                  f"{f', {mix:.0%} of each batch plain' if mix > 0 else ''}), {single.n} single-object and "
                  f"{pair.n} two-object held-out scenes, vocabulary {len(vocab)} ({time.time() - t0:.0f}s)")
    model = build(settings, vocab)
    pending_aux = None
    if args.init:
        ck = torch.load(args.init)
        model.load_state_dict(ck["model"] if "model" in ck else ck)
        if args.init_aux:
            pending_aux = ck["aux"]
        log(logf, f"init from {args.init}")
    if args.init_model:
        load_weights(model, args.init_model)
        log(logf, f"init from the weights of {args.init_model}")
    nparams = sum(p.numel() for p in model.parameters())
    log(logf, f"model: {nparams} parameters")
    aux = new_aux(settings)
    if pending_aux is not None:
        aux.load_state_dict(pending_aux)
    decay = [p for n, p in model.named_parameters()
             if p.dim() >= 2 and "embedding" not in n] + list(aux.parameters())
    no_decay = [p for n, p in model.named_parameters()
                if not (p.dim() >= 2 and "embedding" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tr["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=tr["lr"])
    params = list(model.parameters()) + list(aux.parameters())
    # The same seed in every process: the same batches, each taking its share.
    rng = np.random.default_rng(settings["seed"])
    steps, B = tr["steps"], tr["batch"]
    # Two streams of scene indices when mixing (varied first in train, then plain),
    # else one.
    if mix > 0:
        bp = int(round(B * mix))
        streams = [[np.arange(nvaried), B - bp], [nvaried + np.arange(train.n - nvaried), bp]]
    else:
        streams = [[np.arange(train.n), B]]
    batch_streams(rng, streams)
    t0 = time.time()
    acc = np.zeros(7)
    for step in range(1, steps + 1):
        lr = learning_rate(tr, step, steps)
        for gr in opt.param_groups:
            gr["lr"] = lr
        idx = next_batch(rng, streams)[rank::procs]  # this process's share
        loss, parts = losses(model, train, idx, settings, aux)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if procs > 1:
            average_gradients(params, procs)
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, tr["max_logit_scale"])
        acc += np.array([loss.item(), *parts])
        if step % tr["log_every"] == 0:
            a = acc / tr["log_every"]
            acc[:] = 0
            el = time.time() - t0
            log(logf, f"step {step}/{steps} loss {a[0]:.4f} (contrastive {a[1]:.4f} t2i {a[2]:.4f} "
                      f"i2t {a[3]:.4f} words {a[4]:.4f} prompts {a[5]:.4f} aux {a[6]:.4f}) scale {model.logit_scale.exp().item():.1f} lr {lr:.2e} "
                      f"{el:.0f}s {step * B / el:.0f} img/s")
        stop = args.stop_after is not None and step == args.stop_after
        if rank == 0 and (step % tr["eval_every"] == 0 or step == steps or stop):
            m = evaluate(model, vocab, single, pair, T, limit=None if step == steps else 300)
            log(logf, f"eval step {step}: {json.dumps(m)}")
            if d.get("variety"):
                mv = evaluate_vec(model, vocab, *independent(args, d))
                log(logf, f"eval step {step}, independent renderer: {json.dumps(mv)}")
            final = m
            torch.save({"model": model.state_dict(), "aux": aux.state_dict()},
                       os.path.join(args.work, "checkpoint.pt"))
        if stop:
            log(logf, f"stopped after step {step}; checkpoint in {args.work}")
            return
    if rank != 0:
        return
    log(logf, f"training took {time.time() - t0:.0f}s")
    export(model, vocab, settings, args.out, logf)
    pc.write_json(args.eval_json, final)


def average_gradients(params, procs):
    """Replaces each gradient by its mean over the processes."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat /= procs
    off = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[off:off + n].view_as(p))
        off += n


def export(model, vocab, settings, out, logf):
    model.eval()
    os.makedirs(out, exist_ok=True)
    pc.save_pretrained(out, model, vocab, metadata={
        "format": "pt", "source": "scripts/train_default/train.py",
        "settings": json.dumps(settings, sort_keys=True)})
    total = 0
    for root, _, files in os.walk(out):
        for f in sorted(files):
            p = os.path.join(root, f)
            total += os.path.getsize(p)
            log(logf, f"export {os.path.relpath(p, out)} {os.path.getsize(p)} bytes")
    log(logf, f"export total {total} bytes")


if __name__ == "__main__":
    main()
