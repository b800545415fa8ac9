"""Independent Python twins of what ./run prints, for the tests: llama2.c's
sampler (plus top-k), the generate and chat loops, and the printed pieces.

Written from the documented behaviour (llama2.c's run.c, the contracts in
sampler.h's and run.c's comments), not from their code; the logits come from
the engine's own forward pass over the whole token sequence at positions
0..T-1 (build/logits, env LOGITS), which is bit for bit what one-token decoding
computes, so a twin that makes the same choices prints the same bytes.

The sampler works in float64 where the engine works in float32: the two agree
unless the coin lands within rounding of a boundary, so every draw records its
margin (min_margin) and a test can demand a clear one.
"""
import array
import math
import os
import re
import struct
import sys

import common

LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
BOS, EOS = 1, 2
MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------- the sampler

class Rng:
    """xorshift64*: the state shifts 12 right, 25 left, 27 right; the output is
    the top 32 bits of state * 0x2545F4914F6CDD1D; a coin is its top 24 bits / 2^24."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def u32(self):
        s = self.state
        s ^= s >> 12
        s ^= (s << 25) & MASK64
        s ^= s >> 27
        self.state = s
        return ((s * 0x2545F4914F6CDD1D) & MASK64) >> 32

    def coin(self):
        return (self.u32() >> 8) / 16777216.0


class Sampler:
    """llama.cpp's repeat penalty first, on the logits: each distinct token
    among the last repeat_last_n accepted (every token the prompt fed and
    every token drawn) has its logit x replaced by x / R where x > 0, else
    x * R. Then temperature 0: the first index of the largest logit.
    Otherwise one coin per draw and softmax(logits / temperature), then:
      - top-k, top-p and min-p all off: the first index whose cumulative
        probability (in index order) exceeds the coin;
      - top-k on (0 < k < vocab): the k most probable tokens; else with top-p
        on, the tokens with p >= (1 - topp) / (vocab - 1), llama2.c's cutoff;
        sorted by probability, most probable first;
      - top-p on: only the shortest prefix whose (unnormalised) mass exceeds topp;
      - min-p on: of those (or of all tokens, in index order, when top-k and
        top-p are off), the tokens whose probability before temperature is
        at least min_p times the largest, as llama.cpp tests it: logit >=
        max logit + ln(min_p);
      - the draw renormalises over what is kept: the first token whose
        cumulative probability exceeds coin * (the kept mass)."""

    def __init__(self, vocab, temperature, topp, topk, seed, min_p=0.0, repeat_penalty=1.0, repeat_last_n=64):
        self.vocab, self.temperature, self.topp, self.topk = vocab, temperature, topp, topk
        self.min_p, self.repeat_penalty, self.repeat_last_n = min_p, repeat_penalty, repeat_last_n
        self.history = []
        self.rng = Rng(seed)
        self.min_margin = float("inf")   # closest any coin (or min-p's bound) came to a boundary

    def accept(self, token):
        self.history.append(token)

    def sample(self, logits):
        token = self.choose(list(logits))
        self.accept(token)
        return token

    def choose(self, logits):
        assert len(logits) == self.vocab, (len(logits), self.vocab)
        if self.repeat_penalty != 1 and self.repeat_last_n > 0:
            for t in set(self.history[-self.repeat_last_n:]):
                x = logits[t]
                logits[t] = x * self.repeat_penalty if x <= 0 else x / self.repeat_penalty
        if self.temperature == 0:
            return max(range(self.vocab), key=lambda i: (logits[i], -i))
        coin = self.rng.coin()
        top = max(logits)
        e = [math.exp((x - top) / self.temperature) for x in logits]
        total = sum(e)
        p = [v / total for v in e]
        topp_on = 0 < self.topp < 1
        topk_on = 0 < self.topk < self.vocab
        def kept(order):
            if self.min_p <= 0:
                return order
            bound = math.log(self.min_p)
            for i in order:   # (the tempered log domain, where the engine judges it)
                self.min_margin = min(self.min_margin, abs((logits[i] - top) - bound) / self.temperature)
            return [i for i in order if logits[i] - top >= bound]
        if not topp_on and not topk_on:
            return self.draw(kept(range(self.vocab)), p, coin)
        if topk_on:
            order = sorted(range(self.vocab), key=lambda i: -p[i])[:self.topk]
        else:
            cutoff = (1 - self.topp) / (self.vocab - 1)
            order = sorted((i for i in range(self.vocab) if p[i] >= cutoff), key=lambda i: -p[i])
        if topp_on:
            mass = 0.0
            for n, i in enumerate(order):
                mass += p[i]
                if mass > self.topp:
                    order = order[:n + 1]
                    break
        return self.draw(kept(order), p, coin)

    def draw(self, order, p, coin):
        """The token of `order` whose cumulative probability, renormalised over
        `order`, first exceeds coin."""
        kept = sum(p[i] for i in order)
        r, cdf = coin * kept, 0.0
        for i in order:
            before, cdf = cdf, cdf + p[i]
            if r < cdf:
                self.min_margin = min(self.min_margin, (r - before) / kept, (cdf - r) / kept)
                return i
        self.min_margin = min(self.min_margin, (r - cdf) / kept)
        return order[-1]


# ---------------------------------------------------------------- the engine's logits

def last_logits(ckpt, tokens, vocab, extra=()):
    """The engine's logits after tokens (positions 0..T-1, one prefill), as a list."""
    out = common.scratch(f"twin_{os.getpid()}.f32")
    args = [ckpt, "--tokens", ",".join(map(str, tokens)), "--mode", "prefill", "--out", out] + list(extra)
    rc, _, err = common.run(args, binary=LOGITS)
    assert rc == 0, f"{LOGITS} failed (rc {rc}): {err}"
    a = array.array("f")
    with open(out, "rb") as f:
        a.frombytes(f.read())
    os.remove(out)
    if sys.byteorder != "little":
        a.byteswap()
    assert len(a) == len(tokens) * vocab, (len(a), len(tokens), vocab)
    return list(a[-vocab:])


# ---------------------------------------------------------------- printed text

def load_pieces(path):
    """The pieces of a llama2.c tokenizer.bin: int32 max length, then per token
    float32 score, int32 length, bytes."""
    data = open(path, "rb").read()
    off, pieces = 4, []
    while off < len(data):
        _score, n = struct.unpack_from("<fi", data, off)
        off += 8
        pieces.append(data[off:off + n])
        off += n
    return pieces


def decode(pieces, prev, tok):
    """run.c's printed bytes for `tok` following `prev`: no leading space after
    BOS, <0xNN> as its byte, a lone unprintable ASCII control byte skipped
    (a lone byte >= 0x80, part of a UTF-8 sequence, is printed)."""
    p = pieces[tok]
    if prev == BOS and p.startswith(b" "):
        p = p[1:]
    m = re.fullmatch(rb"<0x([0-9A-Fa-f]{2})>", p)
    if m:
        p = bytes([int(m.group(1), 16)])
    if len(p) == 1 and p[0] < 0x80 and not (32 <= p[0] < 127 or p in b" \t\n\v\f\r"):
        p = b""
    return p


# ---------------------------------------------------------------- the loops

def generate(ckpt, pieces, sampler, steps, prompt=(BOS,)):
    """./run's stdout for generate mode: the prompt's pieces after the first,
    then tokens drawn from positions len(prompt)-1 .. steps-1, stopping at BOS."""
    seq = list(prompt)
    for t in seq:   # the prompt counts for the repeat penalty
        sampler.accept(t)
    out = b"".join(decode(pieces, a, b) for a, b in zip(seq, seq[1:]))
    for _ in range(len(seq) - 1, steps):
        nxt = sampler.sample(last_logits(ckpt, seq, len(pieces)))
        if nxt == BOS:
            break
        out += decode(pieces, seq[-1], nxt)
        seq.append(nxt)
    return out + b"\n"


def chat(ckpt, pieces, sampler, turns, steps, stop=(EOS,), close=None):
    """./run -m chat's stdout with the user turns (token ids, as the template
    renders them) typed on stdin, the whole conversation's tokens, and how
    many replies ended at a stop token (the template's end of turn, EOS). The
    conversation is one sequence at positions 0, 1, 2, ...: each turn's tokens,
    then the reply, then the stop token that ended it (forwarded, so the next
    turn follows it). close: the template's end-of-turn id; a reply that
    ended at another stop token gets it at the start of the next turn, as the
    template closes every reply with it. A turn that does not leave a position for its reply
    ends the chat (./run then says on stderr that the context is full), as
    does a reply that reaches the last position (steps)."""
    seq, out, ended = [], b"", 0
    for k, ids in enumerate(turns):
        if len(seq) >= steps:
            break
        if k and close is not None and seq[-1] != close:
            ids = [close] + ids
        out += b"User: "
        if len(seq) + len(ids) >= steps:
            return out, seq, ended
        out += b"Assistant: "
        seq += ids
        while len(seq) < steps:
            nxt = sampler.sample(last_logits(ckpt, seq, len(pieces)))
            if nxt in stop:
                seq.append(nxt)
                ended += 1
                break
            out += decode(pieces, seq[-1], nxt)
            seq.append(nxt)
        out += b"\n"
    if len(seq) < steps:
        out += b"User: "             # the prompt that then reads end of input
    return out, seq, ended
