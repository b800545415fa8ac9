#!/usr/bin/env python3
"""gen_unicode_tables.py -- write tokenizer_unicode.h, the Unicode tables of
the tokenizer's byte-level pre-tokenizers (tokenizer/bpe.c) and NFC
(tokenizer/nfc.c), from Python's unicodedata.

  python3 tools/gen_unicode_tables.py > tokenizer_unicode.h

The header holds sorted, non-overlapping code point ranges of the letter class
\\p{L} (general categories Lu Ll Lt Lm Lo) and the number class \\p{N}
(Nd Nl No), as the regex engines of the tokenizers define them, and what NFC
needs: canonical combining classes, full canonical decompositions (Hangul
syllables are algorithmic: their ranges, read from the data and checked
against the arithmetic), the primary composites, and the characters that
can change under NFC (a text without them is already NFC: the composites'
second parts, the Hangul syllables' V and T jamo among them). The White_Space
property (PropList.txt) is not in unicodedata; it has not changed since
Unicode 6.3 and tokenizer/bpe.c lists it by hand. The committed header comes from
/usr/bin/python3 3.11 (Debian 12): Unicode 14.0.0. Characters assigned after
that version count as neither letter nor number.
"""
import sys
import unicodedata


def ranges(pred):
    out, start = [], None
    for cp in range(0x110000):
        if pred(cp):
            if start is None:
                start = cp
        elif start is not None:
            out.append((start, cp - 1))
            start = None
    if start is not None:
        out.append((start, 0x10FFFF))
    return out


def emit_pairs(name, rows, w, what):
    w(f"/* {len(rows)} {what} */\n")
    w(f"static const uint32_t {name}[][{len(rows[0])}] = {{\n")
    per = 4 if len(rows[0]) == 2 else 3
    for i in range(0, len(rows), per):
        w("    " + " ".join("{" + ", ".join(f"0x{v:05X}" for v in r) + "}," for r in rows[i:i + per]) + "\n")
    w("};\n\n")


def hangul():
    """The Hangul syllables and the conjoining jamo they are made of, read from
    unicodedata: (first syllable, last syllable, [L first, L last], [V ...],
    [T ...]), each syllable the NFD of L V or L V T. tokenizer/nfc.c composes
    and decomposes them by the arithmetic this implies (UAX #15), which is
    checked here on every syllable."""
    u = unicodedata
    syl = [cp for cp in range(0x110000) if u.name(chr(cp), "").startswith("HANGUL SYLLABLE ")]
    parts = [u.normalize("NFD", chr(cp)) for cp in syl]
    L = sorted({ord(p[0]) for p in parts})
    V = sorted({ord(p[1]) for p in parts})
    T = sorted({ord(p[2]) for p in parts if len(p) == 3})
    for r in (L, V, T, syl):
        assert r == list(range(r[0], r[-1] + 1)), "not a contiguous range"
    for cp, p in zip(syl, parts):
        s = ((ord(p[0]) - L[0]) * len(V) + ord(p[1]) - V[0]) * (len(T) + 1)
        assert cp == syl[0] + s + (ord(p[2]) - T[0] + 1 if len(p) == 3 else 0), hex(cp)
        assert u.normalize("NFC", p) == chr(cp)
    return syl[0], syl[-1], (L[0], L[-1]), (V[0], V[-1]), (T[0], T[-1])


def nfc_tables():
    """(ccc ranges, decompositions, pool, compositions, unstable ranges), checked
    against the bounds tokenizer/nfc.c relies on."""
    u = unicodedata
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    nfc = lambda s: u.normalize("NFC", s)
    nfd = lambda s: u.normalize("NFD", s)
    s0, s1, _, (v0, v1), (t0, t1) = hangul()
    ccc = []
    for cp in cps:
        c = u.combining(chr(cp))
        if c and ccc and ccc[-1][1] == cp - 1 and ccc[-1][2] == c:
            ccc[-1][1] = cp
        elif c:
            ccc.append([cp, cp, c])
    decomp, pool = [], []
    for cp in cps:
        d = nfd(chr(cp))
        if d != chr(cp) and not s0 <= cp <= s1:
            assert len(d) <= 7 and len(d.encode()) <= 3 * len(chr(cp).encode())   # NFC grows text 3x at most
            decomp.append((cp, len(pool) << 3 | len(d)))
            pool += [ord(x) for x in d]
    comp = []
    for cp in cps:
        d = u.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = [chr(int(x, 16)) for x in d.split()]
            if len(parts) == 2 and nfc("".join(parts)) == chr(cp):
                assert len(chr(cp).encode()) <= len("".join(parts).encode())
                comp.append((ord(parts[0]), ord(parts[1]), cp))
    comp.sort()
    # the second parts: of the primary composites, and of the Hangul syllables
    # (a vowel after a leading consonant, a trailing consonant after an LV syllable)
    seconds = {b for _, b, _ in comp} | set(range(v0, v1 + 1)) | set(range(t0, t1 + 1))
    unstable = ranges(lambda cp: not 0xD800 <= cp <= 0xDFFF and (
        u.combining(chr(cp)) or cp in seconds or nfc(chr(cp)) != chr(cp)))
    assert all(lo >= 0x300 for lo, _ in unstable)   # below U+0300 text is always NFC
    return ([(lo, hi | c << 24) for lo, hi, c in ccc], decomp, pool, comp, unstable)


def emit(name, rs, w):
    w(f"/* {len(rs)} ranges */\n")
    w(f"static const uint32_t {name}[][2] = {{\n")
    for i in range(0, len(rs), 4):
        w("    " + " ".join(f"{{0x{a:05X}, 0x{b:05X}}}," for a, b in rs[i:i + 4]) + "\n")
    w("};\n\n")


def main():
    w = sys.stdout.write
    cat = unicodedata.category
    letters = ranges(lambda cp: cat(chr(cp)) in ("Lu", "Ll", "Lt", "Lm", "Lo"))
    numbers = ranges(lambda cp: cat(chr(cp)) in ("Nd", "Nl", "No"))
    w("/* tokenizer_unicode.h -- generated by tools/gen_unicode_tables.py; do not edit.\n")
    w(f" * Unicode {unicodedata.unidata_version} (Python {sys.version.split()[0]}'s unicodedata).\n")
    w(" * Sorted inclusive code point ranges: tok__letters is \\p{L} (Lu Ll Lt Lm Lo),\n")
    w(" * tok__numbers is \\p{N} (Nd Nl No). Included by tokenizer/bpe.c and nfc.c only. */\n")
    w("#ifndef TOKENIZER_UNICODE_H\n#define TOKENIZER_UNICODE_H\n\n#include <stdint.h>\n\n")
    w(f'#define TOK_UNICODE_VERSION "{unicodedata.unidata_version}"\n\n')
    emit("tok__letters", letters, w)
    emit("tok__numbers", numbers, w)
    ccc, decomp, pool, comp, unstable = nfc_tables()
    s0, s1, (l0, l1), (v0, v1), (t0, t1) = hangul()
    w("/* The Hangul syllables S and the conjoining jamo L, V, T they decompose to\n"
      " * (S = L V or L V T; the syllable's index is (l * V_COUNT + v) * (T_COUNT + 1) + t + 1\n"
      " * or + 0 without T): first and last of each range. */\n")
    for name, (a, b) in (("S", (s0, s1)), ("L", (l0, l1)), ("V", (v0, v1)), ("T", (t0, t1))):
        w(f"#define TOK_HANGUL_{name}_FIRST 0x{a:04X}\n#define TOK_HANGUL_{name}_LAST 0x{b:04X}\n")
    w("\n")
    w("/* NFC. tok__ccc: {first, last | combining class << 24} of the characters whose\n"
      " * canonical combining class is not 0. tok__decomp: {code point, pool offset << 3 |\n"
      " * length} of the full canonical decomposition (Hangul syllables excluded: they\n"
      " * are algorithmic) in tok__decomp_pool. tok__comp: {first, second, composite},\n"
      " * the primary composites (composition exclusions left out), sorted by\n"
      " * (first, second). tok__nfc_unstable: the characters that may change under NFC\n"
      " * (combining class not 0, a composite's or a Hangul syllable's second part, or\n"
      " * NFC of it alone differs): a text without them is NFC (UAX #15's quick check). */\n")
    emit_pairs("tok__ccc", ccc, w, "ranges")
    emit_pairs("tok__decomp", decomp, w, "decompositions")
    w(f"static const uint32_t tok__decomp_pool[{len(pool)}] = {{\n")
    for i in range(0, len(pool), 10):
        w("    " + " ".join(f"0x{v:05X}," for v in pool[i:i + 10]) + "\n")
    w("};\n\n")
    emit_pairs("tok__comp", comp, w, "compositions")
    emit("tok__nfc_unstable", unstable, w)
    w("#endif\n")


if __name__ == "__main__":
    main()
