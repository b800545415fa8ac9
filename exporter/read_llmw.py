"""Reader of LLMW files (re-export): the header, the directory, every tensor dequantized."""
import os
import struct

import numpy as np

from .common import ExportError
from .llmw import (ALIGN, BLOCK_TYPES, DTYPE_NAMES, ENTRY_FMT, ENTRY_SIZE, file_size_of,
                   HEADER_FIELDS, HEADER_FMT, HEADER_SIZE, KIND_IDS, layout, MAGIC, matrix_bytes,
                   matrix_type, n_groups, split_name, tensor_count, tensor_plan, V2_DEFAULTS,
                   V2_FIELDS, V2_FMT, validate_config, WT_F16, WT_F32, WT_Q8_0)
from .quantizers import dequantize_q8_0, QUANTIZERS
from .source import _mm, Source


def read_llmw_header(path):
    size = os.path.getsize(path)
    if size < HEADER_SIZE:
        raise ExportError(f"{path} is truncated: {size} bytes, shorter than the 256-byte LLMW header")
    with open(path, "rb") as fh:
        head = fh.read(HEADER_SIZE)
    vals = dict(zip(HEADER_FIELDS, struct.unpack_from(HEADER_FMT, head, 0)))
    if vals["magic"] != MAGIC:
        raise ExportError(f"{path}: not an LLMW file (magic {vals['magic']!r})")
    if vals["version"] not in (1, 2):
        raise ExportError(f"{path}: LLMW version {vals['version']} is not supported (1 and 2 are)")
    if vals["header_size"] != HEADER_SIZE or vals["alignment"] != ALIGN:
        raise ExportError(f"{path}: header_size {vals['header_size']} / alignment "
                          f"{vals['alignment']} must be {HEADER_SIZE} / {ALIGN}")
    if vals["rope_layout"] != 0:
        raise ExportError(f"{path}: rope_layout {vals['rope_layout']} is not supported here (only 0)")
    if vals["version"] == 2:
        vals.update(zip(V2_FIELDS, struct.unpack_from(V2_FMT, head, 96)))
        if any(head[172:]):
            raise ExportError(f"{path}: reserved header bytes 172..255 are not zero")
        for k in ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "embed_scale", "query_scalar",
                  "rope_local_theta"):
            vals[k] = float(vals[k])
    else:
        vals.update(V2_DEFAULTS)
    vals["norm_eps"] = float(vals["norm_eps"])
    vals["rope_theta"] = float(vals["rope_theta"])
    return vals, size


def load_llmw(path):
    """An LLMW file as a Source (q8_0 / q4 / f16 matrices come back as float32). Version 2's
    directory must list the tensors the header implies, in file order, each inside the
    file and after the one before."""
    hdr, size = read_llmw_header(path)
    cfg = {k: v for k, v in hdr.items() if k not in ("magic", "tensor_count", "directory_offset")}
    try:
        validate_config(cfg)
    except ExportError as e:
        raise ExportError(f"{path}: {e}")
    wt, gs = cfg["weight_type"], cfg["group_size"]
    if hdr["version"] == 2:
        count = tensor_count(cfg)
        dir_off = hdr["directory_offset"]
        if hdr["tensor_count"] != count:
            raise ExportError(f"{path}: tensor_count {hdr['tensor_count']} in the header, the "
                              f"config implies {count}")
        if dir_off < HEADER_SIZE or dir_off + ENTRY_SIZE * count > size:
            raise ExportError(f"{path} is truncated or corrupt: the tensor directory at {dir_off} "
                              f"({count} entries) is not inside the {size}-byte file")
        with open(path, "rb") as fh:
            fh.seek(dir_off)
            raw = fh.read(ENTRY_SIZE * count)
        end = dir_off + ENTRY_SIZE * count
        entries = []
        for i, (name, shape, kind) in enumerate(tensor_plan(cfg)):
            k, l, t, g, rows, cols, off, s_off = struct.unpack_from(ENTRY_FMT, raw, i * ENTRY_SIZE)
            want_k, want_l = split_name(name)
            want_t = WT_F32 if kind == "vec" else matrix_type(cfg, shape[1])
            want = (KIND_IDS[want_k], want_l, want_t, gs if want_t == WT_Q8_0 else 0,
                    *((1, shape[0]) if kind == "vec" else shape))
            if (k, l, t, g, rows, cols) != want:
                raise ExportError(f"{path}: directory entry {i} is (kind {k}, layer {l}, type {t}, "
                                  f"group {g}, {rows} x {cols}), expected {name} {want}")
            _, rel, total = matrix_bytes(rows, cols, want_t, gs)
            if off % ALIGN or off < end or (rel is None and s_off) or \
                    (rel is not None and (s_off % ALIGN or s_off < off + rows * cols)):
                raise ExportError(f"{path}: tensor {name} has offsets {off} / {s_off}: not "
                                  f"64-aligned, overlapping what comes before, or scales "
                                  f"{'missing' if rel is not None else 'where ' + DTYPE_NAMES[want_t] + ' has none'}")
            end = off + total if rel is None else s_off + 4 * rows * n_groups(cols, gs)
            if end > size:
                raise ExportError(f"{path} is truncated: tensor {name} ends at {end}, the file "
                                  f"has {size} bytes")
            entries.append((name, shape, kind, off, None if rel is None else s_off))
        if end != size or hdr["file_size"] != size:
            raise ExportError(f"{path}: {size} bytes, the header says {hdr['file_size']} and the "
                              f"last tensor ends at {end}")
    else:
        file_size = file_size_of(cfg)
        if hdr["file_size"] != file_size:
            raise ExportError(f"{path}: header file_size {hdr['file_size']} does not match the "
                              f"{file_size} bytes its fields imply")
        if size != file_size:
            entries, _ = layout(cfg)   # the size is real, so the layer count is bounded
            last = next((e[0] for e in entries if (e[4] or e[3]) >= size), entries[-1][0])
            raise ExportError(f"{path} is {'truncated' if size < file_size else 'too long'}: "
                              f"{size} bytes, the header says {file_size} (tensor {last})")
        entries, _ = layout(cfg)
    src = Source(f"LLMW file {path}", cfg)
    for name, shape, kind, off, s_off in entries:
        if kind == "vec" or wt == WT_F32:
            fn = lambda off=off, shape=shape: _mm(path, np.dtype("<f4"), off, shape)
        elif wt == WT_F16:
            fn = lambda off=off, shape=shape: _mm(path, np.dtype("<f2"), off, shape).astype(np.float32)
        elif wt in BLOCK_TYPES:
            def fn(off=off, shape=shape, mt=matrix_type(cfg, shape[1])):
                nbytes = matrix_bytes(shape[0], shape[1], mt, gs)[2]
                raw = _mm(path, np.uint8, off, (nbytes,))
                return QUANTIZERS[mt][1](np.asarray(raw).tobytes(), *shape)
        else:
            def fn(off=off, s_off=s_off, shape=shape):
                q = _mm(path, np.int8, off, shape)
                s = _mm(path, np.dtype("<f4"), s_off, (shape[0], n_groups(shape[1], gs)))
                return dequantize_q8_0(q, s, gs)
        src.add(name, name, shape, fn)
    return src
