#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/fuzz/gen_corpus.py - writes the seed corpora of tests/fuzz/corpus/:
for each fuzz target a few valid inputs and near-valid ones (one field
wrong), small so that make check replays them quickly.  Run from the
source tree's top directory; regression inputs found by fuzzing are added
by hand beside these (named after what they found).

    python3 tests/fuzz/gen_corpus.py
"""
import json
import os
import struct

TOP = os.path.join('tests', 'fuzz', 'corpus')


def put(target, name, data):
    d = os.path.join(TOP, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


# ---------------------------------------------------------------- checkpoint
def safetensors(tensors, meta=None, header=None, pad=b''):
    """tensors: [(name, dtype, shape, bytes)] laid out in order."""
    h, blob = {}, b''
    for name, dtype, shape, data in tensors:
        h[name] = {'dtype': dtype, 'shape': shape,
                   'data_offsets': [len(blob), len(blob) + len(data)]}
        blob += data
    if meta is not None:
        h['__metadata__'] = meta
    text = (header if header is not None else json.dumps(h)).encode()
    return struct.pack('<Q', len(text)) + text + blob + pad


def f32(*v):
    return struct.pack('<%df' % len(v), *v)


def i32(*v):
    return struct.pack('<%di' % len(v), *v)


def checkpoint():
    w = ('w', 'F32', [2, 3], f32(1, 2, 3, 4, 5, 6))
    b = ('b', 'F32', [3], f32(-1, 0, 1))
    ix = ('ix', 'I32', [2, 2], i32(0, 1, 2, 3))
    pos = {'train.step': '3', 'train.epoch': '1', 'train.index': '2',
           'generator.seed': '42', 'generator.offset': '7'}
    put('checkpoint', 'valid-two', safetensors([w, b]))
    put('checkpoint', 'valid-meta', safetensors([w, ix], pos))
    put('checkpoint', 'valid-scalar', safetensors([('s', 'F32', [], f32(2))]))
    put('checkpoint', 'valid-empty', safetensors([], {'k': 'v'}))
    put('checkpoint', 'near-overlap',
        safetensors([], header='{"a":{"dtype":"F32","shape":[2],'
                    '"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],'
                    '"data_offsets":[4,12]}}', pad=bytes(12)))
    put('checkpoint', 'near-shape',
        safetensors([], header='{"a":{"dtype":"F32","shape":[3,'
                    '6148914691236517206],"data_offsets":[0,24]}}',
                    pad=bytes(24)))
    put('checkpoint', 'near-dtype',
        safetensors([('a', 'F64', [1], bytes(8))]))
    # batch norm's num_batches_tracked, as PyTorch saves it; and an I64
    # entry whose byte count fits I32's rule (4 per element), not I64's
    put('checkpoint', 'valid-i64',
        safetensors([w, ('bn.num_batches_tracked', 'I64', [],
                         struct.pack('<q', 3))]))
    put('checkpoint', 'near-i64',
        safetensors([('n', 'I64', [2], struct.pack('<q', 5))]))
    put('checkpoint', 'near-hlen', struct.pack('<Q', 1 << 40) + b'{}')
    put('checkpoint', 'near-position',
        safetensors([w], {'train.step': '-1', 'train.epoch': '1e3',
                          'train.index': '99999999999999999999'}))
    # 16-bit tensors as PyTorch writes float16 / bfloat16 (NaN, inf,
    # subnormal bits included), and a BF16 entry sized as F32
    put('checkpoint', 'valid-f16-bf16',
        safetensors([('h', 'F16', [2, 3], struct.pack('<6H', 0x3C00, 0x7E00,
                                                      0xFC00, 0x0001, 0x8000,
                                                      0x7BFF)),
                     ('b', 'BF16', [3], struct.pack('<3H', 0x7FC0, 0xFF80,
                                                   0x0001)), w]))
    put('checkpoint', 'near-bf16-size',
        safetensors([('b', 'BF16', [2], f32(1, 2))]))
    put('checkpoint', 'near-gap',
        safetensors([], header='{"a":{"dtype":"F32","shape":[1],'
                    '"data_offsets":[4,8]}}', pad=bytes(8)))


# ---------------------------------------------------------------- tuning
def tuning():
    with open(os.path.join('data', 'tuning', 'pocl-cpu.json')) as f:
        shipped = json.load(f)
    put('tuning', 'valid-shipped', json.dumps(shipped, indent=1))
    small = dict(shipped, entries=shipped['entries'][:2])
    put('tuning', 'valid-two', json.dumps(small))
    e = json.loads(json.dumps(small))
    e['entries'][0]['params'] = {'VW': -3, 'RB': 1 << 40, 'WG': 0}
    put('tuning', 'near-params', json.dumps(e))
    e = json.loads(json.dumps(small))
    e['version'] = 99
    put('tuning', 'near-version', json.dumps(e))
    e = json.loads(json.dumps(small))
    e['entries'][0]['kernel'] = 'x' * 100
    e['entries'][1]['source_hash'] = 'zz'
    put('tuning', 'near-strings', json.dumps(e))
    e = json.loads(json.dumps(small))
    e['entries'][0]['params'] = {'P%d' % i: i for i in range(30)}
    put('tuning', 'near-many-params', json.dumps(e))
    e = json.loads(json.dumps(small))
    e['entries'] = [{'kernel': 'clblast.Xgemm', 'shape': 'any',
                     'params': {'MWG': 3, 'NWG': 5}, 'time_us': 1,
                     'default_time_us': 2, 'note': 'bad CLBlast set'}]
    put('tuning', 'near-clblast', json.dumps(e))
    put('tuning', 'near-truncated', json.dumps(small)[:200])
    put('tuning', 'near-types',
        '{"format":"clgrad-tuning","version":"1","device":[],'
        '"entries":{}}')


# ---------------------------------------------------------------- csv
def csv():
    # First byte: bits 0-1 header mode + 1, 2-4 label column + 4, 5-6
    # delimiter (0 default, ',', ';', tab), 7 an extreme label column.
    def opt(header=0, label=-1, delim=0):
        return bytes([(header + 1) | (label + 4) << 2 | delim << 5])
    put('csv', 'valid-header', opt() + b'a,b,label\n1,2,0\n3.5,-4,1\n')
    put('csv', 'valid-plain', opt(1) + b'0.5,1\n-2e3,0\n\n7,2\n')
    put('csv', 'valid-first-label', opt(2, 0, 2) + b'y;x1;x2\n1;2;3\n0;5;6\n')
    put('csv', 'valid-tabs', opt(1, 1, 3) + b' 1 \t 2\t3\r\n4\t0\t6\r\n')
    put('csv', 'near-ragged', opt() + b'1,2,0\n3,1\n')
    put('csv', 'near-nan', opt(1) + b'nan,0\ninf,1\n')
    put('csv', 'near-label', opt(1) + b'1,-1\n2,0.5\n')
    put('csv', 'near-bigcolumn', bytes([0x80 | 0x40]) + b'1,2\n3,4\n')
    put('csv', 'near-one-column', opt(1) + b'1\n2\n')
    put('csv', 'near-nul', opt(1) + b'1,0\n\x002,1\n')
    # Found by fuzz_csv: finite doubles that are +-inf as float32.
    put('csv', 'regress-float-range', opt(1) + b'1e39,0\n2,1\n')
    put('csv', 'regress-float-range-neg', opt(1) + b'-3.5e38,0\n2,1\n')


# ---------------------------------------------------------------- text
def text():
    put('text', 'valid-plain', b'\x00In the beginning God created the '
        b'heaven and the earth.\n')
    put('text', 'valid-vocab', b'\x01[10,32,97,98]\x00ab ba\nab\n')
    put('text', 'valid-binary', b'\x00' + bytes(range(256)))
    put('text', 'near-vocab-missing', b'\x01[97]\x00abc\n')
    put('text', 'near-vocab-bad', b'\x01[97,97,300,-1]\x00aaa')
    put('text', 'near-vocab-text', b'\x01abc\x00abc')
    put('text', 'near-short', b'\x00a')
    put('text', 'near-empty', b'\x00')


# ---------------------------------------------------------------- bincache
def bincache():
    # First byte: 0 raw file, 1 the real header and a new binary, 2 the
    # file cut at a length, 3 bytes replaced at (offset, value) triples.
    put('bincache', 'valid-intact', b'\x03')
    put('bincache', 'near-raw', b'\x00CLGRADB1' + bytes(40) + b'junk')
    put('bincache', 'near-header-only', b'\x01')
    put('bincache', 'near-binary', b'\x01\x7fELF' + bytes(60))
    put('bincache', 'near-cut-header', b'\x02' + struct.pack('>Q', 40))
    put('bincache', 'near-cut-binary', b'\x02' + struct.pack('>Q', 100))
    put('bincache', 'near-length', b'\x03\x00\x18\xff\x00\x1f\x7f')
    put('bincache', 'near-checksum', b'\x03\x00\x20\x00\x00\x2f\x01')
    put('bincache', 'near-payload', b'\x03\x01\x00\x00\x02\x00\xff')


# ---------------------------------------------------------------- api
# Mirrors tests/fuzz/fuzz_api.c's decoder.
NEXTREME = 25
EXTREME = {2**63 - 1: 0, 2**63 - 2: 1, -2**63: 2, -2**63 + 1: 3,
           2**63 - 808: 4, 6148914691236517206: 7,
           9223372036854775805: 8, 2**31: 9, 2**32: 11}


def size(v):
    if 1 <= v <= 4:
        return bytes([v - 1])
    if v in (-1, 0, -2):
        return bytes([160 + (v + 2 + 1) % 3])
    if v in EXTREME:
        return bytes([176 + EXTREME[v]])
    return bytes([201]) + struct.pack('>Q', v % 2**64)


def dim(d):
    return bytes([d + 4])


def shape(s):
    return bytes([len(s)]) + b''.join(size(v) for v in s)


def opbyte(kind, sub, bits=4, mask=0xff):
    """A byte b with b % 9 == kind and (b >> bits) & mask == sub."""
    for b in range(256):
        if b % 9 == kind and (b >> bits) & mask == sub:
            return bytes([b])
    raise ValueError((kind, sub))


def create(slot, shp, kind=3, grad=False, dtype=None):
    """dtype None: float32; 'F16' or 'BF16' (kinds 0 and 3 only): a kind
    byte k with k % 6 == kind and bits 0x20 (16-bit), 0x40 (bfloat16)."""
    if dtype is None:
        return b'\x00' + bytes([slot, kind | (0x10 if grad else 0)]) + \
            shape(shp)
    want = 0x20 | (0x40 if dtype == 'BF16' else 0) | (0x10 if grad else 0)
    k = next(b for b in range(256)
             if b % 6 == kind and b & 0x78 == want)
    return b'\x00' + bytes([slot, k]) + shape(shp)


def view(slot, src, code, args=b''):
    return opbyte(2, code, 4, 7) + bytes([slot, src]) + args


def api():
    # the view codes: 0 reshape, 1 transpose, 2 permute, 3 narrow (start is
    # size - 1), 4 expand, 5 squeeze, 6 unsqueeze, 7 contiguous
    a = create(0, [2, 3])
    put('api', 'valid-views', a + view(1, 0, 1, dim(0) + dim(1)) +
        view(2, 1, 7) + view(3, 0, 3, dim(1) + size(2) + size(2)) +
        view(4, 0, 0, shape([3, -1])) + view(5, 0, 6, dim(0)) +
        view(6, 5, 4, shape([4, 2, 3])))
    # reductions: op byte kind 4, code from sub >> 3 | (op & 0xf0), % 9
    red = b''.join(bytes([4 | 0x00, s << 3 | 0]) + bytes([i]) +
                   bytes([0, 3 + 4])[:1] + bytes([7, 4, 4])
                   for s, i in ((0, 0), (1, 0), (2, 0), (4, 0), (5, 0)))
    put('api', 'valid-reduce', a + create(1, [3, 4]) + red)
    put('api', 'valid-grad', create(0, [2, 3], 3, True) +
        view(1, 0, 3, dim(1) + size(1) + size(2)) + b'\x08\x01\x01\x00')
    put('api', 'valid-binary', a + create(1, [3], 1) + create(2, [3, 2], 4) +
        b'\x05\x03\x00\x01' + b'\x05\x04\x00\x02' + b'\x06\x05\x00\x00\x00')
    put('api', 'valid-join', a + create(1, [2, 3], 2) +
        b'\x07\x02\x00\x01\x00' + dim(0) +
        b'\x07\x03\x00\x01\x00' + dim(-1))
    put('api', 'near-narrow-huge', a +
        view(1, 0, 3, dim(1) + size(2**63 - 1) + size(2)))
    put('api', 'near-reshape-neg', a +
        view(1, 0, 0, shape([2, 9223372036854775805, -1])))
    put('api', 'near-create-zero', create(0, [2, 0]) + create(1, [-1]))
    put('api', 'near-expand-huge', create(0, [1, 1], 1) +
        view(1, 0, 4, shape([2**62, 4])) + view(2, 0, 4, shape([3, 2])))
    # Issue 16's defects 1 and 2: a shape whose product wraps to 6, then
    # summed; a [2, 3] reshaped to it; narrow past INT64_MAX.
    wrap = [9, 6148914691236517206]
    put('api', 'regress-shape-wrap', create(1, wrap, 1) + create(2, wrap, 3) +
        bytes([4, 1 << 3 | 0, 1]) + bytes([1]) + dim(1))
    put('api', 'regress-reshape-wrap', a + view(1, 0, 0, shape(wrap)) +
        view(2, 0, 0, shape([2, 9223372036854775805, -1])))
    put('api', 'regress-narrow-wrap', a +
        view(1, 0, 3, dim(1) + size(2**63 - 807) + size(808)) +
        view(2, 0, 3, dim(1) + size(-2**63) + size(2)))
    # 16-bit tensors: views and their copies (a transpose made contiguous,
    # a narrow), casts from float32 and back (the code 7 with bit 3: the
    # next byte picks the dtype), and ops that must refuse them.
    h = create(0, [3, 5], 3, dtype='F16') + create(1, [2, 7], 0, dtype='BF16')
    cast = opbyte(2, 15, 4, 15)
    put('api', 'valid-half-views', h + view(2, 0, 1, dim(0) + dim(1)) +
        view(3, 2, 7) + view(4, 1, 3, dim(1) + size(2) + size(4)) +
        view(5, 1, 4, shape([3, 2, 7])))
    put('api', 'valid-half-cast', create(0, [4, 3], 3, True) +
        cast + bytes([1, 0, 3]) + cast + bytes([2, 0, 4]) +
        view(3, 1, 1, dim(0) + dim(1)) + cast + bytes([4, 3, 0]) +
        cast + bytes([5, 2, 1]) + b'\x08\x04\x04\x00')
    put('api', 'near-half-ops', h + b'\x05\x03\x00\x01' +
        b'\x06\x05\x00\x00\x00' + bytes([4, 1 << 3 | 0, 0]) + bytes([0]) +
        b'\x08\x01\x00\x00')
    put('api', 'near-dims', a + view(1, 0, 1, bytes([255, 240])) +
        view(2, 0, 5, dim(5)) + view(3, 0, 2, bytes(8)))


checkpoint()
tuning()
csv()
text()
bincache()
api()
