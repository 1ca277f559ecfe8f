"""Writes the PyTorch checkpoint fixtures of llm/model and llm/checkpoint tests.

Run with a Python that has torch (Debian 12's python3-torch, 1.13.1, was used):

    /usr/bin/python3 llm/checkpoint/testdata/torch/make.py

Every file holds the same random GPT-2 (seed 7, the shape in config.json) as
GPT2LMHeadModel.state_dict() lays it out: the "transformer." prefix, the
attn.bias / attn.masked_bias buffers, and lm_head.weight sharing wte's
storage. The *.safetensors twins hold the same values, so a test can compare
what the loader reads from each format. Nothing here runs transformers.
"""

import json
import os
import struct
import zipfile
from collections import OrderedDict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CFG = json.load(open(os.path.join(HERE, "config.json")))
V, P, D, L = CFG["vocab_size"], CFG["n_positions"], CFG["n_embd"], CFG["n_layer"]


def state_dict():
    g = torch.Generator().manual_seed(7)

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * 0.3).float()

    sd = OrderedDict()
    sd["transformer.wte.weight"] = rand(V, D)
    sd["transformer.wpe.weight"] = rand(P, D)
    for i in range(L):
        h = f"transformer.h.{i}."
        sd[h + "ln_1.weight"] = 1 + rand(D)
        sd[h + "ln_1.bias"] = rand(D)
        sd[h + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
        sd[h + "attn.masked_bias"] = torch.tensor(-1e4)
        sd[h + "attn.c_attn.weight"] = rand(D, 3 * D)
        sd[h + "attn.c_attn.bias"] = rand(3 * D)
        sd[h + "attn.c_proj.weight"] = rand(D, D)
        sd[h + "attn.c_proj.bias"] = rand(D)
        sd[h + "ln_2.weight"] = 1 + rand(D)
        sd[h + "ln_2.bias"] = rand(D)
        sd[h + "mlp.c_fc.weight"] = rand(D, 4 * D)
        sd[h + "mlp.c_fc.bias"] = rand(4 * D)
        sd[h + "mlp.c_proj.weight"] = rand(4 * D, D)
        sd[h + "mlp.c_proj.bias"] = rand(D)
    sd["transformer.ln_f.weight"] = 1 + rand(D)
    sd["transformer.ln_f.bias"] = rand(D)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # tied: one storage
    with_metadata(sd)
    return sd


def with_metadata(sd):
    """Module.state_dict() sets _metadata, which pickle writes as BUILD state."""
    sd._metadata = OrderedDict([("", {"version": 1}), ("transformer", {"version": 1}),
                                ("transformer.h.0.attn", {"version": 1})])
    return sd


def cast(sd, dtype):
    out = OrderedDict((k, v.to(dtype)) for k, v in sd.items() if not k.startswith("lm_head"))
    out["lm_head.weight"] = out["transformer.wte.weight"]
    return with_metadata(out)


def write_safetensors(path, sd):
    """A plain safetensors writer (the safetensors package is not in Debian 12)."""
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    header, blobs, offset = OrderedDict(), [], 0
    for k, v in sd.items():
        if k == "lm_head.weight" or k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue
        raw = v.contiguous().view(torch.uint8).numpy().tobytes() if v.dtype == torch.bfloat16 \
            else v.contiguous().numpy().tobytes()
        header[k] = {"dtype": names[v.dtype], "shape": list(v.shape),
                     "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


def torch2_layout(src, dst, alignment=64):
    """Re-packs the torch.save zip src into the record layout of torch 2.x.

    No torch 2.x can be installed here, so this is the 1.13 file's records
    laid out as torch 2.x's torch/serialization.py (_save) and its C++
    writer (caffe2/serialize/inline_container.cc, PyTorchStreamWriter) lay
    them out, with torch>=2.6's
    torch.utils.serialization.config.save.compute_crc32 = False:

      - the folder is "archive" (torch 2.x names it so; 1.13 used the
        file's stem);
      - records in torch 2.x's order: data.pkl, .format_version ("1"),
        .storage_alignment (str(alignment)), byteorder ("little"), the
        storages data/<key> in the order the pickle first names them
        (numeric: 0, 1, 2, ..., 10, 11, not 1.13's 0, 1, 10, 11, 2),
        then what the writer adds when it closes: version ("3\n") and
        .data/serialization_id (40 digits; torch's are two 20-digit
        hashes, this one is a fixed stand-in);
      - every record's data starts at a multiple of alignment, padded with
        an "FB" extra field in its local header (as torch's getPadding);
      - each entry as miniz writes it: local header with sizes and CRC-32
        0 and general purpose flags 0x0808 (data descriptor, UTF-8), the
        data, a data descriptor (signature, CRC-32, 32-bit sizes); no
        timestamps (0), so the bytes are the same on every run; ZIP64
        end records, as torch writes them;
      - CRC-32 0 in every data descriptor and central directory entry, as
        compute_crc32=False leaves them (torch reads without checking any
        CRC-32; Python's zipfile refuses to read such entries).

    data.pkl and the storages' bytes are src's own, unchanged.
    """
    with zipfile.ZipFile(src) as z:
        folder = z.namelist()[0].split("/")[0]
        read = lambda name: z.read(f"{folder}/{name}")
        keys = sorted((n.rsplit("/", 1)[1] for n in z.namelist() if n.startswith(f"{folder}/data/")), key=int)
        records = [("data.pkl", read("data.pkl")), (".format_version", b"1"),
                   (".storage_alignment", str(alignment).encode()), ("byteorder", b"little")]
        records += [(f"data/{k}", read(f"data/{k}")) for k in keys]
        records += [("version", read("version")), (".data/serialization_id", b"%020d%020d" % (7, 7))]
    out, central = bytearray(), []
    for name, body in records:
        name = f"archive/{name}".encode()
        pad = -(len(out) + 30 + len(name) + 4) % alignment
        extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        central.append((name, len(body), len(out)))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, 0x0808, 0, 0, 0, 0, 0, 0, len(name), len(extra))
        out += name + extra
        assert len(out) % alignment == 0
        out += body
        out += struct.pack("<IIII", 0x08074B50, 0, len(body), len(body))  # CRC-32 0
    cd = len(out)
    for name, size, offset in central:
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, 0x0808, 0, 0, 0, 0, size, size,
                           len(name), 0, 0, 0, 0, 0, offset) + name
    n, cd_size, z64 = len(central), len(out) - cd, len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, n, n, cd_size, cd)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, cd_size, cd, 0)
    with open(dst, "wb") as f:
        f.write(out)


def main():
    sd = state_dict()
    for name, dtype in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        c = cast(sd, dtype)
        torch.save(c, os.path.join(HERE, f"zip-{name}.bin"))
        write_safetensors(os.path.join(HERE, f"{name}.safetensors"), c)
    # zip-f32.bin re-packed in torch 2.x's record layout (see torch2_layout),
    # and loaded back by torch to check that torch reads it.
    torch2 = os.path.join(HERE, "zip-torch2-layout.bin")
    torch2_layout(os.path.join(HERE, "zip-f32.bin"), torch2)
    back = torch.load(torch2)
    assert list(back) == list(sd) and all(torch.equal(back[k], sd[k]) for k in sd)
    assert back["lm_head.weight"].data_ptr() == back["transformer.wte.weight"].data_ptr()
    torch.save(sd, os.path.join(HERE, "legacy-f32.bin"), _use_new_zipfile_serialization=False)
    # Pickle protocol 4 (torch.save's pickle_protocol): FRAME, MEMOIZE,
    # SHORT_BINUNICODE and STACK_GLOBAL instead of protocol 2's opcodes.
    torch.save(sd, os.path.join(HERE, "zip-f32-protocol4.bin"), pickle_protocol=4)

    # Views that are not contiguous: the Conv1D weights stored transposed
    # and read back through strides, and a bias cut from the middle of a
    # longer storage.
    strided = OrderedDict()
    for k, v in sd.items():
        if k.endswith("c_fc.weight") or k.endswith("c_attn.weight"):
            v = v.t().contiguous().t()
        elif k.endswith("c_proj.bias"):
            v = torch.cat([torch.zeros(3), v, torch.zeros(2)])[3:3 + v.numel()]
        strided[k] = v
    assert not strided["transformer.h.0.mlp.c_fc.weight"].is_contiguous()
    torch.save(strided, os.path.join(HERE, "strided-f32.bin"))

    # A pickle that runs a program when Python unpickles it: the loader
    # must refuse it without running anything.
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo this command ran",))

    torch.save(OrderedDict([("transformer.wte.weight", Evil())]), os.path.join(HERE, "evil.bin"))

    # Small files for the fuzz target's seed corpus (FuzzParseTorch).
    small = OrderedDict([("a", torch.arange(6.0).view(2, 3)), ("b", torch.arange(6.0).view(2, 3).t()),
                         ("c", torch.tensor([1.5, -2.0], dtype=torch.float16)), ("d", torch.tensor(3.0))])
    small["e"] = small["a"]
    with_metadata(small)
    torch.save(small, os.path.join(HERE, "small-zip.bin"))
    torch.save(small, os.path.join(HERE, "small-legacy.bin"), _use_new_zipfile_serialization=False)

    # Empty views whose storage offset lies past their storage: torch
    # checks no offset of an empty tensor, and writes and loads these.
    one = torch.tensor([1.0, 2.0])
    far = torch.empty(0).set_(one.storage(), 1000, (0,), (1,))
    huge = torch.empty(0).set_(one.storage(), 2**61, (0, 3), (3, 1))
    torch.save(OrderedDict([("far", far), ("huge", huge), ("one", one)]), os.path.join(HERE, "empty-views.bin"))

    # An expanded view: one element as a 2**20 x 2**20 matrix (strides 0),
    # which a 750-byte file holds and which is 4 TiB once gathered.
    torch.save(OrderedDict([("w", torch.tensor([1.0]).expand(2**20, 2**20))]), os.path.join(HERE, "expanded.bin"))

    # Two shards and their index, as save_pretrained writes them.
    shard_dir = os.path.join(HERE, "sharded")
    os.makedirs(shard_dir, exist_ok=True)
    keys = list(sd.keys())
    half = len(keys) // 2
    weight_map = OrderedDict()
    for n, part in enumerate((keys[:half], keys[half:]), start=1):
        fname = f"pytorch_model-0000{n}-of-00002.bin"
        torch.save(OrderedDict((k, sd[k]) for k in part), os.path.join(shard_dir, fname))
        for k in part:
            weight_map[k] = fname
    with open(os.path.join(shard_dir, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(shard_dir, "config.json"), "w") as f:
        json.dump(CFG, f, indent=2)


if __name__ == "__main__":
    main()
