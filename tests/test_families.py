"""Today's model families, end to end: random Hugging Face folders shaped like
Llama 3.x (llama3 rope scaling), a linearly scaled Llama, a Llama with its
head_dim set apart from hidden_size / heads, Qwen2 (q/k/v biases) and Qwen3
(per-head q/k RMSNorm, head_dim apart), scaled down; converted by export.py and
run by the engine (build/logits), against the independent float64 reference
(tests/reference.py), which reads the HF files in HF's own layout (rotate_half,
no permutation) and applies the rope scaling by HF's formulas, the biases and
the q/k norms. Prefill and decode within TOL x max |logit|, and bit for bit
against each other.

test_families_gguf writes the qwen2 and qwen3 folders as GGUF (export.py
--format gguf), checks the keys, llama.cpp's tensor names and each tensor
against the HF file (HF's row order: these architectures rotate halves) with
test_gguf_export's reader, and runs them to the LLMW's and the reference's logits.

The checks that need no C build (export.py's permutations, the tolerance's
reach, refusals, pytorch_model.bin, progress) are in test_families_export.py.

The safetensors files are written here by a tiny numpy writer; the weights are
random, so every q/k row, bias and norm weight is distinct and a permutation
applied to one of them but not another shows in the logits.
"""
import array
import json
import os
import shutil
import struct
import subprocess

import numpy as np

import common
from common import run, scratch

REF_PYTHON = os.environ.get("REF_PYTHON", "/usr/bin/python3")
# q8_0 of the families in the first build only (run_tests.py): the other builds
# check the q8_0 kernels in test_kernels and whole q8_0 models in test_formats
# (the same text in every build); f32 and f16 run in every build.
FIRST_BUILD_ONLY = tuple(f"test_families_compact_weights[{n}-q8_0]" for n in ("qwen3", "qwen2", "llama3")) + \
    tuple(f"test_families_gguf[{n}-q8_0]" for n in ("qwen2", "qwen3"))
LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
EXPORT = os.path.join(common.ROOT, "export.py")
TOL = 1e-4          # max |c - ref| <= TOL * max |ref|, as in test_reference.py
TOL_Q8 = 5e-2       # q8_0 weights and activations against the float64 reference
N_TOKENS = 40

# name: the HF config's shape and kind. head_dim None: hidden_size / heads.
# llama3's original context of 64 with high/low factors 4/1 puts the head's
# first pair below the 16-position wavelength (kept), the second at 32 (blended)
# and the rest above 64 (divided by 8): all three branches of the formula.
FAMILIES = {
    "llama3": dict(arch="LlamaForCausalLM", dim=64, hidden=96, L=2, nh=4, nkv=2, head_dim=None, V=300,
                   theta=500000.0, tied=True, dtype="F32",
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
    "linear": dict(arch="LlamaForCausalLM", dim=96, hidden=160, L=2, nh=6, nkv=2, head_dim=None, V=300,
                   theta=10000.0, tied=False, dtype="BF16", rope_scaling={"type": "linear", "factor": 4.0}),
    "headdim": dict(arch="LlamaForCausalLM", dim=64, hidden=128, L=2, nh=4, nkv=1, head_dim=32, V=257,
                    theta=100000.0, tied=False, dtype="F16", rope_scaling=None),
    "qwen2": dict(arch="Qwen2ForCausalLM", dim=96, hidden=192, L=2, nh=6, nkv=2, head_dim=None, V=300,
                  theta=1000000.0, tied=True, dtype="F32", rope_scaling=None),
    "qwen3": dict(arch="Qwen3ForCausalLM", dim=64, hidden=128, L=2, nh=4, nkv=2, head_dim=32, V=300,
                  theta=1000000.0, tied=True, dtype="BF16", rope_scaling=None),
}


# ---------------------------------------------------------------- HF folders

def bf16_round(a):
    """float32 -> the nearest bfloat16 (ties to even), as uint16 bits."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def write_safetensors(path, tensors, dtype):
    """A safetensors file: u64 header length, JSON header (padded with spaces
    to 8 bytes), the tensors' bytes in order."""
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        raw = {"F32": lambda x: np.asarray(x, "<f4"), "F16": lambda x: np.asarray(x, "<f2"),
               "BF16": bf16_round}[dtype](a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def hf_config(f, **extra):
    conf = {"architectures": [f["arch"]],
            "model_type": {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
                           "Qwen3ForCausalLM": "qwen3"}[f["arch"]],
            "hidden_size": f["dim"], "intermediate_size": f["hidden"], "num_hidden_layers": f["L"],
            "num_attention_heads": f["nh"], "num_key_value_heads": f["nkv"], "vocab_size": f["V"],
            "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": f["theta"],
            "tie_word_embeddings": f["tied"], "hidden_act": "silu", "rope_scaling": f["rope_scaling"]}
    if f["head_dim"]:
        conf["head_dim"] = f["head_dim"]
    if f["arch"] == "Qwen2ForCausalLM":
        conf.update(use_sliding_window=False, sliding_window=4096, max_window_layers=21)
    if f["arch"] == "Qwen3ForCausalLM":
        conf.update(attention_bias=False, use_sliding_window=False, sliding_window=None)
    conf.update(extra)
    return conf


def make_family(name, folder=None, config_extra=None, seed=0):
    """A random HF folder of family `name`; returns its path."""
    f = FAMILIES[name]
    folder = folder or scratch(f"fam_{name}_hf")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = np.random.default_rng([seed, len(name)])
    d, hid, nh, nkv, V = f["dim"], f["hidden"], f["nh"], f["nkv"], f["V"]
    hs = f["head_dim"] or d // nh
    mat = lambda r, c: (rng.standard_normal((r, c)) / np.sqrt(c)).astype(np.float32)
    gain = lambda n, s=0.2: (1 + rng.uniform(-s, s, n)).astype(np.float32)
    t = {"model.embed_tokens.weight": rng.standard_normal((V, d)).astype(np.float32) * 0.7}
    for l in range(f["L"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = gain(d)
        t[p + "self_attn.q_proj.weight"] = mat(nh * hs, d) * 2   # sharper attention: RoPE matters more
        t[p + "self_attn.k_proj.weight"] = mat(nkv * hs, d) * 2
        t[p + "self_attn.v_proj.weight"] = mat(nkv * hs, d)
        if f["arch"] == "Qwen2ForCausalLM":
            for k, n in (("q", nh), ("k", nkv), ("v", nkv)):
                t[p + f"self_attn.{k}_proj.bias"] = rng.uniform(-0.8, 0.8, n * hs).astype(np.float32)
        if f["arch"] == "Qwen3ForCausalLM":
            t[p + "self_attn.q_norm.weight"] = gain(hs, 0.6)
            t[p + "self_attn.k_norm.weight"] = gain(hs, 0.6)
        t[p + "self_attn.o_proj.weight"] = mat(d, nh * hs)
        t[p + "post_attention_layernorm.weight"] = gain(d)
        t[p + "mlp.gate_proj.weight"] = mat(hid, d)
        t[p + "mlp.up_proj.weight"] = mat(hid, d)
        t[p + "mlp.down_proj.weight"] = mat(d, hid)
    t["model.norm.weight"] = gain(d)
    if not f["tied"]:
        t["lm_head.weight"] = mat(V, d)
    write_safetensors(os.path.join(folder, "model.safetensors"), t, f["dtype"])
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(hf_config(f, **(config_extra or {})), fh)
    return folder


def export(*args):
    p = subprocess.run([REF_PYTHON, EXPORT] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    return p.returncode, p.stderr.decode()


def tokens_for(name):
    rng = np.random.default_rng([7, len(name)])
    return [1] + [int(x) for x in rng.integers(0, FAMILIES[name]["V"], N_TOKENS - 1)]


# ---------------------------------------------------------------- the runs, cached

_files = {}


def converted(name, dtype="f32"):
    """(HF folder, LLMW path) of family `name`, the LLMW in `dtype`."""
    key = (name, dtype)
    if key not in _files:
        folder = _files.get((name, "hf")) or make_family(name)
        _files[(name, "hf")] = folder
        out = scratch(f"fam_{name}_{dtype}.llmw")
        rc, err = export(folder, out, "--dtype", dtype)
        assert rc == 0, err
        _files[key] = out
    return _files[(name, "hf")], _files[key]


def read_f32(path, rows, cols):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    assert len(a) == rows * cols, (path, len(a), rows, cols)
    return a


def py(code):
    code = f"import sys; sys.path.insert(0, {common.TESTS!r})\n" + code
    p = subprocess.run([REF_PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    return p.stdout.decode()


_refs = {}


def reference(name, source="hf", **opts):
    """float64 reference logits (T, vocab) as float32, of the HF folder
    (source 'hf') or of an exported LLMW (source a dtype), with forward() options."""
    key = (name, source, tuple(sorted(opts.items())))
    if key not in _refs:
        folder, path = converted(name, "f32" if source == "hf" else source)
        src = folder if source == "hf" else path
        out = scratch(f"fam_ref_{name}_{source}_{len(_refs)}.f32")
        py("import reference\n"
           f"w = reference.load_checkpoint({src!r})\n"
           f"reference.forward(w, {tokens_for(name)!r}, **{opts!r}).numpy().astype('<f4').tofile({out!r})\n")
        _refs[key] = read_f32(out, N_TOKENS, FAMILIES[name]["V"])
    return _refs[key]


def engine(path, name, mode="prefill", extra=()):
    out = scratch(f"fam_c_{os.getpid()}.f32")
    toks = tokens_for(name)
    rc, so, se = run([path, "--tokens", ",".join(map(str, toks)), "--mode", mode, "--out", out] + list(extra),
                     binary=LOGITS)
    assert rc == 0, se
    try:
        return read_f32(out, len(toks), FAMILIES[name]["V"])
    finally:
        os.remove(out)


def compare(got, ref, what, tol=TOL):
    rel, at = common.rel_diff(got, ref)
    print(f"   {what}: max rel diff {rel:.3g} (tol {tol:g})")
    assert rel <= tol, f"{what}: {rel:.3g} > {tol:g} at value {at}: c {got[at]!r} ref {ref[at]!r}"


# ---------------------------------------------------------------- tests

def test_families_match_reference():
    """f32 export of each family against the reference on the HF files, prefill and decode."""
    for name in FAMILIES:
        for mode in ("prefill", "decode"):
            def one(name=name, mode=mode):
                _, path = converted(name)
                compare(engine(path, name, mode), reference(name), f"{name} f32 {mode}")
            yield f"{name}-{mode}", one


def test_families_prefill_equals_decode():
    """Batched prefill (2 threads), one-token decode and chunks of 5: the same bits."""
    for name in FAMILIES:
        def one(name=name):
            _, path = converted(name)
            pre = engine(path, name, "prefill", ["--threads", "2"])
            for mode in ("decode", "chunked"):
                got = engine(path, name, mode)
                at = next((i for i, (x, y) in enumerate(zip(pre, got)) if not x == y), None)
                assert at is None, f"{name}: prefill and {mode} differ first at value {at}: {pre[at]!r} vs {got[at]!r}"
        yield name, one


def test_families_compact_weights():
    """f16 against the reference on the same f16 file (read by tests/llmw.py) within
    TOL; q8_0 (weights and activations in int8) against the HF reference within TOL_Q8."""
    for name in ("qwen3", "qwen2", "llama3"):
        def f16(name=name):
            _, path = converted(name, "f16")
            for mode in ("prefill", "decode"):
                compare(engine(path, name, mode), reference(name, "f16"), f"{name} f16 {mode}")

        def q8(name=name):
            _, path = converted(name, "q8_0")
            for mode in ("prefill", "decode"):
                compare(engine(path, name, mode), reference(name), f"{name} q8_0 {mode}", TOL_Q8)
        yield f"{name}-f16", f16
        yield f"{name}-q8_0", q8


def test_info_and_qk_norm_flag():
    """--info names the rope scaling, the biases and the q/k norm; --qk-norm off runs
    without the norm (as the reference does), on is refused where the weights are absent."""
    _, q3 = converted("qwen3")
    _, q2 = converted("qwen2")
    _, l3 = converted("llama3")
    _, lin = converted("linear")
    for path, want in ((q3, "rope theta 1e+06, q/k/v biases no, q/k norm on"),
                       (q2, "rope theta 1e+06, q/k/v biases yes, q/k norm off"),
                       (l3, "rope theta 500000, llama3 rope scaling x8 (low 1, high 4, original context 64)"),
                       (lin, "rope theta 10000, linear rope scaling x4, q/k/v biases no")):
        rc, out, err = run([path, "--info"])
        assert rc == 0 and want in err, (want, err)
    rc, out, err = run([q3, "--info", "--qk-norm", "off"])
    assert rc == 0 and "q/k norm off (weights stored)" in err, err
    compare(engine(q3, "qwen3", "decode", ["--qk-norm", "off"]), reference("qwen3", qk_norm="off"),
            "qwen3 --qk-norm off, decode")
    compare(engine(q3, "qwen3", "prefill", ["--qk-norm", "on"]), reference("qwen3"), "qwen3 --qk-norm on")
    for path in (q2, l3):
        rc, out, err = run([path, "--qk-norm", "on", "-n", "2", "-z", common.model("tok512.bin")])
        lines = [l for l in err.splitlines() if l.strip()]
        assert rc == 2 and len(lines) == 1 and "--qk-norm" in lines[0] and "q/k norm" in lines[0], err


def test_v1_files_still_load():
    """--llmw-version 1 of a model it can hold (llama3's shape, plain RoPE): the engine
    gives the same bits as from version 2."""
    src = make_family("llama3", scratch("fam_plain_hf"), config_extra={"rope_scaling": None})
    a, b = scratch("fam_plain_v1.llmw"), scratch("fam_plain_v2.llmw")
    for out, ver in ((a, "1"), (b, "2")):
        rc, err = export(src, out, "--llmw-version", ver)
        assert rc == 0, err
    with open(a, "rb") as f:
        assert struct.unpack_from("<4sI", f.read(8)) == (b"LLMW", 1)
    with open(b, "rb") as f:
        assert struct.unpack_from("<4sI", f.read(8)) == (b"LLMW", 2)
    assert list(engine(a, "llama3")) == list(engine(b, "llama3")), "v1 and v2 files of one model differ"


# ---------------------------------------------------------------- --format gguf

def read_safetensors(path):
    """{name: float32 array} of a safetensors file written by write_safetensors."""
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data)[0]
    out = {}
    for name, h in json.loads(data[8:8 + n]).items():
        raw = data[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]]
        if h["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, {"F32": "<f4", "F16": "<f2"}[h["dtype"]]).astype(np.float32)
        out[name] = a.reshape(h["shape"])
    return out


def gguf_expected(name):
    """llama.cpp's name -> the HF tensor it holds, as llama.cpp's converter writes qwen2 and
    qwen3: HF's own rows (no q/k permutation: these architectures rotate halves)."""
    f = FAMILIES[name]
    want = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    per = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
           "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
           "attn_output.weight": "self_attn.o_proj.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
           "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
           "ffn_down.weight": "mlp.down_proj.weight"}
    if name == "qwen2":
        per.update({f"attn_{k}.bias": f"self_attn.{k}_proj.bias" for k in "qkv"})
    if name == "qwen3":
        per.update({"attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight"})
    for l in range(f["L"]):
        want.update({f"blk.{l}.{g}": f"model.layers.{l}.{h}" for g, h in per.items()})
    return want


def short_tokenizer(n, out):
    """The first n tokens of tok512.bin as a tokenizer.bin (its max-length field kept)."""
    data = open(common.model("tok512.bin"), "rb").read()
    pos = 4
    for _ in range(n):
        pos += 8 + struct.unpack_from("<fi", data, pos)[1]
    with open(out, "wb") as fh:
        fh.write(data[:pos])


def test_families_gguf():
    """export.py --format gguf of the qwen2 and qwen3 folders: read back by the tests'
    own GGUF reader (test_gguf_export.read_gguf), every key and tensor as llama.cpp names
    them, each tensor the HF one bit for bit in HF's row order; run by the engine, the
    same logits as the LLMW of the folder and as the float64 reference on the HF files.
    qwen2 gets a tokenizer.bin in its folder (embedded), qwen3 none (model "none")."""
    import test_gguf_export as tg
    for name in ("qwen2", "qwen3"):
        def one(name=name):
            f = FAMILIES[name]
            folder, llmw = converted(name)
            if name == "qwen2":
                short_tokenizer(f["V"], os.path.join(folder, "tokenizer.bin"))
            out = scratch(f"fam_{name}.gguf")
            try:
                rc, err = export("--format", "gguf", folder, out)
            finally:
                if name == "qwen2":
                    os.remove(os.path.join(folder, "tokenizer.bin"))
            assert rc == 0, err
            meta, tensors, _ = tg.read_gguf(out)
            hs = f["head_dim"] or f["dim"] // f["nh"]
            a = meta["general.architecture"]
            assert a == name, a
            assert (meta[f"{a}.context_length"], meta[f"{a}.embedding_length"], meta[f"{a}.block_count"],
                    meta[f"{a}.feed_forward_length"], meta[f"{a}.attention.head_count"],
                    meta[f"{a}.attention.head_count_kv"], meta[f"{a}.attention.key_length"],
                    meta[f"{a}.attention.value_length"]) == (128, f["dim"], f["L"], f["hidden"], f["nh"], f["nkv"], hs, hs)
            assert meta[f"{a}.rope.freq_base"] == f["theta"]
            assert abs(meta[f"{a}.attention.layer_norm_rms_epsilon"] - 1e-6) < 1e-12
            if name == "qwen2":
                assert meta["tokenizer.ggml.model"] == "llama" and len(meta["tokenizer.ggml.tokens"]) == f["V"]
                assert meta["tokenizer.ggml.tokens"][:3] == ["<unk>", "<s>", "</s>"]
                assert "tokenizer for the GGUF" in err, err
            else:
                assert meta["tokenizer.ggml.model"] == "none" and "tokenizer.ggml.tokens" not in meta
            hf = read_safetensors(os.path.join(folder, "model.safetensors"))
            want = gguf_expected(name)
            assert sorted(tensors) == sorted(want), sorted(set(tensors) ^ set(want))
            for g, h in want.items():
                dims, t, raw = tensors[g]
                assert dims == list(reversed(hf[h].shape)) and t == 0, (g, dims, t)
                got = np.frombuffer(raw, "<f4").reshape(hf[h].shape)
                assert np.array_equal(got, hf[h]), f"{g} is not {h} in HF's row order"
            for mode in ("prefill", "decode"):
                got = engine(out, name, mode)
                compare(got, engine(llmw, name, mode), f"{name} gguf vs llmw {mode}")
                compare(got, reference(name), f"{name} gguf vs reference {mode}")

        def q8(name=name):
            folder, _ = converted(name)
            out = scratch(f"fam_{name}_q8_0.gguf")
            rc, err = export("--format", "gguf", "--dtype", "q8_0", folder, out)
            assert rc == 0, err
            meta, tensors, _ = tg.read_gguf(out)
            hf = read_safetensors(os.path.join(folder, "model.safetensors"))
            for g, h in gguf_expected(name).items():
                dims, t, raw = tensors[g]
                assert t == (8 if len(dims) == 2 else 0), (g, t)
                got = tg.dequant(dims, t, raw).reshape(hf[h].shape)
                # Q8_0: within half a step (amax/127 of the block) and d's f16 rounding
                step = np.repeat(np.abs(hf[h]).reshape(-1, 32).max(axis=1) / 127, 32).reshape(hf[h].shape) \
                    if t == 8 else 0
                assert (np.abs(got - hf[h]) <= 0.51 * step + 127 * step / 1024 + 1e-7).all(), g
            compare(engine(out, name, "prefill"), reference(name), f"{name} gguf q8_0 prefill", TOL_Q8)
        yield name, one
        yield f"{name}-q8_0", q8
