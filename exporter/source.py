"""Sources: what every reader returns, a model's canonical tensors by name, loaded lazily;
and the helpers readers share to place and map tensors."""
import os

import numpy as np

from .common import ExportError
from .llmw import tensor_plan, WT_F32

# ----------------------------------------------------------------------------
# sources: something that yields the canonical tensors of a model

class Source:
    """cfg: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
    head_size, norm_eps, rope_theta, shared_classifier, norm_bias (present in the
    input), and optionally norm_type/norm_pos/final_norm/weight_type/group_size.
    entries: canonical name -> (source name, shape, loader() -> float32 array)."""

    def __init__(self, desc, cfg):
        self.desc = desc
        self.cfg = cfg
        self.entries = {}
        self.config_name = "the header"   # what shapes are checked against, for messages

    def add(self, name, src_name, shape, loader):
        self.entries[name] = (src_name, tuple(int(x) for x in shape), loader)

    def src_name(self, name):
        return self.entries[name][0] if name in self.entries else name

    def check(self, wanted):
        for name, shape in wanted:
            if name not in self.entries:
                raise ExportError(f"missing tensor {self.expected_name(name)} in {self.desc}")
            src_name, have, _ = self.entries[name]
            if have != tuple(shape):
                raise ExportError(f"tensor {src_name} has shape {list(have)} but "
                                  f"{self.config_name} implies {list(shape)}")

    def expected_name(self, name):
        return self.src_name(name)

    def load(self, name):
        src_name, shape, loader = self.entries[name]
        a = np.asarray(loader(), dtype=np.float32)
        return a

    def tensors(self):
        """All tensors of the plan as float32 arrays (for read_checkpoint)."""
        cfg = dict(self.cfg)
        cfg.setdefault("weight_type", WT_F32)
        cfg.setdefault("group_size", 0)
        plan = tensor_plan(cfg)
        self.check([(n, s) for n, s, _ in plan])
        return {n: np.array(self.load(n), dtype=np.float32) for n, _, _ in plan}


class SeqLayout:
    """Tensors laid one after another from an offset, each checked against the file
    size as it is placed (so a header claiming huge sizes fails at once)."""

    def __init__(self, path, offset):
        self.path, self.off = path, offset
        self.size = os.path.getsize(path)

    def take(self, name, nbytes):
        start = self.off
        self.off += nbytes
        if self.off > self.size:
            raise ExportError(f"{self.path} is truncated: tensor {name} needs bytes "
                              f"[{start}, {self.off}), the file has {self.size}")
        return start

    def check_end(self):
        """The tensors must end where the file does: extra bytes mean the header does
        not describe this file."""
        if self.off != self.size:
            raise ExportError(f"{self.path} has {self.size - self.off} bytes after the last "
                              f"tensor: the header does not describe this file")


def _mm(path, dtype, offset, shape):
    n = int(np.prod(shape))
    if n == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape))


def _check_layer_count(n_layers, n_tensors, where, key):
    """Every layer has several tensors: a count beyond the tensors there are is bad input
    (and would make the per-layer name tables huge)."""
    if n_layers > n_tensors:
        raise ExportError(f"{where}: field {key} = {n_layers}, but the weights hold only "
                          f"{n_tensors} tensors")
