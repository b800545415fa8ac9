"""bench/anchors.py -- the other engines `make bench` sets beside ./run, each run
on the same checkpoints, converted with that engine's own converter:

  LLAMA_BENCH=/path/to/llama-bench   llama.cpp. Its llama-convert-llama2c-to-ggml
                                     (f32 GGUF from a llama2.c legacy file and
                                     its tokenizer) and llama-quantize (f16, q8_0)
                                     are looked up beside it, in the same folder.
  LLAMA2C=/path/to/run               llama2.c. runq (q8_0) and export.py are
                                     looked up in the same folder; f16 has no
                                     llama2.c engine, so its cells stay empty.

The binaries are the user's: nothing here builds them. Checkpoints go through
a llama2.c training checkpoint (.pt: model_args and the state dict, written
here with torch from the f32 file this bench runs) and llama2.c's export.py
(--version 0: the legacy f32 file both converters read; --version 2: runq's
q8_0, group 64). Converted files are cached in build/bench/anchors/.

What each reports, per run:
  llama.cpp  `llama-bench -m GGUF -p 128 -n 128 -t N -r 1 -o json`: pp128 and
             tg128 tok/s (one timed repetition per call; the bench interleaves
             the calls with ./run's runs and takes medians).
  llama2.c   `run CKPT -z TOK -n 256 -t 0 -i PROMPT` with OMP_NUM_THREADS=N: its
             "achieved tok/s" over the 255 forwards after the first. llama2.c
             runs the prompt one token at a time, so this one figure is its
             prefill rate and its decode rate.
"""
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "build", "bench", "anchors")
sys.path.insert(0, os.path.join(ROOT, "tests"))


class AnchorError(Exception):
    pass


SKIPPED = []  # (engine, row key, dtype, why): cells an engine cannot run, told under the table


def _run(cmd, env=None, what=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise AnchorError("%s failed (exit %d): %s" % (what or os.path.basename(cmd[0]), r.returncode, " | ".join(tail)))
    return r


def _fresh(out, *inputs):
    return os.path.exists(out) and all(os.path.getmtime(out) >= os.path.getmtime(i) for i in inputs)


# --------------------------------------------------------------------------- #
# a llama2.c training checkpoint (.pt) from the f32 file the bench runs
# --------------------------------------------------------------------------- #

def _legacy_weights(path):
    """llama2.c legacy file -> (model_args, {llama2.c state-dict name: float32 array})."""
    import numpy as np
    data = open(path, "rb").read()
    dim, hidden, L, nh, nkv, vocab, seq = struct.unpack_from("<7i", data, 0)
    shared, V, hs = vocab > 0, abs(vocab), dim // nh
    kvd = nkv * hs
    f = np.frombuffer(data, "<f4", offset=28)
    pos = [0]

    def take(*shape):
        n = int(np.prod(shape))
        a = f[pos[0]:pos[0] + n].reshape(shape)
        pos[0] += n
        return a
    emb = take(V, dim)
    att, wq, wk, wv, wo = take(L, dim), take(L, dim, dim), take(L, kvd, dim), take(L, kvd, dim), take(L, dim, dim)
    ffn, w1, w2, w3 = take(L, dim), take(L, hidden, dim), take(L, dim, hidden), take(L, hidden, dim)
    final = take(dim)
    take(seq, hs // 2), take(seq, hs // 2)  # RoPE tables
    cls = emb if shared else take(V, dim)
    sd = {"tok_embeddings.weight": emb, "norm.weight": final, "output.weight": cls}
    for l in range(L):
        p = "layers.%d." % l
        sd.update({p + "attention_norm.weight": att[l], p + "attention.wq.weight": wq[l],
                   p + "attention.wk.weight": wk[l], p + "attention.wv.weight": wv[l],
                   p + "attention.wo.weight": wo[l], p + "ffn_norm.weight": ffn[l],
                   p + "feed_forward.w1.weight": w1[l], p + "feed_forward.w2.weight": w2[l],
                   p + "feed_forward.w3.weight": w3[l]})
    args = dict(dim=dim, n_layers=L, n_heads=nh, n_kv_heads=nkv, vocab_size=V, hidden_dim=hidden,
                multiple_of=32, norm_eps=1e-5, max_seq_len=seq, dropout=0.0)
    return args, sd


def _llmw_weights(path):
    """An f32 LLMW file of llama2.c's math (pre-RMSNorm, interleaved RoPE) -> the same."""
    import llmw
    h, w = llmw.read(path)
    ok = (h["norm_type"], h["norm_pos"], h["final_norm"], h["rope_layout"], h["norm_bias"]) == (0, 0, 1, 0, 0)
    if not ok or h["head_size"] * h["n_heads"] != h["dim"]:
        raise AnchorError("%s: not a llama2.c-shaped model" % path)
    sd = {"tok_embeddings.weight": w["tok_embeddings"], "norm.weight": w["final_norm"],
          "output.weight": w["tok_embeddings"] if h["shared_classifier"] else w["classifier"]}
    for l in range(h["n_layers"]):
        p, q = "layers.%d." % l, "layers.%d." % l
        sd.update({p + "attention_norm.weight": w[q + "attn_norm"], p + "attention.wq.weight": w[q + "wq"],
                   p + "attention.wk.weight": w[q + "wk"], p + "attention.wv.weight": w[q + "wv"],
                   p + "attention.wo.weight": w[q + "wo"], p + "ffn_norm.weight": w[q + "ffn_norm"],
                   p + "feed_forward.w1.weight": w[q + "w1"], p + "feed_forward.w2.weight": w[q + "w2"],
                   p + "feed_forward.w3.weight": w[q + "w3"]})
    args = dict(dim=h["dim"], n_layers=h["n_layers"], n_heads=h["n_heads"], n_kv_heads=h["n_kv_heads"],
                vocab_size=h["vocab_size"], hidden_dim=h["hidden_dim"], multiple_of=32,
                norm_eps=float(h["norm_eps"]), max_seq_len=h["seq_len"], dropout=0.0)
    return args, sd


def in_child(what, *args):
    """Run this file's `what` in a child process and return the path it prints: numpy and
    torch stay out of the bench's own process, whose size would otherwise count in the
    peak RSS of every ./run it starts (ru_maxrss includes the parent's pages at exec)."""
    r = _run([sys.executable, os.path.abspath(__file__), what] + list(args), what="bench/anchors.py " + what)
    return r.stdout.strip()


def llama2c_pt(f32_path, name):
    """build/bench/anchors/NAME.pt: llama2.c's training-checkpoint layout of the f32 file."""
    out = os.path.join(CACHE, name + ".pt")
    if _fresh(out, f32_path):
        return out
    return in_child("pt", f32_path, name)


def _write_pt(f32_path, name):
    out = os.path.join(CACHE, name + ".pt")
    import numpy as np
    import torch
    with open(f32_path, "rb") as f:
        magic = f.read(4)
    args, sd = (_llmw_weights if magic == b"LLMW" else _legacy_weights)(f32_path)
    tied = sd["output.weight"] is sd["tok_embeddings.weight"]
    state = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in sd.items()}
    if tied:  # llama2.c's model ties the two: export.py then writes a shared classifier
        state["output.weight"] = state["tok_embeddings.weight"]
    os.makedirs(CACHE, exist_ok=True)
    torch.save({"model_args": args, "model": state}, out + ".tmp")
    os.replace(out + ".tmp", out)
    return out


def llama2c_export(folder, pt, version, out):
    """llama2.c's export.py --version V --checkpoint PT OUT (its own converter)."""
    if _fresh(out, pt):
        return out
    env = dict(os.environ, PYTHONPATH=folder)
    _run([sys.executable, os.path.join(folder, "export.py"), out + ".tmp", "--version", str(version),
          "--checkpoint", pt], env=env, what="llama2.c export.py --version %d" % version)
    os.replace(out + ".tmp", out)
    return out


# --------------------------------------------------------------------------- #
# the engines
# --------------------------------------------------------------------------- #

class LlamaCpp:
    name = "llama.cpp"

    def __init__(self, bench):
        self.bench = bench
        d = os.path.dirname(os.path.abspath(bench))
        self.convert = os.path.join(d, "llama-convert-llama2c-to-ggml")
        self.quantize = os.path.join(d, "llama-quantize")
        for p in (bench, self.convert, self.quantize):
            if not os.access(p, os.X_OK):
                raise AnchorError("LLAMA_BENCH: %s not found or not executable (llama-bench, "
                                  "llama-convert-llama2c-to-ggml and llama-quantize must share a folder)" % p)

    def prepare(self, key, dtype, legacy_f32, tok):
        """The GGUF for this row, converted from the llama2.c legacy file with llama.cpp's tools."""
        f32 = os.path.join(CACHE, key + "-f32.gguf")
        if not _fresh(f32, legacy_f32, tok):
            _run([self.convert, "--copy-vocab-from-model", tok, "--llama2c-model", legacy_f32,
                  "--llama2c-output-model", f32 + ".tmp.gguf"], what="llama-convert-llama2c-to-ggml")
            os.replace(f32 + ".tmp.gguf", f32)
        if dtype == "f32":
            return f32
        out = os.path.join(CACHE, "%s-%s.gguf" % (key, dtype))
        if not _fresh(out, f32):
            try:
                _run([self.quantize, f32, out + ".tmp.gguf", dtype.upper()], what="llama-quantize")
            except AnchorError as e:  # e.g. Q8_0 blocks of 32 cannot hold stories260K's 172 columns
                SKIPPED.append((self.name, key, dtype, str(e)))
                return None
            os.replace(out + ".tmp.gguf", out)
        return out

    def measure(self, path, threads, prompt_tokens, decoded, tok=None, prompt=None):
        r = _run([self.bench, "-m", path, "-p", str(prompt_tokens), "-n", str(decoded), "-t", str(threads),
                  "-r", "1", "-o", "json"], what="llama-bench")
        pp = tg = None
        for row in json.loads(r.stdout):
            if row.get("n_prompt") == prompt_tokens and row.get("n_gen") == 0:
                pp = float(row["avg_ts"])
            if row.get("n_gen") == decoded and row.get("n_prompt") == 0:
                tg = float(row["avg_ts"])
        if pp is None or tg is None:
            raise AnchorError("llama-bench printed no pp%d/tg%d rows" % (prompt_tokens, decoded))
        return pp, tg


class Llama2c:
    name = "llama2.c"

    def __init__(self, run):
        self.run = run
        self.folder = os.path.dirname(os.path.abspath(run))
        self.runq = os.path.join(self.folder, "runq")
        if not os.access(run, os.X_OK):
            raise AnchorError("LLAMA2C: %s not found or not executable" % run)
        if not os.path.exists(os.path.join(self.folder, "export.py")):
            raise AnchorError("LLAMA2C: no export.py beside %s (llama2.c's converter)" % run)

    def prepare(self, key, dtype, legacy_f32, tok):
        if dtype == "f32":
            return legacy_f32
        if dtype == "q8_0" and os.access(self.runq, os.X_OK):
            pt = llama2c_pt(legacy_f32, key)
            return llama2c_export(self.folder, pt, 2, os.path.join(CACHE, key + "-q80.llama2c"))
        SKIPPED.append((self.name, key, dtype, "llama2.c has no %s engine" % dtype))
        return None

    def measure(self, path, threads, prompt_tokens, decoded, tok=None, prompt=None):
        exe = self.runq if path.endswith("-q80.llama2c") else self.run
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        r = _run([exe, path, "-z", tok, "-n", str(prompt_tokens + decoded), "-t", "0", "-i", prompt],
                 env=env, what=os.path.basename(exe))
        for line in r.stderr.splitlines():
            if line.startswith("achieved tok/s:"):
                rate = float(line.split(":")[1])
                return rate, rate
        raise AnchorError("%s printed no 'achieved tok/s' line" % exe)


def from_env():
    """The anchors the environment names (LLAMA_BENCH, LLAMA2C), each checked."""
    os.makedirs(CACHE, exist_ok=True)
    out = []
    if os.environ.get("LLAMA_BENCH"):
        out.append(LlamaCpp(os.environ["LLAMA_BENCH"]))
    if os.environ.get("LLAMA2C"):
        out.append(Llama2c(os.environ["LLAMA2C"]))
    return out


def legacy_f32(f32_path, key, anchors):
    """The llama2.c legacy f32 file of a row's f32 checkpoint: the file itself when it
    is one, else llama2.c's export.py --version 0 of its .pt (needs LLAMA2C's folder;
    without it, a small writer of the same headerless layout)."""
    with open(f32_path, "rb") as f:
        if f.read(4) != b"LLMW":
            return f32_path
    out = os.path.join(CACHE, key + "-f32.llama2c")
    l2c = [a for a in anchors if isinstance(a, Llama2c)]
    if l2c:
        return llama2c_export(l2c[0].folder, llama2c_pt(f32_path, key), 0, out)
    if _fresh(out, f32_path):
        return out
    return in_child("legacy", f32_path, key)


def _write_legacy(f32_path, key):
    """The headerless llama2.c layout, written here when LLAMA2C (and its export.py) is not given."""
    import numpy as np
    out = os.path.join(CACHE, key + "-f32.llama2c")
    args, sd = _llmw_weights(f32_path)
    tied = sd["output.weight"] is sd["tok_embeddings.weight"]
    L = args["n_layers"]
    hs = args["dim"] // args["n_heads"]
    with open(out + ".tmp", "wb") as f:
        f.write(struct.pack("<7i", args["dim"], args["hidden_dim"], L, args["n_heads"], args["n_kv_heads"],
                            args["vocab_size"] * (1 if tied else -1), args["max_seq_len"]))
        put = lambda a: f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
        put(sd["tok_embeddings.weight"])
        for part in ("attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
                     "ffn_norm", "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"):
            for l in range(L):
                put(sd["layers.%d.%s.weight" % (l, part)])
        put(sd["norm.weight"])
        freqs = 1.0 / (10000.0 ** (np.arange(0, hs, 2)[: hs // 2].astype(np.float32) / hs))
        ang = np.outer(np.arange(args["max_seq_len"]), freqs).astype(np.float32)
        put(np.cos(ang)), put(np.sin(ang))
        if not tied:
            put(sd["output.weight"])
    os.replace(out + ".tmp", out)
    return out


if __name__ == "__main__":
    # the numpy/torch halves, run by in_child: `anchors.py pt|legacy F32 KEY` prints the file's path
    os.makedirs(CACHE, exist_ok=True)
    print({"pt": _write_pt, "legacy": _write_legacy}[sys.argv[1]](sys.argv[2], sys.argv[3]))
