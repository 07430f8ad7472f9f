"""Q8_0 and MXFP4 block quantization in numpy, bit-compatible with ggml's reference quantizers.

Q8_0  (34 bytes / 32 values): f16 d = amax/127, then 32 int8 q = round-half-away(x / d) (x * (1/d));
      value = q * d (d as stored, f16).
MXFP4 (17 bytes / 32 values): u8 e = floor(log2(amax)) - 2 + 127 (0 when amax == 0), then 16 bytes;
      byte j holds element j (low nibble) and element j+16 (high nibble); nibble = index into
      K = {0,1,2,3,4,6,8,12,0,-1,-2,-3,-4,-6,-8,-12} (twice the E2M1 value), value = K[n] * 2^(e-128).
      Quantization picks the nearest K[i]*2^(e-128), first index on ties.
Rows are the last axis; its length must be a multiple of 32.
"""
import numpy as np

QK = 32
KVALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)


def _blocks(x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % QK:
        raise ValueError(f"row length {x.shape[-1]} is not a multiple of {QK}")
    return x.reshape(-1, QK)


def quantize_q8_0(x):
    b = _blocks(x)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = b * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # C roundf
    out = np.empty((b.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(buf, n):
    blk = np.frombuffer(buf, dtype=np.uint8, count=n // QK * 34).reshape(-1, 34)
    d = blk[:, :2].copy().view(np.float16).astype(np.float32)
    return (blk[:, 2:].copy().view(np.int8).astype(np.float32) * d).reshape(-1)


def _e8m0_half(e):
    """2^(e-128) as float32 (ggml_e8m0_to_fp32_half; e = 0, 1 give the denormals 2^-128, 2^-127)."""
    return np.ldexp(np.float32(1), e.astype(np.int32) - 128).astype(np.float32)


def quantize_mxfp4(x):
    b = _blocks(x)
    amax = np.abs(b).max(axis=1)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2 + 127, 0)
    e = np.clip(e, 0, 255).astype(np.uint8)
    d = _e8m0_half(e)
    err = np.abs(KVALUES[None, None, :] * d[:, None, None] - b[:, :, None])  # [blocks, 32, 16]
    idx = err.argmin(axis=2).astype(np.uint8)  # first minimum = ggml's strict '<' scan
    out = np.empty((b.shape[0], 17), dtype=np.uint8)
    out[:, 0] = e
    out[:, 1:] = idx[:, :16] | (idx[:, 16:] << 4)
    return out.tobytes()


def dequantize_mxfp4(buf, n):
    blk = np.frombuffer(buf, dtype=np.uint8, count=n // QK * 17).reshape(-1, 17)
    d = _e8m0_half(blk[:, 0])
    lo, hi = KVALUES[blk[:, 1:] & 0x0F], KVALUES[blk[:, 1:] >> 4]
    return (np.concatenate([lo, hi], axis=1) * d[:, None]).reshape(-1)
