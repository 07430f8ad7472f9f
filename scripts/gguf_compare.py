#!/usr/bin/python3
"""Compare two GGUF files tensor by tensor: type, shape and data bytes; metadata keys too.

usage: scripts/gguf_compare.py A.gguf B.gguf
Prints one line per differing tensor and a summary; exit 0 when every tensor is equal.
(Used to check `strata quantize` against llama-quantize, see README.) Standard library only.
"""
import struct
import sys

# ggml type id -> (elements per block, bytes per block)
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2), 39: (32, 17)}
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Gguf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.p = 0
        if self.take(4) != b"GGUF":
            raise SystemExit(f"{path}: not a GGUF file")
        self.u("<I")
        n_tensors, n_kv = self.u("<Q"), self.u("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            k = self.string()
            self.metadata[k] = self.value(self.u("<I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = self.string()
            ne = [self.u("<Q") for _ in range(self.u("<I"))]
            self.tensors[name] = (self.u("<I"), ne, self.u("<Q"))
        align = self.metadata.get("general.alignment", 32)
        self.data_start = self.p + (-self.p) % align

    def take(self, n):
        b = self.data[self.p:self.p + n]
        self.p += n
        return b

    def u(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return self.take(self.u("<Q")).decode("utf-8", "replace")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.u("<I"), self.u("<Q")
            return tuple(self.value(et) for _ in range(n))
        return self.u(SCALARS[t])

    def tensor_bytes(self, name):
        t, ne, off = self.tensors[name]
        n = 1
        for x in ne:
            n *= x
        be, bb = BLOCKS[t]
        start = self.data_start + off
        return self.data[start:start + n // be * bb]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    a, b = Gguf(sys.argv[1]), Gguf(sys.argv[2])
    same = differ = 0
    for name in sorted(set(a.tensors) | set(b.tensors)):
        if name not in a.tensors or name not in b.tensors:
            print(f"{name}: only in {'A' if name in a.tensors else 'B'}")
            differ += 1
            continue
        (ta, na, _), (tb, nb, _) = a.tensors[name], b.tensors[name]
        if ta != tb or na != nb:
            print(f"{name}: type/shape {ta} {na} vs {tb} {nb}")
            differ += 1
            continue
        ba, bb = a.tensor_bytes(name), b.tensor_bytes(name)
        if ba != bb:
            nd = sum(x != y for x, y in zip(ba, bb))
            print(f"{name}: type {ta} equal, {nd} of {len(ba)} bytes differ")
            differ += 1
        else:
            same += 1
    kd = sorted(k for k in set(a.metadata) | set(b.metadata) if a.metadata.get(k) != b.metadata.get(k))
    print(f"tensors: {same} equal, {differ} differ; metadata keys differing: {', '.join(kd) if kd else 'none'}")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
