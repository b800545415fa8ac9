"""Checkpoints whose sizes do not fit in 32 bits: on a 32-bit size_t (i386 here,
the Cortex-M targets on the boards) a product of header fields that wraps must
not turn into a small arena or a "matching" file size. Every build, 64-bit too,
must answer with one clean "error:" line that states the real size (or, for
--info, print the real figures): never a crash, a sanitizer report or a wrong
number. The expected sizes are computed here from the formats' definitions."""
import os
import re
import struct
import subprocess
import sys

import common
from common import run, scratch

LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
EXPORT = os.path.join(common.ROOT, "export.py")
LIMIT = 6 << 30   # address-space cap: far below the 16 GiB state, above qemu-i386's 4 GiB guest


def llama2c_bytes(kind, dim, hidden, layers, heads, kv_heads, vocab, seq_len, group=0):
    """Size of a llama2.c checkpoint with a shared classifier: kind 'legacy'
    (7 int32, f32 tensors, RoPE tables), 'ak42v1' (256-byte header, f32) or
    'ak42v2' (256-byte header, f32 norms, int8 matrices each with one f32
    scale per `group` values)."""
    hs = dim // heads
    qd, kvd = heads * hs, kv_heads * hs
    per_layer = [(qd, dim), (kvd, dim), (kvd, dim), (dim, qd), (hidden, dim), (dim, hidden), (hidden, dim)]
    norms = 2 * layers * dim + dim
    if kind == "legacy":
        floats = vocab * dim + norms + layers * sum(r * c for r, c in per_layer) + seq_len * hs
        return 28 + 4 * floats
    def matrix(r, c):
        return 4 * r * c if kind == "ak42v1" else r * c + r * c // group * 4
    return 256 + 4 * norms + matrix(vocab, dim) + layers * sum(matrix(r, c) for r, c in per_layer)


def assert_clean_error(rc, err, what):
    """One line "error: ...", a non-zero exit, no signal, no sanitizer report."""
    assert rc > 0, f"{what}: exit {rc} (a signal, or success)\n{err[-2000:]}"
    assert "Sanitizer" not in err and "runtime error" not in err and "uncaught target signal" not in err, \
        f"{what}: crash report\n{err[-2000:]}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{what}: not one error line:\n{err[-2000:]}"
    return lines[0]


def numbers(line):
    return [int(x) for x in re.findall(r"\d+", line)]


# ---- a 16 GiB KV cache: llm__align(SIZE_MAX) was 0, the arena 640 bytes --------

BIG = dict(dim=2, hidden=2, layers=1024, heads=1, kv_heads=1, vocab=4, seq_len=1 << 20)
BIG_KV = 2 * BIG["layers"] * BIG["seq_len"] * BIG["kv_heads"] * (BIG["dim"] // BIG["heads"]) * 4  # f32 keys + values


def big_checkpoint():
    path = scratch("32bit_big_kv.bin")
    if not os.path.exists(path):
        args = [f"--{k.replace('_', '-')}={v}" for k, v in BIG.items()]
        p = subprocess.run([sys.executable, EXPORT, "random"] + args + [path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        assert p.returncode == 0, p.stderr.decode()
    return path


def tiny_tokenizer():
    """llama2.c tokenizer.bin with the 4 tokens the big checkpoint has."""
    path = scratch("32bit_tok4.bin")
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n", b"a"]
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(map(len, pieces))))
        for piece in pieces:
            f.write(struct.pack("<fi", 0.0, len(piece)) + piece)
    return path


def test_huge_kv_cache_info():
    """--info states the 16 GiB KV cache as it is, or refuses cleanly."""
    rc, out, err = run([big_checkpoint(), "--info"], memory_limit=LIMIT, timeout=60)
    if rc != 0:
        line = assert_clean_error(rc, err, "--info")
        assert any(n >= BIG_KV for n in numbers(line)), f"error does not state the size: {line}"
        return
    text = out.decode()
    kv = re.search(r"kv cache +(\d+) bytes", text)
    total = re.search(r"total RAM +(\d+) bytes", text)
    assert kv and total, text
    assert int(kv.group(1)) == BIG_KV, f"kv cache {kv.group(1)} bytes, really {BIG_KV}\n{text}"
    assert int(total.group(1)) > BIG_KV, f"total RAM {total.group(1)} bytes, below the kv cache's {BIG_KV}\n{text}"


def test_huge_kv_cache_generate():
    """Generating needs the whole state: more than the memory limit (and a 32-bit
    address space) holds, so one error line stating its size."""
    rc, out, err = run([big_checkpoint(), "-z", tiny_tokenizer(), "-n", "4", "-t", "0", "-i", "a"],
                       memory_limit=LIMIT, timeout=60)
    line = assert_clean_error(rc, err, "generate")
    assert any(n >= BIG_KV for n in numbers(line)), f"error does not state the size: {line}"


# ---- headers whose tensor sizes wrap to a small "matching" file on 32 bits -----

WIDE = dict(dim=65536, hidden=65536, layers=1, heads=256, kv_heads=256, vocab=65536, seq_len=1)


def header_file(name, header, size):
    path = scratch(name)
    with open(path, "wb") as f:
        f.write(header + bytes(size - len(header)))
    return path


def assert_size_mismatch(rc, err, what, file_size, true_size):
    line = assert_clean_error(rc, err, what)
    assert file_size in numbers(line), f"{what}: error does not name the file's {file_size} bytes: {line}"
    implied = re.search(r"implies (\d+)", line)
    assert not implied or int(implied.group(1)) == true_size, \
        f"{what}: header implies {true_size} bytes, the error says {implied.group(1)}: {line}"


def wide_legacy():
    """V*D, L*qd*D and L*H*D are each 2^32: 0 in 32 bits, leaving 787,484 bytes."""
    fields = [WIDE[k] for k in ("dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq_len")]
    size = 787484
    assert llama2c_bytes("legacy", *fields) % (1 << 32) == size
    return header_file("32bit_wide_legacy.bin", struct.pack("<7i", *fields), size), size, llama2c_bytes("legacy", *fields)


def test_wrapping_legacy_refused():
    path, size, true_size = wide_legacy()
    rc, out, err = run([path, "--info"], memory_limit=LIMIT, timeout=60)
    assert_size_mismatch(rc, err, "run --info", size, true_size)
    assert os.path.exists(LOGITS), f"missing {LOGITS} (build it, or set LOGITS)"
    rc, out, err = run([path, "--tokens", "1", "--out", scratch("32bit_wide.logits")], binary=LOGITS,
                       memory_limit=LIMIT, timeout=60)
    assert_size_mismatch(rc, err, "logits (forward)", size, true_size)


def test_wrapping_ak42_refused():
    """ak42 v1 (f32) and v2 (int8, groups of 32): sizes that are multiples of
    2^32 beyond the file's 786,688 bytes."""
    fields = [WIDE[k] for k in ("dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq_len")]
    for version, kind, group in ((1, "ak42v1", 0), (2, "ak42v2", 32)):
        def one(version=version, kind=kind, group=group):
            true_size = llama2c_bytes(kind, *fields, group=group)
            size = true_size % (1 << 32)
            assert size == 786688, size
            header = struct.pack("<Ii7iB", 0x616b3432, version, *fields, 1)
            header += struct.pack("<i", group) if version == 2 else b""
            path = header_file(f"32bit_wide_ak42_v{version}.bin", header, size)
            rc, out, err = run([path, "--info"], memory_limit=LIMIT, timeout=60)
            assert_size_mismatch(rc, err, f"ak42 v{version} --info", size, true_size)
        yield kind, one
