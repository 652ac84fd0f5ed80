/* SPDX-License-Identifier: MIT */
/*
 * kernels/gather.cl - row gathers along one dimension (embedding,
 * index_select) and their deterministic backward, a segmented sum.
 *
 * The gathered tensor x is viewed as contiguous [outer, V, inner] and the
 * int32 indices idx as a flat list of n; the output is [outer, n, inner]:
 *     gather:   y[o, j, i] = x[o, idx[j], i]   (0 where idx[j] is outside
 *               [0, V): kernels never read or write out of bounds)
 * Backward, gx[o, v, i] = sum of g[o, j, i] over the j with idx[j] == v,
 * without atomics and in a fixed order:
 *     sort_init, bitonic_step: sort the pairs (idx[j], j), padded to a
 *               power of two m with (INT_MAX, j), ascending in both keys;
 *               positions are unique, so the sorted order is unique too.
 *     seg_bounds: bounds[v] = first sorted slot whose key is >= v, for
 *               v = 0..V, so v's segment is [bounds[v], bounds[v + 1]).
 *     seg_sum:  one work-item per element of gx adds its segment's
 *               gradients in increasing j: bit-identical from run to run;
 *               rows that no index names get 0.  In float32, rounded once
 *               to the storage dtype (common.cl's CG_T).
 * Index space: one work-item per element (gather, seg_sum), per pair
 * (sort_init), per compared pair (bitonic_step: m / 2) or per bound
 * (seg_bounds: V + 1), each padded to the host's work-group size.
 * No tunable parameters.
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

/* Whole elements copied as bits: 32-bit words in the float32 variant,
 * so float32 and int32 tensors alike; 16-bit words in the others, so a
 * float16 or bfloat16 row comes out bit for bit (NaN payloads too). */
#if CG_T == 0
typedef uint cg_word;
#else
typedef ushort cg_word;
#endif

#if CG_WANT(gather)
__kernel void
gather(__global const cg_word *x, __global const int *idx,
       __global cg_word *y, uint n, uint V, uint inner, uint total)
{
    uint t = get_global_id(0), i, j, o;
    int v;

    if (t >= total)
        return;
    i = t % inner;
    j = (t / inner) % n;
    o = t / inner / n;
    v = idx[j];
    y[t] = (v >= 0 && (uint)v < V) ? x[((size_t)o * V + (uint)v) * inner + i]
                                   : (cg_word)0;
}
#endif

#if CG_WANT(sort_init)
__kernel void
sort_init(__global const int *idx, __global int2 *pairs, uint n, uint m)
{
    uint t = get_global_id(0);

    if (t >= m)
        return;
    pairs[t] = (int2)(t < n ? idx[t] : INT_MAX, (int)t);
}
#endif

static inline int
pair_greater(int2 a, int2 b)
{
    return a.x > b.x || (a.x == b.x && a.y > b.y);
}

/* One compare-exchange stage of a bitonic sort: block size k, distance j. */
#if CG_WANT(bitonic_step)
__kernel void
bitonic_step(__global int2 *pairs, uint m, uint j, uint k)
{
    uint t = get_global_id(0), a, b;
    int2 pa, pb;
    int up;

    if (t >= m / 2)
        return;
    a = (t / j) * 2 * j + t % j;
    b = a + j;
    up = (a & k) == 0;
    pa = pairs[a];
    pb = pairs[b];
    if (up ? pair_greater(pa, pb) : pair_greater(pb, pa)) {
        pairs[a] = pb;
        pairs[b] = pa;
    }
}
#endif

#if CG_WANT(seg_bounds)
__kernel void
seg_bounds(__global const int2 *pairs, uint m, __global int *bounds, uint V)
{
    uint v = get_global_id(0), lo = 0, hi = m;

    if (v > V)
        return;
    while (lo < hi) {
        uint mid = lo + (hi - lo) / 2;

        if (pairs[mid].x < (int)v)
            lo = mid + 1;
        else
            hi = mid;
    }
    bounds[v] = (int)lo;
}
#endif

#if CG_WANT(seg_sum)
__kernel void
seg_sum(__global const cg_t *g, __global const int2 *pairs,
        __global const int *bounds, __global cg_t *gx, uint n, uint V,
        uint inner, uint total)
{
    uint t = get_global_id(0), i, v, o;
    int s;
    float acc = 0.0f;

    if (t >= total)
        return;
    i = t % inner;
    v = (t / inner) % V;
    o = t / inner / V;
    for (s = bounds[v]; s < bounds[v + 1]; s++)
        acc += CG_LD(g, ((size_t)o * n + (uint)pairs[s].y) * inner + i);
    CG_ST(gx, t, acc);
}
#endif
