"""OLMo 2 (Olmo2ForCausalLM) end to end (issue 26, item 3): a scaled-down
random Hugging Face folder (written here, safetensors by numpy), converted by
export.py to the out placement (h = x + N2(attn(x)), y = h + N4(ffn(h))) with
q/k norms over the whole q and k projections, scored by `./run -m eval`
against the independent float64 reference (tests/reference_olmo2.py, written
from transformers' modeling_olmo2.py): mean NLL within 1e-3 in f32. Each
likely mistake (per-head q/k norm, no q/k norm, no output norms, input norms
as well, no final norm) moves the reference's NLL by more than 10 times that,
and the engine run with the flag that makes the same mistake (--qk-norm off,
--norm-pos peri, --final-norm off) lands on the mistaken reference instead.
Prefill, decode and chunked batches give the same logits bit for bit
(build/logits); --info names the placement and the q/k norm; export.py
refuses what OLMo 2 folders cannot hold. The folder written as GGUF
(llama.cpp's olmo2) reads back to the reference's NLL (f32, f16, q8_0) and
to the LLMW's.
"""
import json
import os
import subprocess

import numpy as np

import common
import hf_eval
from common import run, scratch
import reference_olmo2 as ref

REF_PYTHON = hf_eval.REF_PYTHON
LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
EXPORT = hf_eval.EXPORT
# the 1B config's keys (allenai/OLMo-2-0425-1B), scaled down; grouped kv heads so k's
# norm spans fewer values than q's; eps and theta apart from the defaults
CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=512, max_position_embeddings=128, rope_theta=500000.0,
              rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=False, attention_bias=False,
              attention_dropout=0.0, pad_token_id=1, eos_token_id=2)
# heads of different sizes (q/k rows' gains 0.2..5), sublayer outputs 4x (what N2, N4
# undo), embeddings of std 0.1 (what input norms would rescale), a final gain of 4
# (sharper logits): so each mistake shows in the NLL
SEED, GAINS = 7, dict(head_gains=(0.2, 5.0), final_gain=4.0, out_gain=4.0, emb_std=0.1)
TOL = 1e-3           # |NLL engine - NLL reference|, f32 weights
NEED = 10 * TOL      # each mistake must move the reference's NLL by more
CTX = 64             # eval windows of 64 overlapping by one: the text takes three


def folder_and_model():
    return hf_eval.exported_folder("olmo2", lambda folder: ref.write_random_folder(folder, CONFIG, SEED, **GAINS))


def text_and_tokens():
    return hf_eval.text_and_tokens("olmo2")


def reference_nll(w, tokens, mistakes=frozenset(), ctx=CTX):
    return hf_eval.windowed_nll(lambda win: ref.nll(w, win, mistakes), tokens, ctx)


def engine_nll(path, text, extra=()):
    return hf_eval.engine_nll(path, text, CTX, extra)


def test_eval_matches_reference():
    folder, path = folder_and_model()
    text, tokens = text_and_tokens()
    w = ref.load(folder)
    want, n = reference_nll(w, tokens)
    got, m = engine_nll(path, text)
    print(f"   engine nll {got:.6f}, reference {want:.6f} over {n} tokens: diff {got - want:+.2e}")
    assert m == n, (m, n)
    assert abs(got - want) <= TOL, (got, want)


def test_each_mistake_moves_the_nll():
    """The reference with each mistake against the right one; where a flag makes the
    engine commit the same mistake, the engine follows the mistaken reference."""
    folder, path = folder_and_model()
    text, tokens = text_and_tokens()
    w = ref.load(folder)
    base = reference_nll(w, tokens)[0]
    flags = {"no_qk_norm": ["--qk-norm", "off"], "input_norms": ["--norm-pos", "peri"],
             "no_final_norm": ["--final-norm", "off"]}
    for mistake in ref.MISTAKES:
        def one(mistake=mistake):
            wrong = reference_nll(w, tokens, {mistake})[0]
            print(f"   {mistake}: reference nll {wrong:.6f}, moved {wrong - base:+.4f}")
            assert abs(wrong - base) > NEED, f"{mistake} moves the NLL by only {wrong - base:+.3g}"
            if mistake in flags:
                got = engine_nll(path, text, flags[mistake])[0]
                print(f"   engine {' '.join(flags[mistake])}: nll {got:.6f}")
                assert abs(got - wrong) <= TOL, (mistake, got, wrong)
        yield mistake, one


def test_prefill_equals_decode():
    """build/logits on 40 tokens: one batch, one token a call, batches of 5: the same
    float32 bytes; and within 1e-4 of the reference's largest logit."""
    folder, path = folder_and_model()
    tokens = text_and_tokens()[1][:40]
    got = {}
    for mode in ("prefill", "decode", "chunked"):
        out = scratch(f"olmo2_{mode}_{os.getpid()}.f32")
        rc, _, err = run([path, "--tokens", ",".join(map(str, tokens)), "--mode", mode, "--out", out], binary=LOGITS)
        assert rc == 0, err
        got[mode] = open(out, "rb").read()
        os.remove(out)
    assert got["prefill"] == got["decode"] == got["chunked"], "prefill, decode and chunked logits differ"
    c = np.frombuffer(got["prefill"], "<f4").reshape(len(tokens), CONFIG["vocab_size"]).astype(np.float64)
    r = ref.forward(ref.load(folder), tokens)
    rel = float(np.abs(c - r).max() / np.abs(r).max())
    print(f"   prefill = decode = chunked; max rel diff to the reference {rel:.3g}")
    assert rel <= 1e-4, rel


def test_export_carries_the_model():
    """tests/reference.py (torch) on the exported LLMW (interleaved RoPE, permuted q/k
    rows and q/k norm weights, read by tests/llmw.py) equals reference_olmo2 on the
    HF files: the permutations and header fields carry the model, independently of
    the engine."""
    folder, path = folder_and_model()
    tokens = text_and_tokens()[1][:40]
    out = scratch(f"olmo2_torchref_{os.getpid()}.f32")
    code = (f"import sys; sys.path.insert(0, {common.TESTS!r})\n"
            "import reference\n"
            f"w = reference.load_checkpoint({path!r})\n"
            f"reference.forward(w, {tokens!r}).numpy().astype('<f8').tofile({out!r})\n")
    p = subprocess.run([REF_PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    a = np.fromfile(out, "<f8").reshape(len(tokens), -1)
    os.remove(out)
    b = ref.forward(ref.load(folder), tokens)
    rel = float(np.abs(a - b).max() / np.abs(b).max())
    print(f"   reference.py on the LLMW vs reference_olmo2 on the HF folder: {rel:.3g}")
    assert rel <= 1e-9, rel


def test_info():
    _, path = folder_and_model()
    rc, _, err = run([path, "--info"])
    assert rc == 0, err
    assert "out-norm (output norms stored)" in err and "final norm on, eps 1e-06" in err, err
    assert "rope theta 500000" in err and "q/k norm on (over the whole q and k)" in err, err
    rc, _, err = run([path, "--info", "--qk-norm", "off"])
    assert rc == 0 and "q/k norm off (over the whole q and k) (weights stored)" in err, err


def test_export_refuses():
    """What an OLMo 2 folder may say that the engine cannot honour: refused by name,
    nothing written."""
    folder, _ = folder_and_model()
    t = ref.read_safetensors(os.path.join(folder, "model.safetensors"))
    cases = [("attention_bias", dict(attention_bias=True), None, ["attention_bias"]),
             ("input_norm", {}, "model.layers.0.input_layernorm.weight", ["input_layernorm", "OLMo 2"]),
             ("gguf", {}, None, ["gguf", "llama.cpp's olmo2", "out placement"]),
             ("v1", {}, None, ["version 1", "qk_norm"])]
    for name, conf, extra_tensor, words in cases:
        def one(name=name, conf=conf, extra_tensor=extra_tensor, words=words):
            bad = scratch(f"olmo2_bad_{name}")
            ref.write_random_folder(bad, dict(CONFIG, **conf), SEED, **GAINS)
            if extra_tensor:   # the folder plus one tensor OLMo 2 does not have
                tensors = dict(t)
                tensors[extra_tensor] = np.ones(CONFIG["hidden_size"])
                _write_f32(os.path.join(bad, "model.safetensors"), tensors)
            out = scratch(f"olmo2_bad_{name}.out")
            if os.path.exists(out):
                os.remove(out)
            args = {"gguf": ["--format", "gguf", "--norm-pos", "peri"], "v1": ["--llmw-version", "1"]}.get(name, [])
            p = subprocess.run([REF_PYTHON, EXPORT, bad, out] + args, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=300)
            err = p.stderr.decode()
            assert p.returncode == 1, err
            last = err.strip().splitlines()[-1]
            for word in words:
                assert word in last, (word, last)
            assert not os.path.exists(out), "a refused conversion left its output"
        yield name, one


def _write_f32(path, tensors):
    """An F32 safetensors file of {name: array}."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        raw = np.asarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(tensors[name])), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


# ---------------------------------------------------------------- GGUF olmo2

GGUF_TOL = {"f32": 1e-4, "f16": 2e-3, "q8_0": 1e-2}   # |NLL GGUF - reference| (seen: f32 3e-7, f16 8e-5, q8_0 1.1e-3)
GGUF_SAME = 2e-6     # |NLL GGUF f32 - NLL LLMW f32| as eval prints them (6 decimals): the same math,
                     # only q/k rows in another order


def test_gguf_matches_reference_and_llmw():
    """export.py --format gguf (llama.cpp's olmo2: post_attention_norm, post_ffw_norm,
    q/k norms over the whole projections, rows in Hugging Face's half-split order) read
    back: f32 within 1e-4 of the reference and equal to the LLMW's to eval's printed
    digits (2e-6); f16 and q8_0 within their rounding's reach of the reference."""
    folder, path = folder_and_model()
    text, tokens = text_and_tokens()
    want = reference_nll(ref.load(folder), tokens)[0]
    yield from hf_eval.gguf_cases("olmo2", folder, path, text, want, GGUF_TOL, GGUF_SAME, CTX)
