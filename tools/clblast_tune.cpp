/* SPDX-License-Identifier: MIT */
/*
 * tools/clblast_tune.cpp - the one C++ file of clgrad-tune: a C wrapper
 * over CLBlast's tuning API (clblast::Tune*<float>), which exists only in
 * C++.  Used by the search child only: CLBlast's tuner compiles every
 * candidate and cannot be interrupted, so the parent runs it in a process
 * it can kill.
 */
#include <clblast.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <unordered_map>

extern "C" int tu_clblast_tune(void *queue, const char *kernel, size_t m,
                               size_t n, size_t k, double fraction,
                               char names[][40], long *values, int max,
                               int *count, char *why, size_t whylen);

extern "C" int
tu_clblast_tune(void *queue, const char *kernel, size_t m, size_t n,
                size_t k, double fraction, char names[][40], long *values,
                int max, int *count, char *why, size_t whylen)
{
    std::unordered_map<std::string, size_t> params;
    cl_command_queue *q = static_cast<cl_command_queue *>(queue);
    clblast::StatusCode rc;
    std::string name(kernel);

    *count = 0;
    why[0] = '\0';
    try {
        if (name == "Xgemm")
            rc = clblast::TuneXgemm<float>(q, m, n, k, fraction, params);
        else if (name == "XgemmDirect")
            rc = clblast::TuneXgemmDirect<float>(q, m, n, k, fraction,
                                                 params);
        else if (name == "Copy")
            rc = clblast::TuneCopy<float>(q, m, n, fraction, params);
        else if (name == "Pad")
            rc = clblast::TunePad<float>(q, m, n, fraction, params);
        else if (name == "Transpose")
            rc = clblast::TuneTranspose<float>(q, m, n, fraction, params);
        else if (name == "Padtranspose")
            rc = clblast::TunePadtranspose<float>(q, m, n, fraction, params);
        else {
            std::snprintf(why, whylen, "no CLBlast tuner for '%s'", kernel);
            return -1;
        }
    } catch (const std::exception &e) {
        std::snprintf(why, whylen, "%s", e.what());
        return -1;
    } catch (...) {
        std::snprintf(why, whylen, "unknown exception");
        return -1;
    }
    /* TuneXgemm runs two searches (kernels 0 and 1) into one map: when the
     * second finds nothing the first one's best is still there, so the
     * parameters are returned whatever the status; the parent verifies
     * them anyway. */
    for (const auto &p : params) {
        if (p.first == "PRECISION" || *count >= max)
            continue;
        std::snprintf(names[*count], 40, "%s", p.first.c_str());
        values[*count] = static_cast<long>(p.second);
        (*count)++;
    }
    return static_cast<int>(rc);
}
