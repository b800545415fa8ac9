"""What the tests of a Hugging Face family against its float64 reference share
(test_olmo2.py, test_gemma3.py): a random folder exported once to an f32 LLMW
(and to GGUF), the text they score and its ids, and the engine's eval next to
the same windows scored by the reference."""
import os
import subprocess

import common
from common import model, run, scratch

REF_PYTHON = os.environ.get("REF_PYTHON", "/usr/bin/python3")
EXPORT = os.path.join(common.ROOT, "export.py")
TOK = model("tok512.bin")
STORIES = os.path.join(common.TESTS, "data", "stories.txt")


def exported_folder(name, write_folder):
    """(folder, LLMW path): write_folder(folder) then export.py, made once (workers share them)."""
    folder, path = scratch(name + "_hf"), scratch(name + ".llmw")
    with common.locked(path):
        if not os.path.exists(path):
            write_folder(folder)
            p = subprocess.run([REF_PYTHON, EXPORT, folder, path + ".tmp"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=300)
            assert p.returncode == 0, p.stderr.decode()
            os.replace(path + ".tmp", path)
    return folder, path


def exported_gguf(name, folder, dtype):
    """export.py FOLDER NAME_DTYPE.gguf --format gguf --dtype DTYPE, made once."""
    path = scratch(f"{name}_{dtype}.gguf")
    with common.locked(path):
        if not os.path.exists(path):
            p = subprocess.run([REF_PYTHON, EXPORT, folder, path + ".tmp", "--format", "gguf", "--dtype", dtype],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
            assert p.returncode == 0, p.stderr.decode()
            os.replace(path + ".tmp", path)
    return path


def text_and_tokens(name):
    """(path of the text, its ids with tok512): the first 400 characters of stories.txt."""
    path = scratch(name + "_text.txt")
    text = open(STORIES).read()[:400]
    with open(path, "w") as f:
        f.write(text)
    rc, out, err = run(["-m", "tokenize", "-z", TOK, "-i", text])
    assert rc == 0, err
    return path, [int(t) for t in out.split()]


def windowed_nll(window_nll, tokens, ctx):
    """The engine's eval: windows of ctx tokens overlapping by one, every token after
    the first scored once; window_nll(window) is a window's mean NLL. (mean, count)."""
    total, n, start = 0.0, 0, 0
    while start + 1 < len(tokens):
        win = tokens[start:start + ctx]
        total += window_nll(win) * (len(win) - 1)
        n += len(win) - 1
        start += ctx - 1
    return total / n, n


def engine_nll(path, text, ctx, extra=()):
    """(nll, tokens) from ./run PATH -m eval over text with a context of ctx."""
    rc, out, err = run([path, "-z", TOK, "-m", "eval", "-f", text, "--ctx", ctx] + list(extra))
    assert rc == 0, err
    f = out.decode().split()
    return float(f[f.index("nll") + 1]), int(f[f.index("tokens") + 1])


def gguf_cases(name, folder, llmw_path, text, want, tols, same, ctx):
    """One case per dtype of tols: the folder exported to GGUF in that dtype, its
    eval NLL within tols[dtype] of the reference's `want`, and an f32 file's
    within `same` of the LLMW file's (the test modules yield these)."""
    llmw = engine_nll(llmw_path, text, ctx)[0]
    for dtype, tol in tols.items():
        def one(dtype=dtype, tol=tol):
            got = engine_nll(exported_gguf(name, folder, dtype), text, ctx)[0]
            print(f"   gguf {dtype}: nll {got:.6f}, reference {want:.6f} ({got - want:+.2e}), llmw {llmw:.6f}")
            assert abs(got - want) <= tol, (dtype, got, want)
            if dtype == "f32":
                assert abs(got - llmw) <= same, (got, llmw)
        yield dtype, one
