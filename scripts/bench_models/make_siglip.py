#!/usr/bin/python3
"""make_siglip.py: a real-size SigLIP or SigLIP 2 with RANDOM weights, for speed measurements.

What it makes: a model directory in the Hugging Face layout that `condition` loads
like a SigLIP export (config.json, preprocessor_config.json, tokenizer files,
model.safetensors, onnx/text_model.onnx and onnx/vision_model.onnx with
last_hidden_state and pooler_output, named as transformers.js' split exports name
them), with the ARCHITECTURE of a public checkpoint -- the thing that sets the
speed -- and weights drawn from a fixed seed. The weights are random: the model is
for measuring speed only; its embeddings, scores and attention maps mean nothing.
There is no real checkpoint on the development machine and no way to download one.

Presets (config.json written as the google/* hub repositories have it: only the
fields that differ from SiglipConfig's defaults; the rest are HF's defaults, listed):

  siglip-b-16-224       google/siglip-base-patch16-224: vision 224 px, patch 16 (14x14 grid,
                        196 rows, no CLS), width 768, 12 layers, 12 heads, MLP 3072; text
                        width 768, 12 layers, 12 heads, MLP 3072, 64 positions, vocabulary
                        32000; gelu_pytorch_tanh, layer_norm_eps 1e-6; SiglipTokenizer
                        (spiece.model); resize 224x224 bicubic (resample 3).
  siglip-so400m-14-384  google/siglip-so400m-patch14-384: vision 384 px, patch 14 (27x27 grid,
                        729 rows), width 1152, 27 layers, 16 heads, MLP 4304; text the same
                        widths, 27 layers, 64 positions, vocabulary 32000; bicubic.
  siglip2-b-16-224      google/siglip2-base-patch16-224: the siglip-b-16-224 towers with the
                        Gemma vocabulary (256000) and a tokenizer.json (GemmaTokenizer, <eos>
                        appended, padded with <pad> to 64); resize bilinear (resample 2).
  siglip2-b-16-256      google/siglip2-base-patch16-256: siglip2-b-16-224 at 256 px (16x16 grid,
                        256 rows, position table [256, 768]).
  siglip2-b-16-naflex   google/siglip2-base-patch16-naflex: model_type siglip2, the same towers
                        with the NaFlex vision tower (vision num_patches 256, patch 16, a Linear
                        patch embedding over each patch's 16*16*3 channel-last pixels);
                        preprocessor_config.json Siglip2ImageProcessor (max_num_patches 256,
                        patch 16, bilinear, mean/std 0.5). Its weights are siglip2-b-16-256's
                        (same seed): the Conv kernel [768, 3, 16, 16] laid out as the Linear's
                        [768, 16*16*3], the 16x16 position table as it is; so on a square image
                        (a 16x16 grid) the two towers compute the same function, which the
                        script checks in torch. No onnx/ is written (the NaFlex tower has no
                        exporter here; `condition` builds its graphs from model.safetensors).

Tokenizers. The real ones cannot reach this machine, so:
  * SigLIP: spiece.model is a small Unigram model (nmt_nfkc, <pad> 0, </s> 1, <unk> 2, as
    google's) trained here on caption-like text, then filled up to 32000 pieces with pieces
    no text produces, so that ids, vocabulary size and file layout are those of the real
    one; tokenizer_config.json and special_tokens_map.json as google/siglip-*.
  * SigLIP 2: tokenizer.json and tokenizer_config.json are copied AT RUN TIME from the
    project's Gemma-style fixture (text/testdata/gemma of the tokenizer work, --gemma DIR)
    when it exists; otherwise a minimal one is written (byte-fallback BPE, <pad> 0, <eos>
    1, <bos> 2, <unk> 3, <mask> 4, bytes, a few hundred merges) and the script says so.
    Either way its ids stay far below 256000: only the embedding table has the real size.

Nothing this script writes belongs in the repository (hundreds of megabytes); only the
script is committed.

Usage (needs torch, numpy, onnx, sentencepiece; /usr/bin/python3 on the development machine):

    /usr/bin/python3 scripts/bench_models/make_siglip.py [--preset siglip-b-16-224] [--out DIR] [--seed N] [--no-onnx]

--no-onnx writes everything but onnx/ (the checkpoint for `condition models build`, which makes
the graphs itself): siglip-so400m-14-384 then took 633 s wall, its peak memory still 17.4 GB.

--out defaults to /tmp/condition-<preset>. The weights are the same on every run for a
given torch version (fixed seed).

Sizes and times (measured on the 2-core development machine, torch 1.13, while other
work shared it; the peak memory is the Python process's maximum resident set):

  siglip-b-16-224       203.2 M parameters; model.safetensors 775 MiB, onnx/vision_model.onnx
                        354 MiB, onnx/text_model.onnx 421 MiB; 238 s wall (63% of one core's
                        worth of CPU on average: the machine was shared), 4.2 GB peak memory
                        (Maximum resident set size of /usr/bin/time -v).
  siglip-so400m-14-384  878.0 M parameters; model.safetensors 3349 MiB, onnx/text_model.onnx
                        1716 MiB, onnx/vision_model.onnx 1634 MiB (both below protobuf's 2 GiB);
                        1400 s wall (the vision export alone 849 s), 17.4 GB peak memory:
                        run it alone, with at least 18 GB free.
  siglip2-b-16-224      375.2 M parameters (197 M of them the 256000 x 768 token embedding);
                        model.safetensors 1431 MiB, onnx/text_model.onnx 1077 MiB,
                        onnx/vision_model.onnx 354 MiB; 292 s wall, 7.6 GB peak memory
                        (tokenizer.json copied from the Gemma-style fixture).
  siglip2-b-16-256      375.2 M parameters; with --no-onnx: model.safetensors 1431 MiB, 86 s
                        wall, 7.6 GB peak memory.
  siglip2-b-16-naflex   375.2 M parameters; model.safetensors 1431 MiB (never onnx/), 126 s wall
                        (the torch check against the fixed tower included), 7.6 GB peak memory.
                        condition builds and checks each folder's graphs on first open in
                        30-45 s.
"""

import argparse
import collections
import json
import os
import resource
import shutil
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))

from pysiglip import siglip  # noqa: E402

SEED = 20261202

# config.json of the hub repositories (transformers writes only what differs from
# its defaults; at the time those files were written, the defaults were CLIP's, which
# is why widths equal to today's defaults still appear).
HUB_CONFIGS = {
    "siglip-b-16-224": {
        "text_config": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                        "vocab_size": 32000},
        "vision_config": {"patch_size": 16},
    },
    "siglip-so400m-14-384": {
        "text_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_attention_heads": 16,
                        "num_hidden_layers": 27},
        "vision_config": {"hidden_size": 1152, "image_size": 384, "intermediate_size": 4304,
                          "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14},
    },
    "siglip2-b-16-224": {
        "text_config": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                        "num_hidden_layers": 12, "vocab_size": 256000},
        "vision_config": {"hidden_size": 768, "image_size": 224, "intermediate_size": 3072,
                          "num_attention_heads": 12, "num_hidden_layers": 12, "patch_size": 16},
    },
    "siglip2-b-16-256": {
        "text_config": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                        "num_hidden_layers": 12, "vocab_size": 256000},
        "vision_config": {"hidden_size": 768, "image_size": 256, "intermediate_size": 3072,
                          "num_attention_heads": 12, "num_hidden_layers": 12, "patch_size": 16},
    },
}
RESAMPLE = {"siglip-b-16-224": 3, "siglip-so400m-14-384": 3, "siglip2-b-16-224": 2, "siglip2-b-16-256": 2}
# The NaFlex preset: google/siglip2-base-patch16-naflex, made from the fixed-resolution
# preset of the same patch count (its weights, the patch embedding re-laid out).
NAFLEX, NAFLEX_BASE = "siglip2-b-16-naflex", "siglip2-b-16-256"
NAFLEX_HUB = {
    "text_config": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                    "num_hidden_layers": 12, "vocab_size": 256000},
    "vision_config": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                      "num_hidden_layers": 12, "num_patches": 256, "patch_size": 16},
}
# Roughly the released checkpoints' learned values (logit_scale ~ log 117, bias ~ -12.7).
LOGIT_SCALE, LOGIT_BIAS = 4.76, -12.7


def preset_config(name: str) -> siglip.SiglipConfig:
    """The SiglipConfig of a public checkpoint: HF defaults updated with the hub's config.json."""
    hub = HUB_CONFIGS.get(name)
    if hub is None:
        raise SystemExit(f"make_siglip: unknown preset {name!r}: want one of {', '.join(HUB_CONFIGS)}")
    return siglip.SiglipConfig(text_config=siglip.TextConfig(**hub["text_config"]),
                               vision_config=siglip.VisionConfig(**hub["vision_config"]),
                               logit_scale_init=LOGIT_SCALE, logit_bias_init=LOGIT_BIAS)


def write_hub_config(out: str, name: str) -> None:
    if name == NAFLEX:
        siglip.write_json(os.path.join(out, "config.json"), {
            "architectures": ["Siglip2Model"],
            "initializer_factor": 1.0,
            "model_type": "siglip2",
            "text_config": dict(sorted({**NAFLEX_HUB["text_config"], "model_type": "siglip2_text_model"}.items())),
            "torch_dtype": "float32",
            "vision_config": dict(sorted({**NAFLEX_HUB["vision_config"], "model_type": "siglip2_vision_model"}.items())),
        })
        return
    hub = HUB_CONFIGS[name]
    siglip.write_json(os.path.join(out, "config.json"), {
        "architectures": ["SiglipModel"],
        "initializer_factor": 1.0,
        "model_type": "siglip",
        "text_config": dict(sorted({**hub["text_config"], "model_type": "siglip_text_model"}.items())),
        "torch_dtype": "float32",
        "vision_config": dict(sorted({**hub["vision_config"], "model_type": "siglip_vision_model"}.items())),
    })


COLOURS = ["red", "orange", "yellow", "green", "blue", "purple", "black", "white", "brown", "grey"]
THINGS = ["cat", "dog", "car", "house", "tree", "bird", "horse", "boat", "flower", "person",
          "circle", "square", "triangle", "star", "cross", "table", "chair", "street", "city"]
FRAMES = ["a photo of a {c} {t}", "a picture of the {t} next to a {c} {u}", "two {c} {t}s in the grass",
          "a {c} {t} above a {u}", "an image of a {t} and a {c} {u}", "the {t} is {c}"]


def corpus():
    out = []
    for i, c in enumerate(COLOURS):
        for j, t in enumerate(THINGS):
            for k, f in enumerate(FRAMES):
                out.append(f.format(c=c, t=t, u=THINGS[(i + j + k + 1) % len(THINGS)]))
    return out


def write_siglip_tokenizer(out: str, vocab_size: int) -> None:
    sp = siglip.train_spiece(corpus(), 400, pad_to=vocab_size)
    siglip.write_tokenizer_files(out, sp, model_max_length=64)
    tok = siglip.Tokenizer(sp)
    assert len(tok) == vocab_size, (len(tok), vocab_size)
    print(f"make_siglip: spiece.model: {len(tok)} pieces (a small trained Unigram model filled "
          f"up to {vocab_size}); 'a photo of a cat' -> {tok.encode('a photo of a cat', pad=False)}",
          flush=True)


GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]


def minimal_gemma_tokenizer(num_merges: int = 300) -> dict:
    """A small tokenizer.json in the layout of SigLIP 2's Gemma tokenizer: spaces become
    "▁" (no dummy prefix), split after each "▁"-run boundary as Gemma does, byte-fallback
    BPE, <eos> appended, truncated and padded with <pad> to 64."""
    words = collections.Counter()
    for s in corpus():
        for w in s.replace(" ", " \u2581").split(" "):
            if w:
                words[tuple(w)] += 1
    vocab = {t: i for i, t in enumerate(GEMMA_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for w in words:
        for ch in w:
            vocab.setdefault(ch, len(vocab))
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        top = max(pairs.values())
        best = min(p for p, c in pairs.items() if c == top)
        merges.append(best)
        vocab.setdefault(best[0] + best[1], len(vocab))
        nw = collections.Counter()
        for w, c in words.items():
            o, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    o.append(w[i] + w[i + 1])
                    i += 2
                else:
                    o.append(w[i])
                    i += 1
            nw[tuple(o)] += c
        words = nw
    return {
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 64, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": None,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "<pad>"},
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(GEMMA_SPECIALS)],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
            "special_tokens": {"<eos>": {"id": "<eos>", "ids": [1], "tokens": ["<eos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def write_gemma_tokenizer(out: str, gemma_dir: str) -> None:
    src = os.path.join(gemma_dir, "tokenizer.json")
    if os.path.isfile(src):
        shutil.copyfile(src, os.path.join(out, "tokenizer.json"))
        note = f"copied from {gemma_dir}"
    else:
        siglip.write_json(os.path.join(out, "tokenizer.json"), minimal_gemma_tokenizer())
        note = (f"{src} not found: wrote a MINIMAL Gemma-layout tokenizer.json (byte-fallback BPE, "
                "a few hundred merges; ids far below 256000)")
    siglip.write_json(os.path.join(out, "tokenizer_config.json"), {
        "add_bos_token": False,
        "add_eos_token": True,
        "bos_token": "<bos>",
        "clean_up_tokenization_spaces": False,
        "do_lower_case": True,
        "eos_token": "<eos>",
        "mask_token": "<mask>",
        "model_max_length": 64,
        "pad_token": "<pad>",
        "padding_side": "right",
        "processor_class": "SiglipProcessor",
        "spaces_between_special_tokens": False,
        "tokenizer_class": "GemmaTokenizer",
        "unk_token": "<unk>",
    })
    siglip.write_json(os.path.join(out, "special_tokens_map.json"), {
        t: {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
        for t, c in (("bos_token", "<bos>"), ("eos_token", "<eos>"), ("pad_token", "<pad>"),
                     ("unk_token", "<unk>"))})
    print(f"make_siglip: tokenizer.json: {note}", flush=True)


def write_naflex_preprocessor_config(out: str, patch: int, max_patches: int) -> None:
    """preprocessor_config.json as google/siglip2-base-patch16-naflex has it."""
    siglip.write_json(os.path.join(out, "preprocessor_config.json"), {
        "do_convert_rgb": None, "do_normalize": True, "do_rescale": True, "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "Siglip2ImageProcessor",
        "image_std": [0.5, 0.5, 0.5], "max_num_patches": max_patches, "patch_size": patch,
        "processor_class": "Siglip2Processor", "resample": 2, "rescale_factor": 1 / 255})


def naflex_state_dict(sd: dict) -> dict:
    """A fixed-resolution SigLIP state dict as SigLIP 2 NaFlex's: the patch Conv's kernel
    [D, C, p, p] as the Linear's weight [D, p*p*C] (Siglip2ImageProcessor lays each patch
    out channel-last, row by row); every other tensor as it is."""
    k = "vision_model.embeddings.patch_embedding.weight"
    out = dict(sd)
    w = sd[k]
    out[k] = w.permute(0, 2, 3, 1).reshape(w.shape[0], -1).contiguous()
    return out


def check_naflex(model, sd: dict, vc) -> float:
    """Asserts that the NaFlex tower with sd's weights gives, on a square image (its grid
    the position table's own, every patch used), the fixed-resolution tower's outputs."""
    from pysiglip.naflex import NaFlexVision, NaFlexVisionConfig

    nv = NaFlexVision(NaFlexVisionConfig(
        hidden_size=vc.hidden_size, intermediate_size=vc.intermediate_size, num_hidden_layers=vc.num_hidden_layers,
        num_attention_heads=vc.num_attention_heads, num_patches=vc.grid * vc.grid, patch_size=vc.patch_size,
        hidden_act=vc.hidden_act, layer_norm_eps=vc.layer_norm_eps))
    pre = "vision_model."
    nv.load_state_dict({k[len(pre):]: v for k, v in sd.items() if k.startswith(pre)})
    nv.eval()
    s, p, g = vc.image_size, vc.patch_size, vc.grid
    img = torch.randn(1, 3, s, s, generator=torch.Generator().manual_seed(1))
    patches = img.reshape(1, 3, g, p, g, p).permute(0, 2, 4, 3, 5, 1).reshape(1, g * g, p * p * 3)
    with torch.no_grad():
        h0, e0 = model.encode_image(img)
        h1, e1 = nv(patches, torch.ones(1, g * g, dtype=torch.int64), torch.tensor([[g, g]]))
    diff = max((h0 - h1).abs().max().item(), (e0 - e1).abs().max().item())
    assert diff < 1e-3, diff
    return diff


def mib(path: str) -> str:
    return f"{os.path.getsize(path) / 2**20:.0f} MiB"


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB -> GB (ru_maxrss is KiB on Linux)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="siglip-b-16-224", choices=list(HUB_CONFIGS) + [NAFLEX])
    ap.add_argument("--out", default=None, help="output folder (default /tmp/condition-<preset>)")
    ap.add_argument("--gemma", default=os.path.join(REPO, "..", "hfbpe", "text", "testdata", "gemma"),
                    help="folder with a Gemma-style tokenizer.json for the SigLIP 2 preset")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--no-onnx", action="store_true",
                    help="write the checkpoint without the ONNX exports (for `condition models build`, "
                         "which makes the graphs; the exports take about half of the time)")
    args = ap.parse_args()
    out = args.out or f"/tmp/condition-{args.preset}"
    if os.path.realpath(out).startswith(os.path.realpath(REPO) + os.sep):
        raise SystemExit(f"make_siglip: --out {out} is inside the repository; these files are "
                         "hundreds of MB and must not be committed: write them elsewhere")

    t0 = time.time()
    torch.manual_seed(args.seed)
    naflex = args.preset == NAFLEX
    if naflex and not args.no_onnx:
        print(f"make_siglip: {NAFLEX}: no onnx/ (the NaFlex tower has no exporter here; condition builds "
              "its graphs from model.safetensors)", flush=True)
        args.no_onnx = True
    cfg = preset_config(NAFLEX_BASE if naflex else args.preset)
    tc, vc = cfg.text_config, cfg.vision_config
    os.makedirs(out, exist_ok=True)
    if args.preset.startswith("siglip2"):
        write_gemma_tokenizer(out, os.path.normpath(args.gemma))
    else:
        write_siglip_tokenizer(out, tc.vocab_size)

    model = siglip.SigLIP(cfg).init_random(args.seed).eval()
    params = sum(p.numel() for p in model.parameters())
    print(f"make_siglip: {args.preset}: {params / 1e6:.1f} M parameters (random, seed {args.seed})",
          flush=True)

    write_hub_config(out, args.preset)
    sd = model.hf_state_dict()
    if naflex:
        write_naflex_preprocessor_config(out, vc.patch_size, vc.grid * vc.grid)
        sd = naflex_state_dict(sd)
    else:
        siglip.write_preprocessor_config(out, vc.image_size, vc.image_size, resample=RESAMPLE[args.preset])
    siglip.write_safetensors(os.path.join(out, "model.safetensors"), sd, {
        "format": "pt",
        "note": f"random weights ({args.preset} architecture, seed {args.seed}) for speed "
                "measurements only; outputs mean nothing",
    })
    onnx_dir = os.path.join(out, "onnx")
    exports = (("text_model.onnx", siglip.export_text_onnx), ("vision_model.onnx", siglip.export_vision_onnx))
    for name, export in exports if not args.no_onnx else ():
        p = os.path.join(onnx_dir, name)
        t = time.time()
        export(model, p)
        print(f"make_siglip: {p}: {mib(p)} in {time.time() - t:.0f} s (peak so far {peak_gb():.1f} GB)",
              flush=True)

    # A quick sanity check of what was built (torch only; the Go side checks the graphs).
    with torch.no_grad():
        s = vc.image_size
        h, e = model.encode_image(torch.zeros(1, 3, s, s))
        assert h.shape == (1, vc.grid * vc.grid, vc.hidden_size), h.shape
        assert e.shape == (1, vc.hidden_size), e.shape
        siglip.check_patch_embeds(model, h, atol=1e-4)
        th, te = model.encode_text(torch.ones(1, tc.max_position_embeddings, dtype=torch.int64))
        assert te.shape == (1, vc.hidden_size), te.shape
    if naflex:
        print(f"make_siglip: the NaFlex tower on a square image (a {vc.grid}x{vc.grid} grid) equals "
              f"{NAFLEX_BASE}'s within {check_naflex(model, sd, vc):.1g}", flush=True)

    print(f"make_siglip: wrote {out} (model.safetensors {mib(os.path.join(out, 'model.safetensors'))}) "
          f"in {time.time() - t0:.0f} s, peak memory {peak_gb():.1f} GB; weights are random: "
          "for speed measurements only")


if __name__ == "__main__":
    main()
