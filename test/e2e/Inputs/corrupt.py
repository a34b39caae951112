#!/usr/bin/python3
"""Makes broken copies of model.bin and safetensors files for bad-input tests.

  corrupt.py drop-tensor IN OUT NAME        safetensors without NAME
  corrupt.py add-tensor IN OUT NAME         safetensors with an extra tensor
  corrupt.py lie-offsets IN OUT             first tensor's end offset past the data
  corrupt.py flip-elf IN OUT                model.bin with a byte of its kernel library
                                            flipped (not sealed: for the checksum)
  corrupt.py to-mindformers IN OUT          LLaMA safetensors renamed to MindFormers names
  corrupt.py set-version IN OUT N           model.bin with format_version N
  corrupt.py edit IN OUT 'doc[...] = V'     model.bin through flatc's JSON with one
                                            assignment (e.g. a dispatch's kernel)
  corrupt.py edit-unsealed IN OUT '...'     the same, its checksum left as it was
  corrupt.py duplicate-tensor IN OUT NAME   safetensors whose header names NAME twice
  corrupt.py misalign-attributes IN OUT     model.bin with an op's attribute vector at a
                                            4-byte boundary
  corrupt.py set-metadata IN OUT KEY VALUE  safetensors with metadata KEY = VALUE
  The other model.bin commands seal their output again (seal()).
  corrupt.py nan IN OUT NAME                safetensors with NAME's first value NaN (F32)
  corrupt.py fill IN OUT NAME VALUE         safetensors with every value of NAME = VALUE (F32)
  corrupt.py miscompile IN OUT OLD NEW      model.bin whose kernel library has the
                                            f32 constant OLD replaced by NEW: a
                                            kernel that loads but computes
                                            something else (for mf-run --check)
  corrupt.py rename-service IN OUT OLD NEW  model.bin whose kernels call runtime
                                            service NEW (same length) instead of
                                            OLD: a model from another mfc
  corrupt.py rename-entry IN OUT OLD NEW    model.bin whose entry OLD is called NEW
                                            (same length), wherever it is named
  corrupt.py flip-all MFRUN IN ARGS...      flips bytes of model.bin one at a
                                            time and runs mf-run on each copy,
                                            as it is and sealed again; fails if
                                            any run crashes or an unsealed copy
                                            is not refused
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

# mf-run's exit statuses for an error it reports (docs/runtime.md): 1, and
# sysexits' data error, no input, unavailable, OS error, I/O error and
# configuration. 70 (internal software error) would be a bug.
ERROR_STATUSES = {1, 65, 66, 69, 71, 74, 78}


def read_safetensors(path):
    data = open(path, "rb").read()
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + size]), data[8 + size:]


def write_safetensors(path, header, body):
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


CONTENT_CRC32_FIELD = 9  # Executable.content_crc32 in mf_executable.fbs
OP_ATTRIBUTES_TYPE, OP_ATTRIBUTES = 7, 8  # Op.attributes (a union: 2 fields)


def schema_dir():
    """Where the build generated mf_ops.fbs (lit sets MFC_SCHEMA_DIR)."""
    if "MFC_SCHEMA_DIR" not in os.environ:
        sys.exit("set MFC_SCHEMA_DIR to the build's runtime/format/schemas")
    return os.environ["MFC_SCHEMA_DIR"]


def seal(data):
    """Writes model.bin's content checksum (runtime/format/ContentChecksum.h): the
    CRC-32 of the file with the field's four bytes zero. A corrupt file made
    on purpose is sealed again so that the check behind it is reached."""
    data = bytearray(data)
    (table,) = struct.unpack_from("<I", data, 0)
    (vtable_back,) = struct.unpack_from("<i", data, table)
    vtable = table - vtable_back
    (vtable_size,) = struct.unpack_from("<H", data, vtable)
    slot = 4 + 2 * CONTENT_CRC32_FIELD
    if slot >= vtable_size:
        sys.exit("model.bin has no content checksum field")
    (field,) = struct.unpack_from("<H", data, vtable + slot)
    struct.pack_into("<I", data, table + field, 0)
    struct.pack_into("<I", data, table + field, zlib.crc32(bytes(data)))
    return bytes(data)


def main():
    command = sys.argv[1]
    if command == "drop-tensor":
        header, body = read_safetensors(sys.argv[2])
        del header[sys.argv[4]]
        write_safetensors(sys.argv[3], header, body)
    elif command == "add-tensor":
        header, body = read_safetensors(sys.argv[2])
        header[sys.argv[4]] = {"dtype": "F32", "shape": [1],
                               "data_offsets": [len(body), len(body) + 4]}
        write_safetensors(sys.argv[3], header, body + b"\0\0\0\0")
    elif command == "lie-offsets":
        header, body = read_safetensors(sys.argv[2])
        name = next(n for n in header if n != "__metadata__")
        begin, end = header[name]["data_offsets"]
        header[name]["data_offsets"] = [begin, len(body) + 64]
        write_safetensors(sys.argv[3], header, body)
    elif command == "nan":
        header, body = read_safetensors(sys.argv[2])
        begin = header[sys.argv[4]]["data_offsets"][0]
        body = body[:begin] + struct.pack("<f", float("nan")) + body[begin + 4:]
        write_safetensors(sys.argv[3], header, body)
    elif command == "fill":
        header, body = read_safetensors(sys.argv[2])
        begin, end = header[sys.argv[4]]["data_offsets"]
        filled = struct.pack("<f", float(sys.argv[5])) * ((end - begin) // 4)
        body = body[:begin] + filled + body[end:]
        write_safetensors(sys.argv[3], header, body)
    elif command == "flip-elf":
        data = bytearray(open(sys.argv[2], "rb").read())
        start = data.index(b"\x7fELF")
        data[start + 100] ^= 0xFF
        open(sys.argv[3], "wb").write(data)
    elif command == "to-mindformers":
        rules = [("model.embed_tokens.weight", "model.tok_embeddings.embedding_weight"),
                 ("input_layernorm", "attention_norm"), ("post_attention_layernorm", "ffn_norm"),
                 ("self_attn.q_proj", "attention.wq"), ("self_attn.k_proj", "attention.wk"),
                 ("self_attn.v_proj", "attention.wv"), ("self_attn.o_proj", "attention.wo"),
                 ("mlp.gate_proj", "feed_forward.w1"), ("mlp.up_proj", "feed_forward.w3"),
                 ("mlp.down_proj", "feed_forward.w2"), ("model.norm.weight", "model.norm_out.weight")]
        header, body = read_safetensors(sys.argv[2])
        renamed = {}
        for name, info in header.items():
            for old, new in rules:
                name = name.replace(old, new)
            renamed[name] = info
        write_safetensors(sys.argv[3], renamed, body)
    elif command == "set-version":
        data = bytearray(open(sys.argv[2], "rb").read())
        (table,) = struct.unpack_from("<I", data, 0)
        (vtable_back,) = struct.unpack_from("<i", data, table)
        vtable = table - vtable_back
        (field,) = struct.unpack_from("<H", data, vtable + 4)  # field 0
        struct.pack_into("<I", data, table + field, int(sys.argv[4]))
        open(sys.argv[3], "wb").write(seal(data))
    elif command in ("miscompile", "rename-service"):
        data = bytearray(open(sys.argv[2], "rb").read())
        start = data.find(b"\x7fELF")
        (length,) = struct.unpack("<I", data[start - 4:start])  # the vector's size
        library = bytes(data[start:start + length])
        if command == "miscompile":
            old, new = struct.pack("<f", float(sys.argv[4])), struct.pack("<f", float(sys.argv[5]))
            if library.count(old) != 1:
                sys.exit(f"the constant occurs {library.count(old)} times in the kernels")
        else:  # the slot's name in the symbol tables, same length
            old, new = (sys.argv[4] + "_ptr\0").encode(), (sys.argv[5] + "_ptr\0").encode()
            if len(old) != len(new) or old not in library:
                sys.exit("the names differ in length or the library has no such slot")
        data[start:start + length] = library.replace(old, new)
        open(sys.argv[3], "wb").write(seal(data))
    elif command == "rename-entry":
        data = bytearray(open(sys.argv[2], "rb").read())
        old, new = sys.argv[4].encode(), sys.argv[5].encode()
        stored = struct.pack("<I", len(old)) + old + b"\0"  # a flatbuffer string
        if len(old) != len(new) or stored not in data:
            sys.exit("the names differ in length or there is no such entry")
        renamed = bytes(data).replace(stored, struct.pack("<I", len(new)) + new + b"\0")
        open(sys.argv[3], "wb").write(seal(renamed))
    elif command == "misalign-attributes":
        # An op's attribute vector of 8-byte values (a Slice's offsets)
        # pointed 4 bytes later, with a length of 1 written
        # there: its element then sits at a 4-byte boundary, which
        # flatbuffers' verifier accepts.
        data = bytearray(open(sys.argv[2], "rb").read())
        u32 = lambda at: struct.unpack_from("<I", data, at)[0]

        def field(table, index):
            vtable = table - struct.unpack_from("<i", data, table)[0]
            if 4 + 2 * index >= struct.unpack_from("<H", data, vtable)[0]:
                return None
            offset = struct.unpack_from("<H", data, vtable + 4 + 2 * index)[0]
            return table + offset if offset else None

        def target(at):
            return at + u32(at)

        def elements(vector):
            return [vector + 4 + 4 * i + u32(vector + 4 + 4 * i) for i in range(u32(vector))]

        # The union's member numbers, from the generated schema (NONE is 0).
        schema = open(os.path.join(schema_dir(), "mf_ops.fbs")).read()
        union = schema[schema.index("union OpAttributes"):]
        members = union[union.index("{") + 1:union.index("}")].replace(",", " ").split()
        slice_attrs = members.index("SliceAttrs") + 1
        root = u32(0)
        for entry in elements(target(field(root, 4))):
            for op in elements(target(field(entry, 6))):
                kind, attributes = field(op, OP_ATTRIBUTES_TYPE), field(op, OP_ATTRIBUTES)
                if kind is None or data[kind] != slice_attrs or attributes is None:
                    continue
                at = field(target(attributes), 0)  # SliceAttrs.offsets
                if at is None or u32(target(at)) < 2:
                    continue
                struct.pack_into("<I", data, target(at) + 4, 1)
                struct.pack_into("<I", data, at, u32(at) + 4)
                open(sys.argv[3], "wb").write(seal(bytes(data)))
                return
        sys.exit("no Slice with offsets")
    elif command in ("edit", "edit-unsealed"):
        # The executable as JSON (flatc, from the schema), one Python
        # assignment to it, back to binary, sealed: e.g.
        #   'doc["entries"][0]["dispatches"][3]["kernel"] = 5'
        schema = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "../../../runtime/format/schemas/mf_executable.fbs")
        include = ["-I", schema_dir()]  # mf_ops.fbs, generated by the build
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["flatc", "--json", "--strict-json", "--raw-binary",
                            "-o", tmp] + include + [schema, "--", sys.argv[2]],
                           check=True)
            name = os.path.splitext(os.path.basename(sys.argv[2]))[0]
            doc = json.load(open(os.path.join(tmp, name + ".json")))
            exec(sys.argv[4], {"doc": doc})
            json.dump(doc, open(os.path.join(tmp, name + ".json"), "w"))
            subprocess.run(["flatc", "--binary", "-o", tmp] + include +
                           [schema, os.path.join(tmp, name + ".json")], check=True)
            data = open(os.path.join(tmp, name + ".bin"), "rb").read()
        # edit-unsealed keeps the old checksum: the loader must notice.
        open(sys.argv[3], "wb").write(seal(data) if command == "edit" else data)
    elif command == "duplicate-tensor":
        # The header's JSON with NAME written twice (json.dumps would keep one).
        header, body = read_safetensors(sys.argv[2])
        info = json.dumps(header[sys.argv[4]])
        text = json.dumps(header)
        text = text[:-1] + ", " + json.dumps(sys.argv[4]) + ": " + info + "}"
        with open(sys.argv[3], "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text.encode() + body)
    elif command == "set-metadata":
        header, body = read_safetensors(sys.argv[2])
        header.setdefault("__metadata__", {})[sys.argv[4]] = sys.argv[5]
        write_safetensors(sys.argv[3], header, body)
    elif command == "flip-all":
        # Each flipped copy as it is (the checksum must refuse every one),
        # then sealed again (the checks behind it must hold: no crash).
        # Machine code changed and sealed again is tampering, which no
        # loader can tell from a real kernel: those bytes are flipped only
        # unsealed.
        mfrun, path, args = sys.argv[2], sys.argv[3], sys.argv[4:]
        data = open(path, "rb").read()
        elf = data.find(b"\x7fELF")
        code = range(0)
        if elf >= 4:
            (length,) = struct.unpack("<I", data[elf - 4:elf])
            code = range(elf, elf + length)
        step = max(1, len(data) // 400)
        outcomes = {}
        with tempfile.TemporaryDirectory() as tmp:
            broken = os.path.join(tmp, "broken.bin")
            for offset in range(0, len(data), step):
                copy = bytearray(data)
                copy[offset] ^= 0xFF
                for sealed in (False, True):
                    if sealed and offset in code:
                        continue
                    if sealed:
                        try:
                            copy = bytearray(seal(copy))
                        except (struct.error, SystemExit):
                            continue  # the flip broke the root table itself
                    open(broken, "wb").write(copy)
                    run = subprocess.run([mfrun, broken] + args, capture_output=True,
                                         text=True, errors="replace")
                    refused = run.returncode in ERROR_STATUSES
                    if not (run.returncode == 0 or refused) or (
                            refused and "mf-run: error:" not in run.stderr):
                        print(f"byte {offset} (sealed: {sealed}): exit {run.returncode}\n{run.stderr}")
                        return 1
                    if not sealed and run.returncode == 0:
                        print(f"byte {offset}: flipped, yet the file was not refused")
                        return 1
                    key = (sealed, 1 if refused else 0)
                    outcomes[key] = outcomes.get(key, 0) + 1
        count = len(range(0, len(data), step))
        print(f"flipped {count} bytes: {outcomes.get((False, 1), 0)} refused; sealed again: "
              f"{outcomes.get((True, 1), 0)} rejected with an error, "
              f"{outcomes.get((True, 0), 0)} still ran; no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
