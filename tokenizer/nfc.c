/* tokenizer/nfc.c -- Unicode NFC (UAX #15) of well-formed UTF-8, in place:
 * the byte-level normalizer (bpe.c calls it when an LTOK file asks) and the
 * public tok_nfc. Tables: tokenizer_unicode.h. */
#include "../tokenizer.h"

#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "../tokenizer_unicode.h"   /* NFC tables (tools/gen_unicode_tables.py) */

#define NFC_CP(w) ((w) & 0x1FFFFFu)
#define NFC_CCC(w) ((w) >> 24)
/* Hangul syllables by arithmetic (UAX #15), on the ranges the tables give */
#define NFC_V_COUNT (TOK_HANGUL_V_LAST - TOK_HANGUL_V_FIRST + 1)
#define NFC_LV_STEP (TOK_HANGUL_T_LAST - TOK_HANGUL_T_FIRST + 2)   /* the T jamo and none */

static unsigned nfc_ccc(uint32_t c) {
    size_t lo = 0, hi = sizeof tok__ccc / sizeof tok__ccc[0];
    if (c < 0x300) return 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < tok__ccc[mid][0]) hi = mid;
        else if (c > (tok__ccc[mid][1] & 0xFFFFFFu)) lo = mid + 1;
        else return tok__ccc[mid][1] >> 24;
    }
    return 0;
}

/* The primary composite of a and b, or 0 (Hangul by its formula). */
static uint32_t nfc_compose(uint32_t a, uint32_t b) {
    size_t lo = 0, hi = sizeof tok__comp / sizeof tok__comp[0];
    if (a >= TOK_HANGUL_L_FIRST && a <= TOK_HANGUL_L_LAST && b >= TOK_HANGUL_V_FIRST && b <= TOK_HANGUL_V_LAST)
        return TOK_HANGUL_S_FIRST + ((a - TOK_HANGUL_L_FIRST) * NFC_V_COUNT + (b - TOK_HANGUL_V_FIRST)) * NFC_LV_STEP;
    if (a >= TOK_HANGUL_S_FIRST && a <= TOK_HANGUL_S_LAST && (a - TOK_HANGUL_S_FIRST) % NFC_LV_STEP == 0 &&
        b >= TOK_HANGUL_T_FIRST && b <= TOK_HANGUL_T_LAST)
        return a + (b - TOK_HANGUL_T_FIRST + 1);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tok__comp[mid][0] < a || (tok__comp[mid][0] == a && tok__comp[mid][1] < b)) lo = mid + 1;
        else if (tok__comp[mid][0] == a && tok__comp[mid][1] == b) return tok__comp[mid][2];
        else hi = mid;
    }
    return 0;
}

/* Append c's full canonical decomposition to w (code point | ccc << 24). */
static size_t nfc_decompose(uint32_t c, uint32_t *w) {
    size_t lo = 0, hi = sizeof tok__decomp / sizeof tok__decomp[0], k, n;
    if (c >= TOK_HANGUL_S_FIRST && c <= TOK_HANGUL_S_LAST) {
        uint32_t s = c - TOK_HANGUL_S_FIRST;
        w[0] = TOK_HANGUL_L_FIRST + s / (NFC_V_COUNT * NFC_LV_STEP);
        w[1] = TOK_HANGUL_V_FIRST + (s % (NFC_V_COUNT * NFC_LV_STEP)) / NFC_LV_STEP;
        if (s % NFC_LV_STEP == 0) return 2;
        w[2] = TOK_HANGUL_T_FIRST + s % NFC_LV_STEP - 1;
        return 3;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < tok__decomp[mid][0]) hi = mid;
        else if (c > tok__decomp[mid][0]) lo = mid + 1;
        else {
            const uint32_t *p = tok__decomp_pool + (tok__decomp[mid][1] >> 3);
            n = tok__decomp[mid][1] & 7;
            for (k = 0; k < n; k++) w[k] = p[k] | (uint32_t)nfc_ccc(p[k]) << 24;
            return n;
        }
    }
    w[0] = c | (uint32_t)nfc_ccc(c) << 24;
    return 1;
}

/* Stable sort of w[0..n) by combining class (bottom-up merge sort through tmp). */
static void nfc_sort(uint32_t *w, size_t n, uint32_t *tmp) {
    size_t width, i;
    for (width = 1; width < n; width *= 2) {
        for (i = 0; i < n; i += 2 * width) {
            size_t a = i, m = i + width < n ? i + width : n, e = i + 2 * width < n ? i + 2 * width : n;
            size_t x = a, y = m, k = a;
            while (x < m && y < e) tmp[k++] = NFC_CCC(w[y]) < NFC_CCC(w[x]) ? w[y++] : w[x++];
            while (x < m) tmp[k++] = w[x++];
            while (y < e) tmp[k++] = w[y++];
        }
        memcpy(w, tmp, n * sizeof *w);
    }
}

static size_t put_utf8(unsigned char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { o[0] = (unsigned char)(0xC0 | c >> 6); o[1] = (unsigned char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12);
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18);
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* NFC of the well-formed UTF-8 s[0..len), in place; returns the new length.
 * The result is at most 3 times as long as the raw text it came from (the
 * table generator checks it), which the caller leaves room for. work holds
 * 2 * 3 * len code points. Canonical decomposition, canonical ordering, then
 * the composition algorithm of UAX #15. */
size_t tok__nfc_inplace(unsigned char *s, size_t len, uint32_t *work) {
    size_t i, m = 0, k, out;
    int unstable = 0;
    for (i = 0; i < len && !unstable;) {
        size_t l;
        uint32_t c = tok__cp_at(s, i, len, &l);
        unstable = c >= 0x300 &&
                   tok__in_ranges(tok__nfc_unstable, sizeof tok__nfc_unstable / sizeof tok__nfc_unstable[0], c);
        i += l;
    }
    if (!unstable) return len;   /* already NFC */
    for (i = 0; i < len;) {
        size_t l;
        uint32_t c = tok__cp_at(s, i, len, &l);
        m += nfc_decompose(c, work + m);
        i += l;
    }
    for (i = 0; i < m;) {   /* each run of non-starters in canonical order */
        size_t e;
        if (NFC_CCC(work[i]) == 0) { i++; continue; }
        for (e = i + 1; e < m && NFC_CCC(work[e]) != 0; e++) {}
        for (k = i + 1; k < e && NFC_CCC(work[k - 1]) <= NFC_CCC(work[k]); k++) {}
        if (k < e) nfc_sort(work + i, e - i, work + m);
        i = e;
    }
    {   /* compose */
        size_t starter = 0, w = 1;
        unsigned last = NFC_CCC(work[0]) ? 256 : 0;
        int have_starter = NFC_CCC(work[0]) == 0;
        for (i = 1; i < m; i++) {
            uint32_t c = work[i], comp = 0;
            unsigned cc = NFC_CCC(c);
            if (have_starter && (last < cc || last == 0))
                comp = nfc_compose(NFC_CP(work[starter]), NFC_CP(c));
            if (comp) {
                work[starter] = comp;   /* a composite is a starter (class 0) */
                continue;
            }
            if (cc == 0) {
                starter = w;
                have_starter = 1;
            }
            last = cc;
            work[w++] = c;
        }
        m = w;
    }
    for (i = 0, out = 0; i < m; i++) out += put_utf8(s + out, NFC_CP(work[i]));
    return out;
}

size_t tok_nfc_scratch_size(size_t n) {
    return n <= TOK_MAX_TEXT ? 72 * n + 4 : 0;   /* 2 * 3 * (3n) code points */
}

size_t tok_nfc(char *out, const char *text, size_t n, void *scratch) {
    size_t len = tok__utf8_replace((unsigned char *)out, (const unsigned char *)text, n);
    return len ? tok__nfc_inplace((unsigned char *)out, len, (uint32_t *)scratch) : 0;
}
