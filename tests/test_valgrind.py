"""valgrind memcheck over the portable build (no OpenMP: libgomp's threads
only add noise): every mode of ./run-portable, the q8_0 and int8-cache paths,
an error exit, and the kernel test program. memcheck sees what ASan cannot:
reads of uninitialised memory. Any memcheck error, or memory definitely lost
(run.c's exits leave the rest reachable), fails the test.

Runs once, not per variant: it checks ./run-portable whichever build the
variant is about (hence BUILD_INDEPENDENT)."""
import os
import shutil
import subprocess
import sys

import common
from common import model, scratch

BUILD_INDEPENDENT = True
PORTABLE = os.path.join(common.ROOT, "run-portable")
KERNELS = os.path.join(common.ROOT, "build", "test_kernels-portable")
MEMCHECK_FAILED = 97   # valgrind's exit status when it found an error
MEMCHECK = ["--quiet", f"--error-exitcode={MEMCHECK_FAILED}", "--leak-check=full",
            "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite"]

CKPT = model("stories260K.bin")
TOK = model("tok512.bin")
PROMPT = "Once upon a time"


def memcheck(binary, args, want_rc=0, input=None, timeout=300):
    """Run binary under memcheck; assert its own exit status and a clean report.
    Returns (stdout bytes, stderr str)."""
    valgrind = shutil.which("valgrind")
    assert valgrind, "valgrind not found: apt-get install valgrind (.ci/run does)"
    assert os.path.exists(binary), f"missing {binary}: run make test-bins"
    rc, out, err = common.run(MEMCHECK + [binary] + list(args), input=input, timeout=timeout, binary=valgrind)
    report = [l for l in err.splitlines() if l.startswith("==")]
    assert rc != MEMCHECK_FAILED and not report, f"memcheck: exit {rc}\n" + "\n".join(report[:60])
    assert rc == want_rc, f"exit {rc}, want {want_rc}\n{err[-2000:]}"
    return out, err


def q8_checkpoint():
    path = scratch("valgrind_q8_0.bin")
    if not os.path.exists(path):
        p = subprocess.run([sys.executable, os.path.join(common.ROOT, "export.py"), CKPT, path, "--dtype", "q8_0"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        assert p.returncode == 0, p.stderr.decode()
    return path


def eval_text():
    """The first ~120 tokens of the stories text (valgrind runs ~50x slower)."""
    path = scratch("valgrind_eval.txt")
    with open(os.path.join(common.TESTS, "data", "stories.txt")) as f:
        text = f.read()[:500]
    with open(path, "w") as f:
        f.write(text)
    return path


def test_memcheck():
    def generate():
        out, _ = memcheck(PORTABLE, [CKPT, "-z", TOK, "-n", "20", "-s", "1", "-i", PROMPT])
        assert out.startswith(PROMPT.encode()) and len(out) > len(PROMPT) + 10, out

    def generate_q8_weights_int8_cache():   # the weights read into RAM (--mmap off)
        out, _ = memcheck(PORTABLE, [q8_checkpoint(), "-z", TOK, "-n", "20", "-t", "0", "--kv", "q8",
                                     "--ctx", "64", "--mmap", "off", "-i", PROMPT])
        assert out.startswith(PROMPT.encode()) and len(out) > len(PROMPT) + 10, out

    def chat():
        out, _ = memcheck(PORTABLE, [CKPT, "-z", TOK, "-m", "chat", "-t", "0", "-n", "60", "-y", "You are kind."],
                          input=b"Hi there\n")
        assert out.startswith(b"User: Assistant: ") and len(out) > 40, out

    def eval_():
        out, _ = memcheck(PORTABLE, [CKPT, "-z", TOK, "-m", "eval", "-f", eval_text()])
        fields = out.decode().split()
        assert fields[0] == "tokens" and int(fields[1]) > 50 and fields[4] == "ppl", out

    def tokenize():
        out, _ = memcheck(PORTABLE, ["-m", "tokenize", "-z", TOK, "-i", "Hello world, a tale"])
        ids = out.decode().split()
        assert ids[0] == "1" and len(ids) > 3, out

    def gguf_byte_level_tokenizer():   # the LTOK image built from a GGUF's gpt2 tokenizer (Qwen2-style)
        import test_gguf_tokenizer
        out, _ = memcheck(PORTABLE, [test_gguf_tokenizer.gguf("qwen2"), "-m", "chat", "-t", "0", "-n", "80"],
                          input=b"Hi there\n")
        assert out.startswith(b"User: Assistant: "), out

    def info():
        out, _ = memcheck(PORTABLE, [CKPT, "-z", TOK, "--info"])
        assert b"memory plan" in out, out

    def truncated_checkpoint():
        path = scratch("valgrind_truncated.bin")
        with open(CKPT, "rb") as f, open(path, "wb") as g:
            g.write(f.read()[:5000])
        _, err = memcheck(PORTABLE, [path, "-z", TOK, "-n", "4"], want_rc=1)
        assert err.startswith("error: "), err

    def kernels():
        out, _ = memcheck(KERNELS, [common.MODELS])
        assert out.rstrip().endswith(b" 0 failed") and b" passed" in out, out[-500:]

    for name, check in (("generate", generate), ("q8_0-kv-q8", generate_q8_weights_int8_cache), ("chat", chat),
                        ("eval", eval_), ("tokenize", tokenize), ("gguf-gpt2-tokenizer", gguf_byte_level_tokenizer),
                        ("info", info),
                        ("truncated-checkpoint", truncated_checkpoint), ("test_kernels", kernels)):
        yield name, check
