#!/usr/bin/python3
"""Seed corpora for the fuzz harnesses, written from scratch (no downloaded files).

  /usr/bin/python3 tests/fuzz/make_seeds.py OUT_DIR

OUT_DIR/checkpoint/  one small valid checkpoint per format and variant, named
                     FORMAT_DTYPE_VARIANT.bin (FORMAT: legacy, ak42v1, ak42v2,
                     LLMW): llama2.c's three formats written here, LLMW by
                     export.py's random writer (f32, f16, q8_0 with several
                     group sizes, LayerNorm biases, post-norm, separate classifier),
                     and LLMW_DTYPE_shape_*.bin inputs of fuzz_checkpoint's shape mode
OUT_DIR/tokenizer/   fuzz_tokenizer inputs: uint32 length, a tokenizer.bin
                     (tokenizers built here), a text
OUT_DIR/chat/        fuzz_chat inputs: system prompt, NUL, user turn
OUT_DIR/serve/       fuzz_serve inputs: bytes as a server connection receives them
OUT_DIR/gguf/        small valid GGUF files (tests/gguf_writer.py): llama in every
                     tensor type the engine reads, a tied and an untied
                     classifier, a tokenizer, alignment 64; qwen2, qwen3, gemma3
                     (a sliding window) and olmo2

Deterministic: the same files every run. Needs numpy (Debian's /usr/bin/python3).
"""
import contextlib
import io
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
import exporter.cli  # noqa: E402
import exporter.tok_byte_level  # noqa: E402
import exporter.tok_sentencepiece  # noqa: E402
import exporter.tok_write  # noqa: E402  (the LLMW writer via `random`, tokenizer.bin and LTOK bytes)

# Tiny shapes; every ak42 int8 group used with them fits the rows.
SHAPE = dict(dim=8, hidden_dim=16, n_layers=2, n_heads=2, n_kv_heads=1, vocab_size=13, seq_len=8)
# wider than a vector register, with tails (SIMD kernels and batched tiles)
WIDE = dict(dim=40, hidden_dim=36, n_layers=1, n_heads=4, n_kv_heads=2, vocab_size=33, seq_len=8)
# odd sizes: head size 2, context 2 (a batch only), vocabulary 5
ODD = dict(dim=6, hidden_dim=7, n_layers=1, n_heads=3, n_kv_heads=1, vocab_size=5, seq_len=2)
# multi-head attention (no grouping), llama2.c-style, groups of 16
MHA = dict(dim=32, hidden_dim=48, n_layers=1, n_heads=4, n_kv_heads=4, vocab_size=21, seq_len=4)


# ---------------------------------------------------------------- checkpoints

def llama2c_tensors(cfg, seed, shared):
    """The tensors of a llama2.c checkpoint in file order: (name, float32 array stacked over layers)."""
    rng = np.random.default_rng(seed)
    D, H, L, V = cfg["dim"], cfg["hidden_dim"], cfg["n_layers"], cfg["vocab_size"]
    hs = D // cfg["n_heads"]
    qd, kvd = cfg["n_heads"] * hs, cfg["n_kv_heads"] * hs
    mat = lambda *shape: (rng.standard_normal(shape) * 0.3).astype(np.float32)
    gain = lambda *shape: (1.0 + rng.uniform(-0.2, 0.2, shape)).astype(np.float32)
    t = [("tok_embeddings", mat(V, D)), ("att_norm", gain(L, D)), ("wq", mat(L, qd, D)), ("wk", mat(L, kvd, D)),
         ("wv", mat(L, kvd, D)), ("wo", mat(L, D, qd)), ("ffn_norm", gain(L, D)), ("w1", mat(L, H, D)),
         ("w2", mat(L, D, H)), ("w3", mat(L, H, D)), ("final_norm", gain(D))]
    if not shared:
        t.append(("classifier", mat(V, D)))
    return dict(t), [name for name, _ in t]


def header7(cfg, vocab):
    return struct.pack("<7i", cfg["dim"], cfg["hidden_dim"], cfg["n_layers"], cfg["n_heads"],
                       cfg["n_kv_heads"], vocab, cfg["seq_len"])


def legacy_bytes(cfg, seed, shared):
    """Headerless llama2.c: 7 int32 (vocab negative for a separate classifier),
    the f32 tensors, the unused RoPE tables between final norm and classifier."""
    t, order = llama2c_tensors(cfg, seed, shared)
    hs = cfg["dim"] // cfg["n_heads"]
    rope = np.zeros((2, cfg["seq_len"], hs // 2), np.float32)
    parts = [header7(cfg, cfg["vocab_size"] if shared else -cfg["vocab_size"])]
    for name in order:
        if name == "classifier":
            parts.append(rope.tobytes())
        parts.append(t[name].astype("<f4").tobytes())
    if shared:
        parts.append(rope.tobytes())
    return b"".join(parts)


def q8_groups(a, group):
    """llama2.c's Q8_0: groups of the flattened tensor, scale max|w|/127, int8 values then f32 scales."""
    g = a.reshape(-1, group)
    s = np.abs(g).max(axis=1) / 127.0
    q = np.round(g / np.where(s == 0, 1, s)[:, None]).astype(np.int8)
    return q.tobytes() + s.astype("<f4").tobytes()


def ak42_bytes(cfg, seed, shared, version, group=0):
    """llama2.c's "ak42" file: magic, version, 7 int32, shared byte (v2: int32
    group), zeros to 256; the norms in f32; the matrices in f32 (v1) or Q8_0
    per layer (v2)."""
    t, order = llama2c_tensors(cfg, seed, shared)
    head = struct.pack("<Ii", 0x616B3432, version) + header7(cfg, cfg["vocab_size"]) + struct.pack("<B", int(shared))
    if version == 2:
        head += struct.pack("<i", group)
    parts = [head.ljust(256, b"\0")]
    parts += [t[n].astype("<f4").tobytes() for n in ("att_norm", "ffn_norm", "final_norm")]
    enc = (lambda a: a.astype("<f4").tobytes()) if version == 1 else (lambda a: q8_groups(a, group))
    for name in order:
        if name in ("att_norm", "ffn_norm", "final_norm"):
            continue
        a = t[name]
        parts += [enc(a)] if name in ("tok_embeddings", "classifier") else [enc(layer) for layer in a]
    return b"".join(parts)


def write_llmw(path, s, *options):
    """An LLMW file of shape s from export.py's random writer."""
    args = ["random", path, "--dim", s["dim"], "--hidden-dim", s["hidden_dim"], "--layers", s["n_layers"],
            "--heads", s["n_heads"], "--kv-heads", s["n_kv_heads"], "--vocab", s["vocab_size"],
            "--seq-len", s["seq_len"]] + list(options)
    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        status = exporter.cli.main([str(a) for a in args])
    if status != 0:
        raise SystemExit(f"export.py random failed for {path}: {log.getvalue()}")


def checkpoint_seeds(out):
    files = {
        "legacy_f32_shared.bin": legacy_bytes(SHAPE, 1, True),
        "legacy_f32_unshared.bin": legacy_bytes(SHAPE, 2, False),
        "ak42v1_f32_shared.bin": ak42_bytes(SHAPE, 3, True, 1),
        "ak42v1_f32_unshared.bin": ak42_bytes(SHAPE, 4, False, 1),
        "ak42v2_q8_0_g4_shared.bin": ak42_bytes(SHAPE, 5, True, 2, 4),
        "ak42v2_q8_0_g8_unshared.bin": ak42_bytes(SHAPE, 6, False, 2, 8),
        "legacy_f32_mha.bin": legacy_bytes(MHA, 7, True),
        "ak42v2_q8_0_g16_mha.bin": ak42_bytes(MHA, 8, False, 2, 16),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    llmw = {
        "LLMW_f32_shared.bin": (SHAPE,),
        "LLMW_f32_unshared_layernorm_bias.bin": (SHAPE, "--unshared", "--norm-bias"),
        "LLMW_f32_postnorm.bin": (SHAPE, "--norm-pos", "post", "--final-norm", "off"),
        "LLMW_f32_odd.bin": (ODD,),
        "LLMW_f32_wide.bin": (WIDE, "--unshared"),
        "LLMW_f16_shared.bin": (SHAPE, "--dtype", "f16"),
        "LLMW_f16_unshared.bin": (SHAPE, "--dtype", "f16", "--unshared", "--seed", "1"),
        "LLMW_f16_wide.bin": (WIDE, "--dtype", "f16"),
        "LLMW_f16_mha.bin": (MHA, "--dtype", "f16", "--norm", "layer", "--norm-pos", "post"),
        "LLMW_q8_0_g4_shared.bin": (SHAPE, "--dtype", "q8_0", "--group-size", "4"),
        "LLMW_q8_0_g3_unshared.bin": (SHAPE, "--dtype", "q8_0", "--group-size", "3", "--unshared"),
        "LLMW_q8_0_g32_bias.bin": (SHAPE, "--dtype", "q8_0", "--group-size", "32", "--norm-bias"),
        "LLMW_q8_0_g5_wide.bin": (WIDE, "--dtype", "q8_0", "--group-size", "5"),
        "LLMW_q8_0_g2_odd.bin": (ODD, "--dtype", "q8_0", "--group-size", "2", "--unshared"),
        # version 2 with the tensors only its directory holds (Qwen2's biases, Qwen3's
        # q/k norms, a head size apart from dim / heads), and a version 1 file
        "LLMW_f32_v2_qkv_bias_qk_norm_wide_heads.bin": (SHAPE, "--qkv-bias", "--qk-norm", "--head-size", "12"),
        "LLMW_q8_0_g4_v2_qk_norm.bin": (SHAPE, "--dtype", "q8_0", "--group-size", "4", "--qk-norm", "--unshared"),
        "LLMW_f16_v2_qkv_bias.bin": (MHA, "--dtype", "f16", "--qkv-bias"),
        "LLMW_f32_v1.bin": (SHAPE, "--llmw-version", "1"),
    }
    for name, (shape, *options) in llmw.items():
        write_llmw(os.path.join(out, name), shape, *options)
    # Gemma 3's header fields (FORMAT.md, bytes 144..171) on a peri-norm file with
    # q/k norms: GELU-tanh, embed scale, query scalar, a window of 3 on layer 0
    gemma = os.path.join(out, "LLMW_f32_v2_gemma_window.bin")
    write_llmw(gemma, SHAPE, "--norm-pos", "peri", "--qk-norm")
    with open(gemma, "r+b") as f:
        f.seek(144)
        f.write(struct.pack("<Iffiqf", 1, 4.0, 6.0, 3, 1, 10000.0))
    # fuzz_checkpoint's shape mode: "SHPE", 10 shape bytes (see the harness), weight bytes
    values = bytes(np.random.default_rng(9).integers(0, 256, 96, dtype=np.uint8))
    shapes = {
        "LLMW_q8_0_shape_gqa.bin": [6, 1, 2, 36, 49, 1, 7, 2, 6, 0x3F],     # head 14, heads 6/2, group 7
        "LLMW_f16_shape_wide.bin": [15, 0, 2, 94, 63, 0, 4, 1, 0, 0x00],    # head 32, dim 96
        "LLMW_f32_shape_narrow.bin": [0, 3, 2, 0, 0, 0, 2, 0, 0, 0x15],     # head 2, heads 12/4, hidden 1, vocab 1
    }
    for name, shape in shapes.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"SHPE" + bytes(shape) + values)


# ---------------------------------------------------------------- tokenizers

def tokenizer(pieces):
    """tokenizer.bin for <unk>, <s>, </s> and then `pieces`, later pieces scoring lower."""
    all_pieces = ["<unk>", "<s>", "</s>"] + pieces
    scores = [0.0, 0.0, 0.0] + [-float(i) for i in range(len(pieces))]
    return exporter.tok_sentencepiece.tokenizer_bin_bytes(all_pieces, scores, 1, 2)


BYTE_TOKENS = ["<0x%02X>" % b for b in range(256)]
MERGES = ["\u2581t", "he", "\u2581the", "in", "\u2581a", "an", "on", "ce", "\u2581on", "\u2581once", "up",
          "\u2581up", "\u2581upon", "\u2581\u2581", "\u00e9", "\u20ac", "\U0001F600", "\ufffd", "ll", "llo"]
CHARS = [chr(c) for c in range(0x21, 0x7f)] + ["\u2581"]
TOKENIZERS = {
    "full": tokenizer(BYTE_TOKENS + CHARS + MERGES),
    "no_bytes": tokenizer(CHARS + MERGES),              # <unk> stands in for missing bytes
    "bare": tokenizer([]),                                # only <unk>, <s>, </s>
    "spaces_inside": tokenizer(BYTE_TOKENS[:128] + CHARS + ["a\u2581b", "o\u2581u"] + MERGES),  # not word by word
    "odd": tokenizer(["<0x41>", "<0x41>", "<0x4a>", "", "<0xZZ>", "<0x4", "a", "\u2581", "a\u2581"] + BYTE_TOKENS[::7]),
}


def ltok(pre, normalizer=0, ignore_merges=False, bos=-1, eos=-1):
    """A byte-level LTOK file: the 256 bytes, a few merges, a special and an added token."""
    pieces = [bytes([b]) for b in range(256)]
    merges = {}
    for a, b in ((b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"o", b"n"), (b"c", b"e"), (b"on", b"ce"),
                 (b" ", b"a"), (b"\xc3", b"\xa9"), (b"\xef", b"\xbf"), (b"\xef\xbf", b"\xbd"), (b"1", b"2"),
                 (b" ", b" "), (b"\n", b"\n"), (b"'", b"s")):
        if a + b not in pieces:
            pieces.append(a + b)
        merges[(pieces.index(a), pieces.index(b))] = (len(merges), pieces.index(a + b))
    pieces += [b"<|im_start|>", b"<x>"]
    flags = [0] * (len(pieces) - 2) + [1, 2]
    return exporter.tok_write.ltok_bytes(dict(pieces=pieces, flags=flags, merges=merges, pre=pre, normalizer=normalizer,
                                  ignore_merges=ignore_merges, add_bos=bos >= 0, bos=bos, eos=eos,
                                  eot=len(pieces) - 2, chat=2, system=b"Be brief."))


TOKENIZERS.update({
    "ltok_gpt2": ltok(exporter.tok_byte_level.PRE_GPT2, bos=len(BYTE_TOKENS) + 4, eos=len(BYTE_TOKENS) + 3),
    "ltok_llama3": ltok(exporter.tok_byte_level.PRE_LLAMA3, ignore_merges=True, bos=0),
    "ltok_qwen2_nfc": ltok(exporter.tok_byte_level.PRE_QWEN2, normalizer=exporter.tok_byte_level.NORM_NFC, eos=3),
    "ltok_smollm": ltok(exporter.tok_byte_level.PRE_SMOLLM),
})
def ltok_spm():
    """A sentencepiece-style LTOK file (kind 2): <unk> <s> </s>, the 256 <0xNN>,
    letters, merges, "\n" and U+2581 runs as added tokens (stored as spaces,
    flag 4) that merges also make, a special token past a model's 300 rows."""
    pieces = [b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % b for b in range(256)]
    pieces += [bytes([c]) for c in b" \nabcdehilnopstu"] + ["\u00e9".encode()]
    merges = {}
    for a, b in ((b" ", b" "), (b"  ", b" "), (b"\n", b"\n"), (b"t", b"h"), (b"th", b"e"), (b" ", b"the"),
                 (b"o", b"n"), (b"c", b"e"), (b"on", b"ce"), (b" ", b"a"), (b"u", b"p")):
        if a + b not in pieces:
            pieces.append(a + b)
        merges[(pieces.index(a), pieces.index(b))] = (len(merges), pieces.index(a + b))
    flags = [1, 1, 1] + [0] * (len(pieces) - 3)
    for p in (b"  ", b"   "):
        flags[pieces.index(p)] = 6
    flags[pieces.index(b"\n")] = flags[pieces.index(b"\n\n")] = 2
    pieces += [b"<start_of_turn>", b"<mask>"] + [b"<pad%d>" % i for i in range(300 - len(pieces) - 2)] + [b"<img>"]
    flags += [1, 2] + [2] * (len(pieces) - len(flags) - 3) + [1]
    return exporter.tok_write.ltok_bytes(dict(pieces=pieces, flags=flags, merges=merges, pre=0, normalizer=0,
                                              ignore_merges=False, add_bos=True, bos=1, eos=2,
                                              eot=pieces.index(b"<start_of_turn>"), chat=4, system=b""),
                                         exporter.tok_write.LTOK_KIND_SPM_BPE)


TOKENIZERS["ltok_spm_bpe"] = ltok_spm()
TEXTS = {
    "story": b"Once upon a time, there was a little cat.",
    "empty": b"",
    "utf8": "h\u00e9llo w\u00f6rld \u20ac \U0001F600 \u2581x".encode(),
    "bad_utf8": b"\xff\xc3(\xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \x80end",
    "spaces": b"  a   b  \t\n c ",
    "ab": b"a b ab aab a\xe2\x96\x81b once upon \xe2\x96\x81\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81 x",
    "special": b"<|im_start|>the 123 <x> it's\r\n\n  e\xcc\x81 <|im_start",
    "nfc": "a\u0323\u0301 \u1100\u1161\u11a8 \u0958 \u0344 \u212b \U0001d160\U0001d160 \u0301\u0323x".encode() + b"\xff\xcc",
}


def tokenizer_seeds(out):
    for tname, tok in TOKENIZERS.items():
        for xname, text in TEXTS.items():
            with open(os.path.join(out, f"{tname}_{xname}.in"), "wb") as f:
                f.write(struct.pack("<I", len(tok)) + tok + text)


# ---------------------------------------------------------------- chat turns

CHATS = {
    "system_and_user": b"You are a kind storyteller.\0Tell me about a cat.",
    "user_only": b"Hello there",
    "empty_system": b"\0Hi",
    "empty": b"",
    "format_chars": b"%s %n %d\n\0[INST] <<SYS>> %% [/INST]",
    "utf8": "Sei freundlich \u20ac\0Gr\u00fc\u00df dich \U0001F600".encode(),
}


def chat_seeds(out):
    for name, data in CHATS.items():
        with open(os.path.join(out, f"{name}.in"), "wb") as f:
            f.write(data)


# ---------------------------------------------------------------- server requests

def _post(path, body, extra=b""):
    return b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n" % (
        path, extra, len(body)) + body


SERVE = {
    "health": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "models_key": b"GET /v1/models?x=1 HTTP/1.0\r\nAuthorization: Bearer k\r\nConnection: keep-alive\r\n\r\n",
    "chat": _post(b"/v1/chat/completions", b'{"model":"m","messages":[{"role":"system","content":"Be brief."},'
                  b'{"role":"user","content":[{"type":"text","text":"Hi \\u00e9\\ud83d\\ude00"}]}],'
                  b'"temperature":0.7,"top_p":0.9,"max_tokens":16,"seed":42,"stop":["\\n","END"],"stream":true,'
                  b'"stream_options":{"include_usage":true}}'),
    "completion": _post(b"/v1/completions", b'{"prompt":"Once upon a time","max_tokens":8,"top_k":40,"min_p":0.05,'
                        b'"repeat_penalty":1.1,"repeat_last_n":-1,"stop":"x","n":1,"x":[null,true,false,-1.5e3,0]}',
                        b"Expect: 100-continue\r\n"),
    "pipelined": b"GET /health HTTP/1.1\r\n\r\nGET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n",
    "chunked": b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "bare_lf": b"GET /health HTTP/1.1\nHost: x\n\n",
    "json_only": '{"a":[1,2.5,-0,1e-7,"\\"\\\\\\/\\b\\f\\n\\r\\t",{"b":{}}],"\u00fc":"\u20ac"}'.encode(),
    "json_bad": b'{"a":[1,2,],"b":"\\ud800"}',
}


def serve_seeds(out):
    for name, data in SERVE.items():
        with open(os.path.join(out, f"{name}.in"), "wb") as f:
            f.write(data)


def gguf_seeds(out):
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import gguf_writer as gw
    rng = np.random.default_rng(5)
    for name, gt, dim, arch, extra in (("f32", gw.F32, 8, "llama", {}), ("f16", gw.F16, 8, "llama", {}),
                                       ("bf16", gw.BF16, 8, "llama", {}), ("q8_0", gw.Q8_0, 32, "llama", {}),
                                       ("q4_0", gw.Q4_0, 64, "llama", {"align": 64}), ("q4_K", gw.Q4_K, 256, "llama", {}),
                                       ("q6_K", gw.Q6_K, 256, "llama", {"untied": 1}),
                                       ("q4_1", gw.Q4_1, 32, "llama", {}), ("q5_0", gw.Q5_0, 64, "llama", {}),
                                       ("q5_1", gw.Q5_1, 32, "llama", {"untied": 1}), ("iq4_nl", gw.IQ4_NL, 32, "llama", {}),
                                       ("q2_K", gw.Q2_K, 256, "llama", {}), ("q3_K", gw.Q3_K, 256, "llama", {}),
                                       ("q5_K", gw.Q5_K, 256, "llama", {"untied": 1}), ("iq4_xs", gw.IQ4_XS, 256, "llama", {}),
                                       ("qwen2", gw.F32, 8, "qwen2", {}), ("qwen3", gw.F16, 8, "qwen3", {}),
                                       ("gemma3", gw.F32, 8, "gemma3", {}), ("olmo2", gw.F16, 8, "olmo2", {"untied": 1})):
        cfg = dict(dim=dim, hidden_dim=dim, n_layers=1, n_heads=2, n_kv_heads=1, vocab_size=5, seq_len=4)
        hs = dim // 2
        t = []
        def mat(n, rows, cols):
            data = gw.random_blocks(gt, rows, cols, rng) if gt in gw.BLOCK else gw.encode(gt, rng.normal(0, 0.3, (rows, cols)))
            t.append((n, gt, [cols, rows], data))
        def vec(n, k):
            t.append((n, gw.F32, [k], gw.encode(gw.F32, rng.uniform(0.5, 1.5, (1, k)))))
        mat("token_embd.weight", 5, dim)
        if arch != "olmo2":   # olmo2: the out placement, no input norms
            vec("blk.0.attn_norm.weight", dim)
        mat("blk.0.attn_q.weight", dim, dim)
        mat("blk.0.attn_k.weight", hs, dim)
        mat("blk.0.attn_v.weight", hs, dim)
        mat("blk.0.attn_output.weight", dim, dim)
        if arch != "olmo2":
            vec("blk.0.ffn_norm.weight", dim)
        mat("blk.0.ffn_gate.weight", dim, dim)
        mat("blk.0.ffn_up.weight", dim, dim)
        mat("blk.0.ffn_down.weight", dim, dim)
        if arch == "qwen2":
            vec("blk.0.attn_q.bias", dim); vec("blk.0.attn_k.bias", hs); vec("blk.0.attn_v.bias", hs)
        if arch in ("qwen3", "gemma3"):
            vec("blk.0.attn_q_norm.weight", hs); vec("blk.0.attn_k_norm.weight", hs)
        if arch == "olmo2":   # q/k norms over the whole projections
            vec("blk.0.attn_q_norm.weight", dim); vec("blk.0.attn_k_norm.weight", hs)
        if arch in ("gemma3", "olmo2"):
            vec("blk.0.post_attention_norm.weight", dim); vec("blk.0.post_ffw_norm.weight", dim)
        vec("output_norm.weight", dim)
        if extra.get("untied"):
            mat("output.weight", 5, dim)
        kvs = gw.llama_kvs(dict(cfg, shared=True), arch=arch)
        if arch == "gemma3":   # a window of 2 on every layer (pattern 0: all local)
            kvs += [("gemma3.attention.sliding_window", gw.V_U32, 2), ("gemma3.attention.sliding_window_pattern", gw.V_U32, 0),
                    ("gemma3.rope.freq_base_swa", gw.V_F32, 100.0)]
        kvs += gw.llama_vocab_kvs([b"<unk>", b"<s>", b"</s>", b" a", b"b"], [0.0, 0.0, 0.0, -1.0, -2.0])
        align = extra.get("align", 32)
        if align != 32:
            kvs.append(("general.alignment", gw.V_U32, align))
        gw.write(os.path.join(out, f"gguf_{name}.gguf"), kvs, t, alignment=align)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: make_seeds.py OUT_DIR\n")
        return 2
    for harness, write in (("checkpoint", checkpoint_seeds), ("tokenizer", tokenizer_seeds), ("chat", chat_seeds),
                           ("gguf", gguf_seeds), ("serve", serve_seeds)):
        out = os.path.join(argv[1], harness)
        os.makedirs(out, exist_ok=True)
        write(out)
        print(f"{out}: {len(os.listdir(out))} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
