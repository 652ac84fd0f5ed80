# SPDX-License-Identifier: MIT
"""tests/torch_export.py - tools/clgrad_torch.py against clgrad-train, run
by tests/test_torch_export.sh: python3 torch_export.py SRCDIR TRAIN TMPDIR.

  - a PyTorch model exported with export_char_lstm (two LSTM layers, four
    streams, the vocabulary in an order of its own) is what clgrad-train
    trains: its first step's loss is PyTorch's loss on the same batch, and
    --sample-only draws the characters PyTorch's probabilities give with
    clgrad-train's generator (splitmix64 from the seed); the same weights
    without the training state (a weights-only file) sample the same where
    clgrad-train's --sample-only takes one;
  - a CNN clgrad-train trained on the digits (batch norm in it), imported
    with import_cnn (load_state_dict strict), gives on every row the loss
    and accuracy that clgrad-train --eval-only reports;
  - a checkpoint clgrad-train saved after 3 steps, imported with
    import_char_lstm, gives in PyTorch (with the carried LSTM state) the
    loss clgrad-train reports for step 4, and exports back to the same
    model tensors; its model tensors and vocabulary alone import too.
    One stream, so that its batches are the text's first bytes however
    much of the end clgrad-train holds out;
  - float16 and bfloat16 tensors round-trip through write_safetensors and
    read_safetensors bit for bit.

Tolerance: 1e-4 relative on the losses.  Both sides compute in float32
with different summation orders over at most a few hundred terms (errors
near 1e-6); the log prints the loss with 6 decimals.
"""

import os
import subprocess
import sys

import torch

SRC, TRAIN, TMP = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tools"))
from clgrad_torch import (export_char_lstm, import_char_lstm,  # noqa: E402
                          import_cnn, read_safetensors, write_safetensors)

RTOL = 1e-4
T, E, H, L = 16, 8, 12, 2
failures = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def train(*args, may_fail=False):
    cmd = [TRAIN] + [str(a) for a in args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if may_fail:
        return r
    if r.returncode != 0:
        sys.exit("FAIL: %s: exit %d\n%s" % (" ".join(cmd), r.returncode,
                                            r.stderr.decode(errors="replace")))
    return r.stdout


def logged_loss(path, step):
    """The loss of `step` in a clgrad-train --log file."""
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if fields[0] == str(step):
                return float(fields[1])
    sys.exit("FAIL: %s has no step %d" % (path, step))


def batch(ids, index, B):
    """cg_text_batch: stream b is the slice [b S, (b + 1) S) of the text."""
    S = (len(ids) - 1) // B
    start = index * T
    n = min(T, S - start)
    x = torch.tensor([[ids[b * S + start + k] for b in range(B)]
                      for k in range(n)])
    y = torch.tensor([[ids[b * S + start + k + 1] for b in range(B)]
                      for k in range(n)])
    return x, y


def loss_of(emb, lstm, head, x, y, state=None):
    with torch.no_grad():
        out, _ = lstm(emb(x), state)
        logits = head(out).reshape(-1, head.out_features)
        return torch.nn.functional.cross_entropy(logits, y.reshape(-1)).item()


def close(a, b):
    return abs(a - b) <= RTOL * abs(b)


def splitmix64_uniform(state):
    m = (1 << 64) - 1
    state = (state + 0x9e3779b97f4a7c15) & m
    z = state
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & m
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & m
    return state, ((z ^ (z >> 31)) >> 11) / 9007199254740992.0


def sample(emb, lstm, head, vocab, prime, n, temperature, seed):
    """tools/train.c's sample(): the prime, then n draws by inverse CDF."""
    id_of = {b: i for i, b in enumerate(vocab)}
    scale = torch.tensor(1 / temperature, dtype=torch.float32)
    out, rng = bytearray(prime), seed
    with torch.no_grad():
        y, state = lstm(emb(torch.tensor([[id_of[c]] for c in prime])))
        logits = head(y[-1, 0])
        for _ in range(n):
            p = torch.softmax(logits * scale, -1).tolist()
            rng, u = splitmix64_uniform(rng)
            acc, k = 0.0, 0
            while k < len(p) - 1:
                acc += p[k]
                if u < acc:
                    break
                k += 1
            out.append(vocab[k])
            y, state = lstm(emb(torch.tensor([[k]])), state)
            logits = head(y[-1, 0])
    return bytes(out) + b"\n"


with open(os.path.join(SRC, "data", "kjv.txt"), "rb") as f:
    text = f.read(1200)
data = os.path.join(TMP, "text.txt")
with open(data, "wb") as f:
    f.write(text)

# --- PyTorch -> clgrad-train (holdout 0: the whole text is for training)
torch.manual_seed(15)
vocab = bytes(sorted(set(text), reverse=True))
V, B = len(vocab), 4
emb, lstm, head = (torch.nn.Embedding(V, E), torch.nn.LSTM(E, H, L),
                   torch.nn.Linear(H, V))
exported = os.path.join(TMP, "exported.safetensors")
export_char_lstm(emb, lstm, head, vocab, exported, seq_len=T, batch=B,
                 holdout=0, seed=5)
log = os.path.join(TMP, "exported.csv")
train("--resume", exported, "--data", data, "--steps", 1, "--sample", 0,
      "--quiet", "--log", log)
id_of = {b: i for i, b in enumerate(vocab)}
ids = [id_of[c] for c in text]
ours = logged_loss(log, 1)
theirs = loss_of(emb, lstm, head, *batch(ids, 0, B))
check(close(ours, theirs), "exported model, step 1: clgrad-train's loss "
      "%.6f, PyTorch's %.6f" % (ours, theirs))

prime, temperature = text[:3], 0.8
sampling = ("--sample", 60, "--prime", prime.decode(), "--temperature",
            temperature, "--seed", 5)
got = train("--sample-only", "--resume", exported, *sampling)
want = sample(emb, lstm, head, vocab, prime, 60, temperature, 5)
check(got == want, "exported model: --sample-only drew %r, PyTorch %r"
      % (got, want))

tensors, meta = read_safetensors(exported)
model = sorted(k for k in tensors if k.startswith(("embed.", "lstm.",
                                                   "head.")))
weights = os.path.join(TMP, "weights.safetensors")
write_safetensors(weights, {k: tensors[k] for k in model},
                  {"data.vocab": meta["data.vocab"]})
r = train("--sample-only", "--resume", weights, *sampling, may_fail=True)
if r.returncode and b"is not a clgrad-train checkpoint" in r.stderr:
    print("skipped: this clgrad-train's --sample-only takes no weights-only "
          "checkpoint")
else:
    check(r.returncode == 0 and r.stdout == want,
          "weights only: --sample-only drew %r (exit %d), PyTorch %r"
          % (r.stdout, r.returncode, want))
emb2, lstm2, head2, vocab2 = import_char_lstm(weights)
check(vocab2 == vocab and lstm2.num_layers == L and
      torch.equal(lstm2.weight_hh_l1, lstm.weight_hh_l1) and
      torch.equal(head2.bias, head.bias),
      "the model's tensors and data.vocab alone import")

# --- clgrad-train -> PyTorch
B = 1
ck3 = os.path.join(TMP, "ck3.safetensors")
train("--model", "char-lstm", "--data", data, "--layers", L, "--hidden", H,
      "--embed", E, "--seq-len", T, "--batch", B, "--steps", 3,
      "--sample", 0, "--quiet", "--seed", 3, "--checkpoint", ck3)
log = os.path.join(TMP, "ck3.csv")
train("--resume", ck3, "--data", data, "--steps", 4, "--sample", 0,
      "--quiet", "--log", log)
emb, lstm, head, vocab = import_char_lstm(ck3)
tensors, meta = read_safetensors(ck3)
id_of = {b: i for i, b in enumerate(vocab)}
ids = [id_of[c] for c in text]
check(meta["train.index"] == "3", "the checkpoint is at batch 3")
state = (tensors["train.state.h"], tensors["train.state.c"])
ours = logged_loss(log, 4)
theirs = loss_of(emb, lstm, head, *batch(ids, 3, B), state)
check(close(ours, theirs), "imported checkpoint, step 4: clgrad-train's loss "
      "%.6f, PyTorch's %.6f" % (ours, theirs))

again = os.path.join(TMP, "again.safetensors")
export_char_lstm(emb, lstm, head, vocab, again)
back, _ = read_safetensors(again)
model = sorted(k for k in tensors if k.startswith(("embed.", "lstm.",
                                                   "head.")))
check(sorted(back) == model and
      all(torch.equal(back[k], tensors[k]) for k in back),
      "import then export gives back the model's tensors")

# --- a CNN: clgrad-train -> PyTorch, the same logits on every row
digits = os.path.join(SRC, "data", "digits.csv")
cnn = os.path.join(TMP, "cnn.safetensors")
train("--model", "cnn", "--data", digits, "--hidden", "4,6", "--epochs", 2,
      "--quiet", "--checkpoint", cnn)
out = train("--eval-only", "--resume", cnn, "--data", digits).decode()
fields = out.split("loss ")[1].split(",")
ours_loss = float(fields[0])
ours_acc = float(fields[1].split("accuracy ")[1].split("%")[0])
net, mean, inv_std = import_cnn(cnn)
with open(digits) as f:
    rows = [line.strip().split(",") for line in f.readlines()[1:] if line.strip()]
x = torch.tensor([[float(v) for v in r[:-1]] for r in rows])
y = torch.tensor([int(r[-1]) for r in rows])
side = int(round(x.shape[1] ** 0.5))
with torch.no_grad():
    logits = net(((x - mean) * inv_std).reshape(-1, 1, side, side))
theirs_loss = torch.nn.functional.cross_entropy(logits, y).item()
theirs_acc = 100.0 * (logits.argmax(1) == y).float().mean().item()
check(close(ours_loss, theirs_loss) and abs(ours_acc - theirs_acc) < 0.01,
      "cnn: clgrad-train --eval-only loss %.6f accuracy %.2f%%, PyTorch "
      "%.6f %.2f%%" % (ours_loss, ours_acc, theirs_loss, theirs_acc))

# --- 16-bit tensors through write_safetensors / read_safetensors, bit for
# bit (NaN payloads, subnormals, infinities)
bits = torch.tensor([0, 1, 0x3C00, 0x7C00, -0x400, 0x7E15, 0x0301, -1],
                    dtype=torch.int16)
halves = {"h": bits.view(torch.float16), "b": bits.view(torch.bfloat16),
          "f": torch.tensor([1.5, -2.25])}
path16 = os.path.join(TMP, "half.safetensors")
write_safetensors(path16, halves)
back16, _ = read_safetensors(path16)
check(back16["h"].dtype == torch.float16 and
      back16["b"].dtype == torch.bfloat16 and
      torch.equal(back16["h"].view(torch.int16), bits) and
      torch.equal(back16["b"].view(torch.int16), bits) and
      torch.equal(back16["f"], halves["f"]),
      "float16 and bfloat16 tensors round-trip bit for bit")

sys.exit(1 if failures else 0)
