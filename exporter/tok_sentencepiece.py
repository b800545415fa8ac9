"""Sentencepiece-style vocabularies: tokenizer.model (a small protobuf reader), Llama-2-style
tokenizer.json, their checks, and llama2.c's tokenizer.bin bytes."""
import json
import math
import os
import struct

from .common import ExportError, first_line, log
from .jsonconf import _cfg_type, _is_count, _json

# ----------------------------------------------------------------------------
# tokenizers

class BadProtobuf(ExportError):
    """A malformed protobuf; read_sentencepiece_model() adds the file's path."""


def _pb_varint(buf, i):
    shift = v = 0
    while True:
        if i >= len(buf):
            raise BadProtobuf("truncated protobuf")
        if shift >= 70:
            raise BadProtobuf(f"a varint longer than 10 bytes at byte {i}")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def _pb_fields(buf):
    """Yield (field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _pb_varint(buf, i)
        fnum, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _pb_varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _pb_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise BadProtobuf(f"unsupported protobuf wire type {wt} (field {fnum})")
        if i > len(buf):
            raise BadProtobuf(f"truncated protobuf (field {fnum} needs {i} bytes, "
                              f"{len(buf)} there)")
        yield fnum, wt, v


def read_sentencepiece_model(path):
    """(pieces, scores, types, bos_id, eos_id) from a sentencepiece ModelProto, no library.

    ModelProto: 1 = repeated SentencePiece {1 piece, 2 score (float), 3 type (1 normal,
    2 unknown, 3 control, 4 user defined, 5 unused, 6 byte)}, 2 = TrainerSpec
    {3 model_type, 40 unk_id, 41 bos_id, 42 eos_id, 43 pad_id}."""
    with open(path, "rb") as fh:
        buf = fh.read()
    try:
        return _sentencepiece_fields(path, buf)
    except BadProtobuf as e:
        raise ExportError(f"{path}: {e}")


def _sentencepiece_fields(path, buf):
    pieces, scores, types = [], [], []
    bos, eos, model_type = 1, 2, 1
    for fnum, wt, v in _pb_fields(buf):
        if fnum == 1 and wt == 2:
            piece, score, typ = "", 0.0, 1
            for f2, w2, v2 in _pb_fields(v):
                if f2 == 1 and w2 == 2:
                    try:
                        piece = v2.decode("utf-8")
                    except UnicodeDecodeError:
                        raise BadProtobuf(f"piece {len(pieces)} is not valid UTF-8 ({v2[:20]!r})")
                elif f2 == 2 and w2 == 5:
                    score = struct.unpack("<f", v2)[0]
                elif f2 == 3 and w2 == 0:
                    typ = v2
            pieces.append(piece)
            scores.append(score)
            types.append(typ)
        elif fnum == 2 and wt == 2:
            for f2, w2, v2 in _pb_fields(v):
                if w2 != 0:
                    continue
                v2 = v2 - (1 << 64) if v2 >= 1 << 63 else v2   # negative int32 ids
                if f2 == 3:
                    model_type = v2
                elif f2 == 41:
                    bos = v2
                elif f2 == 42:
                    eos = v2
    if not pieces:
        raise ExportError(f"{path}: no pieces (not a sentencepiece model?)")
    if model_type != 2:
        log(f"warning: {path} is a sentencepiece model of type {model_type}, not BPE (2); "
            f"the C encoder implements BPE merges")
    return pieces, scores, types, bos, eos


def _adds_dummy_prefix(path):
    """NormalizerSpec (ModelProto field 3) add_dummy_prefix (its field 3, default true)."""
    with open(path, "rb") as fh:
        buf = fh.read()
    try:
        for fnum, wt, v in _pb_fields(buf):
            if fnum == 3 and wt == 2:
                for f2, w2, v2 in _pb_fields(v):
                    if f2 == 3 and w2 == 0:
                        return v2 != 0
    except BadProtobuf as e:
        raise ExportError(f"{path}: {e}")
    return True


def sentencepiece_vocab(path):
    """(pieces, scores, bos, eos), with the sentencepiece library when it is importable."""
    if not _adds_dummy_prefix(path):
        raise ExportError(f"{path}: a sentencepiece model without the dummy-prefix space (Gemma's) is not "
                          f"supported as tokenizer.bin; convert the tokenizer.json beside it (LTOK kind 2)")
    try:
        import sentencepiece as spm
    except ImportError:
        spm = None
    if spm is not None:
        try:
            sp = spm.SentencePieceProcessor(model_file=path)
        except Exception as e:
            raise ExportError(f"{path}: sentencepiece cannot load it ({first_line(e)})")
        n = sp.vocab_size()
        try:
            pieces = [sp.id_to_piece(i) for i in range(n)]
        except UnicodeDecodeError as e:
            raise ExportError(f"{path}: a piece is not valid UTF-8 ({first_line(e)})")
        return pieces, [sp.get_score(i) for i in range(n)], sp.bos_id(), sp.eos_id()
    pieces, scores, _, bos, eos = read_sentencepiece_model(path)
    return pieces, scores, bos, eos


def _special_token(conf, key, where, p2id):
    """The id of tokenizer_config.json's bos_token / eos_token (a string or an
    {"content": string} object), None when absent or not in the vocabulary."""
    x = conf.get(key)
    c = x.get("content") if isinstance(x, dict) else x
    if c is not None and not isinstance(c, str):
        raise ExportError(f"{where}: field {key} = {x!r:.80} must be a string or "
                          f"an object with a string content")
    return p2id.get(c)


def _vocab_by_id(vocab, path):
    """tokenizer.json's model.vocab ({piece: id}) as {id: piece}; ids non-negative and unique."""
    id2piece = {}
    for piece, i in vocab.items():
        if not _is_count(i):
            raise ExportError(f"{path}: vocab entry {piece!r} has id {i!r}; ids must be "
                              f"non-negative integers")
        if i in id2piece:
            raise ExportError(f"{path}: id {i} used by both {id2piece[i]!r} and {piece!r}")
        id2piece[i] = piece
    return id2piece


def _normalizers(data):
    """tokenizer.json's normalizer as a flat list of its steps (dicts)."""
    n = data.get("normalizer")
    if not isinstance(n, dict):
        return []
    steps = n.get("normalizers") if n.get("type") == "Sequence" else [n]
    return [x for x in steps or [] if isinstance(x, dict)]


def _no_dummy_prefix(data):
    """A normalizer that writes spaces as U+2581 with no Prepend step and no
    Metaspace pre-tokenizer adding the prefix (Gemma 2/3): sentencepiece with
    add_dummy_prefix false. Llama 2's files have Prepend (or Metaspace, or
    no normalizer at all in older ones)."""
    steps = _normalizers(data)
    replaces = any(x.get("type") == "Replace" and x.get("content") == "\u2581" for x in steps)
    prepends = any(x.get("type") == "Prepend" for x in steps)
    pre = data.get("pre_tokenizer")
    meta = isinstance(pre, dict) and "Metaspace" in json.dumps(pre)
    return replaces and not prepends and not meta


def hf_tokenizer_vocab(path):
    """(pieces, scores, bos, eos) from a Llama-2-style HF tokenizer.json.

    Scores come from the merge ranks: a piece that some merge produces gets
    -(1 + rank of the first merge producing it), so merging by highest score (what
    sentencepiece and the C encoder do) applies merges in tokenizer.json's priority
    order. Pieces no merge produces get 0.0 if special/byte tokens (as sentencepiece
    has them) and -(1 + number of merges) otherwise (never a merge result)."""
    data = _json(path)
    model = _cfg_type(data, "model", path, dict, "an object") or {}
    mtype = model.get("type", "BPE" if "merges" in model else None)
    if mtype != "BPE":
        raise ExportError(f"{path}: model.type {mtype!r} is not supported (only BPE of the "
                          f"Llama 2 / sentencepiece kind)")
    pre = json.dumps(data.get("pre_tokenizer"))
    if "ByteLevel" in pre or "ByteLevel" in json.dumps(data.get("decoder")):
        raise ExportError(f"{path}: a byte-level BPE (GPT-2 / Llama 3 style) is not supported; "
                          f"only sentencepiece-style BPE with byte fallback")
    if _no_dummy_prefix(data):
        raise ExportError(f"{path}: a sentencepiece-style BPE without the dummy-prefix space (its normalizer "
                          f"replaces ' ' with '\u2581' but prepends nothing: Gemma's) is not supported yet; "
                          f"tokenizer.bin's encoder always prepends one")
    if model.get("byte_fallback") is False:
        log(f"warning: {path}: byte_fallback is false; the C encoder falls back to <0xNN> tokens")
    vocab = model.get("vocab")
    merges = model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise ExportError(f"{path}: model.vocab (an object) / model.merges (a list) missing")
    if not vocab:
        raise ExportError(f"{path}: model.vocab is empty")
    id2piece = _vocab_by_id(vocab, path)
    special = set()
    for at in _cfg_type(data, "added_tokens", path, list, "a list") or []:
        i, c = (at.get("id"), at.get("content")) if isinstance(at, dict) else (None, None)
        if not _is_count(i) or not isinstance(c, str):
            raise ExportError(f"{path}: added token {at!r:.80} needs an integer id >= 0 "
                              f"and a string content")
        if i in id2piece and id2piece[i] != c:
            raise ExportError(f"{path}: added token {c!r} reuses id {i} of {id2piece[i]!r}")
        id2piece[i] = c
        if at.get("special"):
            special.add(i)
    n = len(id2piece)
    if sorted(id2piece) != list(range(n)):
        missing = next(i for i in range(n) if i not in id2piece)
        raise ExportError(f"{path}: token ids are not contiguous (id {missing} is missing)")
    pieces = [id2piece[i] for i in range(n)]
    p2id = {p: i for i, p in enumerate(pieces)}
    best = {}
    for rank, m in enumerate(merges):
        parts = m.split(" ") if isinstance(m, str) else m
        if not (isinstance(parts, list) and len(parts) == 2
                and all(isinstance(x, str) for x in parts)):
            raise ExportError(f"{path}: merge #{rank} {m!r:.80} is not a pair of strings")
        tid = p2id.get(parts[0] + parts[1])
        if tid is None:
            raise ExportError(f"{path}: merge #{rank} {m!r} makes {parts[0] + parts[1]!r}, "
                              f"not in the vocabulary")
        best.setdefault(tid, rank)
    scores = []
    for i, p in enumerate(pieces):
        if i in best:
            scores.append(-(1.0 + best[i]))
        elif i in special or (len(p) == 6 and p.startswith("<0x") and p.endswith(">")) \
                or p == model.get("unk_token"):
            scores.append(0.0)
        else:
            scores.append(-(1.0 + len(merges)))

    # BOS / EOS: tokenizer_config.json beside it, else <s> / </s>
    bos = eos = None
    tc = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
    if os.path.exists(tc):
        conf = _json(tc)
        bos, eos = (_special_token(conf, k, tc, p2id) for k in ("bos_token", "eos_token"))
    if bos is None:
        bos = p2id.get("<s>")
    if eos is None:
        eos = p2id.get("</s>")
    if bos is None or eos is None:
        raise ExportError(f"{path}: cannot tell the BOS/EOS tokens (no <s>/</s>)")
    return pieces, scores, bos, eos


def check_vocab(path, pieces, scores, bos, eos):
    """What tokenizer.bin needs: some tokens, finite scores, BOS and EOS two of them."""
    if not pieces:
        raise ExportError(f"{path}: no tokens")
    bad = next((i for i, s in enumerate(scores) if not math.isfinite(s)), None)
    if bad is not None:
        raise ExportError(f"{path}: token {bad} {pieces[bad]!r} has score {scores[bad]}; "
                          f"scores must be finite")
    for what, i in (("bos", bos), ("eos", eos)):
        if not 0 <= i < len(pieces):
            raise ExportError(f"{path}: {what} id {i} is not a token id "
                              f"(0..{len(pieces) - 1})")
    if bos == eos:
        raise ExportError(f"{path}: bos and eos are the same token ({bos})")


def tokenizer_bin_bytes(pieces, scores, bos, eos):
    """llama2.c tokenizer.bin: u32 max_token_length, then per token f32 score, u32 len, bytes."""
    toks = []
    for i, p in enumerate(pieces):
        if i == bos:
            p = "\n<s>\n"
        elif i == eos:
            p = "\n</s>\n"
        toks.append(p.replace("\u2581", " ").encode("utf-8"))
    out = [struct.pack("<I", max(len(t) for t in toks))]
    for t, s in zip(toks, scores):
        out.append(struct.pack("<fI", s, len(t)))
        out.append(t)
    return b"".join(out)
