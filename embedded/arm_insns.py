#!/usr/bin/python3
"""Instructions per decode token of ./run on aarch64, per weight type: the
ARM kernels' yardstick, deterministic where timing is not (`make arm-insns`).

  /usr/bin/python3 embedded/arm_insns.py RUN_AARCH64 PLUGIN

RUN_AARCH64 is ./run built for aarch64 (build/embedded/run-aarch64, static),
PLUGIN the QEMU TCG plugin built from ../shared/tools/qemu-insncount.c. The
checkpoints are a random 15M (dim 288, 6 layers, 6 heads, hidden 768, vocab
32000, seq 256, shared classifier; `export.py random --seed 0`) in each of
LLMW's types, and the same shape as GGUF files of random blocks written by
tests/gguf_writer.py (norms near 1, the tokenizer.bin vocabulary inside), all
cached in build/arm-insns/. A K-quant needs rows of whole 256-element
superblocks; as llama-quantize does, a matrix whose rows are not (288 columns)
falls back: Q6_K's to Q8_0, Q5_K's to Q5_1, and Q3_K's, Q2_K's and
IQ4_XS's to IQ4_NL (llama.cpp's own fallbacks), Q4_K's to Q4_0 (where
llama.cpp takes Q5_0; kept, so that the row compares with its earlier
figures). So in the 15M only the FFN's down projection (768 columns) is a
K-quant (or IQ4_XS); the table says so.

Per token: (count for N greedy steps - count for 1 step) / (N - 1), decode
from an empty prompt (BOS), positions 1..N-1, argmax included; N = ARM_STEPS
(default 33). Prints a markdown table.
Environment: LLM_MODELS (tokenizer.bin; default ../shared/models), ARM_STEPS,
ARM_TYPES (a subset of the rows' names, comma-separated), QEMU (qemu-aarch64).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
MODELS = os.environ.get("LLM_MODELS") or os.path.join(ROOT, "..", "shared", "models")
CACHE = os.path.join(ROOT, "build", "arm-insns")
STEPS = int(os.environ.get("ARM_STEPS", "33"))
QEMU = os.environ.get("QEMU", "qemu-aarch64")
SHAPE = dict(dim=288, hidden_dim=768, n_layers=6, n_heads=6, n_kv_heads=6, vocab_size=32000, seq_len=256, shared=True)
LLMW = ("f32", "f16", "q8_0", "q4_0", "q4_K")
GGUF = ("Q8_0", "Q4_0", "Q4_K", "Q6_K", "Q5_0", "Q5_1", "Q5_K", "IQ4_NL", "Q4_1", "Q3_K", "Q2_K", "IQ4_XS")


def die(msg):
    print("arm_insns.py: error: " + msg, file=sys.stderr)
    sys.exit(1)


def llmw(dtype):
    path = os.path.join(CACHE, "r15-%s.llmw" % dtype)
    if not os.path.exists(path):
        s = SHAPE
        cmd = [sys.executable, os.path.join(ROOT, "export.py"), "random", "--dim", str(s["dim"]),
               "--hidden-dim", str(s["hidden_dim"]), "--layers", str(s["n_layers"]), "--heads", str(s["n_heads"]),
               "--vocab", str(s["vocab_size"]), "--seq-len", str(s["seq_len"]), "--seed", "0", "--dtype", dtype,
               path + ".tmp"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            die("export.py failed: " + r.stderr.strip())
        os.replace(path + ".tmp", path)
    return path


def gguf(name):
    """the random 15M as GGUF blocks of type name, K-quants falling back where
    a row is not whole superblocks; returns (path, note)"""
    import numpy as np
    import gguf_writer as gw
    qtype = getattr(gw, name)
    fallback = {gw.Q6_K: gw.Q8_0, gw.Q4_K: gw.Q4_0, gw.Q5_K: gw.Q5_1, gw.Q3_K: gw.IQ4_NL, gw.Q2_K: gw.IQ4_NL,
                gw.IQ4_XS: gw.IQ4_NL}.get(qtype, qtype)
    path = os.path.join(CACHE, "r15-%s.gguf" % name)
    s = SHAPE
    pick = lambda cols: qtype if cols % gw.BLOCK[qtype][0] == 0 else fallback
    d, h = s["dim"], s["hidden_dim"]
    mats = [("attn_q", d, d), ("attn_k", d, d), ("attn_v", d, d), ("attn_output", d, d),
            ("ffn_gate", h, d), ("ffn_up", h, d), ("ffn_down", d, h)]
    kinds = sorted({"%s %s" % (m, "K" if pick(c) == qtype else "fallback") for m, _, c in mats})
    note = ", ".join(k.split()[0] for k in kinds if k.endswith(" K")) if fallback != qtype else ""
    if os.path.exists(path):
        return path, note
    rng = np.random.default_rng(0)
    tensors = []
    def add_mat(tname, rows, cols):
        gt = pick(cols)
        tensors.append((tname, gt, [cols, rows], gw.random_blocks(gt, rows, cols, rng, scale=0.05)))
    def add_vec(tname, n):
        tensors.append((tname, gw.F32, [n], gw.encode(gw.F32, rng.uniform(0.8, 1.2, (1, n)))))
    add_mat("token_embd.weight", s["vocab_size"], d)
    for l in range(s["n_layers"]):
        add_vec("blk.%d.attn_norm.weight" % l, d)
        add_vec("blk.%d.ffn_norm.weight" % l, d)
        for m, rows, cols in mats:
            add_mat("blk.%d.%s.weight" % (l, m), rows, cols)
    add_vec("output_norm.weight", d)
    vocab = gw.llama_vocab_kvs(*gw.read_tokenizer_bin(os.path.join(MODELS, "tokenizer.bin"), s["vocab_size"]))
    gw.write(path + ".tmp", gw.llama_kvs(s) + vocab, tensors)
    os.replace(path + ".tmp", path)
    return path, note


def count(run, plugin, ckpt, steps):
    cmd = [QEMU, "-plugin", plugin, "-d", "plugin", run, ckpt, "-t", "0", "-n", str(steps)]
    if ckpt.endswith(".llmw"):
        cmd += ["-z", os.path.join(MODELS, "tokenizer.bin")]
    r = subprocess.run(cmd, capture_output=True)
    m = re.search(rb"insns: (\d+)", r.stderr)
    g = re.search(rb"generated: (\d+) tokens", r.stderr)
    if r.returncode != 0 or not m or not g:
        die("%s: status %d\n%s" % (" ".join(cmd), r.returncode, r.stderr.decode(errors="replace")[-800:]))
    if int(g.group(1)) != steps:
        die("%s generated %s tokens, not %d (it met BOS or EOS): per-token counts would be wrong"
            % (os.path.basename(ckpt), g.group(1).decode(), steps))
    return int(m.group(1))


def main():
    if len(sys.argv) != 3:
        die("usage: arm_insns.py RUN_AARCH64 PLUGIN")
    run, plugin = sys.argv[1], sys.argv[2]
    os.makedirs(CACHE, exist_ok=True)
    rows = [("LLMW " + t, lambda t=t: (llmw(t), "")) for t in LLMW] + \
           [("GGUF " + t, lambda t=t: gguf(t)) for t in GGUF]
    want = [x.strip() for x in os.environ.get("ARM_TYPES", "").split(",") if x.strip()]
    if want:
        unknown = [w for w in want if w not in [n for n, _ in rows]]
        if unknown:
            die("ARM_TYPES: unknown %s (choose from %s)" % (", ".join(unknown), ", ".join(n for n, _ in rows)))
        rows = [r for r in rows if r[0] in want]
    print("| weights | instructions per decode token | K-quant matrices |")
    print("| --- | --- | --- |")
    for name, make in rows:
        ckpt, note = make()
        n, n1 = count(run, plugin, ckpt, STEPS), count(run, plugin, ckpt, 1)
        print("| %s | %.2f M | %s |" % (name, (n - n1) / (STEPS - 1) / 1e6, note or "-"), flush=True)
    print()
    print("Random 15M (dim 288, 6 layers, hidden 768, vocab 32000, shared classifier), greedy, 1 thread, "
          "`%s` under %s with the instruction-count plugin: (count for %d steps - count for 1) / %d, decode "
          "from BOS. GGUF K-quant files: only the matrices named are the K type (rows of 768 = 3 superblocks); "
          "the rest, 288 columns, fall back (Q6_K to Q8_0, Q5_K to Q5_1, Q3_K/Q2_K/IQ4_XS to IQ4_NL, "
          "Q4_K to Q4_0)." % (os.path.relpath(run, ROOT), QEMU,
                                                                                STEPS, STEPS - 1))


if __name__ == "__main__":
    main()
