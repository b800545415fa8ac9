"""Reader of safetensors files with numpy alone: the header checked against the file."""
import math
import os
import struct

import numpy as np

from .common import ExportError
from .jsonconf import _is_count, parse_json
from .source import _mm

# ---------------------------------------------------------------- safetensors / HF

ST_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


class SafetensorsFile:
    """The header of a safetensors file, checked against the file: every entry has a
    string dtype, a shape of non-negative integers and data_offsets [begin, end] inside
    the data, and no two tensors' bytes overlap. validate() checks a tensor's dtype and
    span before it is read."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        if size < 8:
            raise ExportError(f"{path} is truncated: {size} bytes, no safetensors header")
        with open(path, "rb") as fh:
            (hlen,) = struct.unpack("<Q", fh.read(8))
            if hlen > size - 8:
                raise ExportError(f"{path} is truncated: the safetensors header needs "
                                  f"{8 + hlen} bytes, the file has {size}")
            meta = parse_json(fh.read(hlen), f"{path}: safetensors header")
        if not isinstance(meta, dict):
            raise ExportError(f"{path}: bad safetensors header (a JSON {type(meta).__name__}, "
                              f"not an object)")
        self.base = 8 + hlen
        self.tensors = {}
        for name, info in meta.items():
            if name != "__metadata__":
                self.tensors[name] = self._entry(name, info, size - self.base)
        self._check_overlaps()

    def _entry(self, name, info, data_size):
        """(dtype, shape, begin, end) of one header entry, or ExportError."""
        path = self.path
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            raise ExportError(f"{path}: bad safetensors entry for tensor {name} (want an object "
                              f"with dtype, shape and data_offsets, found {info!r:.80})")
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str):
            raise ExportError(f"{path}: tensor {name} has dtype {dtype!r}, not a string")
        if not isinstance(shape, list) or not all(_is_count(x) for x in shape):
            raise ExportError(f"{path}: tensor {name} has shape {shape!r:.80}, not a list of "
                              f"non-negative integers")
        if not (isinstance(offs, list) and len(offs) == 2 and all(_is_count(x) for x in offs)
                and offs[0] <= offs[1]):
            raise ExportError(f"{path}: tensor {name} has data_offsets {offs!r:.80}, not "
                              f"[begin, end] with 0 <= begin <= end")
        if offs[1] > data_size:
            raise ExportError(f"{path} is truncated: tensor {name} needs bytes up to "
                              f"{self.base + offs[1]}, the file has {self.base + data_size}")
        return dtype, tuple(shape), offs[0], offs[1]

    def _check_overlaps(self):
        spans = sorted((b, e, n) for n, (_, _, b, e) in self.tensors.items() if e > b)
        for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
            if b1 < e0:
                raise ExportError(f"{self.path}: tensors {n0} (bytes [{b0}, {e0})) and {n1} "
                                  f"(bytes [{b1}, {e1})) overlap")

    def validate(self, name):
        dtype, shape, b, e = self.tensors[name]
        if dtype not in ST_DTYPES:
            raise ExportError(f"tensor {name} in {self.path} has dtype {dtype}; "
                              f"only F32, F16 and BF16 are supported")
        dt = ST_DTYPES[dtype]
        n = math.prod(shape)   # exact: np.prod would wrap around for hostile shapes
        if e - b != n * dt.itemsize:
            raise ExportError(f"tensor {name} in {self.path}: data_offsets span {e - b} bytes, "
                              f"{dtype} {list(shape)} needs {n * dt.itemsize}")
        return dt, n

    def load(self, name):
        dtype, shape, b, e = self.tensors[name]
        dt, n = self.validate(name)
        a = _mm(self.path, dt, self.base + b, shape)
        if dtype == "BF16":
            return (np.asarray(a).astype(np.uint32) << 16).view(np.float32)
        return np.asarray(a, dtype=np.float32)
