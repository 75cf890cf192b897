#!/usr/bin/python3
"""make_photos.py: a folder of photo-like JPEGs for end-to-end speed measurements.

What it makes: N JPEG files (quality 88, 4:2:0 chroma, as cameras and photo
sites write them) at the sizes photo collections hold (640x480, 500x375,
480x640, 800x600, 1024x768 in turn), each a smooth lit background, a few
blurred and sharp shapes, fine strokes and sensor-like noise, drawn from a
fixed seed. Decoding and resizing cost what they cost on photos of those
sizes; the content means nothing. No photograph can be downloaded on the
development machine, which is why this exists.

Usage (needs Pillow, as /usr/bin/python3 on the development machine has; no numpy):

    /usr/bin/python3 scripts/bench_photos/make_photos.py [--out /tmp/condition-photos] [--n 200] [--seed 1]
        [--sizes 640x480,500x375,...]

--sizes replaces the sizes, taken in turn: `--sizes 4032x3024,3024x4032,2048x1536`
makes phone-camera-size files, where decoding is most of the cost of a small model.

The same seed and Pillow version give the same files.
"""

import argparse
import os
import random

from PIL import Image, ImageDraw, ImageFilter

SIZES = [(640, 480), (500, 375), (480, 640), (800, 600), (1024, 768)]


def photo(rng: random.Random, w: int, h: int) -> Image.Image:
    # A lit background: a gradient per channel at its own angle.
    chans = []
    for _ in range(3):
        g = Image.linear_gradient("L").rotate(rng.uniform(0, 360), resample=Image.BILINEAR, expand=True)
        g = g.resize((w, h), Image.BILINEAR)
        lo, hi = sorted((rng.randint(0, 255), rng.randint(0, 255)))
        chans.append(g.point(lambda v, lo=lo, hi=hi: lo + (hi - lo) * v // 255))
    img = Image.merge("RGB", chans)
    # Out-of-focus shapes behind, sharp ones in front.
    for layer, blur in ((6, rng.uniform(4, 12)), (4, 0)):
        over = Image.new("RGBA", (w, h), (0, 0, 0, 0))
        d = ImageDraw.Draw(over)
        for _ in range(layer):
            x0, y0 = rng.randint(-w // 4, w), rng.randint(-h // 4, h)
            x1, y1 = x0 + rng.randint(w // 10, w // 2), y0 + rng.randint(h // 10, h // 2)
            c = (rng.randint(0, 255), rng.randint(0, 255), rng.randint(0, 255), rng.randint(150, 255))
            kind = rng.random()
            if kind < 0.4:
                d.ellipse((x0, y0, x1, y1), fill=c)
            elif kind < 0.7:
                d.rectangle((x0, y0, x1, y1), fill=c)
            else:
                pts = [(rng.randint(x0, x1), rng.randint(y0, y1)) for _ in range(rng.randint(3, 6))]
                d.polygon(pts, fill=c)
        if blur:
            over = over.filter(ImageFilter.GaussianBlur(blur))
        img = Image.alpha_composite(img.convert("RGBA"), over).convert("RGB")
    # Fine detail: strokes like grass, hair or text.
    d = ImageDraw.Draw(img)
    for _ in range(rng.randint(50, 250)):
        x, y = rng.randint(0, w), rng.randint(0, h)
        c = tuple(rng.randint(0, 255) for _ in range(3))
        d.line((x, y, x + rng.randint(-20, 20), y + rng.randint(-20, 20)), fill=c, width=rng.randint(1, 2))
    # Sensor noise.
    noise = Image.merge("RGB", [Image.effect_noise((w, h), rng.uniform(8, 24)) for _ in range(3)])
    return Image.blend(img, noise, 0.12)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/condition-photos")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sizes", default=",".join("%dx%d" % s for s in SIZES), help="WxH,WxH,... taken in turn")
    args = ap.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    for i in range(args.n):
        w, h = sizes[i % len(sizes)]
        p = os.path.join(args.out, f"photo_{i:04d}.jpg")
        photo(rng, w, h).save(p, quality=88, subsampling=2)
    print(f"make_photos: wrote {args.n} JPEGs to {args.out}")


if __name__ == "__main__":
    main()
