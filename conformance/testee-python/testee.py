#!/usr/bin/env python3
"""A testee for `amduat conformance test` (SPECS.md §21), standard library only.

It speaks amduat-testee/1 on stdin/stdout: 4-byte big-endian length, then one
JSON object.  It implements the ASL core (§3-§5: artifacts, references, the
text form, EncodedRef, derivation under SHA-256 and BLAKE3-256), BUNDLE/1
(§19), the program codec (§9), ExecutionResultValue bytes (§8) and TGK/1
edges (§17.1), written from SPECS.md alone.

    amduat conformance test -- python3 conformance/testee-python/testee.py
"""

import hashlib
import json
import struct
import sys

PROTOCOL = "amduat-testee/1"
SHA256, BLAKE3 = 0x0001, 0x8001
KNOWN = {SHA256: 32, BLAKE3: 32}


class Reject(Exception):
    """A decode rejection: field, byte offset (None for the text form), class."""

    def __init__(self, field, offset, cls=None):
        super().__init__(field)
        self.field, self.offset, self.cls = field, offset, cls

    def answer(self):
        r = {"field": self.field}
        if self.offset is not None:
            r["offset"] = self.offset
        if self.cls:
            r["class"] = self.cls
        return {"reject": r}


# --- BLAKE3-256 (default mode), after the reference implementation ---------

_IV = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]
_PERM = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8]
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT = 1, 2, 4, 8
_M32 = 0xFFFFFFFF


def _compress(cv, block, counter, blen, flags):
    m = list(struct.unpack("<16I", block))
    v = cv[:] + _IV[:4] + [counter & _M32, counter >> 32, blen, flags]

    def g(a, b, c, d, x, y):
        v[a] = (v[a] + v[b] + x) & _M32
        t = v[d] ^ v[a]; v[d] = ((t >> 16) | (t << 16)) & _M32
        v[c] = (v[c] + v[d]) & _M32
        t = v[b] ^ v[c]; v[b] = ((t >> 12) | (t << 20)) & _M32
        v[a] = (v[a] + v[b] + y) & _M32
        t = v[d] ^ v[a]; v[d] = ((t >> 8) | (t << 24)) & _M32
        v[c] = (v[c] + v[d]) & _M32
        t = v[b] ^ v[c]; v[b] = ((t >> 7) | (t << 25)) & _M32

    for r in range(7):
        g(0, 4, 8, 12, m[0], m[1]); g(1, 5, 9, 13, m[2], m[3])
        g(2, 6, 10, 14, m[4], m[5]); g(3, 7, 11, 15, m[6], m[7])
        g(0, 5, 10, 15, m[8], m[9]); g(1, 6, 11, 12, m[10], m[11])
        g(2, 7, 8, 13, m[12], m[13]); g(3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[i] for i in _PERM]
    return [v[i] ^ v[i + 8] for i in range(8)]


def _chunk_output(chunk, counter):
    """The (cv, block, blen, flags) of a chunk's last block, before ROOT."""
    cv = _IV[:]
    blocks = [chunk[i:i + 64] for i in range(0, len(chunk), 64)] or [b""]
    for i, b in enumerate(blocks):
        flags = (_CHUNK_START if i == 0 else 0) | (_CHUNK_END if i == len(blocks) - 1 else 0)
        if i == len(blocks) - 1:
            return cv, b.ljust(64, b"\0"), len(b), flags, counter
        cv = _compress(cv, b, counter, 64, flags)


def blake3(data):
    chunks = [data[i:i + 1024] for i in range(0, len(data), 1024)] or [b""]
    stack = []  # chaining values of complete subtrees, left to right
    for n, chunk in enumerate(chunks):
        out = _chunk_output(chunk, n)
        if n == len(chunks) - 1:
            break
        cv = _compress(out[0], out[1], out[4], out[2], out[3])
        total = n + 1
        while total & 1 == 0:  # merge completed subtrees
            cv = _compress(_IV, struct.pack("<16I", *(stack.pop() + cv)), 0, 64, _PARENT)
            total >>= 1
        stack.append(cv)
    cv_in, block, blen, flags, counter = out
    while stack:
        right = _compress(cv_in, block, counter, blen, flags)
        cv_in, block, blen, flags, counter = _IV, struct.pack("<16I", *(stack.pop() + right)), 64, _PARENT, 0
    return struct.pack("<8I", *_compress(cv_in, block, counter, blen, flags | _ROOT))


def digest(hash_id, data):
    if hash_id == SHA256:
        return hashlib.sha256(data).digest()
    if hash_id == BLAKE3:
        return blake3(data)
    raise ValueError("hash id 0x%04x is not registered" % hash_id)


# --- ENC/ASL1-CORE (§3) -----------------------------------------------------

class Reader:
    """Strict big-endian reader; failures name the field and its offset."""

    def __init__(self, b, prefix=""):
        self.b, self.off, self.prefix = b, 0, prefix

    def remaining(self):
        return len(self.b) - self.off

    def fail(self, field, off, cls=None):
        raise Reject(self.prefix + field, off, cls)

    def take(self, n, field):
        if self.remaining() < n:
            self.fail(field, self.off)
        v = self.b[self.off:self.off + n]
        self.off += n
        return v

    def u8(self, f): return self.take(1, f)[0]
    def u16(self, f): return struct.unpack(">H", self.take(2, f))[0]
    def u32(self, f): return struct.unpack(">I", self.take(4, f))[0]
    def u64(self, f): return struct.unpack(">Q", self.take(8, f))[0]

    def prefixed(self, width, field):
        start = self.off
        n = self.u32(field + " length") if width == 4 else self.u64(field + " length")
        if n > self.remaining():
            self.fail(field, start)
        return self.take(n, field)

    def count(self, field, min_elem):
        start = self.off
        n = self.u32(field)
        if n * min_elem > self.remaining():
            self.fail(field, start)
        return n

    def done(self):
        if self.remaining():
            self.fail("end of input", self.off)


def encode_artifact(tag, data):
    head = b"\0" if tag is None else b"\1" + struct.pack(">I", tag)
    return head + struct.pack(">Q", len(data)) + data


def read_artifact(r):
    off = r.off
    flag = r.u8("has_type_tag")
    if flag not in (0, 1):
        r.fail("has_type_tag", off)
    tag = r.u32("type_tag") if flag == 1 else None
    return tag, r.prefixed(8, "bytes")


def decode_reference(b):
    """ReferenceBytes (§3.2) -> (hash_id, digest); rejections are ERR_INTEGRITY."""
    if len(b) < 2:
        raise Reject("hash_id", 0, "ERR_INTEGRITY")
    hid = struct.unpack(">H", b[:2])[0]
    if hid == 0:
        raise Reject("hash_id", 0, "ERR_INTEGRITY")
    if hid in KNOWN and len(b) - 2 != KNOWN[hid]:
        raise Reject("digest", 2, "ERR_INTEGRITY")
    return hid, b[2:]


def read_encoded_ref(r, field):
    start = r.off
    n = r.u32(field + ".ref_len")
    if n < 2 or n > r.remaining():
        r.fail(field + ".ref_len", start)
    body = r.take(n, field)
    try:
        decode_reference(body)
    except Reject as e:
        raise Reject(r.prefix + field + "." + e.field, start + 4 + e.offset)
    return body


def encoded_ref(ref):
    return struct.pack(">I", len(ref)) + ref


def parse_text(s):
    if len(s) < 4 or len(s) % 2 or any(c not in "0123456789abcdef" for c in s):
        raise Reject("text", None, "ERR_INTEGRITY")
    b = bytes.fromhex(s)
    decode_reference(b)
    return b


def derive(hash_id, tag, data):
    return struct.pack(">H", hash_id) + digest(hash_id, encode_artifact(tag, data))


# --- BUNDLE/1 (§19) ---------------------------------------------------------

MAGIC = b"AMDUATBN"


def bundle_encode(hash_id, arts, roots):
    covered, out = bytearray(), bytearray()

    def put(b, cover=True):
        out.extend(b)
        if cover:
            covered.extend(b)
    put(MAGIC + b"\x00\x01\x00\x00")
    refs = []
    for tag, data in arts:
        ref = derive(hash_id, tag, data)
        refs.append(ref)
        whole = encode_artifact(tag, data)
        put(b"\x01" + encoded_ref(ref) + whole[:len(whole) - len(data)])
        put(data, cover=False)
    put(b"\x00" + struct.pack(">I", len(roots)))
    for i in roots:
        put(encoded_ref(refs[i]))
    put(struct.pack(">Q", len(arts)))
    out.extend(hashlib.sha256(bytes(covered)).digest())
    return bytes(out)


def bundle_decode(b):
    """-> (entries, roots) or raises Reject; every class is ERR_INTEGRITY
    except another version and an unregistered hash id (ERR_UNSUPPORTED)."""
    I, U = "ERR_INTEGRITY", "ERR_UNSUPPORTED"
    r = Reader(b)
    covered = bytearray()

    def full(n, field, off=None):
        start = r.off
        if r.remaining() < n:
            raise Reject(field, start if off is None else off, I)
        v = r.take(n, field)
        covered.extend(v)
        return v

    if full(8, "magic") != MAGIC:
        raise Reject("magic", 0, I)
    if struct.unpack(">H", full(2, "version"))[0] != 1:
        raise Reject("version", 8, U)
    if struct.unpack(">H", full(2, "flags"))[0] != 0:
        raise Reject("flags", 10, I)

    def ref(prefix):
        start = r.off
        n = struct.unpack(">I", full(4, prefix + ".ref_len"))[0]
        if n < 2 or n > 257:
            raise Reject(prefix + ".ref_len", start, I)
        body = full(n, prefix + ".ref_len", off=start)
        try:
            decode_reference(body)
        except Reject as e:
            raise Reject(prefix + "." + e.field, start + 4 + e.offset, I)
        return body

    entries = []
    while True:
        start = r.off
        t = full(1, "entry.tag")[0]
        if t == 0:
            break
        if t != 1:
            raise Reject("entry.tag", start, I)
        eref = ref("entry.ref")
        hid = struct.unpack(">H", eref[:2])[0]
        if hid not in KNOWN:
            raise Reject("entry.ref.hash_id", start + 5, U)
        aoff = r.off
        flag = full(1, "entry.artifact.has_type_tag")[0]
        if flag not in (0, 1):
            raise Reject("entry.artifact.has_type_tag", aoff, I)
        tag = struct.unpack(">I", full(4, "entry.artifact.type_tag"))[0] if flag else None
        loff = r.off
        size = struct.unpack(">Q", full(8, "entry.artifact.bytes length"))[0]
        if size > r.remaining():
            raise Reject("entry.artifact.bytes", loff, I)
        data = r.take(size, "entry.artifact.bytes")
        if derive(hid, tag, data) != eref:
            raise Reject("entry.artifact", aoff, I)
        entries.append({"reference": eref.hex(), "type_tag": tag, "bytes": data.hex()})
    nroots = struct.unpack(">I", full(4, "roots.count"))[0]
    roots = [ref("roots.ref").hex() for _ in range(nroots)]
    coff = r.off
    if struct.unpack(">Q", full(8, "entry_count"))[0] != len(entries):
        raise Reject("entry_count", coff, I)
    want = hashlib.sha256(bytes(covered)).digest()
    doff = r.off
    if r.remaining() < 32 or r.take(32, "digest") != want:
        raise Reject("digest", doff, I)
    if r.remaining():
        raise Reject("end of input", r.off, I)
    return entries, roots


# --- ENC/PEL-PROGRAM-DAG/1 (§9) ---------------------------------------------

class ProgramReject(Reject):
    def __init__(self, field, offset, code):
        super().__init__(field, offset)
        self.code = code

    def answer(self):
        a = super().answer()
        a["diagnostic_code"] = self.code
        return a


def program_encode(p):
    out = bytearray(struct.pack(">I", len(p["nodes"])))
    prev = None
    for n in p["nodes"]:
        name = n["op"].encode("utf-8")
        if prev is not None and n["id"] <= prev or not 1 <= len(name) <= 255:
            raise ValueError("bad input: node %d cannot be encoded" % n["id"])
        prev = n["id"]
        out += struct.pack(">II", n["id"], len(name)) + name + struct.pack(">II", n["version"], len(n["inputs"]))
        for i in n["inputs"]:
            if "input" in i:
                out += b"\x00" + struct.pack(">I", i["input"])
            else:
                out += b"\x01" + struct.pack(">II", i["node"], i["output"])
        params = bytes.fromhex(n["params"])
        out += struct.pack(">I", len(params)) + params
    out += struct.pack(">I", len(p["roots"]))
    for rt in p["roots"]:
        out += struct.pack(">II", rt["node"], rt["output"])
    return bytes(out)


def program_decode(b):
    r = Reader(b)
    try:
        nodes = []
        for i in range(r.count("node_count", 21)):
            id_off = r.off
            nid = r.u32("node_id")
            if nodes and nid <= nodes[-1]["id"]:
                raise ProgramReject("node_id", id_off, 3 if nid == nodes[-1]["id"] else 4)
            name_off = r.off
            name = r.prefixed(4, "op_name")
            try:
                text = name.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is None or not 1 <= len(name) <= 255:
                r.fail("op_name", name_off)
            node = {"id": nid, "op": text, "version": r.u32("op_version"), "inputs": []}
            for _ in range(r.count("input_count", 5)):
                tag_off = r.off
                tag = r.u8("input_tag")
                if tag == 0:
                    node["inputs"].append({"input": r.u32("input_index")})
                elif tag == 1:
                    nd = r.u32("input_node_id")
                    node["inputs"].append({"node": nd, "output": r.u32("output_index")})
                else:
                    r.fail("input_tag", tag_off)
            node["params"] = r.prefixed(4, "params").hex()
            nodes.append(node)
        roots = []
        for _ in range(r.count("root_count", 8)):
            nd = r.u32("root_node_id")
            roots.append({"node": nd, "output": r.u32("root_output_index")})
        r.done()
    except ProgramReject:
        raise
    except Reject as e:
        raise ProgramReject(e.field, e.offset, 2)
    return {"nodes": nodes, "roots": roots}


# --- ExecutionResultValue bytes (§8) -----------------------------------------

def status_code_ok(status, code):
    return code == status if status < 4 else code not in (0, 2, 3)


def value_encode(v):
    out = bytearray(struct.pack(">HB", v["pel1_version"], v["status"]))
    out += encoded_ref(parse_text(v["scheme_ref"]))
    out += struct.pack(">BII", v["kind"], v["status_code"], len(v["diagnostics"]))
    for d in v["diagnostics"]:
        msg = d["message"].encode("utf-8") if d.get("message") is not None else hx(d["message_hex"])
        out += struct.pack(">II", d["code"], len(msg)) + msg
    return bytes(out)


def value_decode(b):
    r = Reader(b)
    if r.u16("pel1_version") != 1:
        r.fail("pel1_version", 0)
    off = r.off
    status = r.u8("status")
    if status > 4:
        r.fail("status", off)
    scheme = read_encoded_ref(r, "scheme_ref")
    off = r.off
    if r.u8("summary.kind") != status:
        r.fail("summary.kind", off)
    off = r.off
    code = r.u32("summary.status_code")
    if not status_code_ok(status, code):
        r.fail("summary.status_code", off)
    diags = []
    for _ in range(r.count("diagnostics.count", 8)):
        dcode = r.u32("diagnostics.code")
        msg = r.prefixed(4, "diagnostics.message")
        try:
            diags.append({"code": dcode, "message": msg.decode("utf-8")})
        except UnicodeDecodeError:
            diags.append({"code": dcode, "message_hex": msg.hex()})
    r.done()
    return {"pel1_version": 1, "status": status, "scheme_ref": scheme.hex(), "kind": status,
            "status_code": code, "diagnostics": diags}


# --- ENC/TGK1-EDGE/1 (§17.1) -------------------------------------------------

def edge_encode(e):
    out = bytearray(struct.pack(">I", e["edge_type"]))
    for side in ("from", "to"):
        out += struct.pack(">I", len(e[side]))
        for ep in e[side]:
            out += bytes([ep["role"]]) + encoded_ref(parse_text(ep["ref"]))
    return bytes(out)


def edge_decode(b):
    r = Reader(b)
    e = {"edge_type": r.u32("edge_type")}
    for side in ("from", "to"):
        start = r.off
        n = r.count(side + ".count", 7)
        if n == 0:
            r.fail(side + ".count", start)
        eps = []
        for _ in range(n):
            off = r.off
            role = r.u8(side + ".role")
            if not 1 <= role <= 8:
                r.fail(side + ".role", off)
            eps.append({"role": role, "ref": read_encoded_ref(r, side + ".ref").hex()})
        e[side] = eps
    r.done()
    return e


# --- Requests ---------------------------------------------------------------

def hx(s):
    return bytes.fromhex(s)


def art_json(tag, data):
    return {"type_tag": tag, "bytes": data.hex()}


def k_artifact_decode(i):
    r = Reader(hx(i["artifact_bytes"]))
    tag, data = read_artifact(r)
    r.done()
    return art_json(tag, data)


def k_reference_decode(i):
    hid, dg = decode_reference(hx(i["reference_bytes"]))
    return {"hash_id": hid, "digest": dg.hex(), "known": hid in KNOWN}


def k_encoded_ref_decode(i):
    r = Reader(hx(i["encoded_ref"]))
    ref = read_encoded_ref(r, "encoded_ref")
    r.done()
    return {"reference_bytes": ref.hex()}


def k_optional_decode(i):
    r = Reader(hx(i["optional_encoded_ref"]))
    flag = r.u8("optional_ref.has_ref")
    if flag not in (0, 1):
        r.fail("optional_ref.has_ref", 0)
    ref = read_encoded_ref(r, "optional_ref") if flag else None
    r.done()
    return {"reference_bytes": ref.hex() if ref is not None else None}


def k_bundle_decode(i):
    entries, roots = bundle_decode(hx(i["bundle"]))
    return {"entries": entries, "roots": roots}


def k_program_encode(i):
    b = program_encode(i["program"])
    ref = derive(SHA256, 0x00000101, b)
    return {"program_bytes": b.hex(), "reference": ref.hex()}


def k_edge_encode(i):
    b = edge_encode(i["edge"])
    return {"edge_bytes": b.hex(), "reference": derive(SHA256, 0x00000201, b).hex()}


KINDS = {
    "artifact_encode": lambda i: {"artifact_bytes": encode_artifact(i["type_tag"], hx(i["bytes"])).hex()},
    "artifact_decode": k_artifact_decode,
    "reference_decode": k_reference_decode,
    "reference_derive": lambda i: {
        "artifact_bytes": encode_artifact(i["type_tag"], hx(i["bytes"])).hex(),
        "reference": derive(i["hash_id"], i["type_tag"], hx(i["bytes"])).hex()},
    "reference_to_text": lambda i: {"text": hx(i["reference_bytes"]).hex()},
    "reference_from_text": lambda i: {"reference_bytes": parse_text(i["text"]).hex()},
    "encoded_ref_encode": lambda i: {"encoded_ref": encoded_ref(hx(i["reference_bytes"])).hex()},
    "encoded_ref_decode": k_encoded_ref_decode,
    "optional_encoded_ref_encode": lambda i: {"optional_encoded_ref": (
        "00" if i["reference_bytes"] is None else "01" + encoded_ref(hx(i["reference_bytes"])).hex())},
    "optional_encoded_ref_decode": k_optional_decode,
    "bundle_encode": lambda i: {"bundle": bundle_encode(
        i["hash_id"], [(e["type_tag"], hx(e["bytes"])) for e in i["entries"]], i["roots"]).hex()},
    "bundle_decode": k_bundle_decode,
    "program_encode": k_program_encode,
    "program_decode": lambda i: {"program": program_decode(hx(i["program_bytes"]))},
    "result_value_encode": lambda i: {"value_bytes": value_encode(i["value"]).hex()},
    "result_value_decode": lambda i: {"value": value_decode(hx(i["value_bytes"]))},
    "edge_encode": k_edge_encode,
    "edge_decode": lambda i: {"edge": edge_decode(hx(i["edge_bytes"]))},
}


def answer(req):
    kind = req.get("kind")
    if kind == "hello":
        return {"protocol": PROTOCOL, "implementation": "amduat-python", "kinds": sorted(KINDS), "registries": []}
    if kind not in KINDS:
        raise ValueError("kind %r not implemented" % kind)
    try:
        return KINDS[kind](req["input"])
    except Reject as e:
        return e.answer()


def main():
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(4)
        if not head:
            return 0
        if len(head) < 4:
            return 6
        n = struct.unpack(">I", head)[0]
        payload = stdin.read(n)
        if n == 0 or len(payload) != n:
            return 6
        req = json.loads(payload)
        resp = {"id": req.get("id", 0)}
        try:
            resp["output"] = answer(req)
        except Exception as e:  # a bug or an input this testee cannot answer
            resp["error"] = "%s: %s" % (type(e).__name__, e)
        out = json.dumps(resp, separators=(",", ":")).encode()
        stdout.write(struct.pack(">I", len(out)) + out)
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
