#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks clgrad's checkpoints against PyTorch (tests/test_io_python.c runs
this with Debian's python3-torch).

  io_interop.py check FILE   FILE was written by clgrad: it holds an LSTM
                             ("lstm.*"), a linear layer ("fc.*"), an input x
                             and clgrad's output y = fc(lstm(x)); PyTorch
                             loads the weights with load_state_dict (strict),
                             recomputes y and compares.
  io_interop.py write FILE   writes such a file from PyTorch, for clgrad to
                             load and recompute.
  io_interop.py check-half FILE
                             FILE was written by clgrad: a float32 x of
                             tricky values, "x.f16" and "x.bf16" (clgrad's
                             cg_to_dtype of x, stored F16 and BF16) and
                             "x.f16.f32", "x.bf16.f32" (those cast back);
                             each must equal PyTorch's conversion bit for
                             bit (bfloat16 by c10::BFloat16, whose NaN is
                             0x7FC0: see tests/fixtures/gen_half.py).
  io_interop.py write-half FILE
                             PyTorch writes x, its float16 and bfloat16
                             conversions ("x.f16", "x.bf16") and a float16
                             and a bfloat16 random tensor ("h", "b", with
                             their bits as I32 "h.bits", "b.bits").
  io_interop.py check-cnn FILE, write-cnn FILE
                             the same with a small CNN, nn.Sequential(
                             Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten,
                             Linear), after three training-mode forwards:
                             the state dict holds the batch norm's running
                             statistics and its num_batches_tracked (I64,
                             shape []); y is the eval-mode output.

The safetensors package is not in Debian bookworm and torch 1.13 has no
safetensors reader, so the format is read and written here with struct and
json, as the specification describes it: an 8-byte little-endian header
length, a JSON header, then little-endian data.  Exit status 0 on success,
1 with a message otherwise.
"""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "I32": torch.int32, "I64": torch.int64,
          "F16": torch.float16, "BF16": torch.bfloat16}
NAMES = {v: k for k, v in DTYPES.items()}
# 16-bit tensors are written as their bit patterns (numpy has no bfloat16).
LITTLE = {torch.float32: "<f4", torch.int32: "<i4", torch.int64: "<i8",
          torch.float16: "<i2", torch.bfloat16: "<i2"}
T, B, IN, H, OUT = 5, 2, 3, 4, 2


def model():
    lstm = torch.nn.LSTM(IN, H)
    fc = torch.nn.Linear(H, OUT)
    return lstm, fc


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    end = 0
    for name, e in header.items():
        b, e_ = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e_]), dtype=DTYPES[e["dtype"]])
        tensors[name] = t.reshape(e["shape"])
        end = max(end, e_)
    if end != len(data):
        raise ValueError("data is %d bytes, tensors end at %d" % (len(data), end))
    return tensors, meta


def write(path, tensors, meta):
    header = {"__metadata__": meta}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        c = t.contiguous()
        if c.dtype in (torch.float16, torch.bfloat16):
            c = c.view(torch.int16)
        blob = c.numpy().astype(LITTLE[t.dtype]).tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def forward(lstm, fc, x):
    with torch.no_grad():
        return fc(lstm(x)[0])


def check(path):
    tensors, meta = read(path)
    lstm, fc = model()
    lstm.load_state_dict({k[5:]: v for k, v in tensors.items()
                          if k.startswith("lstm.")}, strict=True)
    fc.load_state_dict({k[3:]: v for k, v in tensors.items()
                        if k.startswith("fc.")}, strict=True)
    y = forward(lstm, fc, tensors["x"])
    err = (y - tensors["y"]).abs().max().item()
    scale = tensors["y"].abs().max().item()
    print("max |y_torch - y_clgrad| = %.3g (max |y| %.3g)" % (err, scale))
    if err > 1e-5 * max(scale, 1):
        raise ValueError("outputs differ")
    ids = tensors["ids"]
    if ids.dtype != torch.int32 or ids.tolist() != [3, -1, 2147483647]:
        raise ValueError("ids: %r" % ids)
    if meta.get("step") != "12" or meta.get("format") != "pt":
        raise ValueError("metadata: %r" % meta)
    if json.loads(meta["config"])["hidden"] != H:
        raise ValueError("config: %r" % meta["config"])


def make(path):
    torch.manual_seed(0)
    lstm, fc = model()
    x = torch.randn(T, B, IN)
    tensors = {"lstm." + k: v for k, v in lstm.state_dict().items()}
    tensors.update({"fc." + k: v for k, v in fc.state_dict().items()})
    tensors["x"] = x
    tensors["y"] = forward(lstm, fc, x)
    tensors["ids"] = torch.tensor([[1, 2], [-3, 2147483647]], dtype=torch.int32)
    write(path, tensors, {"format": "pt", "step": "7", "writer": "torch " + torch.__version__})


def cnn():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3 * 2 * 3, 4))


def check_cnn(path):
    tensors, meta = read(path)
    net = cnn()
    state = {k[4:]: v for k, v in tensors.items() if k.startswith("cnn.")}
    nbt = state["1.num_batches_tracked"]
    if nbt.dtype != torch.int64 or nbt.shape != () or nbt.item() != 3:
        raise ValueError("num_batches_tracked: %r" % nbt)
    net.load_state_dict(state, strict=True)
    net.eval()
    with torch.no_grad():
        y = net(tensors["x"])
    err = (y - tensors["y"]).abs().max().item()
    scale = tensors["y"].abs().max().item()
    print("cnn: max |y_torch - y_clgrad| = %.3g (max |y| %.3g)" % (err, scale))
    if err > 1e-5 * max(scale, 1):
        raise ValueError("outputs differ")


def make_cnn(path):
    torch.manual_seed(1)
    net = cnn()
    with torch.no_grad():
        for _ in range(3):
            net(torch.randn(5, 2, 4, 6) * 2 + 0.5)
    net.eval()
    x = torch.randn(5, 2, 4, 6)
    with torch.no_grad():
        y = net(x)
    tensors = {"cnn." + k: v for k, v in net.state_dict().items()}
    tensors["x"] = x
    tensors["y"] = y
    write(path, tensors, {"format": "pt"})


def tricky():
    bits = [0x00000000, 0x80000000, 0x3F800000, 0x477FE000, 0x477FEFFF,
            0x477FF000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC12345,
            0x7F800001, 0x33000000, 0x33000001, 0x33C00000, 0x387FFFFF,
            0x3F801000, 0x3F803000, 0x00000001, 0x807FFFFF, 0x3F808000,
            0x3F818000, 0x7F7F8000, 0xC0490FDB, 0x3EAAAAAB]
    signed = [b - (1 << 32) if b >= 1 << 31 else b for b in bits]
    return torch.tensor(signed, dtype=torch.int32).view(torch.float32) \
        .reshape(4, 6)


def to_bf16(x):
    """c10::BFloat16's conversion (x.bfloat16() gives NaN 0xFFFF here)."""
    return torch.tensor(x.tolist(), dtype=torch.bfloat16)


def same_bits(a, b, what):
    """Bit for bit, except that a NaN matches a NaN of the same sign: the
    payload of a float32 NaN's float16 differs between PyTorch versions
    (1.13: the quiet NaN 0x7E00; 2.x, by the CPU's F16C instruction: the
    payload's top bits kept)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError("%s: %s %s vs %s %s" % (what, a.dtype, list(a.shape),
                                                 b.dtype, list(b.shape)))
    ia = a.contiguous().view(torch.int16 if a.element_size() == 2
                             else torch.int32)
    ib = b.contiguous().view(ia.dtype)
    nan = a.float().isnan() & b.float().isnan() & ((ia < 0) == (ib < 0))
    diff = (ia != ib) & ~nan
    if diff.any():
        raise ValueError("%s: bits differ at %s" % (
            what, diff.nonzero().tolist()[:4]))


def check_half(path):
    tensors, _ = read(path)
    x = tensors["x"]
    same_bits(tensors["x.f16"], x.half(), "x.f16")
    same_bits(tensors["x.bf16"], to_bf16(x), "x.bf16")
    same_bits(tensors["x.f16.f32"], tensors["x.f16"].float(), "x.f16.f32")
    same_bits(tensors["x.bf16.f32"], tensors["x.bf16"].float(), "x.bf16.f32")
    print("half: clgrad's F16 and BF16 tensors match PyTorch bit for bit")


def make_half(path):
    torch.manual_seed(3)
    x = tricky()
    h = (torch.randn(3, 5) * 1000).half()
    b = (torch.randn(2, 7) * 1e30).bfloat16()
    tensors = {"x": x, "x.f16": x.half(), "x.bf16": to_bf16(x), "h": h,
               "b": b, "h.bits": h.view(torch.int16).to(torch.int32),
               "b.bits": b.view(torch.int16).to(torch.int32)}
    write(path, tensors, {"format": "pt"})


def main():
    modes = {"check": check, "write": make, "check-cnn": check_cnn,
             "write-cnn": make_cnn, "check-half": check_half,
             "write-half": make_half}
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        modes[sys.argv[1]](sys.argv[2])
    except Exception as e:  # any failure is the test's failure
        print("io_interop.py %s: %s: %s" % (sys.argv[1], type(e).__name__, e),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
