"""Gemma 3 text models (Gemma3ForCausalLM) end to end (issue 26, item 2, the
model): a scaled-down random Hugging Face folder with the 270M config's keys
(tests/reference_gemma3.py's writer, bfloat16), converted by export.py (peri
placement, norm weights stored as w + 1, GELU-tanh gate, embedding scale,
query_pre_attn_scalar, sliding-window local layers with their own RoPE
base), scored by `./run -m eval` against the independent float64 reference
(tests/reference_gemma3.py, written from transformers' modeling_gemma3.py):
mean NLL within 1e-3 in f32, on a text of 187 tokens in windows of 64 that
cross the sliding window of 8 many times. Each likely mistake moves the
reference's NLL by more than 10 times that (the GELU form, which moves the
NLL least, is told apart on the logits instead), and the engine run with the
flag that makes the same mistake (--norm-pos pre: no output norms) lands on
the mistaken reference. Prefill, decode and chunked batches give the same
logits bit for bit (build/logits), and the local layers' KV ring the same
bits as full rows; --info prints the new fields and the ring's saving; export.py
refuses what it cannot honour (soft-capping, another activation,
bidirectional attention). A float32 folder written as GGUF (llama.cpp's
gemma3) reads back to the reference's NLL (f32, f16, q8_0) and to the
LLMW's; what llama.cpp's gemma3 would compute differently is refused; its
GGUF sentencepiece tokenizer (no dummy prefix) is refused with a pointer to -z.
"""
import os
import subprocess

import numpy as np

import common
import hf_eval
from common import run, scratch
import reference_gemma3 as ref

REF_PYTHON = hf_eval.REF_PYTHON
LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
EXPORT = hf_eval.EXPORT
# the 270M config's keys, scaled down: 5 sliding layers and 1 full, one kv head, head_dim
# apart from hidden / heads, a window of 8, query_pre_attn_scalar != head_dim, bfloat16
# (sqrt(72) = 8.485 rounds to 8.5)
CONFIG = dict(hidden_size=72, intermediate_size=160, num_hidden_layers=6, num_attention_heads=4,
              num_key_value_heads=1, head_dim=32, vocab_size=512, max_position_embeddings=256,
              sliding_window=8, rope_theta=1000000.0, rope_local_base_freq=10000.0,
              query_pre_attn_scalar=12, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
              attn_logit_softcapping=None, final_logit_softcapping=None, torch_dtype="bfloat16",
              tie_word_embeddings=True, bos_token_id=2, eos_token_id=1,
              layer_types=["sliding_attention"] * 5 + ["full_attention"])
SEED, FINAL_GAIN = 3, 8.0   # the final norm's gain sharpens the tied head's logits
TOL = 1e-3           # |NLL engine - NLL reference|, f32 weights
NEED = 10 * TOL      # each mistake (but the GELU form) must move the reference's NLL by more
CTX = 64             # eval windows of 64 overlapping by one: the text takes four
LOGIT_TOL = 1e-5     # max |logit engine - reference| / max |reference logit| (f32)


def folder_and_model():
    return hf_eval.exported_folder("gemma3", lambda folder: ref.write_random_folder(folder, CONFIG, SEED, final_gain=FINAL_GAIN))


def text_and_tokens():
    return hf_eval.text_and_tokens("gemma3")


def reference_nll(w, tokens, mistakes=frozenset(), ctx=CTX):
    return hf_eval.windowed_nll(lambda win: ref.nll(w, win, mistakes), tokens, ctx)


def engine_nll(path, text, extra=()):
    return hf_eval.engine_nll(path, text, CTX, extra)


def test_eval_matches_reference():
    folder, path = folder_and_model()
    text, tokens = text_and_tokens()
    assert len(tokens) > 2 * CTX > 4 * CONFIG["sliding_window"]
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
    flags = {"no_output_norms": ["--norm-pos", "pre"]}
    for mistake in ref.MISTAKES:
        if mistake == "gelu_erf":
            continue   # moves the NLL by ~1e-4 only: test_logits_match_reference tells it apart
        def one(mistake=mistake):
            wrong = reference_nll(w, tokens, {mistake})[0]
            print(f"   {mistake}: reference nll {wrong:.6f}, moved {wrong - base:+.4f}")
            assert abs(wrong - base) > NEED, f"{mistake} moves the NLL by only {wrong - base:+.3g}"
            if mistake in flags:
                got = engine_nll(path, text, flags[mistake])[0]
                print(f"   engine {' '.join(flags[mistake])}: nll {got:.6f}")
                assert abs(got - wrong) <= TOL, (mistake, got, wrong)
        yield mistake, one


def _logits(path, tokens, mode):
    out = scratch(f"gemma3_{mode}_{os.getpid()}.f32")
    rc, _, err = run([path, "--tokens", ",".join(map(str, tokens)), "--mode", mode, "--out", out], binary=LOGITS)
    assert rc == 0, err
    got = open(out, "rb").read()
    os.remove(out)
    return got


def test_prefill_equals_decode():
    """build/logits on 60 tokens (the window of 8 crossed): one batch, one token a
    call, batches of 5: the same float32 bytes."""
    _, path = folder_and_model()
    tokens = text_and_tokens()[1][:60]
    got = {mode: _logits(path, tokens, mode) for mode in ("prefill", "decode", "chunked")}
    assert got["prefill"] == got["decode"] == got["chunked"], "prefill, decode and chunked logits differ"


def test_ring_equals_full_rows():
    """The local layers' KV ring (2 x sliding_window rows, where it fits in the
    context) against full rows (a context of 2 x window, so no ring) on 16 tokens
    crossing the window of 8: the same float32 bytes, prefill and decode."""
    _, path = folder_and_model()
    tokens = text_and_tokens()[1][:16]
    got = {}
    for ctx in (16, 256):
        for mode in ("prefill", "decode"):
            out = scratch(f"gemma3_ring_{ctx}_{mode}_{os.getpid()}.f32")
            rc, _, err = run([path, "--tokens", ",".join(map(str, tokens)), "--mode", mode, "--ctx", ctx, "--out", out],
                             binary=LOGITS)
            assert rc == 0, err
            got[ctx, mode] = open(out, "rb").read()
            os.remove(out)
    assert len(set(got.values())) == 1, "the ring's logits differ from full rows' (or prefill from decode)"


def test_logits_match_reference():
    """The engine's logits on 60 tokens within LOGIT_TOL (relative to the largest) of
    the reference's, and every mistaken reference, the GELU form included, more than
    10 times as far."""
    folder, path = folder_and_model()
    tokens = text_and_tokens()[1][:60]
    c = np.frombuffer(_logits(path, tokens, "prefill"), "<f4").reshape(len(tokens), -1).astype(np.float64)
    w = ref.load(folder)
    r = ref.forward(w, tokens).numpy()
    rel = float(np.abs(c - r).max() / np.abs(r).max())
    print(f"   max rel diff to the reference {rel:.3g}")
    assert rel <= LOGIT_TOL, rel
    for mistake in ref.MISTAKES:
        bad = ref.forward(w, tokens, {mistake}).numpy()
        d = float(np.abs(c - bad).max() / np.abs(bad).max())
        print(f"   {mistake}: engine to the mistaken reference {d:.3g}")
        assert d > 10 * LOGIT_TOL, (mistake, d)


def test_info():
    _, path = folder_and_model()
    rc, _, err = run([path, "--info"])
    assert rc == 0, err
    assert "peri-norm (output norms stored)" in err and "q/k norm on" in err, err
    assert ("gemma: ffn gelu_tanh, embed scale 8.5, scores / sqrt(12), sliding window 8 on 5 of 6 layers "
            "(local rope theta 10000; global: 5)") in err, err
    assert "rope theta 1e+06" in err, err
    # the KV cache at a context of 256: 5 local layers' rings of 16 rows, 1 global layer of 256, 32 f32 a row
    # for keys and as many for values; without the rings 6 x 256 rows
    rc, out, err = run([path, "--info", "--ctx", 256])
    assert rc == 0, err
    text = out.decode() + err
    assert f"kv cache {(5 * 16 + 256) * 32 * 4 * 2:16d} bytes" in text, text
    assert f"without the local layers' rings (of 2 x sliding window 8 positions): {6 * 256 * 32 * 4 * 2} bytes" in text, text


def test_header_fields_read_independently():
    # tests/llmw.py reads the header from FORMAT.md's table, not from export.py
    import llmw
    _, path = folder_and_model()
    with open(path, "rb") as f:
        h = llmw.read_header(f.read(256))
    assert (h["version"], h["out_norm"], h["qk_norm"], h["qk_norm_whole"]) == (2, 1, 1, 0), h
    assert (h["ffn_act"], h["embed_scale"], h["query_scalar"]) == (1, 8.5, 12.0), h
    assert (h["sliding_window"], h["local_layers"], h["rope_local_theta"]) == (8, 0b011111, 10000.0), h


def test_export_refuses():
    """What a Gemma 3 folder may say that the engine cannot honour: refused by name,
    nothing written."""
    cases = [("attn_softcap", dict(attn_logit_softcapping=50.0), "attn_logit_softcapping"),
             ("final_softcap", dict(final_logit_softcapping=30.0), "final_logit_softcapping"),
             ("gelu_erf", dict(hidden_activation="gelu"), "hidden_activation"),
             ("layer_types", dict(layer_types=["sliding_attention"] * 5), "layer_types"),
             ("bidirectional", dict(use_bidirectional_attention=True), "use_bidirectional_attention")]
    for name, conf, word in cases:
        def one(name=name, conf=conf, word=word):
            bad = scratch(f"gemma3_bad_{name}")
            ref.write_random_folder(bad, dict(CONFIG, **conf), SEED)
            out = scratch(f"gemma3_bad_{name}.out")
            if os.path.exists(out):
                os.remove(out)
            p = subprocess.run([REF_PYTHON, EXPORT, bad, out], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=300)
            err = p.stderr.decode()
            assert p.returncode == 1, err
            assert word in err.strip().splitlines()[-1], (word, err)
            assert not os.path.exists(out), "a refused conversion left its output"
        yield name, one


# ---------------------------------------------------------------- GGUF gemma3

# What llama.cpp's gemma3 can hold: float32 (its embedding scale is sqrtf(hidden) in f32,
# not rounded to bfloat16), query_pre_attn_scalar = head_dim (it scales scores by
# 1/sqrt(key_length)), global layers where l % 6 == 5 (CONFIG's layer_types already)
GGUF_CONFIG = dict(CONFIG, torch_dtype="float32", query_pre_attn_scalar=32)
GGUF_TOL = {"f32": 1e-4, "f16": 2e-3, "q8_0": 1e-2}   # |NLL GGUF - reference| (seen: f32 6e-7, f16 6e-4, q8_0 2.2e-3)
GGUF_SAME = 2e-6     # |NLL GGUF f32 - NLL LLMW f32| as eval prints them (6 decimals): the same math,
                     # only q/k rows in another order


def gguf_folder_and_model():
    return hf_eval.exported_folder("gemma3_gguf", lambda folder: ref.write_random_folder(
        folder, GGUF_CONFIG, SEED, final_gain=FINAL_GAIN))


def test_gguf_matches_reference_and_llmw():
    """export.py --format gguf (llama.cpp's gemma3: its tensor names, norm weights as
    1 + w, q/k rows in Hugging Face's half-split order, sliding_window and
    rope.freq_base_swa) read back: f32 within 1e-4 of the float64 reference and equal
    to the LLMW's to eval's printed digits (2e-6); f16 and q8_0 within their
    rounding's reach of the reference."""
    folder, path = gguf_folder_and_model()
    text, tokens = text_and_tokens()
    want = reference_nll(ref.load(folder), tokens)[0]
    yield from hf_eval.gguf_cases("gemma3", folder, path, text, want, GGUF_TOL, GGUF_SAME, CTX)


def test_gguf_bfloat16_embedding_scale_is_llama_cpps():
    """A bfloat16 folder's GGUF: llama.cpp scales embeddings by sqrtf(72) = 8.48528 in
    f32 where transformers rounds it to bfloat16 (8.5); export.py says so, and the
    GGUF's NLL is the reference's with the exact scale (its embed_scale_exact
    mistake), not the reference's own."""
    folder = scratch("gemma3_gguf_bf16_hf")
    ref.write_random_folder(folder, dict(CONFIG, query_pre_attn_scalar=32), SEED, final_gain=FINAL_GAIN)
    path = scratch("gemma3_gguf_bf16.gguf")
    p = subprocess.run([REF_PYTHON, EXPORT, folder, path, "--format", "gguf"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    err = p.stderr.decode()
    assert p.returncode == 0 and "embedding scale 8.5" in err and "sqrtf(72) = 8.485281" in err, err
    text, tokens = text_and_tokens()
    w = ref.load(folder)
    hf, exact = reference_nll(w, tokens)[0], reference_nll(w, tokens, {"embed_scale_exact"})[0]
    got = engine_nll(path, text)[0]
    print(f"   gguf nll {got:.6f}, reference with sqrtf(72) {exact:.6f}, with bfloat16's 8.5 {hf:.6f}")
    assert abs(got - exact) <= GGUF_TOL["f32"] and abs(got - hf) > 10 * GGUF_TOL["f32"], (got, exact, hf)


def test_gguf_info_and_own_tokenizer():
    """--info of the GGUF prints what the reader set (sqrtf(72) = 8.48528, scores /
    sqrt(32), the window on 5 of 6 layers); export.py --format gguf writes a gemma3's
    sentencepiece tokenizer as llama.cpp's converter does (add_space_prefix false,
    tokenizer.ggml.pre "default", types 2/3/6/1) and the GGUF runs with it, no -z:
    its ids are llama.cpp's rule (test_gguf_tokenizer.spm_by_score) over the file's
    own arrays, with no dummy prefix."""
    folder, _ = gguf_folder_and_model()
    path = hf_eval.exported_gguf("gemma3", folder, "f32")
    rc, _, err = run([path, "-z", hf_eval.TOK, "--info"])
    assert rc == 0, err
    assert "peri-norm (output norms stored)" in err and "q/k norm on" in err, err
    assert "gemma: ffn gelu_tanh, embed scale 8.48528, scores / sqrt(32), sliding window 8 on 5 of 6 layers " \
           "(local rope theta 10000; global: 5)" in err, err
    with_tok = scratch("gemma3_gguf_tok.gguf")
    p = subprocess.run([REF_PYTHON, EXPORT, folder, with_tok, "--format", "gguf", "--tokenizer", hf_eval.TOK],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    import gguf_writer as gw
    from test_gguf_tokenizer import spm_by_score
    with open(with_tok, "rb") as f:
        kvs = gw.read(f.read())[1]
    assert kvs["tokenizer.ggml.add_space_prefix"][1] == 0 and kvs["tokenizer.ggml.pre"][1] == b"default", kvs.keys()
    tokens = [t.decode() for t in kvs["tokenizer.ggml.tokens"][1]]
    types, scores = kvs["tokenizer.ggml.token_type"][1], kvs["tokenizer.ggml.scores"][1]
    assert types[:4] == [2, 3, 3, 6] and types[259:] == [1] * (len(tokens) - 259), types[:8]
    text = b"Once upon a time,  there was a cat."
    rc, out, err = run([with_tok, "-m", "tokenize", "-i", text.decode()])
    want = [kvs["tokenizer.ggml.bos_token_id"][1]] + spm_by_score(tokens, scores, types, text, False)
    assert rc == 0 and [int(x) for x in out.split()] == want and not tokens[want[1]].startswith("\u2581"), (out, want, err)
    rc, out, err = run([with_tok, "-n", "4", "-t", "0"])
    assert rc == 0 and out, err
    rc, out, err = run([with_tok, "-z", hf_eval.TOK, "-n", "4", "-t", "0"])
    assert rc == 0 and out, err


def test_gguf_export_refuses():
    """What llama.cpp's gemma3 would compute differently is refused by name: another
    query_pre_attn_scalar (CONFIG's 12), local layers off its every-6th rule."""
    cases = [("query_scalar", CONFIG, "query_pre_attn_scalar"),
             ("pattern", dict(GGUF_CONFIG, layer_types=["sliding_attention"] * 4 + ["full_attention"] * 2),
              "gemma3 rule")]
    for name, conf, word in cases:
        def one(name=name, conf=conf, word=word):
            bad = scratch(f"gemma3_gguf_bad_{name}")
            ref.write_random_folder(bad, conf, SEED)
            out = scratch(f"gemma3_gguf_bad_{name}.gguf")
            if os.path.exists(out):
                os.remove(out)
            p = subprocess.run([REF_PYTHON, EXPORT, bad, out, "--format", "gguf"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=300)
            err = p.stderr.decode()
            assert p.returncode == 1 and word in err.strip().splitlines()[-1], (word, err)
            assert not os.path.exists(out), "a refused conversion left its output"
        yield name, one
