/* SPDX-License-Identifier: MIT */
/*
 * lib/core/error.c - status names and the thread-local last-error message.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "core/internal.h"

#define ERROR_MAX 16384

static _Thread_local char last_error[ERROR_MAX];
static _Thread_local int last_status;
/* Nonzero while cg__error_quiet_enter is in effect on this thread. */
static _Thread_local int quiet;

/* Every OpenCL 1.2 error code, with the text clgrad shows for it. */
#define CG_CL_ERROR_LIST(X)                                                  \
    X(CL_DEVICE_NOT_FOUND, "device not found")                               \
    X(CL_DEVICE_NOT_AVAILABLE, "device not available")                       \
    X(CL_COMPILER_NOT_AVAILABLE, "compiler not available")                   \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE, "memory object allocation failure")  \
    X(CL_OUT_OF_RESOURCES, "out of resources")                               \
    X(CL_OUT_OF_HOST_MEMORY, "out of host memory")                           \
    X(CL_PROFILING_INFO_NOT_AVAILABLE, "profiling info not available")       \
    X(CL_MEM_COPY_OVERLAP, "memory copy overlap")                            \
    X(CL_IMAGE_FORMAT_MISMATCH, "image format mismatch")                     \
    X(CL_IMAGE_FORMAT_NOT_SUPPORTED, "image format not supported")           \
    X(CL_BUILD_PROGRAM_FAILURE, "program build failure")                     \
    X(CL_MAP_FAILURE, "map failure")                                         \
    X(CL_MISALIGNED_SUB_BUFFER_OFFSET, "misaligned sub-buffer offset")       \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,                          \
      "execution status error for events in wait list")                      \
    X(CL_COMPILE_PROGRAM_FAILURE, "compile program failure")                 \
    X(CL_LINKER_NOT_AVAILABLE, "linker not available")                       \
    X(CL_LINK_PROGRAM_FAILURE, "link program failure")                       \
    X(CL_DEVICE_PARTITION_FAILED, "device partition failed")                 \
    X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, "kernel argument info not available")\
    X(CL_INVALID_VALUE, "invalid value")                                     \
    X(CL_INVALID_DEVICE_TYPE, "invalid device type")                         \
    X(CL_INVALID_PLATFORM, "invalid platform")                               \
    X(CL_INVALID_DEVICE, "invalid device")                                   \
    X(CL_INVALID_CONTEXT, "invalid context")                                 \
    X(CL_INVALID_QUEUE_PROPERTIES, "invalid queue properties")               \
    X(CL_INVALID_COMMAND_QUEUE, "invalid command queue")                     \
    X(CL_INVALID_HOST_PTR, "invalid host pointer")                           \
    X(CL_INVALID_MEM_OBJECT, "invalid memory object")                        \
    X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, "invalid image format descriptor") \
    X(CL_INVALID_IMAGE_SIZE, "invalid image size")                           \
    X(CL_INVALID_SAMPLER, "invalid sampler")                                 \
    X(CL_INVALID_BINARY, "invalid binary")                                   \
    X(CL_INVALID_BUILD_OPTIONS, "invalid build options")                     \
    X(CL_INVALID_PROGRAM, "invalid program")                                 \
    X(CL_INVALID_PROGRAM_EXECUTABLE, "invalid program executable")           \
    X(CL_INVALID_KERNEL_NAME, "invalid kernel name")                         \
    X(CL_INVALID_KERNEL_DEFINITION, "invalid kernel definition")             \
    X(CL_INVALID_KERNEL, "invalid kernel")                                   \
    X(CL_INVALID_ARG_INDEX, "invalid argument index")                        \
    X(CL_INVALID_ARG_VALUE, "invalid argument value")                        \
    X(CL_INVALID_ARG_SIZE, "invalid argument size")                          \
    X(CL_INVALID_KERNEL_ARGS, "invalid kernel arguments")                    \
    X(CL_INVALID_WORK_DIMENSION, "invalid work dimension")                   \
    X(CL_INVALID_WORK_GROUP_SIZE, "invalid work-group size")                 \
    X(CL_INVALID_WORK_ITEM_SIZE, "invalid work-item size")                   \
    X(CL_INVALID_GLOBAL_OFFSET, "invalid global offset")                     \
    X(CL_INVALID_EVENT_WAIT_LIST, "invalid event wait list")                 \
    X(CL_INVALID_EVENT, "invalid event")                                     \
    X(CL_INVALID_OPERATION, "invalid operation")                             \
    X(CL_INVALID_GL_OBJECT, "invalid GL object")                             \
    X(CL_INVALID_BUFFER_SIZE, "invalid buffer size")                         \
    X(CL_INVALID_MIP_LEVEL, "invalid mip level")                             \
    X(CL_INVALID_GLOBAL_WORK_SIZE, "invalid global work size")               \
    X(CL_INVALID_PROPERTY, "invalid property")                               \
    X(CL_INVALID_IMAGE_DESCRIPTOR, "invalid image descriptor")               \
    X(CL_INVALID_COMPILER_OPTIONS, "invalid compiler options")               \
    X(CL_INVALID_LINKER_OPTIONS, "invalid linker options")                   \
    X(CL_INVALID_DEVICE_PARTITION_COUNT, "invalid device partition count")

const char *
cg__cl_error_name(int code)
{
    switch (code) {
#define CG_CL_NAME_(name, text) case name: return #name;
    CG_CL_ERROR_LIST(CG_CL_NAME_)
#undef CG_CL_NAME_
    /* Codes of later OpenCL versions and the ICD loader. */
    case -70: return "CL_INVALID_PIPE_SIZE";
    case -71: return "CL_INVALID_DEVICE_QUEUE";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return NULL;
    }
}

static const char *
cl_error_text(int code)
{
    switch (code) {
#define CG_CL_TEXT_(name, text) case name: return #name ": " text;
    CG_CL_ERROR_LIST(CG_CL_TEXT_)
#undef CG_CL_TEXT_
    default: return NULL;
    }
}

const char *
cg_strerror(int status)
{
    const char *s;

    switch (status) {
#define CG_STATUS_TEXT_(name, value, text) case name: return text;
    CG_STATUS_LIST(CG_STATUS_TEXT_)
#undef CG_STATUS_TEXT_
    default: break;
    }
    s = cl_error_text(status);
    return s ? s : "unknown error";
}

const char *
cg_status_name(int status)
{
    const char *s;

    switch (status) {
#define CG_STATUS_NAME_(name, value, text) case name: return #name;
    CG_STATUS_LIST(CG_STATUS_NAME_)
#undef CG_STATUS_NAME_
    default: break;
    }
    s = cg__cl_error_name(status);
    return s ? s : "CG_UNKNOWN";
}

const char *
cg_last_error(void)
{
    return last_error;
}

const char *
cg_version(void)
{
    return PACKAGE_VERSION;
}

void
cg__error_quiet_enter(void)
{
    quiet++;
}

void
cg__error_quiet_leave(void)
{
    if (quiet > 0)
        quiet--;
}

void
cg__error_clear(void)
{
    if (quiet)
        return;
    last_error[0] = '\0';
    last_status = CG_OK;
}

int
cg__last_status(void)
{
    return last_status;
}

int
cg__error(int status, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (quiet)
        return status;
    last_status = status;
    n = snprintf(last_error, sizeof last_error, "%s: ",
                 cg_status_name(status));
    if (n < 0 || (size_t)n >= sizeof last_error)
        n = 0;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

void
cg__error_append(const char *fmt, ...)
{
    size_t n = strlen(last_error);
    va_list ap;

    if (quiet || n + 1 >= sizeof last_error)
        return;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - n, fmt, ap);
    va_end(ap);
}
