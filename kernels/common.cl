/*
 * kernels/common.cl - helpers prepended to every clgrad kernel file (the
 * loader inserts it, followed by a #line directive for the file itself).
 *
 * Strided indexing: a tensor operand is described by the coalesced shape of
 * the iteration space (int8, outermost dimension first, nd of them used)
 * and the operand's strides in elements over that space (0 where it is
 * broadcast).  cg_off* turn a linear index of the iteration space into
 * element offsets, with nd - 1 divisions (none for contiguous data, which
 * the host coalesces to nd = 1).
 */

inline int
cg_off(uint i, int8 shape8, int8 st8, int nd)
{
    int sh[8], st[8];
    int r = (int)i, o = 0, d;

    vstore8(shape8, 0, sh);
    vstore8(st8, 0, st);
    for (d = nd - 1; d > 0; d--) {
        int c = r % sh[d];

        r /= sh[d];
        o += c * st[d];
    }
    return o + r * st[0];
}

inline int2
cg_off2(uint i, int8 shape8, int8 sa8, int8 sb8, int nd)
{
    int sh[8], sa[8], sb[8];
    int r = (int)i, d;
    int2 o = (int2)(0, 0);

    vstore8(shape8, 0, sh);
    vstore8(sa8, 0, sa);
    vstore8(sb8, 0, sb);
    for (d = nd - 1; d > 0; d--) {
        int c = r % sh[d];

        r /= sh[d];
        o += (int2)(c * sa[d], c * sb[d]);
    }
    return o + (int2)(r * sa[0], r * sb[0]);
}

inline int3
cg_off3(uint i, int8 shape8, int8 sa8, int8 sb8, int8 sc8, int nd)
{
    int sh[8], sa[8], sb[8], sc[8];
    int r = (int)i, d;
    int3 o = (int3)(0, 0, 0);

    vstore8(shape8, 0, sh);
    vstore8(sa8, 0, sa);
    vstore8(sb8, 0, sb);
    vstore8(sc8, 0, sc);
    for (d = nd - 1; d > 0; d--) {
        int c = r % sh[d];

        r /= sh[d];
        o += (int3)(c * sa[d], c * sb[d], c * sc[d]);
    }
    return o + (int3)(r * sa[0], r * sb[0], r * sc[0]);
}
