"""Safetensors files for the tests' Hugging Face folders, with numpy alone:
read (F32, F16, BF16 as float64 arrays) and write a random folder's
config.json + model.safetensors (F32, or BF16 rounded to nearest even when
the config's torch_dtype is bfloat16). The references (reference.py,
reference_gemma3.py, reference_olmo2.py) share these."""
import json
import os
import struct

import numpy as np


def read_safetensors(path):
    """{name: float64 array} of a safetensors file (8-byte header length, JSON
    header, raw little-endian data), F32, F16 and BF16."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        if e["dtype"] == "BF16":
            v = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in ("F32", "F16"):
            v = np.frombuffer(buf, {"F32": "<f4", "F16": "<f2"}[e["dtype"]])
        else:
            raise ValueError(f"{name}: dtype {e['dtype']}")
        out[name] = v.astype(np.float64).reshape(e["shape"])
    return out


def write_hf_folder(folder, tensors, conf, architecture, model_type):
    """config.json (conf plus the architecture and model_type) and
    model.safetensors of tensors ({name: array}, in sorted order)."""
    bf16 = conf.get("torch_dtype") == "bfloat16"
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name], dtype=np.float32)
        if bf16:
            u = a.view(np.uint32).astype(np.uint64)
            raw = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")).tobytes()
        else:
            raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": "BF16" if bf16 else "F32", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(dict(conf, architectures=[architecture], model_type=model_type), f, indent=1)
