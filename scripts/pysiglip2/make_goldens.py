#!/usr/bin/python3
"""Makes vision/testdata/naflex: test images and Siglip2ImageProcessor's outputs for them.

Run from anywhere with Debian's Python (numpy + Pillow only):

    /usr/bin/python3 scripts/pysiglip2/make_goldens.py

It writes, under vision/testdata/naflex/:

  src/<name>.png                small images made here with Pillow (fixed seeds): square,
                                wider than 20:1 and taller than 1:20, smaller than one patch,
                                sides that are not multiples of the patch, gray (mode L),
                                RGBA, paletted
  configs/<cfg>.json            preprocessor_config.json files (image_processor_type
                                Siglip2ImageProcessor): the defaults (patch 16, 256 patches),
                                a 256-patch and a 64-patch budget of 4-pixel patches, and
                                bicubic with CLIP's mean and std
  golden/<name>__<cfg>.pixel_values.npy          float32 [max_num_patches, 3 * patch**2]
  golden/<name>__<cfg>.pixel_attention_mask.npy  int32 [max_num_patches]
  golden/<name>__<cfg>.spatial_shapes.npy        int64 [2]
  cases.json                    the cases, and the versions of Python, numpy and Pillow
  sizes.json                    get_image_size_for_max_num_patches for chosen and random
                                (height, width, patch, budget)

The outputs are naflex_processor.py's (a transcription of transformers' processor), on the
image as Pillow opens it. The defaults config is run on RGB images only: its do_convert_rgb is
null, which transformers reads as "do not convert" (and then fails on gray images), where the
Go package converts; the other configs say do_convert_rgb true.
"""

import json
import os
import platform
import sys

import numpy as np
import PIL
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from naflex_processor import Siglip2ImageProcessor, get_image_size_for_max_num_patches  # noqa: E402

OUT = os.path.join(HERE, "..", "..", "vision", "testdata", "naflex")
SRC = os.path.join(OUT, "src")
CFG = os.path.join(OUT, "configs")
GOLD = os.path.join(OUT, "golden")

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def base_config(**kw) -> dict:
    c = {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "Siglip2ImageProcessor",
        "image_std": [0.5, 0.5, 0.5],
        "max_num_patches": 256,
        "patch_size": 16,
        "processor_class": "Siglip2Processor",
        "resample": 2,
        "rescale_factor": 1 / 255,
    }
    c.update(kw)
    return c


CONFIGS = {
    # As google/siglip2-*-naflex publish it (do_convert_rgb null).
    "default": base_config(do_convert_rgb=None),
    "p4n256": base_config(patch_size=4, max_num_patches=256),
    "p4n64": base_config(patch_size=4, max_num_patches=64),
    "bicubic": base_config(patch_size=4, max_num_patches=64, resample=3, image_mean=CLIP_MEAN,
                           image_std=CLIP_STD),
}


def texture(w: int, h: int, seed: int) -> np.ndarray:
    """uint8 [h, w, 3]: gradients, a few stripes and noise, so that every filter tap matters."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * x / max(w - 1, 1)
    g = 255 * y / max(h - 1, 1)
    b = 127.5 + 127.5 * np.sin((x + 2 * y) / 3.0)
    a = np.stack([r, g, b], axis=-1) + rng.normal(0, 30, (h, w, 3))
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)


def make_images() -> dict:
    """name -> PIL image; also saved as src/<name>.png."""
    ims = {
        "square": Image.fromarray(texture(64, 64, 1)),
        "wide": Image.fromarray(texture(500, 20, 2)),     # 25:1
        "tall": Image.fromarray(texture(12, 300, 3)),     # 1:25
        "tiny": Image.fromarray(texture(3, 2, 4)),        # smaller than a patch
        "small": Image.fromarray(texture(40, 27, 5)),     # under the budget: upscaled
        "odd": Image.fromarray(texture(133, 101, 6)),     # sides not multiples of a patch
        "gray": Image.fromarray(texture(123, 77, 7)[..., 1], mode="L"),
    }
    rgba = np.concatenate([texture(90, 61, 8), texture(90, 61, 9)[..., :1]], axis=-1)
    ims["rgba"] = Image.fromarray(rgba, mode="RGBA")
    ims["palette"] = Image.fromarray(texture(48, 35, 10)).quantize(colors=32, method=Image.MEDIANCUT)
    os.makedirs(SRC, exist_ok=True)
    for name, im in ims.items():
        path = os.path.join(SRC, name + ".png")
        im.save(path, optimize=True)
        with Image.open(path) as back:  # what the Go test decodes
            back.load()
            assert back.mode == im.mode and np.array_equal(np.array(back), np.array(im)), name
    return ims


def cases_for(cfg: str, ims: dict) -> list:
    if cfg == "default":
        return ["square", "tall"]
    return sorted(ims)


def make_goldens(ims: dict) -> list:
    os.makedirs(CFG, exist_ok=True)
    os.makedirs(GOLD, exist_ok=True)
    cases = []
    for cfg, c in CONFIGS.items():
        with open(os.path.join(CFG, cfg + ".json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
            f.write("\n")
        proc = Siglip2ImageProcessor.from_json_file(os.path.join(CFG, cfg + ".json"))
        for name in cases_for(cfg, ims):
            with Image.open(os.path.join(SRC, name + ".png")) as im:
                im.load()
                w, h = im.size
                # Images 1 or 3 pixels high would be read channels-first by transformers.
                assert h not in (1, 3), name
                if cfg == "default":
                    assert im.mode == "RGB", name
                out = proc.preprocess(im)
            n, p = proc.max_num_patches, proc.patch_size
            pv, mask, ss = out["pixel_values"], out["pixel_attention_mask"], out["spatial_shapes"]
            assert pv.shape == (n, 3 * p * p) and pv.dtype == np.float32
            assert mask.shape == (n,) and mask.dtype == np.int32
            assert ss.shape == (2,) and ss.dtype == np.int64
            assert int(ss[0] * ss[1]) == int(mask.sum()) <= n
            files = {}
            for key, arr in out.items():
                rel = f"golden/{name}__{cfg}.{key}.npy"
                np.save(os.path.join(OUT, rel), arr)
                files[key] = rel
            cases.append({
                "image": f"src/{name}.png", "config": f"configs/{cfg}.json", "pil_mode": im.mode,
                "width": w, "height": h, "grid": [int(x) for x in ss], **files,
            })
    return cases


def make_sizes() -> list:
    """get_image_size_for_max_num_patches on chosen and random arguments."""
    args = []
    for p, n in [(16, 256), (16, 64), (14, 729), (16, 1024), (32, 16), (1, 1), (1, 7), (3, 2),
                 (16, 1), (16, 2), (16, 3), (8, 4096)]:
        for h, w in [(1, 1), (1, 2), (2, 1), (16, 16), (15, 17), (224, 224), (480, 640),
                     (640, 480), (20, 500), (500, 20), (1, 10000), (10000, 1), (3, 4000),
                     (4096, 4096), (12345, 678), (7, 5), (256, 256), (255, 257), (100, 100)]:
            args.append((h, w, p, n))
    # Sides past patch / 1e-6: over the budget even at the smallest scale.
    args += [(2_000_000, 1, 1, 1), (1_000_001, 1_000_001, 1, 1), (5_000_000, 10, 1, 4),
             (1, 16_000_001, 16, 1), (1, 3_000_000, 1, 4), (16_000_017, 16, 16, 256),
             (16, 16_777_216, 16, 256), (16_777_216, 16_777_216, 16, 256)]
    rng = np.random.RandomState(11)
    for _ in range(300):
        h = int(np.exp(rng.uniform(0, np.log(20000))))
        w = int(np.exp(rng.uniform(0, np.log(20000))))
        p = int(rng.choice([1, 2, 4, 8, 14, 16, 32]))
        n = int(np.exp(rng.uniform(0, np.log(5000)))) + 1
        args.append((h, w, p, n))
    out = []
    for h, w, p, n in args:
        th, tw = get_image_size_for_max_num_patches(h, w, p, n)
        out.append({"height": h, "width": w, "patch_size": p, "max_num_patches": n,
                    "target": [th, tw]})
    return out


def main() -> None:
    ims = make_images()
    cases = make_goldens(ims)
    meta = {
        "made_by": "scripts/pysiglip2/make_goldens.py",
        "python": platform.python_version(), "numpy": np.__version__, "pillow": PIL.__version__,
        "cases": cases,
    }
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    with open(os.path.join(OUT, "sizes.json"), "w") as f:
        json.dump({"made_by": "scripts/pysiglip2/make_goldens.py", "sizes": make_sizes()}, f,
                  indent=0)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(d, x)) for d, _, xs in os.walk(OUT) for x in xs)
    print(f"{len(cases)} cases, {total} bytes in {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
