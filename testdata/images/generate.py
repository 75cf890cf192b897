#!/usr/bin/python3
"""Makes the image fixtures of testdata/images and PIL's reference outputs.

Run from anywhere with Debian's Python (PIL + numpy only):

    /usr/bin/python3 testdata/images/generate.py

It writes, next to this script:

  src/<name>.<ext>          small test images in every format and mode the Go
                            decoder must handle (PNG 1/8/16-bit gray, gray+alpha,
                            RGB, RGBA, paletted with tRNS; GIF; BMP; TIFF; WebP
                            lossless; baseline/progressive/gray/CMYK JPEG; EXIF
                            orientations 1-8; odd sizes)
  configs/<cfg>.json        preprocessor_config.json variants (legacy int form,
                            dict forms, padding crop, flags off, other filters)
  golden/<name>.rgb.npy     uint8 [H, W, 3]: ImageOps.exif_transpose(im).convert("RGB")
                            (images up to 64x64 pixels)
  golden/<name>__<cfg>.pv.npy
                            float32 [3, h, w]: pixel_values for one image, made by
                            hf_preprocess below (CLIPImageProcessor's steps)
  golden/<name>__<cfg>.u8.png + golden/<cfg>.lut.npy
                            for the 224x224 cases only (to keep testdata small):
                            the uint8 [h, w, 3] after centre crop as a lossless RGB
                            PNG written from the reference array (checked on read-
                            back), and float32 [3, 256],
                            the per-channel rescale+normalise table, such that
                            pixel_values[c, y, x] == lut[c, u8[c, y, x]] (asserted
                            here before writing).
  cases.json                the list of cases: image, config, golden files, and
                            whether the image is lossless ("exact") or JPEG ("lossy").

Everything is deterministic (fixed seeds), so re-running gives the same bytes
for the same PIL/libjpeg/libwebp versions; the versions used are recorded in
cases.json.
"""

import io
import json
import math
import os
import struct
import zlib

import numpy as np
import PIL
from PIL import Image, ImageOps, features

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "src")
CFG = os.path.join(HERE, "configs")
GOLD = os.path.join(HERE, "golden")

# OpenAI CLIP's values (openai/clip-vit-base-patch32 preprocessor_config.json;
# transformers' OPENAI_CLIP_MEAN / OPENAI_CLIP_STD).
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


# ----------------------------------------------------------------------------
# Reference preprocessing: transformers' CLIPImageProcessor, step by step.
# (transformers is not installed here; these follow
# models/clip/image_processing_clip.py and image_transforms.py of transformers
# 4.3x-4.4x, cited per step.)
# ----------------------------------------------------------------------------


def get_size_dict(size, default_to_square):
    """image_processing_utils.get_size_dict / convert_to_size_dict."""
    if isinstance(size, int) and default_to_square:
        return {"height": size, "width": size}
    if isinstance(size, int):
        return {"shortest_edge": size}
    if isinstance(size, (list, tuple)):
        return {"height": size[0], "width": size[1]}
    return dict(size)


def load_config(cfg):
    """CLIPImageProcessor.__init__ defaults for missing keys."""
    return {
        "do_resize": cfg.get("do_resize", True),
        "size": get_size_dict(cfg.get("size", {"shortest_edge": 224}), False),
        "resample": cfg.get("resample", 3),  # PILImageResampling.BICUBIC
        "do_center_crop": cfg.get("do_center_crop", True),
        "crop_size": get_size_dict(cfg.get("crop_size", 224), True),
        "do_rescale": cfg.get("do_rescale", True),
        "rescale_factor": cfg.get("rescale_factor", 1 / 255),
        "do_normalize": cfg.get("do_normalize", True),
        "image_mean": cfg.get("image_mean", CLIP_MEAN),
        "image_std": cfg.get("image_std", CLIP_STD),
        "do_convert_rgb": cfg.get("do_convert_rgb", True),
    }


def get_resize_output_image_size(height, width, size, default_to_square):
    """image_transforms.get_resize_output_image_size (max_size=None)."""
    if isinstance(size, (tuple, list)):
        return tuple(size)
    if default_to_square:
        return (size, size)
    short, long = (width, height) if width <= height else (height, width)
    requested_new_short = size
    new_short, new_long = requested_new_short, int(requested_new_short * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def hf_resize(arr, cfg):
    """CLIPImageProcessor.resize -> image_transforms.resize.

    image_transforms.resize turns the uint8 HWC array back into a PIL image
    (to_pil_image: no rescale for uint8, PIL.Image.fromarray) and calls
    image.resize((width, height), resample=resample, reducing_gap=None), then
    np.array() of the result.
    """
    size = cfg["size"]
    if "shortest_edge" in size:
        out = get_resize_output_image_size(arr.shape[0], arr.shape[1], size["shortest_edge"], False)
    elif "height" in size and "width" in size:
        out = get_resize_output_image_size(arr.shape[0], arr.shape[1], (size["height"], size["width"]), True)
    else:
        raise ValueError("size must contain shortest_edge or height and width")
    height, width = out
    pil = Image.fromarray(arr)
    res = pil.resize((width, height), resample=cfg["resample"], reducing_gap=None)
    return np.array(res)


def hf_center_crop(arr, crop_height, crop_width):
    """image_transforms.center_crop on a channels-last array, including its
    zero padding when the crop is larger than the image."""
    orig_height, orig_width = arr.shape[0], arr.shape[1]
    top = (orig_height - crop_height) // 2
    bottom = top + crop_height
    left = (orig_width - crop_width) // 2
    right = left + crop_width
    if top >= 0 and bottom <= orig_height and left >= 0 and right <= orig_width:
        return arr[top:bottom, left:right]
    new_height = max(crop_height, orig_height)
    new_width = max(crop_width, orig_width)
    new_image = np.zeros((new_height, new_width) + arr.shape[2:], dtype=arr.dtype)
    top_pad = math.ceil((new_height - orig_height) / 2)
    bottom_pad = top_pad + orig_height
    left_pad = math.ceil((new_width - orig_width) / 2)
    right_pad = left_pad + orig_width
    new_image[top_pad:bottom_pad, left_pad:right_pad] = arr
    top += top_pad
    bottom += top_pad
    left += left_pad
    right += left_pad
    return new_image[max(0, top) : min(new_height, bottom), max(0, left) : min(new_width, right)]


def hf_rescale(arr, scale):
    """image_transforms.rescale: upcast to float64, multiply, cast to float32."""
    return (arr.astype(np.float64) * scale).astype(np.float32)


def hf_normalize(arr, mean, std):
    """image_transforms.normalize (channels last): non-float input is cast to
    float32; mean and std are cast to the image's dtype; (image - mean) / std."""
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float32)
    mean = np.array(mean, dtype=arr.dtype)
    std = np.array(std, dtype=arr.dtype)
    return (arr - mean) / std


def to_rgb(im):
    """ImageOps.exif_transpose (we apply orientation by default; CLIPImageProcessor
    itself does not), then image_transforms.convert_to_rgb: im.convert("RGB").

    Pillow 9.4's libtiff loader already applies a TIFF's Orientation on load
    (TiffImageFile._tile_orientation) but leaves the tag in getexif(), so
    exif_transpose would turn the image a second time; the orientation is
    applied once here, as for every other format."""
    im.load()
    if not getattr(im, "_tile_orientation", None):
        im = ImageOps.exif_transpose(im)
    if im.mode != "RGB":
        im = im.convert("RGB")
    return im


def hf_preprocess(rgb, cfg):
    """CLIPImageProcessor.preprocess for one image given as uint8 [H, W, 3]
    (already converted to RGB; the channel format is channels-last, as if
    input_data_format="channels_last" were passed: transformers' inference
    misreads images 1 or 3 pixels high as channels-first).

    Returns pixel_values [3, h, w] and the uint8 [h, w, 3] after the crop."""
    arr = rgb
    if cfg["do_resize"]:
        arr = hf_resize(arr, cfg)
    if cfg["do_center_crop"]:
        arr = hf_center_crop(arr, cfg["crop_size"]["height"], cfg["crop_size"]["width"])
    u8 = arr
    if cfg["do_rescale"]:
        arr = hf_rescale(arr, cfg["rescale_factor"])
    if cfg["do_normalize"]:
        arr = hf_normalize(arr, cfg["image_mean"], cfg["image_std"])
    # to_channel_dimension_format(image, ChannelDimension.FIRST)
    pv = np.ascontiguousarray(arr.transpose(2, 0, 1)).astype(np.float32)
    return pv, u8


def value_lut(cfg):
    """float32 [3, 256]: what each uint8 value becomes in each channel."""
    v = np.tile(np.arange(256, dtype=np.uint8).reshape(1, 256, 1), (1, 1, 3))
    if cfg["do_rescale"]:
        v = hf_rescale(v, cfg["rescale_factor"])
    if cfg["do_normalize"]:
        v = hf_normalize(v, cfg["image_mean"], cfg["image_std"])
    return np.ascontiguousarray(v[0].T).astype(np.float32)


# ----------------------------------------------------------------------------
# Synthetic content
# ----------------------------------------------------------------------------


def synth(w, h, seed, noise=12):
    """uint8 [h, w, 3]: gradients, a ring, sharp-edged blocks and some noise,
    so that resampling hits smooth areas, edges and clipping (ringing)."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    fx = xx / max(w - 1, 1)
    fy = yy / max(h - 1, 1)
    r = 255 * fx
    g = 255 * fy
    b = 127.5 + 127.5 * np.sin(2 * math.pi * (fx * 2.3 + fy * 1.7) + seed)
    img = np.stack([r, g, b], axis=-1)
    cx, cy = w * 0.6, h * 0.4
    d = np.hypot(xx - cx, yy - cy)
    ring = (np.abs(d - min(w, h) * 0.3) < max(1.0, min(w, h) * 0.06))[..., None]
    img = np.where(ring, np.array([250.0, 20.0, 240.0]), img)
    # hard-edged black and white blocks: resampling overshoot must clip
    img[int(h * 0.1) : int(h * 0.1) + max(1, h // 5), int(w * 0.1) : int(w * 0.1) + max(1, w // 6)] = 255
    img[int(h * 0.7) : int(h * 0.7) + max(1, h // 6), int(w * 0.5) : int(w * 0.5) + max(1, w // 5)] = 0
    if noise:
        img = img + rng.uniform(-noise, noise, size=img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def write_png16(path, arr, color_type):
    """A 16-bit PNG written by hand (PIL cannot write 16-bit RGB/RGBA);
    arr is uint16 [H, W, C] (C = 3 for type 2, 4 for type 6)."""
    h, w = arr.shape[:2]
    be = arr.astype(">u2")
    raw = b"".join(b"\x00" + be[y].tobytes() for y in range(h))
    data = b"\x89PNG\r\n\x1a\n"
    data += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0))
    data += png_chunk(b"IDAT", zlib.compress(raw, 9))
    data += png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def exif_orientation(o, big_endian):
    """EXIF payload (with the "Exif\\0\\0" prefix) holding only IFD0 with
    Orientation (0x0112, SHORT) = o, in either byte order."""
    e = ">" if big_endian else "<"
    tiff = (b"MM" if big_endian else b"II") + struct.pack(e + "HI", 42, 8)
    tiff += struct.pack(e + "H", 1)
    tiff += struct.pack(e + "HHIHH", 0x0112, 3, 1, o, 0)
    tiff += struct.pack(e + "I", 0)
    return b"Exif\x00\x00" + tiff


# ----------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------


def make_images():
    """Writes src/ and returns {name: (filename, kind)}."""
    os.makedirs(SRC, exist_ok=True)
    out = {}

    def save(name, ext, kind, fn):
        path = os.path.join(SRC, name + "." + ext)
        fn(path)
        out[name] = (name + "." + ext, kind)

    base = synth(61, 47, 1)
    save("png_rgb_61x47", "png", "exact", lambda p: Image.fromarray(base).save(p, optimize=True))
    rgba = np.dstack([synth(40, 30, 2), (np.arange(40 * 30).reshape(30, 40) * 7 % 256).astype(np.uint8)])
    rgba[0:5, 0:10, 3] = 0  # fully transparent pixels keep their colour: PIL drops alpha
    save("png_rgba_40x30", "png", "exact", lambda p: Image.fromarray(rgba, "RGBA").save(p))
    gray = synth(37, 29, 3)[..., 1]
    save("png_gray_37x29", "png", "exact", lambda p: Image.fromarray(gray, "L").save(p))
    la = np.dstack([synth(30, 22, 4)[..., 0], synth(30, 22, 5)[..., 2]])
    save("png_la_30x22", "png", "exact", lambda p: Image.fromarray(la, "LA").save(p))
    pal = Image.fromarray(synth(33, 25, 6)).quantize(colors=20, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    save("png_p_trns_33x25", "png", "exact", lambda p: pal.save(p, transparency=bytes([0, 128] + [255] * 18)))
    bw = Image.fromarray(synth(27, 19, 7)[..., 0] > 120)
    save("png_1bit_27x19", "png", "exact", lambda p: bw.save(p))
    rgb16 = (synth(29, 21, 8).astype(np.uint16) * 257 + np.random.RandomState(8).randint(0, 257, (21, 29, 3))).astype(np.uint16)
    save("png_rgb16_29x21", "png", "exact", lambda p: write_png16(p, rgb16, 2))
    rgba16 = np.dstack([synth(25, 19, 9).astype(np.uint16) * 257 + 100, np.full((19, 25), 30000, np.uint16)]).astype(np.uint16)
    save("png_rgba16_25x19", "png", "exact", lambda p: write_png16(p, rgba16, 6))
    # 16-bit gray opens in PIL as mode "I" and convert("RGB") clips to 0..255:
    # values from 0 to 1023 make that visible.
    g16 = (synth(23, 17, 10)[..., 1].astype(np.uint16) * 4).astype(np.uint16)
    save("png_gray16_23x17", "png", "exact", lambda p: Image.fromarray(g16, "I;16").save(p))

    # GIF: two frames; the first must be the one decoded. One with a
    # transparent index, whose palette colour PIL still shows in RGB.
    f1 = Image.fromarray(synth(32, 24, 11)).quantize(colors=32, dither=Image.Dither.NONE)
    f2 = Image.fromarray(255 - synth(32, 24, 12)).quantize(colors=32, dither=Image.Dither.NONE)
    save("gif_anim_32x24", "gif", "exact", lambda p: f1.save(p, save_all=True, append_images=[f2], duration=100, loop=0))
    save("gif_trns_32x24", "gif", "exact", lambda p: f1.save(p, transparency=3))

    save("bmp_rgb_35x27", "bmp", "exact", lambda p: Image.fromarray(synth(35, 27, 13)).save(p))
    bmp_p = Image.fromarray(synth(21, 15, 14)).quantize(colors=16, dither=Image.Dither.NONE)
    save("bmp_p_21x15", "bmp", "exact", lambda p: bmp_p.save(p))
    save("tiff_rgb_31x23", "tif", "exact", lambda p: Image.fromarray(synth(31, 23, 15)).save(p, compression="tiff_lzw"))
    tg16 = (synth(19, 13, 16)[..., 2].astype(np.uint16) * 3).astype(np.uint16)
    save("tiff_gray16_19x13", "tif", "exact", lambda p: Image.fromarray(tg16, "I;16").save(p))
    save("webp_ll_36x28", "webp", "exact", lambda p: Image.fromarray(synth(36, 28, 17)).save(p, lossless=True))
    wrgba = np.dstack([synth(26, 20, 18), np.full((20, 26), 90, np.uint8)])
    save("webp_ll_rgba_26x20", "webp", "exact", lambda p: Image.fromarray(wrgba, "RGBA").save(p, lossless=True, exact=True))

    # Lossy WebP (VP8 decoding is exact; libwebp's upsampling and YUV->RGB are reproduced).
    save("webp_lossy_45x33", "webp", "exact", lambda p: Image.fromarray(synth(45, 33, 28)).save(p, quality=80))
    wla = np.dstack([synth(30, 22, 29), (np.arange(30 * 22).reshape(22, 30) * 5 % 256).astype(np.uint8)])
    save("webp_lossy_rgba_30x22", "webp", "exact", lambda p: Image.fromarray(wla, "RGBA").save(p, quality=80))

    # Odd sizes.
    save("png_1x1", "png", "exact", lambda p: Image.fromarray(np.array([[[200, 30, 90]]], np.uint8)).save(p))
    save("png_3x500", "png", "exact", lambda p: Image.fromarray(synth(3, 500, 19)).save(p))
    save("png_500x3", "png", "exact", lambda p: Image.fromarray(synth(500, 3, 20)).save(p))
    save("png_13x9", "png", "exact", lambda p: Image.fromarray(synth(13, 9, 21)).save(p))
    save("png_224x224", "png", "exact", lambda p: Image.fromarray(synth(224, 224, 22, noise=0)).save(p, optimize=True))
    save("webp_ll_320x240", "webp", "exact", lambda p: Image.fromarray(synth(320, 240, 23, noise=0)).save(p, lossless=True, quality=100, method=6))

    # EXIF orientation, lossless (PNG eXIf chunk, both byte orders), plus WebP and TIFF.
    orient = synth(20, 12, 24)
    for o in range(1, 9):
        ex = exif_orientation(o, big_endian=(o % 2 == 1))
        save("png_exif%d_20x12" % o, "png", "exact", lambda p, ex=ex: Image.fromarray(orient).save(p, exif=ex))
    save("webp_ll_exif6_20x12", "webp", "exact", lambda p: Image.fromarray(orient).save(p, lossless=True, exif=exif_orientation(6, False)))
    save("tiff_exif8_20x12", "tif", "exact", lambda p: Image.fromarray(orient).save(p, tiffinfo={274: 8}))

    # JPEG (lossy: Go's decoder and libjpeg differ).
    j = synth(48, 36, 25, noise=4)
    save("jpeg_444_48x36", "jpg", "lossy", lambda p: Image.fromarray(j).save(p, quality=95, subsampling=0))
    save("jpeg_420_48x36", "jpg", "lossy", lambda p: Image.fromarray(j).save(p, quality=90, subsampling=2))
    save("jpeg_422_48x36", "jpg", "lossy", lambda p: Image.fromarray(j).save(p, quality=90, subsampling=1))
    save("jpeg_420_4x5", "jpg", "lossy", lambda p: Image.fromarray(synth(4, 5, 30)).save(p, quality=90, subsampling=2))
    save("jpeg_420_7x3", "jpg", "lossy", lambda p: Image.fromarray(synth(7, 3, 31)).save(p, quality=90, subsampling=2))
    save("jpeg_prog_48x36", "jpg", "lossy", lambda p: Image.fromarray(j).save(p, quality=90, progressive=True, subsampling=2))
    save("jpeg_gray_40x30", "jpg", "lossy", lambda p: Image.fromarray(synth(40, 30, 26, noise=4)[..., 0], "L").save(p, quality=95))
    cmyk = Image.fromarray(synth(40, 30, 27, noise=4)).convert("CMYK")
    save("jpeg_cmyk_40x30", "jpg", "lossy", lambda p: cmyk.save(p, quality=95))
    for o in range(1, 9):
        ex = exif_orientation(o, big_endian=(o % 2 == 0))
        save("jpeg_exif%d_20x12" % o, "jpg", "lossy", lambda p, ex=ex: Image.fromarray(orient).save(p, quality=95, subsampling=0, exif=ex))
    return out


CONFIGS = {
    # OpenAI CLIP's real preprocessor_config.json (legacy int form).
    "clip224": {
        "crop_size": 224,
        "do_center_crop": True,
        "do_normalize": True,
        "do_resize": True,
        "feature_extractor_type": "CLIPFeatureExtractor",
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "resample": 3,
        "size": 224,
    },
    # The same in small, legacy int form.
    "small": {"crop_size": 16, "do_center_crop": True, "do_normalize": True, "do_resize": True,
              "image_mean": CLIP_MEAN, "image_std": CLIP_STD, "resample": 3, "size": 16},
    # Dict forms, non-square crop, explicit rescale keys.
    "dict": {"crop_size": {"height": 16, "width": 20}, "do_center_crop": True, "do_convert_rgb": True,
             "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": CLIP_MEAN,
             "image_processor_type": "CLIPImageProcessor", "image_std": CLIP_STD, "resample": 3,
             "rescale_factor": 0.00392156862745098, "size": {"shortest_edge": 24}},
    # Resize to an exact height and width, no crop.
    "hw": {"size": {"height": 20, "width": 28}, "do_center_crop": False, "image_mean": [0.5, 0.5, 0.5],
           "image_std": [0.5, 0.5, 0.5]},
    # Crop larger than the resized image: zero padding.
    "pad": {"size": 16, "crop_size": {"height": 30, "width": 20}},
    # No resize: crop (and pad) the original.
    "noresize": {"do_resize": False, "crop_size": {"height": 18, "width": 66}},
    # Flags off.
    "norescale": {"size": 16, "crop_size": 16, "do_rescale": False},
    "nonorm": {"size": 16, "crop_size": 16, "do_normalize": False},
    "raw": {"size": 16, "crop_size": 16, "do_normalize": False, "do_rescale": False},
    # No RGB conversion: only for images Pillow opens as RGB, where it changes nothing.
    "noconvert": {"size": 16, "crop_size": 16, "do_convert_rgb": False},
    # Other PIL filters, at a downscale and an upscale.
    "bilinear": {"size": 16, "crop_size": 16, "resample": 2},
    "box": {"size": 16, "crop_size": 16, "resample": 4},
    "hamming": {"size": 16, "crop_size": 16, "resample": 5},
    "lanczos": {"size": 16, "crop_size": 16, "resample": 1},
}

# Which configs run on which images (every image also runs "small").
EXTRA = {
    "png_rgb_61x47": ["dict", "hw", "pad", "noresize", "norescale", "nonorm", "raw", "noconvert", "bilinear", "box", "hamming", "lanczos"],
    "png_13x9": ["dict", "hw", "pad", "noresize", "bilinear", "lanczos"],
    "png_3x500": ["dict", "pad"],
    "png_500x3": ["dict", "pad"],
    "png_1x1": ["pad", "noresize"],
    "png_224x224": ["clip224"],
    "webp_ll_320x240": ["clip224", "dict"],
    "jpeg_420_48x36": ["dict"],
}


def main():
    os.makedirs(CFG, exist_ok=True)
    os.makedirs(GOLD, exist_ok=True)
    for cfgname, cfg in CONFIGS.items():
        with open(os.path.join(CFG, cfgname + ".json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
    images = make_images()
    cases = []
    luts = set()
    for name, (fname, kind) in sorted(images.items()):
        with Image.open(os.path.join(SRC, fname)) as im:
            im.load()
            mode = im.mode
            rgb = np.array(to_rgb(im))
        assert rgb.dtype == np.uint8 and rgb.ndim == 3 and rgb.shape[2] == 3, (name, rgb.shape)
        big = rgb.shape[0] * rgb.shape[1] > 64 * 64
        if not big:
            np.save(os.path.join(GOLD, name + ".rgb.npy"), rgb)
        for cfgname in ["small"] + EXTRA.get(name, []):
            cfg = load_config(CONFIGS[cfgname])
            assert cfg["do_convert_rgb"] or mode == "RGB", (name, cfgname)
            pv, u8 = hf_preprocess(rgb, cfg)
            case = {"image": "src/" + fname, "name": name, "pil_mode": mode, "kind": kind,
                    "config": "configs/" + cfgname + ".json", "shape": list(pv.shape)}
            if not big:
                case["rgb"] = "golden/" + name + ".rgb.npy"
            if pv.shape[1] * pv.shape[2] > 64 * 64:
                lut = value_lut(cfg)
                u8c = np.ascontiguousarray(u8.transpose(2, 0, 1))
                expect = np.stack([lut[c][u8c[c]] for c in range(3)])
                assert np.array_equal(expect, pv), name  # the table reproduces pixel_values bit for bit
                # Stored as a lossless PNG written from the reference array
                # (150 KB as .npy, a few KB as PNG); read back and checked here.
                u8path = os.path.join(GOLD, "%s__%s.u8.png" % (name, cfgname))
                Image.fromarray(np.ascontiguousarray(u8)).save(u8path, optimize=True)
                with Image.open(u8path) as back:
                    assert np.array_equal(np.array(back), u8), name
                if cfgname not in luts:
                    np.save(os.path.join(GOLD, cfgname + ".lut.npy"), lut)
                    luts.add(cfgname)
                case["u8_png"] = "golden/%s__%s.u8.png" % (name, cfgname)
                case["lut"] = "golden/%s.lut.npy" % cfgname
            else:
                np.save(os.path.join(GOLD, "%s__%s.pv.npy" % (name, cfgname)), pv)
                case["pixel_values"] = "golden/%s__%s.pv.npy" % (name, cfgname)
            cases.append(case)
    meta = {
        "generator": "testdata/images/generate.py",
        "pillow": PIL.__version__,
        "numpy": np.__version__,
        "libjpeg_turbo": features.version("libjpeg_turbo") if features.check("libjpeg_turbo") else None,
        "webp": features.version("webp"),
        "note": "pixel_values follow transformers' CLIPImageProcessor steps, reproduced in numpy; "
                "images are exif_transpose'd before convert('RGB')",
        "cases": cases,
    }
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
