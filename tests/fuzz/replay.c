/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/replay.c - main() for a fuzz target built without libFuzzer:
 * runs LLVMFuzzerTestOneInput once on every file named on the command line
 * or found in a directory named there; with no arguments, on every file of
 * $TEST_SRCDIR/tests/fuzz/corpus/<target>/, which is how make check
 * replays the committed corpora.  A finding aborts (fuzz_fail), so the
 * test fails with the file's name printed before it.  Exit 77 (skip) when
 * the target needs an OpenCL device and there is none.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#ifndef CG_FUZZ_TARGET
#error "CG_FUZZ_TARGET (the corpus name) must be defined"
#endif

static int
run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long len;

    if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        perror(path);
        return 1;
    }
    /* An exact allocation, so that AddressSanitizer or valgrind catch a
     * read past the input. */
    buf = malloc(len ? (size_t)len : 1);
    if (!buf || (len && fread(buf, 1, (size_t)len, f) != (size_t)len)) {
        perror(path);
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    printf("%s (%ld bytes)\n", path, len);
    fflush(stdout);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    return 0;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files of a directory, in name order. */
static int
run_dir(const char *dir, int *count)
{
    char **names = NULL, path[4096];
    struct dirent *e;
    size_t n = 0, cap = 0, i;
    int bad = 0;
    DIR *d = opendir(dir);

    if (!d) {
        perror(dir);
        return 1;
    }
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            if (!names)
                abort();
        }
        if (!(names[n++] = strdup(e->d_name)))
            abort();
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        bad |= run_file(path);
        free(names[i]);
        ++*count;
    }
    free(names);
    return bad;
}

static int
run_path(const char *path, int *count)
{
    struct stat st;

    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    if (S_ISDIR(st.st_mode))
        return run_dir(path, count);
    ++*count;
    return run_file(path);
}

int
main(int argc, char **argv)
{
    char corpus[4096];
    const char *src = getenv("TEST_SRCDIR");
    int i, bad = 0, count = 0;

    LLVMFuzzerInitialize(&argc, &argv);
    if (argc > 1) {
        for (i = 1; i < argc; i++)
            bad |= run_path(argv[i], &count);
    } else {
        snprintf(corpus, sizeof corpus, "%s/tests/fuzz/corpus/%s",
                 src && *src ? src : ".", CG_FUZZ_TARGET);
        bad = run_path(corpus, &count);
    }
    if (fuzz_no_device) {
        printf("no OpenCL device: the inputs were not run\n");
        return 77;
    }
    printf("%s: %d inputs replayed%s\n", CG_FUZZ_TARGET, count,
           bad ? ", some could not be read" : "");
    return bad || count == 0;
}
