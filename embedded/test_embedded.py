#!/usr/bin/python3
"""test_embedded.py -- the engine on bare-metal Cortex-M (QEMU mps2-an386,
mps3-an547) and on aarch64 Linux (qemu-aarch64), against the x86 host.

Contract: run from the repo root (embedded/embedded.mk's embedded-test and
embedded-figures do). Builds every image with `make -f embedded/embedded.mk`,
runs it under QEMU with a timeout, and prints one line per check, "ok NAME" or
"FAIL NAME: detail", then "N passed, N failed"; exit status 1 if any failed.
Needs the host's ./run and ./run-portable (the top Makefile's `all portable`).
Each board also runs tests/test_kernels.c (embedded/test_kernels_board.c): its own
kernels in engine/mcu.h against their scalar twins on the tests' awkward shapes.
Model files come from $LLM_MODELS (default ../shared/models); derived files
(the q8_0 export) go under build/embedded/, never into the repository.

  embedded/test_embedded.py              the checks
  embedded/test_embedded.py --figures    flash, RAM, stack and guest instructions
                                         per token, as a markdown snippet on stdout
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("LLM_MODELS") or os.path.join("..", "shared", "models")
CKPT = os.path.join(MODELS, "stories260K.bin")
TOK = os.path.join(MODELS, "tok512.bin")
GREEDY = os.path.join(MODELS, "stories260K.greedy200.txt")
SEEDED = os.path.join(MODELS, "stories260K.t1-p0.9-s133742.txt")
Q8 = os.path.join("build", "embedded", "models", "stories260K-q8_0.llmw")
Q4 = os.path.join("build", "embedded", "models", "stories260K-q4_0.llmw")
# stories260K as a GGUF of Q5_0 blocks (ffn_down's 172 columns F16, as llama.cpp
# falls back), by the tests' GGUF writer: the boards run the twin of a newer type
Q5 = os.path.join("build", "embedded", "models", "stories260K-q5_0.gguf")
# a random Qwen-like LLMW version 2 file (q/k/v biases, q/k norms, heads of 24
# against dim 64) on tok512's vocabulary: the boards read the new tensors in place
QWEN = os.path.join("build", "embedded", "models", "qwen-like-q8_0.llmw")
QWEN_ARGS = ["random", "--dim", "64", "--hidden-dim", "172", "--layers", "2", "--heads", "4", "--kv-heads", "2",
             "--head-size", "24", "--vocab", "512", "--seq-len", "256", "--qkv-bias", "--qk-norm", "--unshared",
             "--dtype", "q8_0", "--seed", "3"]
# small random GGUF files of the types with NEON tiles of their own beyond
# q8_0/q4_0/q4_K/q6_K (tests/gguf_writer.py's random blocks, tok512's
# vocabulary; dim 256, hidden 512: every row whole Q5_K superblocks), which
# aarch64 must read to the host's text
A64_GGUF = ("Q5_0", "Q5_1", "Q5_K", "IQ4_NL")
A64_SHAPE = dict(dim=256, hidden_dim=512, n_layers=2, n_heads=4, n_kv_heads=4, vocab_size=512, seq_len=128,
                 shared=True)
MK = ["make", "--no-print-directory", "-f", os.path.join("embedded", "embedded.mk")]
BOARDS = ["an386", "an547"]
QEMU = {
    "an386": ["qemu-system-arm", "-M", "mps2-an386", "-cpu", "cortex-m4"],
    "an547": ["qemu-system-arm", "-M", "mps3-an547", "-cpu", "cortex-m55"],
}
QEMU_FLAGS = ["-nographic", "-monitor", "none", "-serial", "null",
              "-semihosting-config", "enable=on,target=native"]
TIMEOUT = 600
RAM_LIMIT = 128 * 1024          # the compact configuration's whole RAM: data + bss + arenas + stack

GREEDY200 = dict(temperature="0", steps=200)
SEED256 = dict(temperature="1.0", topp="0.9", seed=133742, steps=256)

# name: checkpoint, context, KV type, sampler and steps, prompt, stack and RAM budget, expected text
VARIANTS = {
    "f32-greedy": dict(ckpt=CKPT, ctx=256, kv="f32", **GREEDY200, golden=GREEDY),
    "f32-seeded": dict(ckpt=CKPT, ctx=256, kv="f32", **SEED256, golden=SEEDED),
    "f32-prompt": dict(ckpt=CKPT, ctx=256, kv="f32", temperature="0", steps=96, prompt="Once upon a time"),
    "compact-greedy": dict(ckpt=Q8, ctx=256, kv="q8", temperature="0", steps=256, stack=4096, budget=RAM_LIMIT),
    "compact-seeded": dict(ckpt=Q8, ctx=256, kv="q8", **SEED256, stack=4096, budget=RAM_LIMIT),
    # 4-bit weights (GGUF's q4_0 blocks) through the boards' block kernels
    "q4_0-greedy": dict(ckpt=Q4, ctx=256, kv="f32", temperature="0", steps=256),
    "q5_0-gguf-greedy": dict(ckpt=Q5, ctx=256, kv="f32", temperature="0", steps=256),
    "qwen-like-seeded": dict(ckpt=QWEN, ctx=128, kv="f32", temperature="1.0", topp="0.9", seed=7, steps=128),
}


def cfg(name, **over):
    v = dict(ckpt=CKPT, ctx=256, kv="f32", temperature="1.0", topp="0.9", topk=0, seed=42, steps=256,
             prompt="", stack=8192, budget=None, golden=None)
    v.update(VARIANTS.get(name, {}))
    v.update(over)
    v["name"] = name
    return v


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, detail="", info=""):
        """detail: why it failed; info: what it measured (shown either way)."""
        if ok:
            self.passed += 1
            print("ok %s%s" % (name, (" (%s)" % info) if info else ""), flush=True)
        else:
            detail = "; ".join(x for x in [detail, info] if x)
            self.failed += 1
            print("FAIL %s: %s" % (name, detail), flush=True)
        return ok


def run(cmd, timeout=TIMEOUT, **kw):
    try:
        return subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, "timeout", e.stdout or b"", (e.stderr or b"") +
                                           b"\n(timed out after %d s)" % timeout)


def exporter_mtime():
    """The newest change to export.py or its package (exporter/): a file it wrote before is stale."""
    folder = os.path.join(ROOT, "exporter")
    paths = [os.path.join(ROOT, "export.py")] + [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py")]
    return max(os.path.getmtime(p) for p in paths)


def tail(b, n=400):
    s = b.decode("utf-8", "replace").strip() if isinstance(b, bytes) else str(b)
    return s[-n:].replace("\n", " | ")


def make_vars(v, board, name=None):
    out = ["EMB_BOARD=" + board, "EMB_NAME=" + (name or v["name"]), "EMB_CKPT=" + v["ckpt"], "EMB_TOK=" + TOK,
           "EMB_CTX=%d" % v["ctx"], "EMB_KV=" + v["kv"], "EMB_TEMPERATURE=" + v["temperature"],
           "EMB_TOPP=" + v["topp"], "EMB_TOPK=%d" % v["topk"], "EMB_SEED=%d" % v["seed"],
           "EMB_STEPS=%d" % v["steps"], "EMB_PROMPT=" + v["prompt"], "EMB_STACK=%d" % v["stack"]]
    if v["budget"]:
        out.append("EMB_RAM_BUDGET=%d" % v["budget"])
    if v.get("opt"):
        out.append("EMB_OPT=" + v["opt"])
    return out


def build(v, board, name=None):
    """Build one image; (elf path, CompletedProcess)."""
    p = run(MK + ["embedded-elf"] + make_vars(v, board, name))
    return os.path.join("build", "embedded", name or v["name"], board, "demo.elf"), p


def qemu(board, elf, plugin=None):
    cmd = QEMU[board] + QEMU_FLAGS + ["-kernel", elf]
    if plugin:
        cmd += ["-plugin", plugin, "-d", "plugin"]
    return run(cmd)


def host_args(v):
    a = [v["ckpt"], "-z", TOK, "-t", v["temperature"], "-p", v["topp"], "-k", str(v["topk"]), "-s", str(v["seed"]),
         "-n", str(v["steps"]), "--ctx", str(v["ctx"]), "--kv", v["kv"]]
    if v["prompt"]:
        a += ["-i", v["prompt"]]
    return a


def plan_block(text):
    """The lines from 'memory plan' to 'total RAM', as run.c's --info prints them
    (less its 'tokenizer is ...' line: the firmware's tokenizer is compiled in)."""
    lines, on = [], False
    for line in text.splitlines():
        if line.startswith("memory plan"):
            on = True
        if on and not line.lstrip().startswith("tokenizer is "):
            lines.append(line)
            if line.lstrip().startswith("total RAM"):
                break
    return lines


def sections(elf):
    """Section sizes by name from arm-none-eabi-size -A."""
    p = run(["arm-none-eabi-size", "-A", elf])
    out = {}
    for line in p.stdout.decode().splitlines():
        m = re.match(r"^(\.\S+)\s+(\d+)\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def memory(elf):
    s = sections(elf)
    code = s.get(".vectors", 0) + s.get(".text", 0) + s.get(".ARM.exidx", 0) + s.get(".data", 0)
    ram = s.get(".data", 0) + s.get(".bss", 0) + s.get(".noinit", 0) + s.get(".stack", 0)
    return dict(code=code, model=s.get(".model", 0), flash=code + s.get(".model", 0), ram=ram,
                data=s.get(".data", 0), bss=s.get(".bss", 0), noinit=s.get(".noinit", 0), stack=s.get(".stack", 0))


def stack_used(stderr):
    m = re.search(rb"stack used (\d+) of (\d+) bytes", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def linked_symbols(elf):
    p = run(["arm-none-eabi-nm", elf])
    return {line.split()[-1] for line in p.stdout.decode().splitlines() if line.strip()}


# --------------------------------------------------------------------------
# Preparation
# --------------------------------------------------------------------------

def prepare(r):
    missing = [t for t in ["arm-none-eabi-gcc", "qemu-system-arm", "qemu-aarch64", "aarch64-linux-gnu-gcc"]
               if not shutil.which(t)]
    if not r.check("tools", not missing, "missing %s: run `make -f embedded/embedded.mk embedded-deps` as root"
                   % ", ".join(missing)):
        return False
    for f in [CKPT, TOK, GREEDY, SEEDED, os.path.join(ROOT, "run"), os.path.join(ROOT, "run-portable")]:
        if not os.path.exists(os.path.join(ROOT, f)):
            r.check("inputs", False, "%s is missing (models: set LLM_MODELS; binaries: make all portable)" % f)
            return False
    for path, dtype in [(Q8, "q8_0"), (Q4, "q4_0")]:
        if not os.path.exists(os.path.join(ROOT, path)) or \
                os.path.getmtime(os.path.join(ROOT, path)) < os.path.getmtime(os.path.join(ROOT, CKPT)):
            os.makedirs(os.path.dirname(os.path.join(ROOT, path)), exist_ok=True)
            p = run([sys.executable, "export.py", "--dtype", dtype, CKPT, path])
            if not r.check("export " + dtype, p.returncode == 0, tail(p.stderr)):
                return False
    if not os.path.exists(os.path.join(ROOT, Q5)) or \
            os.path.getmtime(os.path.join(ROOT, Q5)) < os.path.getmtime(os.path.join(ROOT, "tests", "gguf_writer.py")):
        p = run([sys.executable, os.path.join("tests", "gguf_writer.py"), CKPT, TOK, Q5, "q5_0"])
        if not r.check("write q5_0 GGUF", p.returncode == 0, tail(p.stderr)):
            return False
    if not os.path.exists(os.path.join(ROOT, QWEN)) or \
            os.path.getmtime(os.path.join(ROOT, QWEN)) < exporter_mtime():
        p = run([sys.executable, "export.py"] + QWEN_ARGS + [QWEN])
        if not r.check("export random qwen-like", p.returncode == 0, tail(p.stderr)):
            return False
    return True


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------

def random_gguf(type_name):
    """A64_SHAPE as a GGUF whose matrices are random blocks of type_name
    (written once, into build/embedded/models/); its path"""
    path = os.path.join("build", "embedded", "models", "random-%s.gguf" % type_name.lower())
    full = os.path.join(ROOT, path)
    writer = os.path.join(ROOT, "tests", "gguf_writer.py")
    if os.path.exists(full) and os.path.getmtime(full) >= os.path.getmtime(writer):
        return path
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import numpy as np
    import gguf_writer as gw
    s, qtype, rng = A64_SHAPE, getattr(gw, type_name), np.random.default_rng(5)
    d, h = s["dim"], s["hidden_dim"]
    tensors = [("token_embd.weight", qtype, [d, s["vocab_size"]], gw.random_blocks(qtype, s["vocab_size"], d, rng, scale=0.05))]
    for l in range(s["n_layers"]):
        for norm in ("attn_norm", "ffn_norm"):
            tensors.append(("blk.%d.%s.weight" % (l, norm), gw.F32, [d], gw.encode(gw.F32, rng.uniform(0.8, 1.2, (1, d)))))
        for m, rows, cols in [("attn_q", d, d), ("attn_k", d, d), ("attn_v", d, d), ("attn_output", d, d),
                              ("ffn_gate", h, d), ("ffn_up", h, d), ("ffn_down", d, h)]:
            tensors.append(("blk.%d.%s.weight" % (l, m), qtype, [cols, rows], gw.random_blocks(qtype, rows, cols, rng, scale=0.05)))
    tensors.append(("output_norm.weight", gw.F32, [d], gw.encode(gw.F32, rng.uniform(0.8, 1.2, (1, d)))))
    vocab = gw.llama_vocab_kvs(*gw.read_tokenizer_bin(os.path.join(ROOT, TOK), s["vocab_size"]))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    gw.write(full + ".tmp", gw.llama_kvs(s) + vocab, tensors)
    os.replace(full + ".tmp", full)
    return path


def check_board(r, board, name):
    v = cfg(name)
    tag = "%s %s" % (board, name)
    elf, p = build(v, board)
    if not r.check(tag + " build", p.returncode == 0, tail(p.stderr + p.stdout)):
        return
    q = qemu(board, elf)
    if not r.check(tag + " exit status", q.returncode == 0, "status %s: %s" % (q.returncode, tail(q.stderr))):
        return
    if v["golden"]:
        want, what = open(os.path.join(ROOT, v["golden"]), "rb").read(), os.path.basename(v["golden"])
    else:
        h = run(["./run"] + host_args(v))
        want, what = h.stdout, "host ./run"
    same = q.stdout == want
    detail = "" if same else "differs from %s at byte %d: device %r, expected %r" % (
        what, first_diff(q.stdout, want), q.stdout[:first_diff(q.stdout, want) + 40][-60:],
        want[:first_diff(q.stdout, want) + 40][-60:])
    if not r.check(tag + " text == " + what, same, detail, "%d bytes" % len(want)) and not v["golden"]:
        hp = run(["./run-portable"] + host_args(v))
        print("  note: host ./run-portable (scalar kernels) %s the device; host ./run %s ./run-portable" %
              ("agrees with" if hp.stdout == q.stdout else "also differs from",
               "agrees with" if hp.stdout == want else "differs from"), flush=True)
    # the boards read every weight in place: the host's plan without repacking
    info = run(["./run"] + host_args(v) + ["--info", "--repack", "off"])
    host_plan, dev_plan = plan_block(info.stdout.decode()), plan_block(q.stderr.decode())
    r.check(tag + " plan == ./run --info --repack off", host_plan and host_plan == dev_plan,
            "device:\n    %s\n  host:\n    %s" % ("\n    ".join(dev_plan), "\n    ".join(host_plan))
            if host_plan != dev_plan else "")
    used, size = stack_used(q.stderr)
    mem = memory(elf)
    r.check(tag + " stack high-water", used is not None and used < size, "no stack report" if used is None else "",
            "%s of %s bytes" % (used, size))
    if v["budget"]:
        r.check(tag + " RAM <= %d" % v["budget"], mem["ram"] <= v["budget"], "",
                "data %d + bss %d + arenas %d + stack %d = %d bytes" % (
                    mem["data"], mem["bss"], mem["noinit"], mem["stack"], mem["ram"]))
    heap = {"malloc", "_malloc_r", "_sbrk", "_sbrk_r"} & linked_symbols(elf)
    r.check(tag + " no heap linked", not heap, "links " + ", ".join(sorted(heap)))


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_budget_enforced(r):
    """Too small a RAM budget or stack must fail loudly, never lock up."""
    v = cfg("compact-greedy", budget=64 * 1024)
    _, p = build(v, "an386", name="budget-too-small")
    err = (p.stderr + p.stdout).decode()
    r.check("an386 RAM budget enforced at link time", p.returncode != 0 and "RAM budget exceeded" in err,
            tail(p.stderr, 200))
    v = cfg("compact-greedy", stack=1024)
    elf, p = build(v, "an386", name="stack-too-small")
    if r.check("an386 stack-too-small build", p.returncode == 0, tail(p.stderr)):
        q = qemu("an386", elf)
        r.check("an386 stack overflow caught", q.returncode == 70 and b"stack overflow" in q.stderr,
                "status %s: %s" % (q.returncode, tail(q.stderr, 200)))
    elf, p = build(v, "an547", name="stack-too-small")
    if r.check("an547 stack-too-small build", p.returncode == 0, tail(p.stderr)):
        q = qemu("an547", elf)
        r.check("an547 stack overflow caught", q.returncode == 70 and b"stack overflow" in q.stderr,
                "status %s: %s" % (q.returncode, tail(q.stderr, 200)))


# the path llm_simd_name() names on each board: its kernels in mcu.h
SIMD_PATH = {"an386": "scalar+dsp", "an547": "helium"}


def check_board_kernels(r, board):
    """tests/test_kernels.c on the board: its own kernels against their twins."""
    elf = os.path.join("build", "embedded", "test_kernels", board, "test_kernels.elf")
    p = run(MK + [elf, "EMB_BOARD=" + board])
    if not r.check("%s kernel tests build" % board, p.returncode == 0, tail(p.stderr + p.stdout)):
        return
    q = qemu(board, elf)
    out = q.stdout.decode()
    summary = [l for l in out.splitlines() if l.endswith(" failed") and " passed, " in l]
    fails = [l for l in out.splitlines() if l.startswith("FAIL")]
    r.check("%s kernel tests (%s path)" % (board, SIMD_PATH[board]),
            q.returncode == 0 and "simd path: %s\n" % SIMD_PATH[board] in out and summary
            and summary[-1].split()[2] == "0", "; ".join(fails[:3]) or (summary[-1] if summary else tail(q.stderr)),
            summary[-1] if summary else "")


def check_aarch64(r):
    p = run(MK + ["embedded-aarch64"])
    if not r.check("aarch64 build", p.returncode == 0, tail(p.stderr)):
        return
    # every kernel against its scalar twin, on NEON, and again with i8mm (smmla)
    for binary, label in [("test_kernels-aarch64", "NEON path"), ("test_kernels-aarch64-i8mm", "NEON path, i8mm")]:
        q = run(["qemu-aarch64", os.path.join("build", "embedded", binary), MODELS])
        out = q.stdout.decode()
        summary = [l for l in out.splitlines() if l.endswith(" failed") and " passed, " in l]
        r.check("aarch64 kernel tests (%s)" % label, q.returncode == 0 and "simd path: neon" in out and summary
                and summary[-1].split()[2] == "0", (summary[-1] if summary else tail(q.stderr)),
                summary[-1] if summary else "")
    for binary, extra in [("run-aarch64", []), ("run-aarch64-omp", ["--threads", "2"])]:
        exe = os.path.join("build", "embedded", binary)
        for name in ["f32-greedy", "f32-seeded"]:
            v = cfg(name, ctx=512)
            q = run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", exe] + host_args(v) + extra)
            want = open(os.path.join(ROOT, v["golden"]), "rb").read()
            r.check("aarch64 %s %s text == %s" % (binary, name, os.path.basename(v["golden"])),
                    q.returncode == 0 and q.stdout == want,
                    "status %s, %s" % (q.returncode, tail(q.stderr)) if q.stdout != want else "")
        for name in ["compact-greedy", "compact-seeded"]:
            v = cfg(name)
            q = run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", exe] + host_args(v) + extra)
            h = run(["./run"] + host_args(v))
            r.check("aarch64 %s %s text == host ./run" % (binary, name),
                    q.returncode == 0 and q.stdout == h.stdout, "differs at byte %d" % first_diff(q.stdout, h.stdout))
        # the NEON tiles of the newer GGUF types: a prompt (prefill's tiles) then sampled tokens (decode's)
        for type_name in A64_GGUF:
            args = [random_gguf(type_name), "-i", "Once upon a time", "-t", "1.0", "-s", "11", "-n", "48"] + extra
            q = run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", exe] + args)
            h = run(["./run"] + args)
            r.check("aarch64 %s GGUF %s text == host ./run" % (binary, type_name),
                    q.returncode == 0 and h.returncode == 0 and q.stdout == h.stdout and len(h.stdout) > 16,
                    "status %s/%s, differs at byte %d" % (q.returncode, h.returncode, first_diff(q.stdout, h.stdout)))


def main_checks():
    r = Report()
    if prepare(r):
        for name in VARIANTS:
            for board in BOARDS:
                check_board(r, board, name)
        check_budget_enforced(r)
        for board in BOARDS:
            check_board_kernels(r, board)
        check_aarch64(r)
    print("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed else 0


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------

def insns(board, elf, plugin):
    q = qemu(board, elf, plugin)
    m = re.search(rb"insns: (\d+)", q.stderr)
    if q.returncode != 0 or not m:
        raise RuntimeError("%s %s: status %s %s" % (board, elf, q.returncode, tail(q.stderr)))
    return int(m.group(1)), q


def figures():
    r = Report()
    if not prepare(r):
        return 1
    p = run(MK + ["build/embedded/libinsncount.so"])
    if p.returncode != 0:
        print("cannot build the QEMU plugin: " + tail(p.stderr))
        return 1
    plugin = os.path.join("build", "embedded", "libinsncount.so")
    rows = []
    configs = [
        ("f32 weights, f32 KV, context 256", cfg("f32-greedy"), "-O2", BOARDS),
        ("f32 weights, f32 KV, context 100", cfg("f32-greedy", ctx=100, steps=100), "-O2", BOARDS),
        ("q8_0 weights, q8 KV, context 256", cfg("compact-greedy"), "-O2", BOARDS),
        # each weight type with the same f32 KV cache and 256 steps
        ("f32 weights, f32 KV, context 256", cfg("f32-greedy", steps=256), "-O2", BOARDS),
        ("q8_0 weights, f32 KV, context 256", cfg("q4_0-greedy", ckpt=Q8), "-O2", BOARDS),
        ("q4_0 weights, f32 KV, context 256", cfg("q4_0-greedy"), "-O2", BOARDS),
        ("f32 weights, f32 KV, context 256", cfg("f32-greedy"), "-O3", ["an547"]),
        ("q8_0 weights, q8 KV, context 256", cfg("compact-greedy"), "-O3", ["an547"]),
    ]
    for label, v, opt, boards in configs:
        for board in boards:
            steps = v["steps"]
            key = "%s-%s-%d%s" % (v["kv"], os.path.basename(v["ckpt"]), v["ctx"], opt)
            elf, p = build(dict(v, opt=opt), board, name="fig-" + key)
            elf1, p1 = build(dict(v, opt=opt, steps=1), board, name="fig1-" + key)
            if p.returncode or p1.returncode:
                print("build failed: " + tail(p.stderr + p1.stderr))
                return 1
            n, q = insns(board, elf, plugin)
            n1, _ = insns(board, elf1, plugin)
            used, size = stack_used(q.stderr)
            rows.append((label, board, opt, memory(elf), used, (n - n1) / (steps - 1), steps))
    names = {"an386": "mps2-an386 (Cortex-M4F)", "an547": "mps3-an547 (Cortex-M55)"}
    out = ["| configuration | board, build | code + rodata | checkpoint + tokenizer (flash) | RAM: data + bss "
           "| arenas | stack touched / reserved | RAM total | guest instructions per token (steps) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, board, opt, m, used, per_tok, steps in rows:
        out.append("| %s | %s, %s | %s | %s | %s | %s | %s / %s | %s (%.1f KiB) | %.2f M (%d) |" % (
            label, names[board], opt, fmt(m["code"]), fmt(m["model"]), fmt(m["data"] + m["bss"]), fmt(m["noinit"]),
            fmt(used), fmt(m["stack"]), fmt(m["ram"]), m["ram"] / 1024.0, per_tok / 1e6, steps))
    print("\n".join(out))
    print()
    print("Bytes from `arm-none-eabi-size -A`: code + rodata = .vectors + .text + the load image of .data; "
          "arenas = the engine's state (`llm_state_size`) + the tokenizer's arena + the prompt's encode scratch + "
          "the sampler's candidates, all static (`.noinit`); RAM total = data + bss + arenas + the reserved stack. "
          "The stack is painted at reset and the deepest word written is read after the run. Instructions per "
          "token: (count for N greedy steps - count for 1 step) / (N - 1), from the QEMU TCG plugin built from "
          "shared/tools/qemu-insncount.c: decode from an empty prompt, averaged over positions 1..N-1, argmax "
          "included.")
    return 0


def fmt(n):
    return "{:,}".format(n) if n is not None else "?"


if __name__ == "__main__":
    os.chdir(ROOT)
    if "--figures" in sys.argv[1:]:
        sys.exit(figures())
    sys.exit(main_checks())
