#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tools/bench_torch.py - the PyTorch side of clgrad-bench.

clgrad-bench runs this with /usr/bin/python3 (Debian's python3-torch) and
OMP_NUM_THREADS=N OMP_WAIT_POLICY=passive in the environment, so that
PyTorch's threads sleep instead of spinning against the OpenCL runtime's.
It times the same training steps as clgrad-bench - same shapes, same loss,
Adam with PyTorch's defaults (lr 1e-3) - with the same warm-up and repeats,
and prints one JSON object on stdout:

  {"torch_version": "1.13.1", "threads": 2,
   "results": [{"name": "...", "times_s": [...]}, ...]}

With --device DEV (clgrad-bench --torch-device) the cases run on that
PyTorch device instead of the CPU, e.g. cuda: each timed step then ends
with torch.cuda.synchronize(), and TF32 is off for matrix products and
cuDNN, so that both sides compute in float32.

Usage: bench_torch.py --threads N --warmup W --repeat R [--device DEV]
                      MODEL:SPEC...
  gemm:M:N:K:TA:TB:INNER                 INNER products C = op(A) op(B)
                                         back to back, op(A) M x K, A
                                         stored transposed when TA is 1
  mlp:B:IN:H1:H2:OUT                     linear/relu MLP, cross-entropy
  lstm:T:B:IN:H:LAYERS                   LSTM, MSE against a fixed target
  charlstm:T:B:VOCAB:EMBED:H:LAYERS      embedding, LSTM, linear head,
                                         cross-entropy over all T*B steps
  cnn:N:C:HW:CLASSES                     conv 3x3 (padding 1), relu, max
                                         pool 2x2 per width of 32, 64, 64;
                                         flatten, linear; cross-entropy
  conv:N:C:HW:K:R:STRIDE:PAD:GROUPS:DIR  one conv2d with bias, direction
                                         DIR: 0 forward (no graph), 1
                                         backward to the input only, 2 to
                                         the weight and bias only (one
                                         forward's graph, retain_graph)
  conv1d:N:C:L:S:DIR                     depthwise conv1d (groups C) with
                                         bias, padding "same"; DIR 0
                                         forward (no graph), 1 forward and
                                         backward to x, w and b
  fft:KIND:ROWS:N                        KIND 0: rfft of ROWS x N reals,
                                         1: irfft of ROWS x (N/2 + 1) bins
                                         to N, 2: fft2 of N x N complex
                                         (ROWS unused); no graph
"""
import argparse
import json
import sys
import time
import warnings

import torch
import torch.nn.functional as F


def mlp_case(b, n_in, h1, h2, n_out):
    model = torch.nn.Sequential(
        torch.nn.Linear(n_in, h1), torch.nn.ReLU(),
        torch.nn.Linear(h1, h2), torch.nn.ReLU(),
        torch.nn.Linear(h2, n_out))
    x = torch.rand(b, n_in) * 2 - 1
    y = torch.randint(0, n_out, (b,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def lstm_case(t, b, n_in, h, layers):
    lstm = torch.nn.LSTM(n_in, h, layers)
    x = torch.rand(t, b, n_in) * 2 - 1
    target = torch.rand(t, b, h) * 2 - 1
    opt = torch.optim.Adam(lstm.parameters(), lr=1e-3)

    def step():
        y, _ = lstm(x)
        loss = F.mse_loss(y, target)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def charlstm_case(t, b, vocab, embed, h, layers):
    emb = torch.nn.Embedding(vocab, embed)
    lstm = torch.nn.LSTM(embed, h, layers)
    head = torch.nn.Linear(h, vocab)
    ids = torch.randint(0, vocab, (t, b))
    targets = torch.randint(0, vocab, (t * b,))
    params = list(emb.parameters()) + list(lstm.parameters()) + \
        list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)

    def step():
        y, _ = lstm(emb(ids))
        loss = F.cross_entropy(head(y.reshape(t * b, h)), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def cnn_case(n, c, hw, classes):
    layers, ch, side = [], c, hw
    for k in (32, 64, 64):
        layers += [torch.nn.Conv2d(ch, k, 3, padding=1), torch.nn.ReLU(),
                   torch.nn.MaxPool2d(2)]
        ch, side = k, side // 2
    model = torch.nn.Sequential(*layers, torch.nn.Flatten(),
                                torch.nn.Linear(ch * side * side, classes))
    x = torch.rand(n, c, hw, hw) * 2 - 1
    y = torch.randint(0, classes, (n,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def conv_case(n, c, hw, k, r, stride, pad, groups, direction):
    x = torch.rand(n, c, hw, hw) * 2 - 1
    w = torch.rand(k, c // groups, r, r) * 2 - 1
    b = torch.rand(k) * 2 - 1
    if direction == 0:
        def step():
            with torch.no_grad():
                F.conv2d(x, w, b, stride, pad, 1, groups)
        return step
    x.requires_grad_(direction == 1)
    w.requires_grad_(direction == 2)
    b.requires_grad_(direction == 2)
    y = F.conv2d(x, w, b, stride, pad, 1, groups)
    g = torch.rand_like(y) * 2 - 1

    def step():
        y.backward(g, retain_graph=True)
    return step


def conv1d_case(n, c, length, s, direction):
    # padding="same" with an even kernel pads a copy, which it warns about
    warnings.filterwarnings("ignore", message="Using padding='same'")
    x = torch.rand(n, c, length) * 2 - 1
    w = torch.rand(c, 1, s) * 2 - 1
    b = torch.rand(c) * 2 - 1
    g = torch.rand(n, c, length) * 2 - 1
    if direction == 0:
        def step():
            with torch.no_grad():
                F.conv1d(x, w, b, padding="same", groups=c)
        return step
    for t in (x, w, b):
        t.requires_grad_(True)

    def step():
        x.grad = w.grad = b.grad = None
        F.conv1d(x, w, b, padding="same", groups=c).backward(g)
    return step


def gemm_case(m, n, k, ta, tb, inner):
    a = torch.rand(k, m).t() if ta else torch.rand(m, k)
    b = torch.rand(n, k).t() if tb else torch.rand(k, n)

    def step():
        for _ in range(inner):
            torch.mm(a, b)
    return step


def fft_case(kind, rows, n):
    if kind == 0:
        x = torch.rand(rows, n) * 2 - 1
        return lambda: torch.fft.rfft(x)
    if kind == 1:
        x = torch.randn(rows, n // 2 + 1, dtype=torch.complex64)
        return lambda: torch.fft.irfft(x, n)
    x = torch.randn(n, n, dtype=torch.complex64)
    return lambda: torch.fft.fft2(x)


CASES = {"mlp": (mlp_case, 5), "lstm": (lstm_case, 5),
         "charlstm": (charlstm_case, 6), "cnn": (cnn_case, 4),
         "conv": (conv_case, 9), "conv1d": (conv1d_case, 5),
         "fft": (fft_case, 3), "gemm": (gemm_case, 6)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sync = lambda: None
    if args.device != "cpu":
        torch.set_default_device(args.device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if args.device.startswith("cuda"):
            sync = torch.cuda.synchronize
    torch.manual_seed(1)
    results = []
    for spec in args.specs:
        kind, *dims = spec.split(":")
        if kind not in CASES or len(dims) != CASES[kind][1]:
            sys.exit("bench_torch.py: bad case '%s'" % spec)
        step = CASES[kind][0](*map(int, dims))
        for _ in range(args.warmup):
            step()
        sync()
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - t0)
        results.append({"name": spec, "times_s": times})
    json.dump({"torch_version": torch.__version__, "device": args.device,
               "threads": torch.get_num_threads(), "results": results},
              sys.stdout)
    print()


if __name__ == "__main__":
    main()
