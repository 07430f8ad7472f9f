"""Minimal reader for R's serialization format (XDR, versions 2 and 3) and lazy-load DBs.

Why: the janeaustenr package ships its novels only as R data (data/Rdata.rdx + Rdata.rdb), and we
must read them without installing R. We parse just what data files use: vectors, pairlists with
attributes, symbols, references and a few singletons. Anything else raises RdsError naming the type.

Lazy-load DB layout (R's lazyLoadDBfetch): Rdata.rdx is a gzip'd serialized list
`list(variables = list(name = c(offset, length)), references = ..., compressed = ...)`; each record
in Rdata.rdb at [offset, offset+length) is a 4-byte big-endian uncompressed length followed by zlib
data (compressed = TRUE/1), or by a type byte and data ('Z' zlib, '2' bzip2, 'X' xz, '0' none).
"""
import bz2
import gzip
import lzma
import struct
import zlib


class RdsError(Exception):
    pass


# SEXP type codes (R internals) for the subset we understand.
NILSXP, SYMSXP, LISTSXP, CLOSXP, ENVSXP, PROMSXP, LANGSXP = 0, 1, 2, 3, 4, 5, 6
CHARSXP, LGLSXP, INTSXP, REALSXP, CPLXSXP, STRSXP, VECSXP, EXPRSXP, RAWSXP = 9, 10, 13, 14, 15, 16, 19, 20, 24
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP = 255, 254, 253, 242, 241
MISSINGARG_SXP, BASENAMESPACE_SXP, UNBOUNDVALUE_SXP = 251, 250, 252
NA_INT = -2147483648


class RObject:
    """A parsed R value: `value` is a Python list (vectors) or dict (pairlist), `attrs` a dict."""

    def __init__(self, rtype, value, attrs=None):
        self.rtype, self.value, self.attrs = rtype, value, attrs or {}

    def names(self):
        n = self.attrs.get("names")
        return n.value if n is not None else None


class _Reader:
    def __init__(self, data):
        self.d, self.p, self.refs = data, 0, []

    def _take(self, n):
        if self.p + n > len(self.d):
            raise RdsError(f"truncated R serialization at byte {self.p} (need {n} more)")
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def int(self):
        return struct.unpack(">i", self._take(4))[0]

    def length(self):
        n = self.int()
        if n == -1:  # long vector: two ints, high then low
            hi, lo = self.int(), self.int()
            n = (hi << 32) + lo
        if n < 0:
            raise RdsError(f"negative vector length {n}")
        return n

    def header(self):
        fmt = self._take(2)
        if fmt != b"X\n":
            raise RdsError(f"only XDR serialization is supported, got format {fmt!r}")
        version = self.int()
        self.int(), self.int()  # writer R version, minimal reader version
        if version == 3:
            self._take(self.int())  # native encoding name
        elif version != 2:
            raise RdsError(f"unsupported serialization version {version}")

    def attributes(self, has_attr):
        if not has_attr:
            return {}
        a = self.item()
        return a.value if isinstance(a, RObject) and isinstance(a.value, dict) else {}

    def item(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
        if t in (NILVALUE_SXP, NILSXP):
            return None
        if t in (GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP, MISSINGARG_SXP, BASENAMESPACE_SXP, UNBOUNDVALUE_SXP):
            return RObject(t, None)
        if t == REFSXP:
            idx = flags >> 8
            if idx == 0:
                idx = self.int()
            if not 1 <= idx <= len(self.refs):
                raise RdsError(f"bad reference index {idx}")
            return self.refs[idx - 1]
        if t == SYMSXP:
            sym = RObject(SYMSXP, self.item().value)
            self.refs.append(sym)
            return sym
        if t == ENVSXP:
            env = RObject(ENVSXP, {})
            self.refs.append(env)
            self.int()  # locked
            self.item()  # enclosure
            frame, hashtab = self.item(), self.item()
            env.attrs = self.attributes(True)
            for part in (frame, hashtab):
                if isinstance(part, RObject) and isinstance(part.value, dict):
                    env.value.update(part.value)
            return env
        if t in (LISTSXP, LANGSXP, CLOSXP, PROMSXP):
            # Pairlist cell: [attr] [tag] car cdr; flatten the chain into an ordered dict.
            out, attrs, i = {}, {}, 0
            while True:
                a = self.attributes(has_attr)
                attrs = attrs or a
                tag = self.item() if has_tag else None
                key = tag.value if isinstance(tag, RObject) and tag.rtype == SYMSXP else f"[{i}]"
                out[key] = self.item()
                i += 1
                flags = self.int()
                t2 = flags & 0xFF
                if t2 in (NILVALUE_SXP, NILSXP):
                    break
                if t2 not in (LISTSXP, LANGSXP, CLOSXP, PROMSXP):
                    self.p -= 4
                    out[f"[{i}]"] = self.item()
                    break
                has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
            return RObject(t, out, attrs)
        if t == CHARSXP:
            n = self.int()
            return RObject(CHARSXP, None if n == -1 else self._take(n).decode("utf-8", "replace"))
        if t in (LGLSXP, INTSXP):
            n = self.length()
            v = list(struct.unpack(f">{n}i", self._take(4 * n)))
            return RObject(t, v, self.attributes(has_attr))
        if t == REALSXP:
            n = self.length()
            return RObject(t, list(struct.unpack(f">{n}d", self._take(8 * n))), self.attributes(has_attr))
        if t == RAWSXP:
            n = self.length()
            return RObject(t, self._take(n), self.attributes(has_attr))
        if t in (STRSXP, VECSXP, EXPRSXP):
            n = self.length()
            items = [self.item() for _ in range(n)]
            if t == STRSXP:
                items = [c.value if c is not None else None for c in items]
            return RObject(t, items, self.attributes(has_attr))
        raise RdsError(f"unsupported R object type {t} at byte {self.p - 4}")


def unserialize(data):
    """Parse one serialized R object (already decompressed bytes)."""
    r = _Reader(data)
    r.header()
    return r.item()


def read_rds(path):
    """Read an .rds file (gzip, xz, bzip2 or uncompressed)."""
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    elif raw[:6] == b"\xfd7zXZ\x00":
        raw = lzma.decompress(raw)
    elif raw[:3] == b"BZh":
        raw = bz2.decompress(raw)
    return unserialize(raw)


def _decompress_record(rec):
    if len(rec) < 5:
        raise RdsError("lazy-load record shorter than its header")
    n = struct.unpack(">i", rec[:4])[0]
    body = rec[4:]
    kind = body[:1]
    if kind == b"Z":
        out = zlib.decompress(body[1:])
    elif kind == b"2":
        out = bz2.decompress(body[1:])
    elif kind == b"X":
        out = lzma.decompress(body[1:])
    elif kind == b"0":
        out = body[1:]
    else:
        out = zlib.decompress(body)
    if len(out) != n:
        raise RdsError(f"lazy-load record: expected {n} bytes after decompression, got {len(out)}")
    return out


def read_lazyload_db(rdx_path):
    """Return {variable name: RObject} for an R lazy-load database (<base>.rdx + <base>.rdb)."""
    index = read_rds(rdx_path)
    rdb = open(rdx_path[:-4] + ".rdb", "rb").read()
    fields = dict(zip(index.names(), index.value))
    variables = fields.get("variables")
    if variables is None:
        raise RdsError(f"{rdx_path}: no 'variables' entry in the index")
    out = {}
    for name, loc in zip(variables.names(), variables.value):
        off, length = int(loc.value[0]), int(loc.value[1])
        if off < 0 or off + length > len(rdb):
            raise RdsError(f"{rdx_path}: record {name} [{off}, {off + length}) outside the .rdb")
        out[name] = unserialize(_decompress_record(rdb[off:off + length]))
    return out
