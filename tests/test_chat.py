"""Chat templates and the multi-turn chat (issue 10, part 3).

- Each template's turns, rendered and encoded, against conversations written
  out by hand from the models' published Jinja templates (Llama 2: llama2.c's
  format strings; Llama 3: Meta-Llama-3-8B-Instruct; Llama 3.1/3.2:
  Llama-3.1-8B-Instruct and Llama-3.2-1B-Instruct; ChatML: SmolLM2-135M-
  Instruct, Qwen2.5-0.5B-Instruct, Qwen3-0.6B), through build/chat_turns
  (tests/chat_turns.c: tokenizer/chat.c's API, every buffer at its exact
  size). The ids are checked with a test vocabulary in the tokenizer.bin
  format that holds the special tokens and one piece per ASCII character, so
  the ids of a text are written down from its characters alone.
- ./run -m chat appends each turn to the KV cache: its text equals the
  twin's (tests/twin.py), which draws every token from the engine's logits
  over the whole conversation, with a random checkpoint whose replies end
  at the template's end-of-turn token.
- A full context ends the chat, said on stderr; bad --template / --date
  values are one-line errors.
"""
import array
import os
import re
import struct
import subprocess

import common
import twin
from common import model, run, scratch

CKPT = model("stories260K.bin")
TOK = model("tok512.bin")


def driver_path():
    """build/chat_turns, or its variant beside the LOGITS binary the suite runs (asan, portable, ...)."""
    if os.environ.get("CHATTURNS"):
        return os.environ["CHATTURNS"]
    logits = os.environ.get("LOGITS", os.path.join("build", "logits"))
    head, tail = os.path.split(logits)
    path = os.path.join(head, tail.replace("logits", "chat_turns", 1))
    return path if os.path.isabs(path) else os.path.join(common.ROOT, path)


DRIVER = driver_path()

# ---------------------------------------------------------------- a vocabulary with the special tokens

SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
            "<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>"]


def chat_vocab():
    """512 pieces in llama2.c's tokenizer.bin format: <unk>, <s>, </s>, the
    printable ASCII characters and "\\n", the special tokens, then fillers.
    No piece is two characters long, so nothing merges: a text encodes as
    sentencepiece's dummy-prefix space and then one id per character."""
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [bytes([c]) for c in range(32, 127)] + [b"\n"]
    pieces += [s.encode() for s in SPECIALS]
    pieces += [b"<fill%d>" % i for i in range(512 - len(pieces))]
    path = scratch("chat_vocab.bin")
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for p in pieces:
            f.write(struct.pack("<fi", 0.0, len(p)) + p)
    return path, pieces


VOCAB, PIECES = chat_vocab()
ID = {p.decode(): i for i, p in enumerate(PIECES)}
BOS = 1


def expected_ids(text, bos=False):
    """The ids a turn's text must give: each special token by its id (Gemma's
    "<bos>" as BOS), each run of text between them as its dummy-prefix space
    and characters."""
    out = [BOS] if bos else []
    for part in re.split(r"(<\|[a-z_]+\|>|<[a-z_]+>)", text):
        if part == "<bos>":
            out.append(BOS)
        elif part in SPECIALS:
            out.append(ID[part])
        elif part:
            out += [ID[c] for c in " " + part]
    return out


def driver(template, users, system=None, default=None, date=None, text=False, tok=VOCAB, close=False):
    """(exit status, end-of-turn id, one entry per turn: its ids, or its text with text=True)."""
    args = [DRIVER, tok, template]
    if system is not None:
        args += ["-y", system]
    if default is not None:
        args += ["-D", default]
    if date is not None:
        args += ["-d", date]
    if text:
        args.append("-r")
    if close:
        args.append("-c")
    assert os.path.exists(DRIVER), f"{DRIVER} missing: make build/chat_turns (or set CHATTURNS)"
    p = subprocess.run(args + list(users), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode("utf-8", "replace")
    assert p.returncode in (0, 1) and "FAIL" not in out, f"{args}: exit {p.returncode}\n{out}{p.stderr.decode()}"
    if p.returncode:
        return p.returncode, out, None
    lines = out.split("\n")[:-1]
    assert lines[0].startswith("end "), out
    end = int(lines[0].split()[1])
    turns = [bytes.fromhex(l).decode("utf-8") if text else [int(x) for x in l.split()] for l in lines[1:]]
    assert len(turns) == len(users), out
    return 0, end, turns


# ---------------------------------------------------------------- conversations written out by hand
#
# Messages: [system "You are kind."], user "Hi there", assistant "REPLY",
# user "Tell me more", assistant "REPLY", user "Bye", then the generation
# prompt (add_generation_prompt=True). A chat appends one user turn at a
# time after the model's reply and the end-of-turn token it generated, so
# the turns are these strings cut after each REPLY + end-of-turn token.

USERS = ["Hi there", "Tell me more", "Bye"]
SYSTEM = "You are kind."

CONVERSATIONS = {
    # Meta-Llama-3-8B-Instruct: bos_token before the first message; a system
    # header only when there is a system message
    ("llama3", SYSTEM):
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are kind.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTell me more<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    ("llama3", None):
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTell me more<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    # Llama-3.1-8B-Instruct / Llama-3.2-1B-Instruct: the system header is always
    # there, with the knowledge cutoff and date_string (default "26 Jul 2024")
    ("llama3.1", SYSTEM):
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are kind.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTell me more<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    ("llama3.1", None):
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTell me more<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nREPLY<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    # ChatML as SmolLM2 and Qwen write it: no BOS, every message ends "<|im_end|>\n"
    ("chatml", SYSTEM):
        "<|im_start|>system\nYou are kind.<|im_end|>\n"
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nREPLY<|im_end|>\n"
        "<|im_start|>user\nTell me more<|im_end|>\n<|im_start|>assistant\nREPLY<|im_end|>\n"
        "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n",
    ("chatml", None):
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nREPLY<|im_end|>\n"
        "<|im_start|>user\nTell me more<|im_end|>\n<|im_start|>assistant\nREPLY<|im_end|>\n"
        "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n",
}
END = {"llama3": "<|eot_id|>", "llama3.1": "<|eot_id|>", "chatml": "<|im_end|>"}

# llama2.c: "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]" for the first turn with a
# system prompt, else "[INST] %s [/INST]"; every turn encoded with BOS
LLAMA2_TURNS = {
    SYSTEM: ["[INST] <<SYS>>\nYou are kind.\n<</SYS>>\n\nHi there [/INST]", "[INST] Tell me more [/INST]",
             "[INST] Bye [/INST]"],
    None: ["[INST] Hi there [/INST]", "[INST] Tell me more [/INST]", "[INST] Bye [/INST]"],
}


def hand_turns(template, system):
    if template == "llama2":
        return LLAMA2_TURNS[system]
    turns = CONVERSATIONS[(template, system)].split("REPLY" + END[template])
    assert len(turns) == 3
    return turns


def test_templates_render_and_encode():
    for template in ("llama2", "llama3", "llama3.1", "chatml"):
        for system in (SYSTEM, None):
            want = hand_turns(template, system)

            def check(template=template, system=system, want=want):
                rc, end, text = driver(template, USERS, system=system, text=True)
                assert rc == 0, end
                assert text == want, f"{template} rendered:\n{text!r}\nwant:\n{want!r}"
                rc, end, ids = driver(template, USERS, system=system)
                assert rc == 0, end
                for k, (got, turn) in enumerate(zip(ids, want)):
                    expect = expected_ids(turn, bos=template == "llama2")
                    assert got == expect, f"{template} turn {k} ({turn!r}):\n got  {got}\n want {expect}"
                assert end == (2 if template == "llama2" else ID[END[template]]), end
            yield f"{template}-{'system' if system else 'no-system'}", check


# Gemma 3's chat_template (google/gemma-3-270m-it, gemma-3-1b-it tokenizer_config.json),
# its string-content branch: no system role, the system text + "\n\n" opens the
# first user message; roles alternate; the assistant is "model"; contents |trim.
GEMMA_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {{- message['content'] | trim }}\n"
    "    {{- '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n")


def jinja_render(template, conversations, bos_token):
    """Each conversation rendered by @huggingface/jinja (tests/js), with the generation prompt."""
    import json
    import shutil
    js = os.path.join(common.TESTS, "js")
    assert shutil.which("node"), "node is missing: apt-get install nodejs npm"
    assert os.path.isdir(os.path.join(js, "node_modules")), "tests/js/node_modules is missing: run `npm ci` in tests/js"
    p = subprocess.run(["node", os.path.join(js, "reference.mjs"), "render"], cwd=js, timeout=120,
                       input=json.dumps({"template": template, "bos_token": bos_token,
                                         "conversations": conversations}).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_gemma_against_jinja():
    """The gemma template's turns equal Gemma 3's Jinja template rendered by
    @huggingface/jinja: the conversation (system or not, user texts with
    spaces to trim, replies "REPLY") cut after each "REPLY<end_of_turn>";
    the ids are <bos> as BOS, the special tokens by id, the text by characters;
    a reply ends at <end_of_turn>."""
    users = ["Hi there", " \tTell me more\n ", "Bye"]
    systems = [SYSTEM, None, "  Padded system \n", ""]
    convs = []
    for system in systems:
        msgs = [{"role": "system", "content": system}] if system is not None else []
        for k, u in enumerate(users):
            msgs.append({"role": "user", "content": u})
            if k + 1 < len(users):
                msgs.append({"role": "assistant", "content": "REPLY"})
        convs.append(msgs)
    rendered = jinja_render(GEMMA_TEMPLATE, convs, "<bos>")
    assert rendered[0].startswith("<bos><start_of_turn>user\nYou are kind.\n\nHi there<end_of_turn>\n"
                                  "<start_of_turn>model\nREPLY<end_of_turn>\n"), rendered[0]
    for system, conv in zip(systems, rendered):
        def check(system=system, conv=conv):
            want = conv.split("REPLY<end_of_turn>")
            assert len(want) == 3, conv
            rc, end, text = driver("gemma", users, system=system, text=True)
            assert rc == 0, end
            assert text == want, f"rendered:\n{text!r}\njinja:\n{want!r}"
            rc, end, ids = driver("gemma", users, system=system)
            assert rc == 0, end
            assert ids == [expected_ids(t) for t in want], ids
            assert ids[0][0] == BOS and end == ID["<end_of_turn>"], (ids, end)
        yield repr(system), check


def test_gemma_template_detected():
    """tokenizer_config.json's chat_template: export.py and the C twin (through a
    GGUF's tokenizer.chat_template, test_gguf_tokenizer) both call it gemma."""
    import sys
    sys.path.insert(0, common.ROOT)
    from exporter.tok_chat import CHAT_GEMMA, chat_template_of
    assert chat_template_of(GEMMA_TEMPLATE, "test") == (CHAT_GEMMA, None)


def test_llama2_is_llama2c_on_tok512():
    """tok512.bin (a real sentencepiece vocabulary): the llama2 turns encode as
    ./run -m tokenize encodes llama2.c's text (BOS first)."""
    rc, end, ids = driver("llama2", USERS, system=SYSTEM, tok=TOK)
    assert rc == 0, end
    for got, text in zip(ids, LLAMA2_TURNS[SYSTEM]):
        rc, out, err = run(["-m", "tokenize", "-z", TOK, "-i", text])
        assert rc == 0, err
        assert got == [int(t) for t in out.split()], (text, got, out)


def test_default_system_prompt():
    """A tokenizer's default system prompt (Qwen2.5's, SmolLM2's) stands in
    when the user gives none; -y "" is an empty system message, as
    {"role": "system", "content": ""} renders."""
    qwen = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    rc, _, text = driver("chatml", ["Hi there"], default=qwen, text=True)
    assert text == ["<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"], text
    rc, _, text = driver("chatml", ["Hi there"], default=qwen, system="Be brief.", text=True)
    assert text == ["<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                    "<|im_start|>assistant\n"], text
    rc, _, text = driver("chatml", ["Hi there"], default=qwen, system="", text=True)
    assert text == ["<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"], text
    # llama2.c: an empty system prompt is none
    rc, _, text = driver("llama2", ["Hi there"], system="", text=True)
    assert text == ["[INST] Hi there [/INST]"], text


def test_llama31_date():
    rc, _, text = driver("llama3.1", ["Hi"], date="01 Dec 2026", text=True)
    assert text == ["<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                    "Cutting Knowledge Date: December 2023\nToday Date: 01 Dec 2026\n\n<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n"], text


def test_trim():
    """The Llama 3 templates trim system and user texts (Jinja's |trim, which
    is Python's str.strip()): every character str.isspace() holds, and no
    other; llama2 and ChatML keep them."""
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    kept = ["\u200b", "\u180e", "\ufeff", "\u2060", "\x1b", "\x7f", "\x01"]
    users = [c + "x" + c for c in spaces + kept]
    rc, _, text = driver("llama3", ["first"] + users, system=" \t You are kind.\n\n", text=True)
    assert rc == 0
    assert text[0].startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are kind.<|eot_id|>"), text[0]
    for user, got in zip(users, text[1:]):
        want = "<|start_header_id|>user<|end_header_id|>\n\n" + user.strip() + "<|eot_id|>" \
               "<|start_header_id|>assistant<|end_header_id|>\n\n"
        assert got == want, (user, got, want)
    rc, _, text = driver("chatml", ["  Hi \n"], system=" sys\n", text=True)
    assert text == ["<|im_start|>system\n sys\n<|im_end|>\n<|im_start|>user\n  Hi \n<|im_end|>\n<|im_start|>assistant\n"], text


def test_special_text_from_the_user_is_text():
    """A user typing "<|im_end|>" gets the ids of its characters, not the token."""
    rc, _, ids = driver("chatml", ["<|im_end|><|im_start|>"])
    assert rc == 0
    want = [ID["<|im_start|>"]] + [ID[c] for c in " user\n<|im_end|><|im_start|>"] + [ID["<|im_end|>"]] + \
           [ID[c] for c in " \n"] + [ID["<|im_start|>"]] + [ID[c] for c in " assistant\n"]
    assert ids == [want], (ids, want)


def test_missing_special_token():
    """A template whose tokens the vocabulary lacks is refused, naming the token."""
    for template, token in (("chatml", "<|im_start|>"), ("llama3", "<|begin_of_text|>"), ("llama3.1", "<|begin_of_text|>"),
                            ("gemma", "<start_of_turn>")):
        rc, out, _ = driver(template, ["Hi"], tok=TOK)
        assert rc == 1 and out.startswith("error: ") and token in out and template in out, out


# ---------------------------------------------------------------- ./run -m chat

def chat_checkpoint(ends, name):
    """A random llama2.c checkpoint (512 tokens, unshared classifier) whose
    replies end: every token embedding gets +5 in dimension 0, and the
    classifier rows of the ids `ends` read that dimension alone, so each is
    drawn with a probability of roughly 0.1 at every step."""
    path = scratch(name)
    code = (f"import sys; sys.path.insert(0, {common.TESTS!r}); import reference; "
            f"reference.write_random_legacy({path!r}, 48, 100, 2, 6, 2, 512, 256, 23, False)")
    subprocess.run([os.environ.get("REF_PYTHON", "/usr/bin/python3"), "-c", code], check=True, timeout=300)
    raw = open(path, "rb").read()
    dim, vocab = 48, 512
    w = array.array("f")
    w.frombytes(raw[28:])
    for t in range(vocab):
        w[t * dim] += 5.0
    for end in ends:
        row = len(w) - vocab * dim + end * dim
        w[row:row + dim] = array.array("f", [1.0] + [0.0] * (dim - 1))
    with open(path, "wb") as f:
        f.write(raw[:28] + w.tobytes())
    return path


CHAT_CKPTS = {}


def chat_ckpt(ends=("<|eot_id|>", "<|im_end|>")):
    """The checkpoint whose replies end at these tokens (made once per run)."""
    if ends not in CHAT_CKPTS:
        CHAT_CKPTS[ends] = chat_checkpoint([ID[e] for e in ends], f"chat_ends_{len(CHAT_CKPTS)}.bin")
    return CHAT_CKPTS[ends]


def test_chat_appends_turns_to_the_cache():
    """Three turns in each template: ./run's text equals the twin's, which
    draws every token from the engine's logits over the whole conversation
    at positions 0, 1, 2, ... (turn, reply, end-of-turn token, next turn ...)
    with the turns' ids as written out by hand. So each turn is forwarded
    right after the end-of-turn token the model generated, the reply stops at
    the template's end of turn, and nothing before it is prefilled again."""
    for template, seed in (("chatml", 9), ("llama3", 2), ("llama3.1", 11)):
        def check(template=template, seed=seed):
            ckpt = chat_ckpt()
            turns = [expected_ids(t) for t in hand_turns(template, SYSTEM)]
            steps = 240
            sampler = twin.Sampler(512, 1.0, 0.9, 0, seed)
            stop = (twin.EOS, ID[END[template]])
            want, seq, ended = twin.chat(ckpt, PIECES, sampler, turns, steps, stop=stop, close=stop[1])
            assert ended == 3 and sampler.min_margin > 1e-6, (ended, sampler.min_margin, want)
            replies = want.split(b"Assistant: ")[1:]
            assert len(replies) == 3 and all(len(r) >= 20 for r in replies), f"replies too short to test: {want!r}"
            rc, got, err = run([ckpt, "-z", VOCAB, "-m", "chat", "--template", template, "-t", "1", "-p", "0.9",
                                "-s", seed, "-n", steps, "-y", SYSTEM], input=("\n".join(USERS) + "\n").encode())
            assert rc == 0, err
            assert got == want, f"chat differs from the twin's conversation:\n  run:  {got!r}\n  twin: {want!r}"
            assert "context is full" not in err, err
        yield template, check


def test_reply_ended_by_eos_is_closed():
    """A ChatML reply that ends at EOS instead of <|im_end|>: the next turn
    starts with <|im_end|>, as the template closes every reply with it (the
    twin does the same, with a checkpoint whose replies end at EOS)."""
    rc, _, text = driver("chatml", ["Hi", "Bye"], text=True)
    rc, _, closed = driver("chatml", ["Hi", "Bye"], text=True, close=True)
    assert closed == [text[0], "<|im_end|>" + text[1]] and text[1].startswith("\n<|im_start|>user\n"), (text, closed)
    rc, _, ids = driver("llama2", ["Hi", "Bye"], close=True)
    assert ids[1] == [2] + expected_ids("[INST] Bye [/INST]", bos=True), ids   # llama2: </s> closes a reply
    ckpt = chat_ckpt(("\n</s>\n",))         # replies end at EOS alone
    turns = [expected_ids(t) for t in hand_turns("chatml", SYSTEM)]
    seed, steps = 2, 240
    sampler = twin.Sampler(512, 1.0, 0.9, 0, seed)
    want, seq, ended = twin.chat(ckpt, PIECES, sampler, turns, steps, stop=(twin.EOS, ID["<|im_end|>"]),
                                 close=ID["<|im_end|>"])
    assert ended == 3 and sampler.min_margin > 1e-6, (ended, sampler.min_margin)
    replies = want.split(b"Assistant: ")[1:]
    assert len(replies) == 3 and all(len(r) >= 15 for r in replies), f"replies too short to test: {want!r}"
    closed = [i for i in range(1, len(seq)) if seq[i - 1] == twin.EOS and seq[i] == ID["<|im_end|>"]]
    assert len(closed) == 2, seq
    rc, got, err = run([ckpt, "-z", VOCAB, "-m", "chat", "--template", "chatml", "-t", "1", "-p", "0.9",
                        "-s", seed, "-n", steps, "-y", SYSTEM], input=("\n".join(USERS) + "\n").encode())
    assert rc == 0 and got == want, f"chat differs from the twin's:\n  run:  {got!r}\n  twin: {want!r}\n{err}"


def test_context_full_during_a_reply():
    """stories260K never says EOS: the first reply runs into the context
    (-n 40), is cut there, and the chat ends with a note; exit 0."""
    rc, out, err = run([CKPT, "-z", TOK, "-m", "chat", "-t", "0", "-n", 40, "-i", "Hi"], input=b"More\n")
    assert rc == 0, err
    assert out.startswith(b"Assistant: ") and not out.endswith(b"User: "), out
    assert "note: the context is full (40 positions) and the last reply is cut short: the chat ends" in err, err


def test_context_full_for_a_turn():
    """The second turn leaves no position for its reply: the chat ends with
    one error line naming the positions needed and left; exit 1."""
    ckpt = chat_ckpt()
    template, seed = "chatml", 1
    turns = [expected_ids(t) for t in hand_turns(template, SYSTEM)]
    sampler = twin.Sampler(512, 1.0, 0.9, 0, seed)
    _, seq, ended = twin.chat(ckpt, PIECES, sampler, turns[:1], 240, stop=(twin.EOS, ID["<|im_end|>"]))
    assert ended == 1, ended
    steps = len(seq) + len(turns[1])        # the turn fits, its reply would not
    sampler = twin.Sampler(512, 1.0, 0.9, 0, seed)
    want, seq2, _ = twin.chat(ckpt, PIECES, sampler, turns, steps, stop=(twin.EOS, ID["<|im_end|>"]))
    assert want.endswith(b"\nUser: ") and seq2 == seq, want
    rc, got, err = run([ckpt, "-z", VOCAB, "-m", "chat", "--template", template, "-t", "1", "-p", "0.9",
                        "-s", seed, "-n", steps, "-y", SYSTEM], input=("\n".join(USERS) + "\n").encode())
    assert rc == 1 and got == want, (rc, got, want, err)
    lines = err.strip().split("\n")
    assert lines[-1] == (f"error: the context is full: this turn needs {len(turns[1]) + 1} positions and "
                         f"{len(turns[1])} of the {steps} are left (see -n, --ctx); the chat ends"), err


def test_template_flag_errors():
    base = [CKPT, "-z", TOK]
    for args, status, words in (
            (["-m", "chat", "--template", "llama4"], 2, ["unknown chat template 'llama4'", "llama2", "llama3",
                                                        "llama3.1", "chatml"]),
            (["-m", "chat", "--template", ""], 2, ["unknown chat template ''"]),
            (["--template", "chatml", "-n", "5"], 2, ["--template applies to the chat and serve modes only"]),
            (["-m", "eval", "-f", TOK, "--date", "today"], 2, ["--date applies to the chat and serve modes only"]),
            (["-m", "chat", "--date", ""], 2, ["--date expects"]),
            (["-m", "chat", "--date", "x" * 65], 2, ["--date expects"]),
            (["-m", "chat", "--template", "chatml", "-i", "Hi"], 1, ["<|im_start|>", "chatml", TOK]),
            (["-m", "chat", "--template", "llama3", "-i", "Hi"], 1, ["<|begin_of_text|>", "llama3"])):
        rc, out, err = run(base + args, input=b"")
        lines = [l for l in err.split("\n") if l.startswith("error:")]
        assert rc == status and len(lines) == 1 and all(w in lines[0] for w in words), (args, rc, err)
        assert b"Assistant" not in out, out


def test_template_flag_selects_llama2_explicitly():
    """--template llama2 on tokenizer.bin is the default: the same text."""
    args = [CKPT, "-z", TOK, "-m", "chat", "-t", "0", "-n", "60", "-y", "You are kind.", "-i", "Hi there"]
    rc, a, err = run(args, input=b"")
    assert rc == 0, err
    rc, b, err = run(args + ["--template", "llama2"], input=b"")
    assert rc == 0 and a == b, (a, b, err)


# ---------------------------------------------------------------- a byte-level (LTOK) vocabulary

def test_chatml_turns_with_a_byte_level_vocabulary():
    """Qwen-style LTOK tokenizer (tests/test_bpe.py builds it and converts it with
    export.py): the ChatML turns hold the special tokens by id and, between them,
    @huggingface/tokenizers' ids of each text segment (HF encodes a rendered
    template by splitting it at the added tokens first, so segments encode alone);
    the template's default system prompt comes from the converted tokenizer."""
    import test_bpe as bpe
    folder, ltok = bpe.prepared("qwen2")
    n = len(bpe.small_vocab()[0])
    start, end = n + 1, n + 2                      # <|im_start|>, <|im_end|> (build_qwen2's added tokens)
    system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    segments = ["system\n" + system, "\n", "user\nHi there, 12 apples", "\n", "assistant\n",
                "user\nMore <|im_end|> text", "assistant\n"]
    ref = bpe.reference("qwen2", folder, [s.encode() for s in segments], False)["ids"]
    seg = dict(zip(segments, ref))
    rc, end_id, turns = driver("chatml", ["Hi there, 12 apples", "More <|im_end|> text"], tok=ltok)
    assert rc == 0 and end_id == end, (rc, end_id)
    first = [start] + seg["system\n" + system] + [end] + seg["\n"] + [start] + seg["user\nHi there, 12 apples"] + \
        [end] + seg["\n"] + [start] + seg["assistant\n"]
    later = seg["\n"] + [start] + seg["user\nMore <|im_end|> text"] + [end] + seg["\n"] + [start] + seg["assistant\n"]
    assert turns == [first, later], (turns, [first, later])
    assert end not in seg["user\nMore <|im_end|> text"]   # the user's text never becomes the token


def verbose_prompts(err):
    """[(label, [(id, piece bytes)])] of --verbose-prompt's blocks on stderr."""
    blocks, lines = [], err.splitlines()
    for i, line in enumerate(lines):
        m = re.fullmatch(r"verbose prompt, (.*): (\d+) tokens", line)
        if not m:
            continue
        rows = []
        for row in lines[i + 1:i + 1 + int(m.group(2))]:
            r = re.fullmatch(r" *(\d+) -> '(.*)'", row)
            assert r, f"not an id and its piece: {row!r}"
            piece = re.sub(r"\\x([0-9a-f]{2})|\\(.)", lambda x: chr(int(x.group(1), 16)) if x.group(1) else x.group(2),
                           r.group(2)).encode("latin-1")
            rows.append((int(r.group(1)), piece))
        blocks.append((m.group(1), rows))
    return blocks


def test_verbose_prompt():
    """--verbose-prompt prints on stderr the ids the model is fed and each
    one's piece: in generate mode the prompt (BOS, the dummy-prefix space,
    one id per character of the test vocabulary), in chat mode each turn as
    its template renders it (the ids written out by hand from the published
    ChatML template, as above). stdout is the same as without it."""
    ckpt = chat_ckpt()
    gen = [ckpt, "-z", VOCAB, "-i", "Hi 'there' \\ ok", "-n", "40", "-t", "1", "-s", "3"]
    rc, plain, err = run(gen)
    assert rc == 0, err
    rc, out, err = run(gen + ["--verbose-prompt"])
    assert rc == 0 and out == plain, (out, plain, err)
    want = expected_ids("Hi 'there' \\ ok", bos=True)
    assert verbose_prompts(err) == [("the prompt", [(i, PIECES[i]) for i in want])], err
    users = ("\n".join(USERS) + "\n").encode()
    args = [ckpt, "-z", VOCAB, "-m", "chat", "--template", "chatml", "-t", "1", "-p", "0.9", "-s", "9",
            "-n", "240", "-y", SYSTEM]
    rc, plain, err = run(args, input=users)
    assert rc == 0, err
    rc, out, err = run(args + ["--verbose-prompt"], input=users)
    assert rc == 0 and out == plain, (out, plain, err)
    turns = [expected_ids(t) for t in hand_turns("chatml", SYSTEM)]
    got = verbose_prompts(err)
    assert [label for label, _ in got] == [f"turn {k} in its template" for k in (1, 2, 3)], err
    for k, ((_, rows), ids) in enumerate(zip(got, turns)):
        assert rows == [(i, PIECES[i]) for i in ids], f"turn {k + 1}:\n got  {rows}\n want {ids}"
