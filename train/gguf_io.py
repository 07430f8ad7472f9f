"""Small GGUF (v3) writer and reader in numpy, written for strata's training tools.

File layout (little-endian): magic "GGUF", u32 version 3, u64 n_tensors, u64 n_kv; n_kv pairs of
(string key, u32 value type, value); n_tensors infos of (string name, u32 n_dims, u64 ne[n_dims],
u32 ggml type, u64 offset into the data section); zero padding to `general.alignment` (32); data.
Strings are u64 length + UTF-8 bytes; arrays are u32 element type + u64 count + elements.
ne[] is ggml order (fastest-varying first): a row-major numpy array of shape (a, b, c) is ne {c, b, a}.
Tensors are written from F32/F16 arrays or as `Raw` pre-quantized bytes (quant.py: Q8_0, MXFP4); the
reader decodes F32, F16, Q8_0 and MXFP4 to float32.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGNMENT = 32
# value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
           U64: "<Q", I64: "<q", F64: "<d"}
# ggml tensor types we know the layout of: type -> (block elements, block bytes)
GGML_F32, GGML_F16, GGML_Q8_0, GGML_MXFP4 = 0, 1, 8, 39
GGML_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q8_0: (32, 34), GGML_MXFP4: (32, 17)}


class GGUFError(Exception):
    pass


class Raw:
    """Pre-encoded tensor data: ggml type, ggml ne list (fastest first) and the bytes."""

    def __init__(self, gtype, ne, data):
        be, bb = GGML_BLOCK[gtype]
        n = int(np.prod(ne))
        if n % be or len(data) != n // be * bb:
            raise GGUFError(f"Raw tensor: {len(data)} bytes do not hold {n} values of ggml type {gtype}")
        self.gtype, self.ne, self.data = gtype, list(ne), data


class Value:
    """A metadata value with an explicit GGUF type (plain Python values get a default type)."""

    def __init__(self, vtype, value, elem_type=None):
        self.vtype, self.value, self.elem_type = vtype, value, elem_type


def _infer(v):
    if isinstance(v, Value):
        return v
    if isinstance(v, bool):
        return Value(BOOL, v)
    if isinstance(v, int):
        return Value(U32 if 0 <= v < 2**32 else I64, v)
    if isinstance(v, float):
        return Value(F32, v)
    if isinstance(v, str):
        return Value(STRING, v)
    if isinstance(v, (list, tuple)):
        if not v:
            raise GGUFError("empty array needs an explicit Value(ARRAY, [], elem_type)")
        return Value(ARRAY, list(v), _infer(v[0]).vtype)
    raise GGUFError(f"cannot store {type(v).__name__} in GGUF metadata")


def _pack_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _pack_scalar(t, v):
    return _pack_str(v) if t == STRING else struct.pack(_SCALAR[t], v)


def _pack_value(val):
    if val.vtype != ARRAY:
        return _pack_scalar(val.vtype, val.value)
    et = val.elem_type
    head = struct.pack("<IQ", et, len(val.value))
    if et == STRING:
        return head + b"".join(_pack_str(s) for s in val.value)
    return head + np.asarray(val.value, dtype=np.dtype(_SCALAR[et])).tobytes()


def write_gguf(path, metadata, tensors):
    """metadata: {key: value or Value}; tensors: list of (name, np.ndarray f32/f16 or Raw) in file order."""
    kv = b"".join(_pack_str(k) + (lambda v: struct.pack("<I", v.vtype) + _pack_value(v))(_infer(v))
                  for k, v in metadata.items())
    infos, blobs, offset = [], [], 0
    for name, arr in tensors:
        if isinstance(arr, Raw):
            gtype, ne, data = arr.gtype, arr.ne, arr.data
        else:
            arr = np.ascontiguousarray(arr)
            if arr.dtype == np.float32:
                gtype = GGML_F32
            elif arr.dtype == np.float16:
                gtype = GGML_F16
            else:
                raise GGUFError(f"tensor {name}: dtype {arr.dtype} not supported (F32/F16 or Raw)")
            ne = list(reversed(arr.shape))
            data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        infos.append(_pack_str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) +
                     struct.pack("<IQ", gtype, offset))
        pad = (-len(data)) % ALIGNMENT
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    header = GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(metadata)) + kv + b"".join(infos)
    header += b"\0" * ((-len(header)) % ALIGNMENT)
    with open(path, "wb") as f:
        f.write(header)
        for b in blobs:
            f.write(b)


class _Buf:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, n):
        if n < 0 or self.p + n > len(self.d):
            raise GGUFError(f"truncated file: need {n} bytes at offset {self.p}, size {len(self.d)}")
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return self.take(self.unpack("<Q")).tobytes().decode("utf-8")

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.unpack("<I"), self.unpack("<Q")
            if et == STRING:
                return [self.string() for _ in range(n)]
            if et not in _SCALAR:
                raise GGUFError(f"unsupported array element type {et}")
            dt = np.dtype(_SCALAR[et])
            return np.frombuffer(self.take(n * dt.itemsize), dtype=dt).tolist()
        if t not in _SCALAR:
            raise GGUFError(f"unknown metadata value type {t} at offset {self.p}")
        return self.unpack(_SCALAR[t])


class GGUFFile:
    """Parsed GGUF: .metadata {key: python value}, .tensors {name: (ggml type, ne list, offset)}."""

    def __init__(self, path):
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        b = _Buf(self.data)
        if b.take(4).tobytes() != GGUF_MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        self.version = b.unpack("<I")
        if self.version not in (2, 3):
            raise GGUFError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors, n_kv = b.unpack("<Q"), b.unpack("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            k = b.string()
            self.metadata[k] = b.value(b.unpack("<I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = b.string()
            nd = b.unpack("<I")
            if nd > 4:
                raise GGUFError(f"tensor {name}: {nd} dims (max 4)")
            ne = [b.unpack("<Q") for _ in range(nd)]
            self.tensors[name] = (b.unpack("<I"), ne, b.unpack("<Q"))
        align = self.metadata.get("general.alignment", ALIGNMENT)
        self.data_start = b.p + ((-b.p) % align)
        for name, (t, ne, off) in self.tensors.items():
            if t not in GGML_BLOCK:
                continue
            be, bb = GGML_BLOCK[t]
            n = int(np.prod(ne)) if ne else 1
            if n % be:
                raise GGUFError(f"tensor {name}: {n} elements not a multiple of block {be}")
            end = self.data_start + off + n // be * bb
            if end > len(self.data):
                raise GGUFError(f"tensor {name}: data [{self.data_start + off}, {end}) past end of file")

    def tensor(self, name):
        """F32/F16/Q8_0/MXFP4 tensor as a float32 numpy array of shape reversed(ne) (row-major)."""
        import quant
        if name not in self.tensors:
            raise GGUFError(f"missing tensor {name}")
        t, ne, off = self.tensors[name]
        if t not in GGML_BLOCK:
            raise GGUFError(f"tensor {name}: ggml type {t} cannot be decoded here (F32/F16/Q8_0/MXFP4 only)")
        n = int(np.prod(ne))
        be, bb = GGML_BLOCK[t]
        start = self.data_start + off
        raw = self.data[start:start + n // be * bb].tobytes()
        if t == GGML_F32:
            arr = np.frombuffer(raw, dtype="<f4")
        elif t == GGML_F16:
            arr = np.frombuffer(raw, dtype="<f2")
        elif t == GGML_Q8_0:
            arr = quant.dequantize_q8_0(raw, n)
        else:
            arr = quant.dequantize_mxfp4(raw, n)
        return arr.reshape(list(reversed(ne))).astype(np.float32)
