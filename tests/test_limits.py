"""Resources bounded before anything is allocated, and inputs that used to fail.

Regression tests for issue 14's findings 3-6:
- a prompt or eval text with invalid UTF-8 encodes (each bad byte is U+FFFD,
  three byte-fallback ids), as sentencepiece does;
- --info plans without allocating: a small file with a 2^20 context costs
  megabytes, not the gigabytes its KV cache would take;
- a state above --max-memory is refused before allocation, naming the bytes
  and the --ctx that fits, and that --ctx runs;
- a large file with a bad header is refused before its weights are read;
- non-finite header fields are refused.
"""
import os
import struct
import subprocess
import sys

import sentencepiece as spm

from common import ROOT, model, run, scratch

PYTHON = "/usr/bin/python3"


def export_random(name, *args):
    out = scratch(name)
    subprocess.run([PYTHON, os.path.join(ROOT, "export.py"), "random", *map(str, args), out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def peak_rss_kib(args):
    """Run RUN with args in a fresh Python whose only child it is; returns
    (returncode, stderr, the child's peak RSS in KiB)."""
    from common import RUN
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
             "sys.stdout.write('%d %d\\n' % (p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
             "sys.stdout.write(p.stderr.decode('utf-8', 'replace'))\n")
    p = subprocess.run([PYTHON, "-c", probe, RUN] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=300)
    first, _, err = p.stdout.partition("\n")
    rc, rss = map(int, first.split())
    return rc, err, rss


def one_error_line(err):
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), f"want one error line, got {err!r}"
    return lines[0]


def test_invalid_utf8_prompt_encodes_like_sentencepiece():
    sp = spm.SentencePieceProcessor(model_file=model("tokenizer.model"))
    for raw in [b"\xff\xfe", b"a\xffb", b"\xc3", b"\xed\xa0\x80x", b"\xf4\x90\x80\x80" * 50]:
        text = raw.decode("utf-8", "replace")   # sentencepiece sees U+FFFD where the engine sees the bytes
        want = [1] + sp.encode(text)
        rc, out, err = run([model("stories260K.bin"), "-m", "tokenize", "-z", model("tokenizer.bin"), "-i", os.fsdecode(raw)])
        assert rc == 0, err
        got = [int(t) for t in out.split()]
        assert got == want, f"{raw!r}: engine {got} sentencepiece {want}"


def test_invalid_utf8_generate_and_eval():
    rc, out, err = run([model("stories260K.bin"), "-z", model("tok512.bin"), "-t", "0", "-n", "20",
                        "-i", os.fsdecode(b"\xff\xfe\xfd Once")])
    assert rc == 0, err
    path = scratch("bad_utf8.txt")
    with open(path, "wb") as f:
        f.write(b"Once upon a time \xff\xfe there was a cat.\n" * 20)
    rc, out, err = run([model("stories260K.bin"), "-z", model("tok512.bin"), "-m", "eval", "-f", path, "--ctx", "64"])
    assert rc == 0, err
    assert out.startswith(b"tokens "), out


def big_context_model():
    # 8 layers x 2^20 positions x 64 kv values x 4 bytes x 2 = 4 GiB of f32 cache
    return export_random("limits_seq1m.llmw", "--dim", 64, "--hidden-dim", 96, "--layers", 8, "--heads", 4,
                         "--kv-heads", 4, "--vocab", 512, "--seq-len", 1 << 20)


def test_info_plans_without_allocating():
    path = big_context_model()
    rc, err, rss = peak_rss_kib([path, "--info"])
    assert rc == 0, err
    assert rss < 200 * 1024, f"--info reached {rss} KiB of RSS"
    rc, out, err = run([path, "--info"])
    kv = 8 * (1 << 20) * 64 * 4 * 2
    assert f"kv cache {kv} bytes" in " ".join(out.decode().split()), out.decode()


def test_memory_limit_names_bytes_and_a_context_that_fits():
    path = big_context_model()
    rc, out, err = run([path, "-z", model("tok512.bin"), "-n", "8", "-i", "Hi", "--max-memory", "64M"])
    assert rc == 1, err
    line = one_error_line(err)
    assert "above the memory limit of 67108864 bytes" in line, line
    need = int(line.split("needs ")[1].split(" ")[0])
    assert need > 4 * (1 << 30), line     # the 4 GiB cache and more
    fits = int(line.split("--ctx ")[1].split(" ")[0])
    assert fits > 8, line
    # that context runs, and one more position does not
    rc, out, err = run([path, "-z", model("tok512.bin"), "-n", "8", "-i", "Hi", "--max-memory", "64M",
                        "--ctx", fits, "-t", "0"])
    assert rc == 0, err
    rc, out, err = run([path, "-z", model("tok512.bin"), "-n", "8", "-i", "Hi", "--max-memory", "64M",
                        "--ctx", fits + 1])
    assert rc == 1 and "above the memory limit" in one_error_line(err), err


def test_max_memory_flag_is_checked():
    for bad in ["0", "-5", "12X", "", "99999999999999999999T"]:
        rc, out, err = run([model("stories260K.bin"), "--info", "--max-memory", bad])
        assert rc == 2 and "--max-memory" in one_error_line(err), (bad, err)


def test_bad_header_refused_before_the_weights_are_read():
    # a 4 GiB sparse file whose LLMW header is corrupt: refused with the
    # cost of a page or two, not 4 GB of reads
    path = scratch("limits_bad_header.llmw")
    with open(path, "wb") as f:
        f.write(b"LLMW" + struct.pack("<III", 1, 256, 63))   # alignment field 63: corrupt
        f.truncate(4 << 30)
    try:
        rc, err, rss = peak_rss_kib([path, "-z", model("tok512.bin"), "-n", "4"])
        line = one_error_line(err)
        # a 32-bit host cannot map 4 GiB at all, and says so
        assert rc == 1 and ("corrupt header" in line or "more than this machine can map" in line), err
        assert rss < 200 * 1024, f"refusing the file reached {rss} KiB of RSS"
    finally:
        os.remove(path)


def llmw_with(path, **fields):
    """A copy of a random LLMW file with header fields patched (offsets of the v1 header)."""
    offsets = {"rope_theta": (64, "<f"), "norm_eps": (60, "<f"), "seq_len": (40, "<i")}
    src = export_random("limits_base.llmw", "--dim", 16, "--hidden-dim", 32, "--layers", 1, "--heads", 2,
                        "--kv-heads", 2, "--vocab", 512, "--seq-len", 32)
    data = bytearray(open(src, "rb").read())
    for k, v in fields.items():
        off, fmt = offsets[k]
        struct.pack_into(fmt, data, off, v)
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_non_finite_header_fields_refused():
    for field, value in [("rope_theta", float("inf")), ("rope_theta", float("nan")), ("norm_eps", float("nan"))]:
        path = llmw_with(scratch("limits_nonfinite.llmw"), **{field: value})
        rc, out, err = run([path, "--info"])
        assert rc == 1, (field, value, err)
        line = one_error_line(err)
        assert field.replace("_", " ") in line or field in line, line
