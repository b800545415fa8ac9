"""Weight quantizers: ggml's blocks of 32 (Q8_0, Q4_0; the GGUF writer's types and the
math LLMW's q4_0 shares), and LLMW's q8_0 groups, q4_0 and q4_K, each with its dequantizer."""
import numpy as np

from .common import ExportError
from .llmw import F16_MAX, n_groups, WT_Q4_0, WT_Q4_K

# ----------------------------------------------------------------------------
# ggml's blocks of 32 values, as GGUF stores them (LLMW's q4_0 rows are the same blocks):
# Q8_0 = f16 scale d + 32 int8 (value = q * d); Q4_0 = f16 scale d + 16 bytes whose
# low nibbles hold values 0..15 and high nibbles values 16..31 (value = (nibble - 8) * d).

GGUF_BLOCK = 32
# tensor types (ggml_type)
GG_F32, GG_F16, GG_Q4_0, GG_Q8_0 = 0, 1, 2, 8


def _f16_bits(x):
    return np.asarray(x, dtype=np.float32).astype("<f2")


def quantize_gguf_q8_0(blk):
    """(rows, cols) float32, cols a multiple of 32 -> the Q8_0 blocks' bytes, row-major."""
    rows, cols = blk.shape
    x = blk.reshape(rows, cols // GGUF_BLOCK, GGUF_BLOCK)
    amax = np.abs(x).max(axis=2)
    d = (amax / np.float32(127.0)).astype(np.float32)
    inv = np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d != 0).astype(np.float32)
    v = (x * inv[..., None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)   # roundf: half away from zero
    out = np.empty((rows, cols // GGUF_BLOCK, 34), dtype=np.uint8)
    out[..., :2] = _f16_bits(d).view(np.uint8).reshape(rows, cols // GGUF_BLOCK, 2)
    out[..., 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_gguf_q4_0(blk):
    """(rows, cols) float32, cols a multiple of 32 -> the Q4_0 blocks' bytes: d = the value
    of largest magnitude (the first, on a tie) / -8, nibble = min(15, trunc(x / d + 8.5))."""
    rows, cols = blk.shape
    nb = cols // GGUF_BLOCK
    x = blk.reshape(rows, nb, GGUF_BLOCK)
    pick = np.abs(x).argmax(axis=2)                      # argmax: the first of equal magnitudes
    mx = np.take_along_axis(x, pick[..., None], axis=2)[..., 0]
    mx = np.where(mx == 0, np.float32(0.0), mx)          # an all-zero block: d = 0 / -8 = -0
    d = (mx / np.float32(-8.0)).astype(np.float32)
    inv = np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d != 0).astype(np.float32)
    v = (x * inv[..., None]).astype(np.float32) + np.float32(8.5)
    n = np.minimum(np.trunc(v), 15).astype(np.uint8)     # (int8_t) cast: toward zero; v >= 0.5 here
    packed = n[..., :16] | (n[..., 16:] << 4)
    out = np.empty((rows, nb, 18), dtype=np.uint8)
    out[..., :2] = _f16_bits(d).view(np.uint8).reshape(rows, nb, 2)
    out[..., 2:] = packed
    return out.tobytes()


def dequantize_gguf(raw, gtype, rows, cols):
    """The float32 values of a tensor's GGUF bytes (the round-trip check, and tests)."""
    if gtype == GG_F32:
        return np.frombuffer(raw, "<f4", rows * cols).reshape(rows, cols)
    if gtype == GG_F16:
        return np.frombuffer(raw, "<f2", rows * cols).astype(np.float32).reshape(rows, cols)
    nb = cols // GGUF_BLOCK
    size = 34 if gtype == GG_Q8_0 else 18
    b = np.frombuffer(raw, np.uint8, rows * nb * size).reshape(rows, nb, size)
    d = b[..., :2].copy().view("<f2").astype(np.float32)       # (rows, nb, 1)
    if gtype == GG_Q8_0:
        q = b[..., 2:].view(np.int8).astype(np.float32)
    else:
        lo, hi = (b[..., 2:] & 15).astype(np.float32), (b[..., 2:] >> 4).astype(np.float32)
        q = np.concatenate([lo, hi], axis=2) - np.float32(8.0)
    return (q * d).astype(np.float32).reshape(rows, cols)


# ----------------------------------------------------------------------------
# LLMW's types: q8_0 groups along each row, q4_0 and q4_K

def round_half_away(x):
    """Round float32 x to the nearest integer, halves away from zero (C roundf)."""
    t = np.trunc(x)
    frac = x - t                       # exact for float32
    return t + np.sign(x) * (np.abs(frac) >= 0.5)


def quantize_q8_0(w, group_size):
    """(rows, cols) float -> (q int8 (rows, cols), scale float32 (rows, ceil(cols/G))).

    Groups run along each row: group j of a row covers columns [j*G, min((j+1)*G, cols)),
    so the last group of a row is short when G does not divide cols. scale = max|w|/127
    (float32), q = round-half-away(w/scale) clamped to [-127, 127], q = 0 when scale = 0.
    """
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    ng = n_groups(cols, group_size)
    pad = ng * group_size - cols
    wp = np.pad(w, ((0, 0), (0, pad))) if pad else w
    g = wp.reshape(rows, ng, group_size)
    amax = np.abs(g).max(axis=2)
    scale = (amax / np.float32(127.0)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    x = g / safe[:, :, None]
    q = np.clip(round_half_away(x), -127, 127)
    q[scale == 0] = 0
    q = q.astype(np.int8).reshape(rows, ng * group_size)[:, :cols]
    return np.ascontiguousarray(q), scale


def dequantize_q8_0(q, scale, group_size):
    rows, cols = q.shape
    s = np.repeat(np.asarray(scale, dtype=np.float32), group_size, axis=1)[:, :cols]
    return q.astype(np.float32) * s


def pad_columns(w, qk):
    """(rows, cols) -> (rows, cols rounded up to a multiple of qk), zeros appended."""
    pad = -w.shape[1] % qk
    return np.pad(w, ((0, 0), (0, pad))) if pad else w


def f16_scale(v, name, what):
    """float32 scales -> their f16 bits, refusing one beyond f16's range."""
    big = float(np.abs(v).max(initial=0))
    if not big <= F16_MAX:
        raise ExportError(f"tensor {name} needs a {what} of {big:g}, beyond f16's range (65504): "
                          f"its values are too large for 4 bits; use --dtype q8_0 or f32")
    return _f16_bits(v)


def quantize_q4_0(w, name="matrix"):
    """(rows, cols) float32 -> LLMW q4_0 bytes: each row zero-padded to blocks of 32, then
    ggml's Q4_0 reference rounding (quantize_gguf_q4_0). A padded value is 0, so its code
    is 8, which decodes to exactly 0 whatever the block's d."""
    w = np.asarray(w, dtype=np.float32)
    pick = np.abs(w).max(initial=0)
    f16_scale(np.float32(pick / 8.0), name, "q4_0 block scale")
    return quantize_gguf_q4_0(pad_columns(w, 32))


def dequantize_q4_0(raw, rows, cols):
    """The real columns of LLMW q4_0 bytes, float32, as the engine computes them."""
    return dequantize_gguf(raw, GG_Q4_0, rows, n_groups(cols, 32) * 32)[:, :cols]


Q4K_STEPS = np.float32(-1.0) + np.float32(0.1) * np.arange(21, dtype=np.float32)


def fit_scale_min(x, wt, nmax=15):
    """Per row of x (N, 32) with error weights wt (N, 32) (0: a padded value): the scale
    s >= 0 and offset m <= 0 that make x ~ s * L + m, L = 0..nmax, with small weighted
    squared error: ggml's make_qkx2_quants idea. Start from L spread over [min(x, 0),
    max(x)]; then for 21 stretches of that grid (nmax - 1 .. nmax + 1 steps across the
    range) round x to it and solve the weighted least squares for (s, m) given those L,
    keeping the fit of least error. Returns float32 (s (N,), m (N,))."""
    f32 = np.float32
    real = wt > 0
    lo = np.minimum(np.where(real, x, f32(np.inf)).min(axis=1), f32(0.0))
    hi = np.where(real, x, f32(-np.inf)).max(axis=1)
    hi = np.where(np.isfinite(hi), hi, lo)               # a sub-block of padding only
    flat = hi <= lo
    rng = np.where(flat, f32(1.0), hi - lo)
    u = (x - lo[:, None]) / rng[:, None]                 # 0..1 across [lo, hi]
    wx = wt * x
    sw, sx, sxx = wt.sum(axis=1), wx.sum(axis=1), np.einsum("ij,ij->i", wx, x)
    L = np.empty_like(x)

    def fit(k, least_squares):
        """Codes on the grid of k steps across [lo, hi], then (s, m, weighted squared
        error); the error from sums: sum w (s L + m - x)^2, expanded."""
        np.multiply(u, k, out=L)
        np.rint(L, out=L)
        if k > nmax:                                     # u <= 1: only a stretched grid overflows
            np.minimum(L, f32(nmax), out=L)
        sl, sl2, sxl = np.einsum("ij,ij->i", wt, L), np.einsum("ij,ij,ij->i", wt, L, L), np.einsum("ij,ij->i", wx, L)
        if least_squares:
            D = sw * sl2 - sl * sl
            ok = D > 0
            Ds = np.where(ok, D, f32(1.0))
            sc = (sw * sxl - sx * sl) / Ds
            m = (sl2 * sx - sl * sxl) / Ds
            pos = m > 0                                  # an offset above 0: fit s alone, m = 0
            sc = np.where(pos, sxl / np.where(sl2 > 0, sl2, f32(1.0)), sc)
            m = np.where(pos, f32(0.0), m)
        else:
            ok, sc, m = True, rng / k, lo
        e = sc * sc * sl2 + 2 * sc * m * sl + m * m * sw - 2 * sc * sxl - 2 * m * sx + sxx
        return ok, sc, m, e
    _, best_s, best_m, best = fit(f32(nmax), False)
    for step in Q4K_STEPS:
        ok, sc, m, e = fit(f32(nmax) + step, True)
        better = ok & (e < best)
        best, best_s, best_m = np.where(better, e, best), np.where(better, sc, best_s), np.where(better, m, best_m)
    best_s = np.where(flat, f32(0.0), best_s).astype(f32)
    best_m = np.where(flat, lo, best_m).astype(f32)
    return best_s, best_m


def pack_q4_K_scales(ls, lm):
    """Eight 6-bit scales ls and mins lm (..., 8) -> ggml's 12 bytes (..., 12): bytes 0-3
    scales 0-3, bytes 4-7 mins 0-3, each with bits 4-5 of scale/min j+4 in its top two
    bits; bytes 8-11 scale j+4's low four bits, min j+4's in the high four."""
    out = np.empty(ls.shape[:-1] + (12,), dtype=np.uint8)
    out[..., 0:4] = ls[..., :4] | (ls[..., 4:] >> 4) << 6
    out[..., 4:8] = lm[..., :4] | (lm[..., 4:] >> 4) << 6
    out[..., 8:12] = (ls[..., 4:] & 15) | (lm[..., 4:] & 15) << 4
    return out


def quantize_q4_K(w, name="matrix"):
    """(rows, cols) float32 -> LLMW q4_K bytes: rows zero-padded to superblocks of 256, each
    144 bytes: f16 d, f16 dmin, 12 bytes of eight 6-bit sub-block scales and mins, 128 bytes
    of codes (sub-blocks 2p, 2p + 1 the low and high nibbles of bytes 32p..32p + 31), value
    = d * sc * code - dmin * m. Each sub-block of 32 is fitted (fit_scale_min, error weights
    rms(x) + |x| as ggml's reference; padding weighs 0); then sc = round(63 * s / max s) with
    d = max s / 63, m likewise with dmin, and the codes rounded against the stored d, dmin.
    A sub-block of padding only gets sc = m = 0 and codes 0: it decodes to exactly 0."""
    f32 = np.float32
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    x = pad_columns(w, 256)
    nb = x.shape[1] // 256
    real = (np.arange(nb * 256) < cols).reshape(nb * 8, 32)
    x = x.reshape(rows * nb * 8, 32)
    real = np.broadcast_to(real[None], (rows, nb * 8, 32)).reshape(rows * nb * 8, 32)
    n_real = np.maximum(real.sum(axis=1), 1).astype(f32)
    rms = np.sqrt((x * x).sum(axis=1) / n_real)
    wt = np.where(real, rms[:, None] + np.abs(x), f32(0.0)).astype(f32)
    with np.errstate(over="ignore", invalid="ignore"):   # values too large for f16 scales: refused below
        s, m = fit_scale_min(x, wt)
    s, mn = s.reshape(rows, nb, 8), (f32(0.0) - m).reshape(rows, nb, 8)    # mn = -m >= 0 (never -0)
    max_s, max_m = s.max(axis=2), mn.max(axis=2)
    inv_s = np.where(max_s > 0, f32(63.0) / np.where(max_s > 0, max_s, f32(1.0)), f32(0.0)).astype(f32)
    inv_m = np.where(max_m > 0, f32(63.0) / np.where(max_m > 0, max_m, f32(1.0)), f32(0.0)).astype(f32)
    ls = np.minimum(np.rint(inv_s[..., None] * s), 63).astype(np.uint8)
    lm = np.minimum(np.rint(inv_m[..., None] * mn), 63).astype(np.uint8)
    d = f16_scale((max_s / f32(63.0)).astype(f32), name, "q4_K superblock scale")
    dmin = f16_scale((max_m / f32(63.0)).astype(f32), name, "q4_K superblock min")
    d1 = (d.astype(f32)[..., None] * ls.astype(f32)).reshape(-1, 1)
    m1 = (dmin.astype(f32)[..., None] * lm.astype(f32)).reshape(-1, 1)
    L = np.where(d1 > 0, np.clip(np.rint((x + m1) / np.where(d1 > 0, d1, f32(1.0))), 0, 15), 0)
    L = L.astype(np.uint8).reshape(rows, nb, 4, 2, 32)
    out = np.empty((rows, nb, 144), dtype=np.uint8)
    out[..., 0:2] = d.view(np.uint8).reshape(rows, nb, 2)
    out[..., 2:4] = dmin.view(np.uint8).reshape(rows, nb, 2)
    out[..., 4:16] = pack_q4_K_scales(ls, lm)
    out[..., 16:] = (L[:, :, :, 0] | L[:, :, :, 1] << 4).reshape(rows, nb, 128)
    return out.tobytes()


def unpack_q4_K_scales(s):
    """ggml's 12 bytes (..., 12) -> the eight 6-bit scales and mins, each (..., 8)."""
    s = s.astype(np.int32)
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 15) | (s[..., 0:4] >> 6) << 4], axis=-1)
    mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | (s[..., 4:8] >> 6) << 4], axis=-1)
    return sc, mn


def dequantize_q4_K(raw, rows, cols):
    """The real columns of LLMW q4_K bytes, float32, in the engine's order:
    (d * sc) * code - dmin * m."""
    f32 = np.float32
    nb = n_groups(cols, 256)
    b = np.frombuffer(raw, np.uint8, rows * nb * 144).reshape(rows, nb, 144)
    d = b[..., 0:2].copy().view("<f2").astype(f32)       # (rows, nb, 1)
    dmin = b[..., 2:4].copy().view("<f2").astype(f32)
    sc, mn = unpack_q4_K_scales(b[..., 4:16])
    qs = b[..., 16:].reshape(rows, nb, 4, 32)
    L = np.stack([qs & 15, qs >> 4], axis=3).reshape(rows, nb, 8, 32).astype(f32)
    d1 = (d * sc.astype(f32))[..., None]
    m1 = (dmin * mn.astype(f32))[..., None]
    return (d1 * L - m1).astype(f32).reshape(rows, nb * 256)[:, :cols]


QUANTIZERS = {WT_Q4_0: (quantize_q4_0, dequantize_q4_0), WT_Q4_K: (quantize_q4_K, dequantize_q4_K)}
