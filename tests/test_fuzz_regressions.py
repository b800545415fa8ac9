"""The fuzz harnesses (tests/fuzz/) without libFuzzer: each harness body built
with tests/fuzz/driver.c in the asan build (build/fuzz/fuzz_NAME-asan, made by
`make test-bins`, no clang needed) runs every saved crash input under
tests/fuzz/regressions/NAME/ and every seed make_seeds.py writes, and must exit
cleanly. The seeds also pin what the harness saw: each checkpoint loads in the
format and weight type its name says and runs batched == one by one (and is
refused one byte short or long), the full tokenizer decodes every text back,
and the chat text has llama2.c's length."""
import os
import shutil
import subprocess

import common

BUILD_INDEPENDENT = True   # always the asan driver
HARNESSES = ("checkpoint", "tokenizer", "chat", "gguf", "serve")
FUZZ = os.path.join(common.TESTS, "fuzz")
REGRESSIONS = os.path.join(FUZZ, "regressions")
PYTHON = os.environ.get("REF_PYTHON", "/usr/bin/python3")


def driver(harness):
    path = os.path.join(common.BUILD, "fuzz", f"fuzz_{harness}-asan")
    assert os.path.exists(path), f"missing {path}: run make test-bins"
    return path


def run_inputs(harness, files):
    """Run the files through the harness; {file: outcome line}. Fails on any crash."""
    p = subprocess.run([driver(harness)] + files, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0, f"{harness} exit status {p.returncode}:\n{err[-4000:]}"
    out = {}
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        name, _, outcome = line.partition(": ")
        out[name] = outcome
    assert sorted(out) == sorted(files), f"{harness}: ran {len(out)} of {len(files)} inputs"
    return out


_seeds = []


def seeds(harness):
    """The seed files for a harness, written once per run by make_seeds.py."""
    if not _seeds:
        out = common.scratch("fuzz_test_seeds")
        shutil.rmtree(out, ignore_errors=True)
        p = subprocess.run([PYTHON, os.path.join(FUZZ, "make_seeds.py"), out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        assert p.returncode == 0, p.stderr.decode()[-3000:]
        _seeds.append(out)
    folder = os.path.join(_seeds[0], harness)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder))


def test_regressions():
    """Every saved crash input runs clean through its harness."""
    if not os.path.isdir(REGRESSIONS):
        return
    for harness in sorted(os.listdir(REGRESSIONS)):
        folder = os.path.join(REGRESSIONS, harness)
        def known(harness=harness):
            assert harness in HARNESSES, f"tests/fuzz/regressions/{harness}: no such harness {HARNESSES}"
        yield f"{harness}-folder", known
        for name in sorted(os.listdir(folder)) if harness in HARNESSES else []:
            yield f"{harness}/{name}", lambda h=harness, f=os.path.join(folder, name): run_inputs(h, [f])


def test_checkpoint_seeds():
    files = seeds("checkpoint")
    out = run_inputs("checkpoint", files)
    kinds = set()
    for f, outcome in out.items():
        fmt, rest = os.path.basename(f).split("_", 1)
        dtype = "q8_0" if rest.startswith("q8_0") else rest.split("_")[0]
        assert outcome.startswith(f"loaded {fmt} {dtype},") and outcome.endswith("batched == one by one"), (f, outcome)
        kinds.add((fmt, dtype))
    assert {f for f, _ in kinds} == {"legacy", "LLMW", "ak42v1", "ak42v2"}, kinds
    assert {d for f, d in kinds if f == "LLMW"} == {"f32", "f16", "q8_0"}, kinds


def test_checkpoint_seeds_resized_refused():
    """One byte short or one byte over: every format refuses the file and says why."""
    folder = common.scratch("fuzz_test_resized")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    resized = []
    for f in seeds("checkpoint"):
        if "_shape_" in f:   # the harness writes those files itself
            continue
        data = open(f, "rb").read()
        for tag, variant in (("short", data[:-1]), ("long", data + b"\0")):
            path = os.path.join(folder, f"{tag}_{os.path.basename(f)}")
            open(path, "wb").write(variant)
            resized.append(path)
    for f, outcome in run_inputs("checkpoint", resized).items():
        assert outcome.startswith("refused: ") and len(outcome) > len("refused: ") + 10, (f, outcome)


def test_gguf_seeds():
    """Every GGUF seed loads and runs; cut anywhere in its header, it is refused with a reason."""
    files = seeds("gguf")
    for f, outcome in run_inputs("gguf", files).items():
        assert outcome.startswith("loaded gguf ") and outcome.endswith("batched == one by one"), (f, outcome)
    folder = common.scratch("fuzz_test_gguf_cut")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    cut = []
    for f in files:
        data = open(f, "rb").read()
        for end in (3, 23, 40, 100, len(data) // 2):   # (the last tensor's padding may go)
            path = os.path.join(folder, f"{end}_{os.path.basename(f)}")
            open(path, "wb").write(data[:end])
            cut.append(path)
    for f, outcome in run_inputs("gguf", cut).items():
        assert outcome.startswith("refused: ") and len(outcome) > 20, (f, outcome)


def test_tokenizer_seeds():
    out = run_inputs("tokenizer", seeds("tokenizer"))
    for f, outcome in out.items():
        name = os.path.basename(f)
        assert outcome.startswith("loaded "), (f, outcome)
        if name.startswith(("full_", "ltok_spm_bpe_")):   # every byte has a token: the ids give the text back
            assert outcome.endswith("decoded back to the text"), (f, outcome)
        if name.startswith("bare_") and not name.endswith("_empty.in"):
            assert outcome.endswith("<unk> stood in for a byte"), (f, outcome)


def test_chat_seeds():
    out = run_inputs("chat", seeds("chat"))
    for f, outcome in out.items():
        data = open(f, "rb").read()
        system, nul, user = data.partition(b"\0")
        if not nul:
            system, user = b"", data
        user = user.split(b"\0")[0]
        want = (b"[INST] <<SYS>>\n" + system + b"\n<</SYS>>\n\n" + user + b" [/INST]") if system \
            else b"[INST] " + user + b" [/INST]"
        assert outcome.startswith(f"rendered {len(want)} bytes"), (f, outcome, len(want))


def test_serve_seeds():
    """The server's parser and JSON reader on the seeds: each request's head
    and body read as written (the writer's text parses to itself), the
    refused ones refused with their status."""
    out = run_inputs("serve", seeds("serve"))
    want = {
        "health.in": "GET /health, body 0; JSON refused",
        "models_key.in": "GET /v1/models, body 0; JSON refused",
        "chat.in": "POST /v1/chat/completions, body ",
        "completion.in": "POST /v1/completions, body ",
        "pipelined.in": "GET /health, body 0; JSON refused",
        "chunked.in": "refused 501: ",
        "bare_lf.in": "refused 400: lines must end in CRLF",
        "json_only.in": "JSON ok, 10 values",
        "json_bad.in": "JSON refused",
    }
    for f, outcome in out.items():
        name = os.path.basename(f)
        assert outcome.startswith(want[name]), (name, outcome)
        if name in ("chat.in", "completion.in"):
            assert outcome.endswith("values") and "JSON ok" in outcome, (name, outcome)
