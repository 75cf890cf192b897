"""SigLIP 2's NaFlex image processor, transcribed from transformers with numpy and Pillow only.

This is Siglip2ImageProcessor (transformers' models/siglip2/image_processing_siglip2.py, the
Pillow processor of the 4.x releases that have SigLIP 2, read at commit 0597cc27c284; not
Siglip2ImageProcessorFast, which resizes with torchvision) together with the parts of
image_transforms.py and image_utils.py it calls, written out step by step so that it runs
where transformers is not installed (Debian's /usr/bin/python3: numpy 1.24, Pillow 9.4).
Each function names what it transcribes. It is the reference the Go package vision is
tested against (make_goldens.py).

    from PIL import Image
    from naflex_processor import Siglip2ImageProcessor
    proc = Siglip2ImageProcessor.from_json_file("preprocessor_config.json")
    out = proc.preprocess(Image.open("a.png"))
    out["pixel_values"]          # float32 [max_num_patches, 3 * patch_size**2]
    out["pixel_attention_mask"]  # int32 [max_num_patches]
    out["spatial_shapes"]        # int64 [2]: patch rows, patch columns
"""

import json
import math
from typing import List, Optional, Tuple, Union

import numpy as np
from PIL import Image

# PILImageResampling values (PIL.Image.Resampling).
NEAREST, LANCZOS, BILINEAR, BICUBIC, BOX, HAMMING = 0, 1, 2, 3, 4, 5


def get_image_size_for_max_num_patches(image_height: int, image_width: int, patch_size: int,
                                       max_num_patches: int, eps: float = 1e-5) -> Tuple[int, int]:
    """get_image_size_for_max_num_patches: the (height, width), both multiples of patch_size and
    at least one patch, whose patch count is at most max_num_patches, by a binary search on the
    scale in [eps / 10, 100] to a width of eps. The lower bound is returned without being tested,
    so a side longer than patch_size / (eps / 10) comes out over the budget."""

    def scaled(scale: float, size: int) -> int:
        s = size * scale
        s = math.ceil(s / patch_size) * patch_size
        s = max(patch_size, s)
        return int(s)

    lo, hi = eps / 10, 100.0
    while (hi - lo) >= eps:
        scale = (lo + hi) / 2
        h = scaled(scale, image_height)
        w = scaled(scale, image_width)
        if (h / patch_size) * (w / patch_size) <= max_num_patches:
            lo = scale
        else:
            hi = scale
    return scaled(lo, image_height), scaled(lo, image_width)


def convert_image_to_patches(image: np.ndarray, patch_size: int) -> np.ndarray:
    """convert_image_to_patches: an (H, W, C) array into (H/p * W/p, p * p * C): patches in
    row-major order, each one's values by row, column, channel."""
    h, w, c = image.shape
    gh, gw = h // patch_size, w // patch_size
    x = image.reshape(gh, patch_size, gw, patch_size, c)
    x = x.transpose(0, 2, 1, 3, 4)
    return x.reshape(gh * gw, -1)


def pad_along_first_dim(array: np.ndarray, target_length: int,
                        pad_value: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """pad_along_first_dim: zero rows up to target_length, and the int32 mask (1 for the rows
    that were there). With more rows than target_length nothing is cut (and the mask is all
    ones, shorter than the array): transformers does not check; make_goldens.py asserts it
    never happens."""
    n = array.shape[0]
    pad = target_length - n
    mask = np.ones((target_length,), dtype=np.int32)
    if pad > 0:
        array = np.pad(array, [(0, pad)] + [(0, 0)] * (array.ndim - 1), mode="constant",
                       constant_values=pad_value)
        mask[-pad:] = 0
    return array, mask


def convert_to_rgb(image):
    """image_transforms.convert_to_rgb: PIL images not in mode RGB go through
    Image.convert("RGB") (alpha dropped, not composited); arrays are left alone."""
    if not isinstance(image, Image.Image) or image.mode == "RGB":
        return image
    return image.convert("RGB")


def infer_channels_last(image: np.ndarray) -> bool:
    """image_utils.infer_channel_dimension_format for a 3-D array and 1 or 3 channels: the first
    axis wins when both could be channels (an image 1 or 3 pixels high is read channels-first);
    returns True for channels-last."""
    if image.ndim != 3:
        raise ValueError(f"Unsupported number of image dimensions: {image.ndim}")
    if image.shape[0] in (1, 3):
        return False
    if image.shape[2] in (1, 3):
        return True
    raise ValueError("Unable to infer channel dimension format")


def resize(image: np.ndarray, height: int, width: int, resample: int) -> np.ndarray:
    """image_transforms.resize on a uint8 (H, W, 3) array: to_pil_image (no rescale for uint8),
    Image.resize((width, height), resample, reducing_gap=None), back to a uint8 array."""
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    pil = Image.fromarray(image)
    out = pil.resize((width, height), resample=resample, reducing_gap=None)
    return np.array(out)


def rescale(image: np.ndarray, scale: float) -> np.ndarray:
    """image_transforms.rescale: multiply in float64, cast to float32."""
    return (image.astype(np.float64) * scale).astype(np.float32)


def normalize(image: np.ndarray, mean, std) -> np.ndarray:
    """image_transforms.normalize, channels last: non-float images become float32 first; mean
    and std as arrays of the image's dtype; (image - mean) / std."""
    c = image.shape[-1]
    if not np.issubdtype(image.dtype, np.floating):
        image = image.astype(np.float32)
    mean = list(mean) if isinstance(mean, (list, tuple)) else [mean] * c
    std = list(std) if isinstance(std, (list, tuple)) else [std] * c
    if len(mean) != c or len(std) != c:
        raise ValueError(f"mean and std must have {c} values")
    mean = np.array(mean, dtype=image.dtype)
    std = np.array(std, dtype=image.dtype)
    return (image - mean) / std


class Siglip2ImageProcessor:
    """Siglip2ImageProcessor: __init__'s defaults and preprocess's steps, one image at a time."""

    def __init__(self, do_resize: bool = True, resample: int = BILINEAR, do_rescale: bool = True,
                 rescale_factor: float = 1 / 255, do_normalize: bool = True,
                 image_mean: Optional[Union[float, List[float]]] = None,
                 image_std: Optional[Union[float, List[float]]] = None,
                 do_convert_rgb: Optional[bool] = None, patch_size: int = 16,
                 max_num_patches: int = 256, **kwargs):
        self.do_resize = do_resize
        self.resample = resample
        self.do_rescale = do_rescale
        self.rescale_factor = rescale_factor
        self.do_normalize = do_normalize
        self.image_mean = image_mean if image_mean is not None else [0.5, 0.5, 0.5]
        self.image_std = image_std if image_std is not None else [0.5, 0.5, 0.5]
        self.do_convert_rgb = do_convert_rgb
        self.patch_size = patch_size
        self.max_num_patches = max_num_patches

    @classmethod
    def from_dict(cls, config: dict) -> "Siglip2ImageProcessor":
        """ImageProcessingMixin.from_dict: the config's keys as keyword arguments, a JSON null
        as None (for image_mean and image_std that means 0.5; for do_convert_rgb, no
        conversion)."""
        return cls(**config)

    @classmethod
    def from_json_file(cls, path: str) -> "Siglip2ImageProcessor":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def preprocess(self, image, channels_last: Optional[bool] = None) -> dict:
        """Siglip2ImageProcessor.preprocess for one image (PIL or uint8 array). channels_last
        is input_data_format (None: inferred as transformers does)."""
        if self.do_convert_rgb:
            image = convert_to_rgb(image)
        image = np.array(image) if isinstance(image, Image.Image) else image
        if channels_last is None:
            channels_last = infer_channels_last(image)
        if not channels_last:
            image = image.transpose(1, 2, 0)
        p, n = self.patch_size, self.max_num_patches
        if self.do_resize:
            h, w = get_image_size_for_max_num_patches(image.shape[0], image.shape[1], p, n)
            image = resize(image, h, w, self.resample)
        if self.do_rescale:
            image = rescale(image, self.rescale_factor)
        if self.do_normalize:
            image = normalize(image, self.image_mean, self.image_std)
        patches = convert_image_to_patches(image, p)
        patches, mask = pad_along_first_dim(patches, n)
        shape = (image.shape[0] // p, image.shape[1] // p)
        return {
            "pixel_values": np.ascontiguousarray(patches, dtype=np.float32),
            "pixel_attention_mask": mask,
            "spatial_shapes": np.array(shape, dtype=np.int64),
        }


def _selftest() -> None:
    assert get_image_size_for_max_num_patches(100, 100, 16, 256) == (256, 256)
    a = np.arange(4 * 6 * 3, dtype=np.float32).reshape(4, 6, 3)
    x = convert_image_to_patches(a, 2)
    assert x.shape == (6, 12) and list(x[1, :6]) == list(a[0, 2, :]) + list(a[0, 3, :])
    y, m = pad_along_first_dim(x, 8)
    assert y.shape == (8, 12) and list(m) == [1] * 6 + [0] * 2 and not y[6:].any()


if __name__ == "__main__":
    _selftest()
    print("ok")
