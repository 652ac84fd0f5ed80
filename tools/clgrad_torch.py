# SPDX-License-Identifier: MIT
"""PyTorch models to and from clgrad-train's character-LSTM checkpoints.

    import torch
    from clgrad_torch import export_char_lstm, import_char_lstm

    emb = torch.nn.Embedding(len(vocab), 16)
    lstm = torch.nn.LSTM(16, 64, num_layers=2)
    head = torch.nn.Linear(64, len(vocab))
    export_char_lstm(emb, lstm, head, vocab, "model.safetensors", seq_len=50)
    #   clgrad-train --sample-only --resume model.safetensors
    #   clgrad-train --resume model.safetensors --data text.txt --steps 100 \
    #       --checkpoint trained.safetensors
    emb, lstm, head, vocab = import_char_lstm("trained.safetensors")

The model is clgrad-train's char-lstm: ids [T, B] -> embedding [V, E] ->
LSTM (sequence first) -> linear [V, H] -> V logits per position, id i
standing for the byte vocab[i].  Only the Python standard library and torch
are used.  `make install` puts it in the site directory of the python3
that configure found (configure PYTHON=/usr/bin/python3 picks Debian's,
which has python3-torch; a prefix other than /usr may need that directory
on PYTHONPATH); from the source tree, put tools/ on sys.path.

The file is safetensors, as clgrad writes it (lib/io/safetensors.c):

    8 bytes   N, the JSON header's length, unsigned 64-bit little-endian
    N bytes   a JSON object: "__metadata__" maps keys to strings, and each
              tensor's name maps to {"dtype": "F32", "shape": [...],
              "data_offsets": [begin, end]}; padded with spaces so that
              the data starts 8-aligned
    the rest  the tensors' bytes, little-endian, row-major, at their
              offsets from the start of this part, tiling it (the models'
              tensors are float32; read_safetensors and write_safetensors
              also carry F16 and BF16 tensors, bit for bit, as clgrad does)

Tensors (PyTorch's state_dict names under the container's child names;
clgrad's LSTM keeps PyTorch's gate order i, f, g, o and both biases):

    embed.weight            [V, E]
    lstm.weight_ih_l{k}     [4H, E for k = 0, else H]
    lstm.weight_hh_l{k}     [4H, H]
    lstm.bias_ih_l{k}       [4H]
    lstm.bias_hh_l{k}       [4H]
    head.weight             [V, H]
    head.bias               [V]

A checkpoint clgrad-train saved may also hold the optimizer's state
("optim.exp_avg.<i>" ...), the LSTM state carried between batches
("train.state.h", "train.state.c": [layers, B, H]); import_char_lstm ignores
them and read_safetensors returns them.

Metadata (strings, as tools/train_ckpt.c writes and reads them):

    clgrad.model            "char-lstm"
    data.vocab              the byte of each id, "[10,32,65]"
    config.hidden           H;  config.layers, config.embed: the model's shape
    config.dropout          between LSTM layers
    config.seq_len, config.batch, config.optimizer, config.schedule,
    config.lr, config.momentum, config.weight_decay, config.clip,
    config.holdout, config.warmup, config.step_size, config.gamma,
    config.min_lr, config.seed
                            the training configuration a resumed run keeps
                            (a clgrad-train older than issue 15 ignores
                            config.step_size, config.gamma, config.min_lr)
    optim.step.<i>          steps the optimizer took for parameter i (in
                            the order of the table above)
    train.step, train.epoch, train.index
                            where training stands
    clgrad.generator.seed, clgrad.generator.offset
                            clgrad's random generator

export_char_lstm writes all of these, as a run at step 0 with a fresh
optimizer: `clgrad-train --resume` trains the PyTorch weights further
(keeping the exported configuration unless told otherwise) and
`--sample-only --resume` samples from them.  The model's tensors and
data.vocab alone (write_safetensors) make a weights-only checkpoint, which
import_char_lstm reads, and so does a clgrad-train whose --sample-only
takes one.
"""

import json
import os
import struct

import torch

__all__ = ["export_char_lstm", "import_char_lstm", "import_cnn",
           "read_safetensors", "write_safetensors"]

# clgrad-train's char-lstm defaults once resolved (tools/train.c), the
# configuration an export records unless given.  holdout is the fraction
# of the text's end held out for validation; step_size, gamma and min_lr
# are the schedule's parameters, 0 for its defaults.
CONFIG_DEFAULTS = {
    "seq_len": 100, "batch": 32, "optimizer": "adam", "schedule": "constant",
    "lr": 2e-3, "momentum": 0.0, "weight_decay": 0.0, "clip": 5.0,
    "holdout": 0.05, "warmup": 0, "step_size": 0, "gamma": 0.0,
    "min_lr": 0.0, "seed": 1,
}
_INT_CONFIG = ("seq_len", "batch", "warmup", "step_size", "seed")
_STR_CONFIG = {"optimizer": ("adam", "adamw", "sgd", "rmsprop"),
               "schedule": ("constant", "step", "exp", "cosine")}
_LSTM_PARAMS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
_HALF = {torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors, metadata=None):
    """Write {name: tensor} and {key: str} metadata to path, through a
    temporary file renamed over it.  float16 and bfloat16 tensors are
    written as F16 and BF16, bit for bit; every other tensor as float32."""
    header, parts, at = {}, [], 0
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("metadata %r: keys and values must be str"
                                % (k,))
        header["__metadata__"] = dict(metadata)
    for name, t in tensors.items():
        t = t.detach().to("cpu")
        if t.dtype in _HALF:
            # float16 and bfloat16 keep their dtype, written bit for bit.
            code = _HALF[t.dtype]
            bits = t.contiguous().view(torch.int16).reshape(-1).tolist()
            data = struct.pack("<%dh" % t.numel(), *bits)
        else:
            code = "F32"
            t = t.to(torch.float32).contiguous()
            data = struct.pack("<%df" % t.numel(), *t.reshape(-1).tolist())
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [at, at + len(data)]}
        parts.append(data)
        at += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    # As clgrad saves: never a partial file under the real name.
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for data in parts:
                f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_safetensors(path):
    """Return ({name: float32, int32, int64, float16 or bfloat16 tensor},
    {key: str}) from path; 16-bit tensors bit for bit."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack_from("<Q", blob, 0)
    if n > len(blob) - 8:
        raise ValueError("%s: the header length %d passes the end" % (path, n))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base, tensors = 8 + n, {}
    for name, e in header.items():
        fmt = {"F32": "f", "I32": "i", "I64": "q", "F16": "h",
               "BF16": "h"}.get(e["dtype"])
        if fmt is None:
            raise ValueError("%s: tensor %r: dtype %s is not F32, I32, I64, "
                             "F16 or BF16" % (path, name, e["dtype"]))
        begin, end = e["data_offsets"]
        count = (end - begin) // struct.calcsize(fmt)
        values = struct.unpack_from("<%d%s" % (count, fmt), blob, base + begin)
        dtype = {"f": torch.float32, "i": torch.int32, "q": torch.int64,
                 "h": torch.int16}[fmt]
        t = torch.tensor(values, dtype=dtype).reshape(e["shape"])
        if e["dtype"] in ("F16", "BF16"):
            t = t.view(torch.float16 if e["dtype"] == "F16"
                       else torch.bfloat16)
        tensors[name] = t
    return tensors, meta


def _vocab_bytes(vocab):
    if isinstance(vocab, str):
        vocab = vocab.encode("latin-1")
    vocab = bytes(vocab)
    if not vocab or len(set(vocab)) != len(vocab):
        raise ValueError("the vocabulary must be non-empty bytes, each once")
    return vocab


def _config(config, dropout):
    unknown = set(config) - set(CONFIG_DEFAULTS)
    if unknown:
        raise TypeError("unknown configuration: %s"
                        % ", ".join(sorted(unknown)))
    c = dict(CONFIG_DEFAULTS, **config)
    for k, allowed in _STR_CONFIG.items():
        if c[k] not in allowed:
            raise ValueError("%s %r: want one of %s" % (k, c[k], allowed))
    out = {"config.dropout": repr(float(dropout))}
    for k, v in c.items():
        if k in _INT_CONFIG:
            out["config." + k] = str(int(v))
        elif k in _STR_CONFIG:
            out["config." + k] = v
        else:
            out["config." + k] = repr(float(v))
    return out


def _check_modules(embedding, lstm, linear, V):
    if not isinstance(lstm, torch.nn.LSTM) or lstm.bidirectional or \
            getattr(lstm, "proj_size", 0):
        raise ValueError("lstm: want a one-direction nn.LSTM, no projection")
    if embedding.max_norm is not None:
        raise ValueError("embedding: max_norm changes the forward pass; "
                         "clgrad's embedding has none")
    E, H = lstm.input_size, lstm.hidden_size
    if (embedding.num_embeddings, embedding.embedding_dim) != (V, E):
        raise ValueError("embedding is %dx%d, want %d (vocabulary) x %d "
                         "(lstm input)" % (embedding.num_embeddings,
                                           embedding.embedding_dim, V, E))
    if (linear.in_features, linear.out_features) != (H, V):
        raise ValueError("linear is %d -> %d, want %d (lstm hidden) -> %d "
                         "(vocabulary)" % (linear.in_features,
                                           linear.out_features, H, V))


def export_char_lstm(embedding, lstm, linear, vocab, path, **config):
    """Write a PyTorch char model as a clgrad-train checkpoint at path.

    embedding: nn.Embedding(V, E); lstm: nn.LSTM(E, H, num_layers=L), one
    direction (batch_first does not matter: clgrad-train feeds [T, B]);
    linear: nn.Linear(H, V).  A missing bias is written as zeros.  vocab:
    the byte of each id (bytes, a str of characters below 256, or ints).
    config: clgrad-train's training configuration for a resumed run
    (seq_len, batch, optimizer, schedule, lr, momentum, weight_decay, clip,
    holdout, warmup, step_size, gamma, min_lr, seed), by default that of
    `clgrad-train --model char-lstm`.
    """
    vocab = _vocab_bytes(vocab)
    V, L, H = len(vocab), lstm.num_layers, lstm.hidden_size
    _check_modules(embedding, lstm, linear, V)
    tensors = {"embed.weight": embedding.weight}
    for k in range(L):
        for p in _LSTM_PARAMS:
            name = "%s_l%d" % (p, k)
            t = getattr(lstm, name, None)
            if t is None:
                t = torch.zeros(4 * H)
            tensors["lstm." + name] = t
    tensors["head.weight"] = linear.weight
    tensors["head.bias"] = linear.bias if linear.bias is not None \
        else torch.zeros(V)
    meta = {"clgrad.model": "char-lstm",
            "data.vocab": "[" + ",".join(str(b) for b in vocab) + "]",
            "config.hidden": str(H), "config.layers": str(L),
            "config.embed": str(lstm.input_size)}
    meta.update(_config(config, lstm.dropout))
    # A run at step 0: the optimizer has stepped no parameter, the
    # generator starts from the seed.
    for i in range(len(tensors)):
        meta["optim.step.%d" % i] = "0"
    for k in ("train.step", "train.epoch", "train.index",
              "clgrad.generator.offset"):
        meta[k] = "0"
    meta["clgrad.generator.seed"] = meta["config.seed"]
    write_safetensors(path, tensors, meta)


def import_char_lstm(path):
    """Read a clgrad-train char-lstm checkpoint (saved by clgrad-train or
    export_char_lstm) into (nn.Embedding, nn.LSTM, nn.Linear, vocab bytes).

    Only the model's tensors and data.vocab are needed (clgrad.model, if
    there, must be "char-lstm").  The shape comes from the tensors; the
    LSTM is sequence first, with the checkpoint's dropout (config.dropout,
    else 0).  The modules are in training mode, as PyTorch makes them.
    """
    tensors, meta = read_safetensors(path)
    kind = meta.get("clgrad.model", "char-lstm")
    if kind != "char-lstm":
        raise ValueError("%s holds a %s model, not char-lstm" % (path, kind))
    for name in ("embed.weight", "lstm.weight_hh_l0", "head.weight",
                 "head.bias"):
        if name not in tensors:
            raise ValueError("%s: no tensor %s: not a char-lstm checkpoint"
                             % (path, name))
    text = meta.get("data.vocab", "")
    try:
        vocab = _vocab_bytes(json.loads(text))
    except (ValueError, TypeError):
        raise ValueError("%s: bad data.vocab %r" % (path, text))
    V, E = tensors["embed.weight"].shape
    H = tensors["lstm.weight_hh_l0"].shape[1]
    L = 0
    while "lstm.weight_ih_l%d" % L in tensors:
        L += 1
    if V != len(vocab):
        raise ValueError("%s: %d embeddings for %d vocabulary entries"
                         % (path, V, len(vocab)))
    embedding = torch.nn.Embedding(V, E)
    dropout = float(meta.get("config.dropout", 0)) if L > 1 else 0.0
    lstm = torch.nn.LSTM(E, H, num_layers=L, dropout=dropout)
    linear = torch.nn.Linear(H, V)
    with torch.no_grad():
        embedding.load_state_dict({"weight": tensors["embed.weight"]})
        lstm.load_state_dict({"%s_l%d" % (p, k):
                              tensors["lstm.%s_l%d" % (p, k)]
                              for k in range(L) for p in _LSTM_PARAMS})
        linear.load_state_dict({"weight": tensors["head.weight"],
                                "bias": tensors["head.bias"]})
    return embedding, lstm, linear, vocab


def import_cnn(path):
    """Read a clgrad-train --model cnn checkpoint into (nn.Sequential, mean,
    inv_std): the model, in eval mode, with clgrad-train's layer names
    (conv0, bn0, relu0, pool0, ..., flatten, fc) loaded with
    load_state_dict(strict=True), batch norm statistics included; and the
    per-feature standardisation clgrad-train applied to the CSV rows,
    x' = (x - mean) * inv_std.  The model takes x' viewed as [N, 1, S, S]
    (S * S features) and gives the class logits."""
    tensors, meta = read_safetensors(path)
    kind = meta.get("clgrad.model")
    if kind != "cnn":
        raise ValueError("%s holds a %s model, not cnn" % (path, kind))
    nn = torch.nn
    layers, k = [], 0
    while "conv%d.weight" % k in tensors:
        out, inp = tensors["conv%d.weight" % k].shape[:2]
        layers += [("conv%d" % k, nn.Conv2d(inp, out, 3, padding=1)),
                   ("bn%d" % k, nn.BatchNorm2d(out)),
                   ("relu%d" % k, nn.ReLU()),
                   ("pool%d" % k, nn.MaxPool2d(2))]
        k += 1
    classes, features = tensors["fc.weight"].shape
    layers += [("flatten", nn.Flatten()), ("fc", nn.Linear(features, classes))]
    model = nn.Sequential(__import__("collections").OrderedDict(layers))
    model.load_state_dict({n: t for n, t in tensors.items()
                           if n.split(".")[0] in dict(layers)}, strict=True)
    model.eval()
    return model, tensors["data.mean"], tensors["data.inv_std"]
