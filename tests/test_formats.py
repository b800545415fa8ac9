"""Checkpoint formats through the engine: stories260K exported to LLMW in f32,
f16 and q8_0; LLMW files with LayerNorm biases and a Hugging Face directory
against the PyTorch reference; llama2.c's ak42 files; and every malformed LLMW
file refused with a clear error (also under the asan build)."""
import os
import re
import struct
import subprocess
import sys

import common
from common import model, run, scratch

REF_PYTHON = os.environ.get("REF_PYTHON", "/usr/bin/python3")
LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
EXPORT = os.path.join(common.ROOT, "export.py")
LEGACY = model("stories260K.bin")
TOK = model("tok512.bin")
TOKENS = [1] + [(i * 37 + 11) % 512 for i in range(47)]   # 48 positions
TOL_F16 = 2e-3      # max |logit - f32 logit| / max |f32 logit|: f16 weights (seen: 4e-4)
TOL_Q8 = 5e-2       # the same for q8_0 weights and activations (seen: 2e-2)
TOL_Q4 = 0.25       # q4_0 / q4_K weights, q8_0 activations (seen: 0.21, 0.20)
TOL_REF = 1e-4      # engine vs the float64 reference, as in test_reference.py


def py(code, timeout=600):
    p = subprocess.run([REF_PYTHON, "-c", code], cwd=common.TESTS, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    return p.stdout.decode()


def export(*args):
    p = subprocess.run([REF_PYTHON, EXPORT] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-3000:]


_exported = {}


def exported(dtype, group=32):
    key = (dtype, group)
    if key not in _exported:
        path = scratch(f"fmt_stories260K_{dtype}_g{group}.llmw")
        export("--dtype", dtype, "--group-size", group, LEGACY, path)
        _exported[key] = path
    return _exported[key]


def logits(path, tokens=TOKENS, mode="prefill", extra=()):
    out = scratch(f"fmt_logits_{os.getpid()}.f32")
    rc, so, se = run([path, "--tokens", ",".join(map(str, tokens)), "--mode", mode, "--out", out] + list(extra),
                     binary=LOGITS)
    assert rc == 0, se
    import array
    a = array.array("f")
    with open(out, "rb") as f:
        a.frombytes(f.read())
    os.remove(out)
    return a


def rel(a, b):
    """max |a - b| / max |b|: infinite on a NaN or inf, AssertionError if the lengths differ."""
    return common.rel_diff(a, b)[0]


def greedy(path, n=200):
    rc, out, err = run([path, "-z", TOK, "-t", "0", "-n", n])
    assert rc == 0, err
    return out


def token_ids(text):
    rc, out, err = run(["-m", "tokenize", "-z", TOK, "-i", text.decode().rstrip("\n")])
    assert rc == 0, err
    return out.split()


def test_f32_export_identical_to_legacy():
    path = exported("f32")
    a, b = logits(path), logits(LEGACY)
    assert list(a) == list(b), f"logits differ: max rel {rel(a, b):.3g}"
    assert greedy(path) == open(model("stories260K.greedy200.txt"), "rb").read()
    rc, out, err = run([path, "-z", TOK, "-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"])
    assert out == open(model("stories260K.t1-p0.9-s133742.txt"), "rb").read()


def test_compact_weights_close_to_f32():
    base = logits(LEGACY)
    want = token_ids(open(model("stories260K.greedy200.txt"), "rb").read())
    for dtype, group, tol, min_agree in (("f16", 32, TOL_F16, 200), ("q8_0", 32, TOL_Q8, 50), ("q8_0", 64, TOL_Q8, 50),
                                         ("q8_0", 48, TOL_Q8, 20), ("q4_0", 32, TOL_Q4, 20), ("q4_K", 32, TOL_Q4, 20)):
        def one(dtype=dtype, group=group, tol=tol, min_agree=min_agree):
            path = exported(dtype, group)
            for mode in ("prefill", "decode"):
                d = rel(logits(path, mode=mode), base)
                print(f"   {dtype} g{group} {mode}: max rel logit diff {d:.3g} (tol {tol:g})")
                assert d <= tol, (dtype, group, mode, d)
            got = token_ids(greedy(path))
            agree = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
            print(f"   {dtype} g{group}: greedy text agrees with f32 for {agree} of {len(want)} tokens; "
                  f"file {os.path.getsize(path)} bytes")
            assert agree >= min_agree, (dtype, group, agree)
        yield f"{dtype}_g{group}", one


def test_compact_config_same_text_every_build():
    """q8_0 (and q4_0, q4_K) weights, int8 KV cache, context 256: every build (and,
    in embedded-test, every device) computes these products in one order, so prints
    the same text."""
    reference = os.path.join(common.ROOT, "run")
    for dtype, args in (("q8_0", ["-t", "0", "-n", "256"]), ("q8_0", ["-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"]),
                        ("q4_0", ["-t", "0", "-n", "256"]), ("q4_K", ["-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"])):
        path = exported(dtype)
        outs = []
        for binary, threads in ((None, 1), (None, 2), (reference, 1)):
            rc, out, err = run([path, "-z", TOK, "--kv", "q8", "--ctx", "256", "--threads", threads] + args, binary=binary)
            assert rc == 0, err
            outs.append(out)
        assert outs[0] == outs[1] == outs[2], f"{dtype} {args}: texts differ:\n{outs[0]!r}\n{outs[1]!r}\n{outs[2]!r}"


def test_q8_0_logits_same_bits_every_build_every_kv_cache():
    """The promise under the text above, in bits: a q8_0 checkpoint's logits at
    every position, decoded one token at a time and prefilled in one batch, are
    the optimised build's bits in this build, for each KV cache type. The int8
    cache rounds each key and value to 1/127 of its head's largest, so a value
    that differs in its last bit can move a code, and the text with it: what
    reaches the cache must be one order on every target too. (An f32 or f16
    checkpoint's products keep the ISA's lanes, so its logits differ in the
    last bits between builds and its text may differ: no promise there.)"""
    path = exported("q8_0")
    tokens = [1] + [(i * 53 + 7) % 512 for i in range(79)]   # 80 positions: three blocks of keys
    reference = os.path.join(common.ROOT, "build", "logits")
    for kv in ("f32", "f16", "q8"):
        for mode in ("decode", "prefill"):
            outs = []
            for binary in (LOGITS, reference):
                out = scratch(f"fmt_bits_{kv}_{mode}_{len(outs)}_{os.getpid()}.f32")
                rc, so, se = run([path, "--tokens", ",".join(map(str, tokens)), "--mode", mode, "--kv", kv,
                                  "--threads", 1, "--out", out], binary=binary)
                assert rc == 0, se
                with open(out, "rb") as f:
                    outs.append(f.read())
                os.remove(out)
            assert len(outs[0]) == 80 * 512 * 4 and outs[0] == outs[1], \
                f"kv {kv} {mode}: logits differ from the optimised build's (rel diff {rel_bytes(outs[0], outs[1]):.3g})"


def test_f16_logits_same_bits_avx2_and_avx512():
    """f16 products take AVX-512's sixteen lanes and the tree of its sum in the
    AVX2 build too (engine/simd.h: two ymm a (row, token) accumulator), and the
    rest of the forward pass is one order on every target, so an f16
    checkpoint's logits, decoded and prefilled, are the same bits in an AVX2
    build as in an AVX-512 one (the avx2 variant against the optimised build
    on an AVX-512 CPU; any two builds of one vector ISA too). A build with
    other lanes (scalar, NEON) keeps its own order: there within TOL_F16."""
    path = exported("f16")   # rows of 64 and 172: 172 ends in a part of a second half
    tokens = [1] + [(i * 53 + 7) % 512 for i in range(79)]
    reference = os.path.join(common.ROOT, "build", "logits")
    kernels = []
    for binary in (common.RUN, os.path.join(common.ROOT, "run")):   # LOGITS is built as RUN is, build/logits as ./run
        rc, _, err = run([path, "--info"], binary=binary)
        assert rc == 0, err
        kernels.append(re.search(r", (\S+) kernels\n", err).group(1))
    x86 = all(k.startswith(("avx2", "avx512")) for k in kernels)
    for mode in ("decode", "prefill"):
        outs = []
        for binary in (LOGITS, reference):
            out = scratch(f"fmt_f16_bits_{mode}_{len(outs)}_{os.getpid()}.f32")
            rc, so, se = run([path, "--tokens", ",".join(map(str, tokens)), "--mode", mode, "--threads", 1,
                              "--out", out], binary=binary)
            assert rc == 0, se
            with open(out, "rb") as f:
                outs.append(f.read())
            os.remove(out)
        assert len(outs[0]) == 80 * 512 * 4 == len(outs[1])
        d = rel_bytes(outs[0], outs[1])
        if x86:
            assert outs[0] == outs[1], f"{mode}: {kernels[0]} logits differ from {kernels[1]}'s (rel diff {d:.3g})"
        else:
            assert d <= TOL_F16, f"{mode}: {kernels[0]} logits {d:.3g} from {kernels[1]}'s (tolerance {TOL_F16})"


def rel_bytes(a, b):
    import array
    x, y = array.array("f"), array.array("f")
    x.frombytes(a)
    y.frombytes(b)
    return rel(x, y) if len(x) == len(y) else float("inf")


def test_llmw_with_norm_biases_matches_reference():
    """export.py random with LayerNorm biases, q/k/v biases and q/k norms (a version 2
    file), GQA, a head size apart from dim / heads (6 x 12 = 72 against dim 48),
    unshared classifier, awkward sizes; the engine against the reference for every
    norm variant: 8 block norms x q/k norm on and off, prefill and decode."""
    for dtype in ("f32", "f16"):
        path = scratch(f"fmt_random_bias_{dtype}.llmw")
        export("random", "--dim", 48, "--hidden-dim", 100, "--layers", 3, "--heads", 6, "--kv-heads", 2,
               "--head-size", 12, "--vocab", 97, "--seq-len", 64, "--unshared", "--norm-bias", "--qkv-bias",
               "--qk-norm", "--seed", 5, "--dtype", dtype, path)
        toks = [1] + [(i * 13 + 5) % 97 for i in range(40)]
        combos = [(n, p, f, q) for n in ("rms", "layer") for p in ("pre", "post") for f in ("on", "off")
                  for q in ("on", "off")]
        outs = {c: scratch(f"fmt_ref_{dtype}_{'_'.join(c)}.f32") for c in combos}
        py("import reference\n"
           f"w = reference.load_checkpoint({path!r})\n"
           f"for (n, p, f, q), o in {list(outs.items())!r}:\n"
           f"    reference.forward(w, {toks!r}, n, p, f, None, q).numpy().astype('<f4').tofile(o)\n")
        for combo in combos:
            for mode in ("prefill", "decode"):
                def one(path=path, combo=combo, mode=mode, toks=toks, out=outs[combo]):
                    import array
                    ref = array.array("f")
                    with open(out, "rb") as f:
                        ref.frombytes(f.read())
                    got = logits(path, toks, mode, ["--norm", combo[0], "--norm-pos", combo[1], "--final-norm", combo[2],
                                                    "--qk-norm", combo[3]])
                    d = rel(got, ref)
                    print(f"   {'/'.join(combo)} {mode}: max rel diff {d:.3g}")
                    assert d <= TOL_REF, (combo, mode, d)
                yield f"{dtype}-{'-'.join(combo[:3])}-qk{combo[3]}-{mode}", one


def test_llmw_header_defaults_used():
    """The header's norm settings apply without flags (post-LayerNorm, final off, eps 1e-3)."""
    path = scratch("fmt_random_post_layer.llmw")
    export("random", "--dim", 32, "--hidden-dim", 80, "--layers", 2, "--heads", 4, "--kv-heads", 4, "--vocab", 61,
           "--seq-len", 32, "--norm", "layer", "--norm-pos", "post", "--final-norm", "off", "--norm-eps", "1e-3",
           "--norm-bias", "--seed", 9, path)
    toks = [1, 5, 9, 60, 2, 33, 17]
    out = scratch("fmt_ref_defaults.f32")
    py("import reference\n"
       f"w = reference.load_checkpoint({path!r})\n"
       f"reference.forward(w, {toks!r}).numpy().astype('<f4').tofile({out!r})\n")
    import array
    ref = array.array("f")
    with open(out, "rb") as f:
        ref.frombytes(f.read())
    d = rel(logits(path, toks), ref)
    assert d <= TOL_REF, d
    rc, so, err = run([path, "--info"])
    assert rc == 0, err
    assert "norm: layer, post-norm, final norm off, eps 0.001, with biases" in err, err


def test_hf_directory_matches_reference():
    """A tiny HF Llama directory (bf16, HF names, HF's half-split rotary layout), converted
    by export.py, against a reference that runs HF's layout (rotate_half) on the HF weights."""
    folder = scratch("fmt_hf")
    ckpt = scratch("fmt_hf.llmw")
    out = scratch("fmt_hf_ref.f32")
    toks = [1] + [(i * 7 + 3) % 50 for i in range(33)]   # HF_CFG's vocabulary is 50
    py(f"""
import sys, numpy as np, torch
sys.path.insert(0, {common.TESTS!r})
import test_export, reference
known = test_export.make_hf({folder!r}, dtype="bf16", seed=3)
c = test_export.HF_CFG
assert c["V"] == 50, c
nh, nkv = c["nh"], c["nkv"]
w = reference._empty_weights(dict(dim=c["dim"], hidden_dim=c["hidden"], n_layers=c["L"], n_heads=nh,
                                  n_kv_heads=nkv, vocab_size=c["V"], seq_len=c["S"], shared_classifier=False))
w["config"].update(rope_layout="half", rope_theta=50000.0, norm_eps=1e-6)
t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
w["tok_embeddings"], w["classifier"], w["final_norm"] = t(known["tok_embeddings"]), t(known["classifier"]), t(known["final_norm"])
for l in range(c["L"]):
    k = lambda n: known[f"layers.{{l}}.{{n}}"]
    w["layers"].append(dict(att_norm=t(k("attn_norm")), att_norm_bias=None, ffn_norm=t(k("ffn_norm")), ffn_norm_bias=None,
        wq=t(test_export.hf_permute(torch.from_numpy(k("wq")), nh).numpy()),
        wk=t(test_export.hf_permute(torch.from_numpy(k("wk")), nkv).numpy()),
        wv=t(k("wv")), wo=t(k("wo")), w1=t(k("w1")), w2=t(k("w2")), w3=t(k("w3"))))
reference.forward(w, {toks!r}).numpy().astype('<f4').tofile({out!r})
""")
    export(folder, ckpt)
    import array
    ref = array.array("f")
    with open(out, "rb") as f:
        ref.frombytes(f.read())
    for mode in ("prefill", "decode"):
        d = rel(logits(ckpt, toks, mode), ref)
        print(f"   hf bf16 {mode}: max rel diff {d:.3g}")
        assert d <= TOL_REF, (mode, d)


# ---- llama2.c's ak42 files, written here from the legacy tensors ----

def write_ak42(src, dst, version, group=0):
    py(f"""
import struct, numpy as np, reference
w = reference.load_checkpoint({src!r})
c = w["config"]
L = c["n_layers"]
f32 = lambda a: np.asarray(a, dtype='<f4').tobytes()
head = struct.pack('<Ii7i', 0x616b3432, {version}, c["dim"], c["hidden_dim"], L, c["n_heads"], c["n_kv_heads"],
                   c["vocab_size"], c["seq_len"]) + struct.pack('<B', int(c["shared_classifier"]))
if {version} == 2: head += struct.pack('<i', {group})
out = [head + b'\\0' * (256 - len(head))]
out += [f32(lw["att_norm"]) for lw in w["layers"]] + [f32(lw["ffn_norm"]) for lw in w["layers"]] + [f32(w["final_norm"])]
def q(a):   # llama2.c's Q8_0: groups of the flattened tensor, scale max|w|/127, round
    a = np.asarray(a, dtype=np.float32).reshape(-1, {group or 1})
    s = np.abs(a).max(axis=1) / 127.0
    qv = np.round(a / np.where(s == 0, 1, s)[:, None]).astype(np.int8)
    return qv.tobytes() + s.astype('<f4').tobytes()
enc = f32 if {version} == 1 else q
out.append(enc(w["tok_embeddings"]))
for name in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
    out += [enc(lw[name]) for lw in w["layers"]]
if not c["shared_classifier"]:
    out.append(enc(w["classifier"]))
open({dst!r}, 'wb').write(b''.join(out))
""")


def test_ak42_files():
    v1 = scratch("fmt_ak42_v1.bin")
    write_ak42(LEGACY, v1, 1)
    assert list(logits(v1)) == list(logits(LEGACY)), "ak42 v1 logits differ from the legacy file's"
    assert greedy(v1) == open(model("stories260K.greedy200.txt"), "rb").read()
    # int8: a random model whose rows the groups divide
    src = scratch("fmt_ak42_src.bin")
    py(f"import reference; reference.write_random_legacy({src!r}, 64, 128, 2, 4, 2, 97, 64, 4, False)")
    v2 = scratch("fmt_ak42_v2.bin")
    write_ak42(src, v2, 2, 32)
    toks = [1] + [(i * 5 + 2) % 97 for i in range(30)]
    d = rel(logits(v2, toks), logits(src, toks))
    print(f"   ak42 v2 (int8, group 32) vs f32: max rel diff {d:.3g}")
    assert d <= TOL_Q8, d
    # stories260K with groups of 64 spanning w2's rows of 172: refused, pointing at export.py
    bad = scratch("fmt_ak42_v2_span.bin")
    write_ak42(LEGACY, bad, 2, 64)
    rc, out, err = run([bad, "-z", TOK, "-n", "4"])
    assert rc == 1 and "span" in err and "export.py" in err, err


# ---- malformed LLMW files ----


def refused_in_one_line(name, blob, word):
    """./run on the bytes blob exits 1 with one line, 'error: ...', whose message
    (not the file's name) holds word."""
    path = scratch(f"fmt_bad_{name}.llmw")
    with open(path, "wb") as f:
        f.write(blob)
    rc, out, err = run([path, "-z", TOK, "-n", "4"])
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("error:"), (rc, err[-2000:])
    assert word in lines[0].replace(path, ""), lines[0]

def test_malformed_llmw_refused():
    good = open(exported("q8_0"), "rb").read()

    def patched(off, fmt, value, *more):
        """good with value packed at off (and more (off, fmt, value) triples after it)."""
        b = bytearray(good)
        more = [(off, fmt, value)] + [more[i:i + 3] for i in range(0, len(more), 3)]
        for o, f, v in more:
            struct.pack_into(f, b, o, v)
        return bytes(b)

    # version 2's directory: entry i at 256 + 40 i (kind, layer, type, group, rows,
    # cols: u32; offset, scale offset: u64); stories260K's entry 1 is layer 0's
    # attn_norm, 2 its wq (q8_0), the last one final_norm (the classifier is shared)
    assert struct.unpack_from("<I", good, 4) == (2,), "export.py writes version 2"
    count = struct.unpack_from("<I", good, 96)[0]
    entry = lambda i, field: 256 + 40 * i + field
    wq_off, wq_scales = struct.unpack_from("<QQ", good, entry(2, 24))
    cases = {
        "truncated": (good[:-100], "truncated"),
        "truncated_header": (good[:100], "truncated"),
        "trailing": (good + b"\0" * 64, "bytes"),
        "newer_version": (patched(4, "<I", 3), "newer"),
        "misaligned": (patched(12, "<I", 32), "alignment"),
        "header_size": (patched(8, "<I", 128), "header"),
        "file_size_field": (patched(88, "<Q", len(good) + 64), "records"),
        "head_size": (patched(44, "<i", 16), "head_size"),
        "weight_type": (patched(76, "<I", 7), "weight type"),
        "group_size_zero": (patched(80, "<I", 0), "group size"),
        "norm_type": (patched(48, "<I", 5), "norm_type"),
        "norm_bias_flag": (patched(84, "<I", 3), "norm_bias"),
        "eps_nan": (patched(60, "<f", float("nan")), "eps"),
        "huge_dim": (patched(16, "<i", 1 << 30), "dim"),
        "rope_layout": (patched(68, "<I", 9), "rope_layout"),
        # version 2's header fields
        "v2_tensor_count": (patched(96, "<I", count + 1), "tensor_count"),
        "v2_tensor_count_huge": (patched(96, "<I", 0xFFFFFFFF), "tensor_count"),
        "v2_directory_offset": (patched(104, "<Q", 2**62), "directory"),
        "v2_directory_offset_wraps": (patched(104, "<Q", 2**64 - 8), "directory"),
        "v2_directory_inside_header": (patched(104, "<Q", 64), "directory"),
        "v2_reserved": (patched(200, "<B", 1), "reserved"),
        "v2_rope_scaling": (patched(100, "<I", 7), "rope_scaling"),
        "v2_rope_factor_nan": (patched(100, "<I", 1, 112, "<f", float("nan")), "factor"),
        "v2_rope_factor_zero": (patched(100, "<I", 2, 112, "<f", 0.0), "factor"),
        "v2_llama3_high_below_low": (patched(100, "<I", 2, 112, "<f", 8.0, 116, "<f", 4.0, 120, "<f", 1.0,
                                             124, "<i", 64), "high_freq_factor"),
        "v2_llama3_orig_ctx": (patched(100, "<I", 2, 112, "<f", 8.0, 116, "<f", 1.0, 120, "<f", 4.0,
                                       124, "<i", -5), "original context"),
        "v2_qkv_bias_without_tensors": (patched(128, "<I", 1), "tensor_count"),
        "v2_qk_norm_flag": (patched(132, "<I", 2), "qk_norm"),
        "v2_out_norm_flag": (patched(136, "<I", 2), "out_norm"),
        "v2_out_norm_without_tensors": (patched(136, "<I", 1), "tensor_count"),
        "v2_qk_norm_whole_flag": (patched(140, "<I", 2), "qk_norm_whole"),
        "v2_qk_norm_whole_without_qk_norm": (patched(140, "<I", 1), "qk_norm_whole"),
        "v2_ffn_act": (patched(144, "<I", 2), "ffn_act"),
        "v2_embed_scale": (patched(148, "<f", -1.0), "embed_scale"),
        "v2_query_scalar": (patched(152, "<f", float("inf")), "query_scalar"),
        "v2_sliding_window": (patched(156, "<i", -1), "sliding_window"),
        "v2_local_layers_without_window": (patched(160, "<Q", 1), "sliding_window"),
        "v2_reserved_after_gemma_fields": (patched(172, "<B", 1), "reserved"),
        "norm_pos": (patched(52, "<I", 4), "norm_pos"),
        # its directory entries
        "v2_kind": (patched(entry(1, 0), "<I", 99), "kind"),
        "v2_kind_out_norm_not_flagged": (patched(entry(1, 0), "<I", 20), "flags"),
        "v2_kind_not_flagged": (patched(entry(1, 0), "<I", 6), "flags"),
        "v2_layer": (patched(entry(1, 4), "<I", 7), "layer"),
        "v2_model_level_layer": (patched(entry(0, 4), "<I", 0), "layer"),
        "v2_order": (good[:entry(3, 0)] + good[entry(4, 0):entry(5, 0)] + good[entry(3, 0):entry(4, 0)]
                     + good[entry(5, 0):], "order"),   # wk and wv swapped
        "v2_repeated": (patched(entry(3, 0), "<I", 3), "order"),
        "v2_shape": (patched(entry(2, 16), "<I", 65), "shape"),
        "v2_type": (patched(entry(2, 8), "<I", 0), "type"),
        "v2_group": (patched(entry(2, 12), "<I", 16), "group"),
        "v2_offset_misaligned": (patched(entry(2, 24), "<Q", wq_off + 4), "multiple of 64"),
        "v2_scales_misaligned": (patched(entry(2, 32), "<Q", wq_scales + 4), "multiple of 64"),
        "v2_overlap": (patched(entry(3, 24), "<Q", wq_off), "overlap"),
        "v2_scales_missing": (patched(entry(2, 32), "<Q", 0), "needs scales"),
        "v2_scales_inside_values": (patched(entry(2, 32), "<Q", wq_off), "overlap its values"),
        "v2_scales_on_vector": (patched(entry(1, 32), "<Q", wq_off), "has no scales"),
        "v2_offset_past_end": (patched(entry(count - 1, 24), "<Q", 2**64 - 64), "truncated"),
        "v2_scales_past_end": (patched(entry(count - 2, 32), "<Q", 2**63), "truncated"),
        "v2_directory_cut": (good[:256 + 40 * count - 8], "directory"),
    }
    for name, (blob, word) in cases.items():
        yield name, lambda blob=blob, word=word, name=name: refused_in_one_line(name, blob, word)


def q4_K_wide():
    """A random model whose every matrix row is a multiple of 256 wide, in q4_K: all
    q4_K (stories260K's rows of 64 and 172 are stored q4_0, FORMAT.md)."""
    path = scratch("fmt_wide_q4_k.llmw")
    if not os.path.exists(path):
        export("random", "--dim", 256, "--hidden-dim", 512, "--layers", 1, "--heads", 4, "--kv-heads", 4,
               "--vocab", 512, "--seq-len", 32, "--dtype", "q4_K", path)
    return path


def test_malformed_q4_llmw_refused():
    """LLMW q4_0 / q4_K files with a bad field: one line naming it, exit 1."""
    for dtype in ("q4_0", "q4_K"):
        good = open(exported(dtype) if dtype == "q4_0" else q4_K_wide(), "rb").read()

        def patched(off, fmt, value):
            b = bytearray(good)
            struct.pack_into(fmt, b, off, value)
            return bytes(b)
        entry = lambda i, field: 256 + 40 * i + field   # entry 2: layer 0's wq
        wq_off = struct.unpack_from("<Q", good, entry(2, 24))[0]
        other = 6 if dtype == "q4_0" else 5
        cases = {
            "group_size": (patched(80, "<I", 32), "must be 0"),
            "gguf_only_type": (patched(76, "<I", 4), "unknown to LLMW"),
            "bf16_type": (patched(76, "<I", 3), "unknown to LLMW"),
            "other_q4_type": (patched(76, "<I", other), "type"),
            "entry_type": (patched(entry(2, 8), "<I", other), "type"),
            "entry_group": (patched(entry(2, 12), "<I", 32), "group"),
            "scales_given": (patched(entry(2, 32), "<Q", wq_off + 4096), "has no scales"),
            "truncated": (good[:-1], "truncated"),
            "trailing": (good + b"\0" * 64, "bytes"),
            "huge_hidden": (patched(20, "<i", 1 << 19), "shape"),
        }
        if dtype == "q4_0":
            # stories260K in q4_0 with the header saying q4_K is a valid q4_K file:
            # its rows (64, 172) are not whole superblocks, so q4_K stores them q4_0
            del cases["other_q4_type"]
        if dtype == "q4_K":
            # stories260K's q4_K file: its rows (64, 172) must be q4_0, so an entry
            # that says q4_K is refused
            narrow = open(exported("q4_K"), "rb").read()
            b = bytearray(narrow)
            struct.pack_into("<I", b, entry(2, 8), 6)
            cases["narrow_row_as_q4_k"] = (bytes(b), "multiple of 256")
        for name, (blob, word) in cases.items():
            name = f"{dtype}_{name}"
            yield name, lambda blob=blob, word=word, name=name: refused_in_one_line(name, blob, word)
