/* SPDX-License-Identifier: MIT */
/*
 * lib/core/util.c - hashing, checked size arithmetic, host allocation and
 * file helpers.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"

/* FNV-1a with the 128-bit prime 2^88 + 2^8 + 0x3b, multiplied out on two
 * 64-bit halves so that no compiler extension is needed. */
void
cg__hash_init(cg__hash *h)
{
    h->hi = 0x6c62272e07bb0142ULL;
    h->lo = 0x62b821756295c58dULL;
}

void
cg__hash_update(cg__hash *h, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t i;

    for (i = 0; i < len; i++) {
        uint64_t lo, hi, a_lo, a_hi, cross;

        h->lo ^= p[i];
        /* (hi:lo) * (2^88 + 0x13b) mod 2^128 */
        a_lo = h->lo & 0xffffffffULL;
        a_hi = h->lo >> 32;
        lo = a_lo * 0x13b;
        cross = a_hi * 0x13b + (lo >> 32);
        lo = (lo & 0xffffffffULL) | (cross << 32);
        hi = (cross >> 32) + h->hi * 0x13b + (h->lo << 24);
        h->lo = lo;
        h->hi = hi;
    }
}

void
cg__hash_str(cg__hash *h, const char *s)
{
    if (!s)
        s = "";
    cg__hash_update(h, s, strlen(s) + 1);
}

void
cg__hash_hex(const cg__hash *h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h->hi,
             (unsigned long long)h->lo);
}

int
cg__checked_mul_i64(int64_t a, int64_t b, int64_t *r, const char *what)
{
    if (cg__mul_i64(a, b, r))
        return cg__error(CG_ESHAPE, "%s: %lld * %lld overflows a 64-bit "
                         "integer", what, (long long)a, (long long)b);
    return CG_OK;
}

int
cg__checked_add_i64(int64_t a, int64_t b, int64_t *r, const char *what)
{
    if (cg__add_i64(a, b, r))
        return cg__error(CG_ESHAPE, "%s: %lld + %lld overflows a 64-bit "
                         "integer", what, (long long)a, (long long)b);
    return CG_OK;
}

int
cg__checked_mul_size(size_t a, size_t b, size_t *r, const char *what)
{
    if (cg__mul_size(a, b, r))
        return cg__error(CG_ESHAPE, "%s: %zu * %zu overflows size_t", what,
                         a, b);
    return CG_OK;
}

int
cg__checked_add_size(size_t a, size_t b, size_t *r, const char *what)
{
    if (cg__add_size(a, b, r))
        return cg__error(CG_ESHAPE, "%s: %zu + %zu overflows size_t", what,
                         a, b);
    return CG_OK;
}

/* The countdown of cg__fault_after: one thread-local compare per site
 * when off, so it stays compiled in. */
static _Thread_local long fault_countdown = -1;
static _Thread_local unsigned fault_mask;
static _Thread_local unsigned fault_fired;

long
cg__fault_after(unsigned mask, long n)
{
    long old = fault_countdown;

    fault_countdown = n < 0 || !mask ? -1 : n;
    fault_mask = mask;
    fault_fired = 0;
    return old;
}

int
cg__fault(unsigned kind)
{
    if (fault_countdown < 0 || !(fault_mask & kind))
        return 0;
    if (fault_countdown-- != 0)
        return 0;
    fault_fired = kind;
    return 1;
}

unsigned
cg__fault_fired_kind(void)
{
    return fault_fired;
}

long
cg__alloc_fail_after(long n)
{
    return cg__fault_after(CG__FAULT_HOST_ALLOC, n);
}

/* Nonzero when this allocation is the one a test asked to fail. */
static int
injected_failure(void)
{
    return cg__fault(CG__FAULT_HOST_ALLOC);
}

void *
cg__malloc(size_t bytes)
{
    void *p = injected_failure() ? NULL : malloc(bytes ? bytes : 1);

    if (!p)
        cg__error(CG_EHOSTMEM, "cannot allocate %zu bytes of host memory",
                  bytes);
    return p;
}

void *
cg__calloc(size_t n, size_t size)
{
    void *p = injected_failure() ? NULL : calloc(n ? n : 1, size ? size : 1);

    if (!p)
        cg__error(CG_EHOSTMEM, "cannot allocate %zu x %zu bytes of host "
                  "memory", n, size);
    return p;
}

void *
cg__realloc(void *p, size_t bytes)
{
    void *q = injected_failure() ? NULL : realloc(p, bytes ? bytes : 1);

    if (!q)
        cg__error(CG_EHOSTMEM, "cannot allocate %zu bytes of host memory",
                  bytes);
    return q;
}

char *
cg__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = cg__malloc(n);

    if (p)
        memcpy(p, s, n);
    return p;
}

/* fstat after open, not the size fseek/ftell report: a directory opens
 * for reading on Linux and "ends" at LONG_MAX, which was then asked of
 * malloc.  A regular file is read at its size; anything else (a pipe,
 * a character device) is read to its end in growing steps. */
char *
cg__read_file(const char *path, size_t *len)
{
    struct stat st;
    char *buf = NULL, *nb;
    size_t cap, n = 0, want;
    int fd = open(path, O_RDONLY);

    if (fd < 0) {
        cg__error(CG_EIO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        cg__error(CG_EIO, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        cg__error(CG_EIO, "%s is a directory, not a file", path);
        goto fail;
    }
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size >= SIZE_MAX) {
        cg__error(CG_EIO, "%s: %jd bytes do not fit in memory", path,
                  (intmax_t)st.st_size);
        goto fail;
    }
    cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
    if (!(buf = cg__malloc(cap)))
        goto fail;
    for (;;) {
        ssize_t r;

        if (n + 1 == cap) {
            if (S_ISREG(st.st_mode))
                break;             /* what fstat said: no more is read */
            if (cg__mul_size(cap, 2, &want)) {
                cg__error(CG_EHOSTMEM, "%s: too large to read into memory",
                          path);
                goto fail;
            }
            if (!(nb = cg__realloc(buf, want)))
                goto fail;
            buf = nb;
            cap = want;
        }
        r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            cg__error(CG_EIO, "cannot read %s: %s", path, strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (S_ISREG(st.st_mode) && n != (size_t)st.st_size) {
        cg__error(CG_EIO, "cannot read %s: %zu of %jd bytes (the file "
                  "changed while read)", path, n, (intmax_t)st.st_size);
        goto fail;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    close(fd);
    return buf;
fail:
    free(buf);
    close(fd);
    return NULL;
}

int
cg__env_flag(const char *name, int *value, int *set)
{
    const char *v = getenv(name);

    *value = 0;
    *set = v && *v;
    if (!*set)
        return CG_OK;
    if ((v[0] == '0' || v[0] == '1') && !v[1]) {
        *value = v[0] == '1';
        return CG_OK;
    }
    *set = 0;
    return cg__error(CG_EINVAL, "environment variable %s=%s: want 0 or 1 "
                     "(or unset it)", name, v);
}

int
cg__env_long(const char *name, long lo, long hi, long *value, int *set)
{
    const char *v = getenv(name);
    char *end;
    long n;

    *set = v && *v;
    if (!*set)
        return CG_OK;
    errno = 0;
    n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi) {
        *set = 0;
        return cg__error(CG_EINVAL, "environment variable %s=%s: want an "
                         "integer from %ld to %ld (or unset it)", name, v,
                         lo, hi);
    }
    *value = n;
    return CG_OK;
}

int
cg__env_choice(const char *name, const char *const *choices, int n,
               int *value, int *set)
{
    const char *v = getenv(name);
    char want[256];
    size_t len = 0;
    int i;

    *set = v && *v;
    if (!*set)
        return CG_OK;
    for (i = 0; i < n; i++)
        if (strcmp(v, choices[i]) == 0) {
            *value = i;
            return CG_OK;
        }
    *set = 0;
    want[0] = '\0';
    for (i = 0; i < n && len < sizeof want; i++)
        len += (size_t)snprintf(want + len, sizeof want - len, "%s%s",
                                i == 0 ? "" : i == n - 1 ? " or " : ", ",
                                choices[i]);
    return cg__error(CG_EINVAL, "environment variable %s=%s: want %s (or "
                     "unset it)", name, v, want);
}

int
cg__mkdir_p(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path), i;

    if (n == 0 || n >= sizeof tmp)
        return cg__error(CG_EIO, "bad directory path '%s'", path);
    memcpy(tmp, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0')
            continue;
        tmp[i] = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return cg__error(CG_EIO, "cannot create directory %s: %s", tmp,
                             strerror(errno));
        if (i < n)
            tmp[i] = '/';
    }
    return CG_OK;
}

/* fsync on the directory makes a rename durable; some file systems refuse
 * it (EINVAL), which is harmless. */
static int
sync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    int fd, rc = CG_OK;

    if (n >= sizeof dir)
        return cg__error(CG_EIO, "path too long: %s", path);
    if (slash && n == 0)
        n = 1;                       /* "/file": the root */
    memcpy(dir, slash ? path : ".", slash ? n : 1);
    dir[slash ? n : 1] = '\0';
    fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return cg__error(CG_EIO, "cannot open directory %s: %s", dir,
                         strerror(errno));
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        rc = cg__error(CG_EIO, "cannot sync directory %s: %s", dir,
                       strerror(errno));
    close(fd);
    return rc;
}

static int
write_all(int fd, const char *tmp, const void *data, size_t len)
{
    const char *p = data;

    while (len > 0) {
        ssize_t w = -1;

        if (cg__fault(CG__FAULT_FILE_WRITE))
            errno = ENOSPC;
        else
            w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return cg__error(CG_EIO, "cannot write %s: %s", tmp,
                             w < 0 ? strerror(errno) : "short write");
        p += w;
        len -= (size_t)w;
    }
    return CG_OK;
}

/* An injected file-write fault: sets errno as the failing call would. */
static int
injected_io(int err)
{
    if (!cg__fault(CG__FAULT_FILE_WRITE))
        return 0;
    errno = err;
    return 1;
}

/* Where a write to `path` must land: the file a symbolic link (or a chain
 * of them) names, so that the link stays a link, as editors do.  A link
 * to a file that does not exist yet names where to create it.  Fails with
 * CG_EIO for a directory, a link loop, or a path too long. */
static int
write_target(const char *path, char *out, size_t size)
{
    char cur[4096], link[4096];
    struct stat st;
    int hops;

    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur)
        return cg__error(CG_EIO, "path too long: %s", path);
    for (hops = 0; hops < 40; hops++) {
        ssize_t n;
        const char *slash;

        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            break;
        n = readlink(cur, link, sizeof link - 1);
        if (n < 0 || n >= (ssize_t)sizeof link - 1)
            return cg__error(CG_EIO, "cannot read the link %s: %s", cur,
                             n < 0 ? strerror(errno) : "target too long");
        link[n] = '\0';
        slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            memcpy(cur, link, (size_t)n + 1);
        } else {            /* relative to the link's directory */
            size_t d = (size_t)(slash - cur) + 1;

            if (d + (size_t)n + 1 > sizeof cur)
                return cg__error(CG_EIO, "path too long: %s", path);
            memcpy(cur + d, link, (size_t)n + 1);
        }
    }
    if (hops == 40)
        return cg__error(CG_EIO, "cannot write %s: too many levels of "
                         "symbolic links", path);
    if (stat(cur, &st) == 0 && S_ISDIR(st.st_mode))
        return cg__error(CG_EIO, "cannot write %s: it is a directory%s%s",
                         path, strcmp(cur, path) ? " (through a link: " : "",
                         strcmp(cur, path) ? cur : "");
    if (snprintf(out, size, "%s", cur) >= (int)size)
        return cg__error(CG_EIO, "path too long: %s", path);
    return CG_OK;
}

/* The rename is the commit point: the directory's fsync after it is not
 * a fault site, as its failure cannot undo the rename (the new file is in
 * place; the error only says that its durability is not known). */
int
cg__write_parts_atomic(const char *path, int mode, int nparts,
                       const void *const *parts, const size_t *lens)
{
    char target[4096], tmp[4200];
    struct stat st;
    int fd, i, keep;

    if (write_target(path, target, sizeof target) != CG_OK)
        return CG_EIO;
    /* An existing file keeps its permissions (a 0600 checkpoint stays
     * 0600); a new one gets `mode` less the umask. */
    keep = stat(target, &st) == 0;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", target, (long)getpid()) >=
        (int)sizeof tmp)
        return cg__error(CG_EIO, "path too long: %s", path);
    fd = injected_io(ENOSPC) ? -1
         : open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return cg__error(CG_EIO, "cannot create %s: %s", tmp,
                         strerror(errno));
    if (keep && fchmod(fd, st.st_mode & 07777) != 0) {
        cg__error(CG_EIO, "cannot give %s the mode %04o of %s: %s", tmp,
                  (unsigned)(st.st_mode & 07777), target, strerror(errno));
        goto fail;
    }
    for (i = 0; i < nparts; i++)
        if (write_all(fd, tmp, parts[i], lens[i]) != CG_OK)
            goto fail;
    if (injected_io(EIO) || fsync(fd) != 0) {
        cg__error(CG_EIO, "cannot sync %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (close(fd) != 0 || injected_io(EIO)) {
        fd = -1;
        cg__error(CG_EIO, "cannot close %s: %s", tmp, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (injected_io(EIO) || rename(tmp, target) != 0) {
        cg__error(CG_EIO, "cannot rename %s to %s: %s", tmp, target,
                  strerror(errno));
        goto fail;
    }
    return sync_parent_dir(target);
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return CG_EIO;
}

int
cg__write_file_atomic(const char *path, const void *data, size_t len)
{
    return cg__write_parts_atomic(path, 0600, 1, &data, &len);
}

/* SplitMix64 (Steele, Lea and Flood 2014): the one host generator of the
 * library and its tools (dataset shuffles, sampling, benchmark inputs). */
uint64_t
cg_splitmix64_next(uint64_t *state)
{
    uint64_t z;

    if (!state)
        return 0;
    z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double
cg_splitmix64_uniform(uint64_t *state)
{
    return (double)(cg_splitmix64_next(state) >> 11) / 9007199254740992.0;
}
