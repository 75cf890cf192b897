#!/usr/bin/python3
"""Makes the JPEGs of vision's jpegdec tests with libjpeg-turbo's cjpeg
(Debian: libjpeg-turbo-progs; 2.1.5 made the committed files): chroma
samplings, sizes that are not whole MCUs, restart intervals,
non-interleaved scans, gray, qualities 1 to 100, 16-bit quantization
tables (SOF1) and optimized Huffman tables; and progressive files (SOF2,
prog_*): every sampling, gray, restart intervals and scan scripts of DC
scans interleaved or not, spectral selection and successive
approximation, and a quantization table redefined between scans. The
tests decode each with TurboJPEG and with vision's Go decoder and want
the same pixels.

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


def scripted(name, ppm, script, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(script)
        f.flush()
        cjpeg(name, ppm, "-scans", f.name, *args)


def segments(data):
    """The (marker, start, end) of each marker segment of data, a scan's
    entropy-coded data included in its SOS segment."""
    out, i = [], 2
    while i < len(data):
        m = data[i + 1]
        if m == 0xD9:
            break
        n = data[i + 2] << 8 | data[i + 3]
        j = i + 2 + n
        if m == 0xDA:
            while not (data[j] == 0xFF and data[j + 1] not in (0,) and not 0xD0 <= data[j + 1] <= 0xD7):
                j += 1
        out.append((m, i, j))
        i = j
    return out


def requantize(name, before_scan, table, scale):
    """Inserts before scan before_scan (from 0) a DQT segment redefining
    table as the file's own scaled by scale: libjpeg keeps, for each
    component, the table as it was at the component's first scan."""
    with open(name, "rb") as f:
        data = f.read()
    segs = segments(data)
    dqt = b"".join(data[a + 4:b] for m, a, b in segs if m == 0xDB)
    tables = {}
    while dqt:
        pq, tq = dqt[0] >> 4, dqt[0] & 15
        assert pq == 0
        tables[tq] = dqt[1:65]
        dqt = dqt[65:]
    q = bytes(min(255, max(1, round(v * scale))) for v in tables[table])
    seg = b"\xff\xdb\x00\x43" + bytes([table]) + q
    at = [a for m, a, b in segs if m == 0xDA][before_scan]
    with open(name, "wb") as f:
        f.write(data[:at] + seg + data[at:])


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

    # Progressive: libjpeg-turbo's scans for every sampling, gray.
    for sname, s in samplings.items():
        for w, h in [(7, 9), (45, 31)]:
            seed += 1
            cjpeg(f"prog_s{sname}_{w}x{h}.jpg", pattern(w, h, seed, 20), "-progressive", "-sample", s)
    for w, h in [(1, 1), (33, 17)]:
        seed += 1
        cjpeg(f"prog_gray_{w}x{h}.jpg", pattern(w, h, seed, 10), "-progressive", "-grayscale")
    cjpeg("prog_q100_noise_444_24x24.jpg", pattern(24, 24, 97, 127), "-progressive", "-quality", "100", "-sample", "1x1")
    cjpeg("prog_q1_noise_420_40x24.jpg", pattern(40, 24, 96, 127), "-progressive", "-quality", "1")
    # Restart intervals, which end EOB runs: every block, every 3 blocks
    # (MCU rows, in 4:4:4), in gray and in 4:4:4.
    cjpeg("prog_restart_1B_gray_29x21.jpg", pattern(29, 21, 89, 20), "-progressive", "-restart", "1B", "-grayscale")
    cjpeg("prog_restart_3B_1x1_45x31.jpg", pattern(45, 31, 88, 20), "-progressive", "-restart", "3B", "-sample", "1x1")
    cjpeg("prog_restart_1_1x1_33x17.jpg", pattern(33, 17, 87, 20), "-progressive", "-restart", "1", "-sample", "1x1")
    # Scan scripts: DC first at Al 2 then refined twice; DC scans one
    # component each; the band split many ways; successive approximation
    # with several refinement passes, of split bands too; refinement left
    # unfinished (Al 1 at the end: libjpeg smooths those files, left to
    # image/jpeg), and that of the DC coefficients alone (which libjpeg
    # does not smooth).
    scripts = {
        "dc_refine": "0,1,2: 0-0, 0, 2; 0,1,2: 0-0, 2, 1; 0,1,2: 0-0, 1, 0; 0: 1-63, 0, 0; 1: 1-63, 0, 0; 2: 1-63, 0, 0;",
        "dc_each": "0: 0-0, 0, 1; 2: 0-0, 0, 0; 1: 0-0, 0, 1; 1: 1-63, 0, 0; 0: 1-63, 0, 0; 2: 1-63, 0, 0; 0: 0-0, 1, 0; 1: 0-0, 1, 0;",
        "spectral": "0,1,2: 0-0, 0, 0; 0: 1-1, 0, 0; 0: 2-5, 0, 0; 0: 6-20, 0, 0; 0: 21-63, 0, 0; 2: 1-9, 0, 0; 1: 1-63, 0, 0; 2: 10-63, 0, 0;",
        "successive": "0,1,2: 0-0, 0, 1; 0: 1-5, 0, 3; 0: 6-63, 0, 4; 1: 1-63, 0, 2; 2: 1-63, 0, 1; 0: 6-63, 4, 3;"
        " 0: 1-63, 3, 2; 0,1,2: 0-0, 1, 0; 1: 1-63, 2, 1; 0: 1-63, 2, 1; 2: 1-63, 1, 0; 0: 1-63, 1, 0; 1: 1-63, 1, 0;",
        "unfinished": "0,1,2: 0-0, 0, 1; 0: 1-63, 0, 2; 1: 1-63, 0, 1; 2: 1-63, 0, 1; 0: 1-63, 2, 1;",
        "dc_unrefined": "0,1,2: 0-0, 0, 1; 0: 1-63, 0, 0; 1: 1-63, 0, 0; 2: 1-63, 0, 0;",
    }
    for i, (name, script) in enumerate(scripts.items()):
        for s, (w, h) in [("2x2", (37, 29)), ("2x1", (26, 19)), ("1x1", (21, 13))]:
            scripted(f"prog_{name}_{s}_{w}x{h}.jpg", pattern(w, h, 50 + i, 30), script, "-sample", s, "-quality", "92")
    scripted("prog_successive_restart_2B_1x1_30x20.jpg", pattern(30, 20, 49, 30), scripts["successive"], "-sample", "1x1", "-restart", "2B")
    scripted("prog_successive_gray_35x29.jpg", pattern(35, 29, 48, 30), "0: 0-0, 0, 2; 0: 1-63, 0, 3; 0: 0-0, 2, 1; 0: 1-63, 3, 2;"
          " 0: 1-63, 2, 1; 0: 0-0, 1, 0; 0: 1-63, 1, 0;", "-grayscale", "-quality", "95")
    # A DQT segment between scans, redefining the chroma table after Cb's
    # first scan and before Cr's: Cb keeps the old table, Cr takes the new.
    name = "prog_dqt_between_scans_1x1_21x13.jpg"
    scripted(name, pattern(21, 13, 47, 30), "0: 0-0, 0, 0; 1: 0-0, 0, 0; 2: 0-0, 0, 0; 0: 1-63, 0, 0; 1: 1-63, 0, 0; 2: 1-63, 0, 0;",
          "-sample", "1x1")
    requantize(name, 2, 1, 3)


if __name__ == "__main__":
    main()
