"""Writing an LLMW file: the header, the directory and every tensor, atomically, with progress."""
import contextlib
import os
import sys

import numpy as np

from .common import ExportError, PROG
from .llmw import (align_up, BLOCK_TYPES, directory, F16_MAX, layout, matrix_type, pack_header,
                   validate_config, VERSION, WT_F16, WT_Q8_0)
from .quantizers import dequantize_q8_0, quantize_q8_0, QUANTIZERS

# ----------------------------------------------------------------------------
# writing

@contextlib.contextmanager
def atomic_output(path):
    """Open a temp file beside `path`; rename it over `path` only on success."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise ExportError(f"output folder {folder} does not exist")
    if os.path.isdir(path):
        raise ExportError(f"output {path} is a directory")
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp{os.getpid()}")
    f = open(tmp, "wb")
    try:
        yield f
        f.flush()
        f.close()
        os.replace(tmp, path)
    except BaseException:
        f.close()
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


ROW_CHUNK_ELEMS = 1 << 22   # write big matrices in ~4M-element slices


def write_matrix(f, name, w, weight_type, group_size):
    """Write one matrix in weight_type; returns the max abs round-trip error."""
    rows, cols = w.shape
    step = max(1, ROW_CHUNK_ELEMS // max(cols, 1))
    err = 0.0
    if weight_type == WT_Q8_0:
        scales = []
        start = f.tell()
        for r0 in range(0, rows, step):
            blk = np.asarray(w[r0:r0 + step], dtype=np.float32)
            q, s = quantize_q8_0(blk, group_size)
            f.write(q.tobytes())
            scales.append(s)
            err = max(err, float(np.abs(dequantize_q8_0(q, s, group_size) - blk).max(initial=0)))
        f.write(b"\0" * (align_up(f.tell() - start) - (f.tell() - start)))
        for s in scales:
            f.write(s.astype("<f4").tobytes())
        return err
    if weight_type in BLOCK_TYPES:
        quantize, dequantize = QUANTIZERS[weight_type]
        for r0 in range(0, rows, step):
            blk = np.asarray(w[r0:r0 + step], dtype=np.float32)
            raw = quantize(blk, name)
            err = max(err, float(np.abs(dequantize(raw, blk.shape[0], cols) - blk).max(initial=0)))
            f.write(raw)
        return err
    for r0 in range(0, rows, step):
        blk = np.asarray(w[r0:r0 + step], dtype=np.float32)
        if weight_type == WT_F16:
            big = float(np.abs(blk).max(initial=0))
            if not big <= F16_MAX:
                raise ExportError(f"tensor {name} has a value of magnitude {big:g}, "
                                  f"beyond the f16 range (65504): use --dtype f32 or q8_0")
            h = blk.astype("<f2")
            err = max(err, float(np.abs(h.astype(np.float32) - blk).max(initial=0)))
            f.write(h.tobytes())
        else:
            f.write(blk.astype("<f4").tobytes())
    return err


class Progress:
    """'tensor n of N, bytes, rate' on one stderr line, redrawn, once a conversion has
    run for a second, and only when stderr is a terminal (a log keeps the summaries).
    EXPORT_PROGRESS=SECONDS shows it on any stderr after that many seconds."""

    def __init__(self, n_tensors, total_bytes, delay=1.0):
        import time
        self.time = time.monotonic
        self.n, self.total, self.delay = n_tensors, total_bytes, delay
        self.t0 = self.last = self.time()
        self.shown = False
        self.on = sys.stderr.isatty()
        forced = os.environ.get("EXPORT_PROGRESS")
        if forced:
            with contextlib.suppress(ValueError):
                self.delay, self.on = float(forced), True

    def update(self, i, done):
        now = self.time()
        if not self.on or now - self.t0 < self.delay or (now - self.last < 0.2 and i < self.n):
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-9) / 2**20
        sys.stderr.write(f"\r{PROG}: tensor {i} of {self.n}, {done / 2**20:.1f} of "
                         f"{self.total / 2**20:.1f} MiB, {rate:.1f} MiB/s  ")
        sys.stderr.flush()
        self.shown = True

    def close(self):
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def write_llmw(path, cfg, src):
    """Write `src` (a Source) as LLMW to `path` with header values from cfg."""
    validate_config(cfg)
    entries, file_size = layout(cfg)
    src.check([(n, s) for n, s, _, _, _ in entries])
    max_err = 0.0
    progress = Progress(len(entries), file_size)
    with atomic_output(path) as f, contextlib.closing(progress):
        f.write(pack_header(cfg, file_size))
        if cfg.get("version", VERSION) == 2:
            f.write(directory(cfg, entries))
        for i, (name, shape, kind, off, _) in enumerate(entries):
            progress.update(i, f.tell())
            f.write(b"\0" * (off - f.tell()))
            arr = src.load(name)
            if tuple(arr.shape) != tuple(shape):
                raise ExportError(f"tensor {src.src_name(name)} has shape {list(arr.shape)}, "
                                  f"expected {list(shape)}")
            if not np.isfinite(arr).all():
                raise ExportError(f"tensor {src.src_name(name)} contains NaN or Inf")
            if kind == "vec":
                f.write(np.asarray(arr, dtype="<f4").tobytes())
            else:
                max_err = max(max_err, write_matrix(f, name, arr, matrix_type(cfg, shape[1]),
                                                    cfg["group_size"]))
            del arr
        progress.update(len(entries), f.tell())
        if f.tell() != file_size:   # a bug, not bad input
            raise ExportError(f"internal error: wrote {f.tell()} bytes, header says {file_size}")
    return file_size, max_err
