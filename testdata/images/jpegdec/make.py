#!/usr/bin/python3
"""Makes the baseline JPEGs of vision's jpegdec tests with libjpeg-turbo's
cjpeg (Debian: libjpeg-turbo-progs; 2.1.5 made the committed files):
chroma samplings, sizes that are not whole MCUs, restart intervals,
non-interleaved scans, gray, qualities 1 to 100, 16-bit quantization
tables (SOF1) and optimized Huffman tables. The tests decode each with
TurboJPEG and with vision's Go decoder and want the same pixels.

Run from this folder: ./make.py
"""
import os
import random
import subprocess
import tempfile


def pattern(w, h, seed, noise):
    """A PPM of gradients, edges and (noise > 0) random noise."""
    rng = random.Random(seed)
    px = bytearray()
    for y in range(h):
        for x in range(w):
            r = (x * 255 // max(w - 1, 1)) ^ (64 if (x // 5 + y // 3) % 2 else 0)
            g = y * 255 // max(h - 1, 1)
            b = 255 if (x - w // 2) ** 2 + (y - h // 2) ** 2 < (min(w, h) // 3) ** 2 else 30
            if noise:
                r, g, b = (min(255, max(0, c + rng.randint(-noise, noise))) for c in (r, g, b))
            px += bytes((r, g, b))
    return b"P6\n%d %d\n255\n" % (w, h) + bytes(px)


def cjpeg(name, ppm, *args):
    with tempfile.NamedTemporaryFile(suffix=".ppm") as f:
        f.write(ppm)
        f.flush()
        subprocess.run(["cjpeg", *args, "-outfile", name, f.name], check=True)


def main():
    for f in os.listdir("."):
        if f.endswith(".jpg"):
            os.remove(f)
    sizes = [(1, 1), (7, 9), (17, 33), (45, 31), (64, 48)]
    samplings = {"444": "1x1", "422": "2x1", "420": "2x2", "440": "1x2", "411": "4x1"}
    seed = 0
    for sname, s in samplings.items():
        for w, h in sizes:
            for q in (20, 90):
                seed += 1
                cjpeg(f"s{sname}_{w}x{h}_q{q}.jpg", pattern(w, h, seed, 20), "-quality", str(q), "-sample", s)
    for w, h in [(1, 1), (9, 7), (33, 17), (40, 30)]:
        seed += 1
        cjpeg(f"gray_{w}x{h}.jpg", pattern(w, h, seed, 10), "-grayscale", "-quality", "85")
    for q in (1, 5, 25, 50, 75, 95, 100):
        seed += 1
        cjpeg(f"q{q}_420_50x38.jpg", pattern(50, 38, seed, 40), "-quality", str(q), "-baseline")
    # Quality 1 without -baseline: 16-bit quantization tables, SOF1.
    cjpeg("q1_sof1_16bit_420_50x38.jpg", pattern(50, 38, 99, 60), "-quality", "1")
    cjpeg("q3_sof1_16bit_444_31x23.jpg", pattern(31, 23, 98, 90), "-quality", "3", "-sample", "1x1")
    # Pure noise at the extremes: coefficients of every size, clamping.
    cjpeg("noise_q100_444_24x24.jpg", pattern(24, 24, 97, 127), "-quality", "100", "-sample", "1x1")
    cjpeg("noise_q1_420_40x24.jpg", pattern(40, 24, 96, 127), "-quality", "1", "-baseline")
    cjpeg("optimize_420_61x47.jpg", pattern(61, 47, 95, 50), "-quality", "80", "-optimize")
    cjpeg("optimize_gray_35x29.jpg", pattern(35, 29, 94, 50), "-quality", "60", "-optimize", "-grayscale")
    # Restart intervals: every MCU, every 3 MCUs, every MCU row, 2 rows.
    for i, (arg, s) in enumerate([("1B", "2x2"), ("3B", "2x1"), ("1", "1x1"), ("2", "2x2"), ("5B", "1x2"), ("7B", "4x1")]):
        w, h = [(45, 31), (61, 47), (33, 17), (64, 70), (23, 41), (70, 20)][i]
        cjpeg(f"restart_{arg}_{s}_{w}x{h}.jpg", pattern(w, h, 80 + i, 20), "-restart", arg, "-sample", s)
    cjpeg("restart_1B_gray_29x21.jpg", pattern(29, 21, 90, 20), "-restart", "1B", "-grayscale")
    cjpeg("restart_2B_optimize_420_50x50.jpg", pattern(50, 50, 91, 20), "-restart", "2B", "-optimize")
    # Non-interleaved scans: each component alone, and Y then Cb+Cr.
    scans = {"each": "0;\n1;\n2;\n", "y_cbcr": "0;\n1 2;\n", "cr_first": "2;\n0;\n1;\n"}
    for i, (name, script) in enumerate(scans.items()):
        for s, (w, h) in [("2x2", (37, 29)), ("2x1", (26, 19)), ("1x1", (21, 13))]:
            with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
                f.write(script)
                f.flush()
                cjpeg(f"scans_{name}_{s}_{w}x{h}.jpg", pattern(w, h, 70 + i, 20), "-scans", f.name, "-sample", s)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write("0;\n1;\n2;\n")
        f.flush()
        cjpeg("scans_each_restart_1B_1x1_30x20.jpg", pattern(30, 20, 60, 20), "-scans", f.name, "-sample", "1x1", "-restart", "1B")


if __name__ == "__main__":
    main()
