#!/usr/bin/python3
"""Makes the JPEG draft fixtures of testdata/images/draft and Pillow's pixels.

Run with Debian's Python (PIL + numpy only), after generate.py (whose synth
and to_rgb it reuses):

    /usr/bin/python3 testdata/images/draft.py

Pillow's Image.draft("RGB", (d, d)) asks libjpeg for a JPEG scaled by 1/2,
1/4 or 1/8 in the DCT, the largest factor keeping both sides >= d, before the
image is loaded. For each JPEG of draft/src and each size d it writes

  draft/golden/<name>__d<d>.png   uint8 RGB: Image.open, draft("RGB", (d, d)),
                                  then to_rgb (exif_transpose, convert("RGB")),
                                  stored as a lossless PNG (checked on read-back)
  draft/cases.json                the list: image, d, the drafted size, the
                                  scale Pillow chose, and the golden file

Deterministic: the same bytes for the same PIL/libjpeg versions, recorded in
cases.json.
"""

import json
import os

import numpy as np
import PIL
from PIL import Image, features

from generate import synth, to_rgb, exif_orientation

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.path.join(HERE, "draft")
SRC = os.path.join(DIR, "src")
GOLD = os.path.join(DIR, "golden")


def smooth(w, h, seed):
    """synth without noise, so that the JPEGs stay a few KB."""
    return synth(w, h, seed, noise=0)


def main():
    os.makedirs(SRC, exist_ok=True)
    os.makedirs(GOLD, exist_ok=True)
    images = {}

    def save(name, fn, sizes):
        path = os.path.join(SRC, name + ".jpg")
        fn(path)
        images[name] = sizes

    # Sizes chosen so that every scale (8, 4, 2, 1) and sides that do not
    # divide by it (rounded up) occur.
    save("jpeg_420_600x400", lambda p: Image.fromarray(smooth(600, 400, 41)).save(p, quality=85, subsampling=2),
         [40, 100, 150])
    save("jpeg_444_prog_333x250", lambda p: Image.fromarray(smooth(333, 250, 42)).save(
        p, quality=85, subsampling=0, progressive=True), [30, 125])
    save("jpeg_422_321x199", lambda p: Image.fromarray(smooth(321, 199, 43)).save(p, quality=85, subsampling=1),
         [24, 49])
    save("jpeg_gray_300x200", lambda p: Image.fromarray(smooth(300, 200, 44)[..., 1], "L").save(p, quality=85),
         [25, 90])
    cmyk = Image.fromarray(smooth(260, 180, 45)).convert("CMYK")
    save("jpeg_cmyk_260x180", lambda p: cmyk.save(p, quality=85), [40])
    # Stored 400x240 with orientation 6: draft works on the stored sides,
    # the turn comes after.
    save("jpeg_exif6_400x240", lambda p: Image.fromarray(smooth(400, 240, 46)).save(
        p, quality=85, subsampling=2, exif=exif_orientation(6, False)), [56])

    cases = []
    for name, sizes in sorted(images.items()):
        for d in sizes:
            with Image.open(os.path.join(SRC, name + ".jpg")) as im:
                full = im.size
                im.draft("RGB", (d, d))
                scale = im.decoderconfig[0]
                rgb = to_rgb(im)
                arr = np.array(rgb)
            gold = os.path.join(GOLD, "%s__d%d.png" % (name, d))
            Image.fromarray(arr).save(gold, optimize=True)
            with Image.open(gold) as back:
                assert np.array_equal(np.array(back), arr), gold
            cases.append({"image": "src/%s.jpg" % name, "draft": d, "full": list(full), "scale": scale,
                          "size": [arr.shape[1], arr.shape[0]], "rgb_png": "golden/%s__d%d.png" % (name, d)})
    meta = {
        "generator": "testdata/images/draft.py",
        "pillow": PIL.__version__,
        "libjpeg_turbo": features.version("libjpeg_turbo") if features.check("libjpeg_turbo") else None,
        "cases": cases,
    }
    with open(os.path.join(DIR, "cases.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
