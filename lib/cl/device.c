/* SPDX-License-Identifier: MIT */
/*
 * lib/cl/device.c - platform and device enumeration, device selection.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cl/internal.h"

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

int
cg__cl_fail(cl_int rc, const char *what)
{
    const char *name = cg__cl_error_name(rc);

    if (rc == CL_MEM_OBJECT_ALLOCATION_FAILURE || rc == CL_OUT_OF_RESOURCES)
        return cg__error(CG_ENOMEM, "%s failed: %s (%d)", what,
                         name ? name : "unknown OpenCL error", rc);
    return cg__error(rc, "%s failed: %s (%d)", what,
                     name ? name : "unknown OpenCL error", rc);
}

static int
get_platforms(cl_platform_id *ids, cl_uint *n)
{
    cl_int rc = clGetPlatformIDs(MAX_PLATFORMS, ids, n);

    /* The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR (-1001) when no
     * vendor driver is registered. */
    if (rc == -1001 || (rc == CL_SUCCESS && *n == 0)) {
        *n = 0;
        return cg__error(CG_ENOPLATFORM, "no OpenCL platform found; install "
                         "an OpenCL driver, for example the pocl-opencl-icd "
                         "package (OpenCL on the CPU)");
    }
    if (rc != CL_SUCCESS)
        return cg__cl_fail(rc, "clGetPlatformIDs");
    if (*n > MAX_PLATFORMS)
        *n = MAX_PLATFORMS;
    return CG_OK;
}

static cl_uint
platform_devices(cl_platform_id p, cl_device_id *ids, cl_uint max)
{
    cl_uint n = 0;

    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, max, ids, &n) != CL_SUCCESS)
        return 0;
    return n < max ? n : max;
}

int
cg_device_count(int *count)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_device_id devs[MAX_DEVICES];
    cl_uint np, i;
    int status, total = 0;

    cg__error_clear();
    if (!count)
        return cg__error(CG_EINVAL, "count is NULL");
    *count = 0;
    status = get_platforms(plats, &np);
    if (status)
        return status;
    for (i = 0; i < np; i++)
        total += (int)platform_devices(plats[i], devs, MAX_DEVICES);
    *count = total;
    return CG_OK;
}

int
cg__device_lookup(int index, cl_platform_id *platform, cl_device_id *device)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_device_id devs[MAX_DEVICES];
    cl_uint np, nd, i;
    int status, base = 0;

    status = get_platforms(plats, &np);
    if (status)
        return status;
    for (i = 0; i < np; i++) {
        nd = platform_devices(plats[i], devs, MAX_DEVICES);
        if (index >= base && index < base + (int)nd) {
            *platform = plats[i];
            *device = devs[index - base];
            return CG_OK;
        }
        base += (int)nd;
    }
    return cg__error(CG_ENODEVICE, "no OpenCL device %d (there are %d)",
                     index, base);
}

static void
info_str(cl_device_id d, cl_device_info what, char *out, size_t size)
{
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, size, out, NULL) != CL_SUCCESS) {
        /* Too long for `out` (extensions on some drivers): truncate. */
        size_t need = 0;
        char *tmp;

        if (clGetDeviceInfo(d, what, 0, NULL, &need) != CL_SUCCESS ||
            !(tmp = malloc(need + 1)))
            return;
        if (clGetDeviceInfo(d, what, need, tmp, NULL) == CL_SUCCESS) {
            memcpy(out, tmp, size - 1);
            out[size - 1] = '\0';
        }
        free(tmp);
    }
}

static void
plat_str(cl_platform_id p, cl_platform_info what, char *out, size_t size)
{
    out[0] = '\0';
    if (clGetPlatformInfo(p, what, size, out, NULL) != CL_SUCCESS)
        out[0] = '\0';
}

static unsigned
info_uint(cl_device_id d, cl_device_info what)
{
    cl_uint v = 0;

    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

static uint64_t
info_ulong(cl_device_id d, cl_device_info what)
{
    cl_ulong v = 0;

    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

/* Is `name` one of the space-separated words of `list`? */
static int
has_word(const char *list, const char *name)
{
    size_t n = strlen(name);
    const char *s;

    for (s = strstr(list, name); s; s = strstr(s + 1, name))
        if ((s == list || s[-1] == ' ') && (s[n] == ' ' || s[n] == '\0'))
            return 1;
    return 0;
}

/* A cl_device_fp_config as CG_FP_* bits (the same values). */
static unsigned
fp_config(cl_device_id d, cl_device_info what)
{
    cl_device_fp_config v = 0;

    if (clGetDeviceInfo(d, what, sizeof v, &v, NULL) != CL_SUCCESS)
        return CG_FP_NOT_EXPOSED;
    return (unsigned)(v & 0xff);
}

/* "OpenCL M.N ..." as 10 * M + N, 0 if unreadable. */
static int
cl_version(const char *s)
{
    int major = 0, minor = 0;

    if (sscanf(s, "OpenCL %d.%d", &major, &minor) != 2)
        return 0;
    return 10 * major + minor;
}

/* Sub-groups, UUID and PCI address: each queried only where the device's
 * version or extension list says the query exists, and left at 0 (not
 * exposed) when it is refused. */
static void
fill_optional(cl_device_id d, cg_device_info *info)
{
    const char *ext = info->extensions;
    cl_uint v = 0, slot = 0;
    struct { cl_uint domain, bus, device, function; } pci;

    if (cl_version(info->opencl_version) >= 21 &&
        clGetDeviceInfo(d, 0x105C /* CL_DEVICE_MAX_NUM_SUB_GROUPS */,
                        sizeof v, &v, NULL) == CL_SUCCESS)
        info->max_sub_groups = v;
    info->sub_groups = info->max_sub_groups > 0 ||
                       has_word(ext, "cl_khr_subgroups");
    if (has_word(ext, "cl_khr_device_uuid") &&
        clGetDeviceInfo(d, 0x106A /* CL_DEVICE_UUID_KHR */,
                        sizeof info->uuid, info->uuid, NULL) == CL_SUCCESS)
        info->has_uuid = 1;
    if (has_word(ext, "cl_khr_pci_bus_info") &&
        clGetDeviceInfo(d, 0x410F /* CL_DEVICE_PCI_BUS_INFO_KHR */,
                        sizeof pci, &pci, NULL) == CL_SUCCESS) {
        info->has_pci = 1;
        info->pci_domain = pci.domain;
        info->pci_bus = pci.bus;
        info->pci_device = pci.device;
        info->pci_function = pci.function;
    } else if (has_word(ext, "cl_nv_device_attribute_query") &&
               clGetDeviceInfo(d, 0x4008 /* CL_DEVICE_PCI_BUS_ID_NV */,
                               sizeof v, &v, NULL) == CL_SUCCESS &&
               clGetDeviceInfo(d, 0x4009 /* CL_DEVICE_PCI_SLOT_ID_NV */,
                               sizeof slot, &slot, NULL) == CL_SUCCESS) {
        /* The slot packs device and function as PCI's devfn does. */
        info->has_pci = 1;
        info->pci_bus = v & 0xff;
        info->pci_device = (slot >> 3) & 0x1f;
        info->pci_function = slot & 7;
        v = 0;
        if (clGetDeviceInfo(d, 0x400A /* CL_DEVICE_PCI_DOMAIN_ID_NV */,
                            sizeof v, &v, NULL) == CL_SUCCESS)
            info->pci_domain = v;
    }
}

/* What OpenCL 1.2 defines for every device beyond the basics. */
static void
fill_capabilities(cl_device_id d, cg_device_info *info)
{
    cl_device_local_mem_type lt = 0;
    cl_device_mem_cache_type ct = 0;
    cl_command_queue_properties qp = 0;
    size_t res = 0;

    info->native_width_char = info_uint(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_CHAR);
    info->native_width_short =
        info_uint(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_SHORT);
    info->native_width_int = info_uint(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_INT);
    info->native_width_long = info_uint(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_LONG);
    info->native_width_float =
        info_uint(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT);
    info->native_width_double =
        info_uint(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE);
    info->native_width_half = info_uint(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_HALF);
    info->fp32_config = fp_config(d, CL_DEVICE_SINGLE_FP_CONFIG);
    info->fp64_config = fp_config(d, CL_DEVICE_DOUBLE_FP_CONFIG);
    /* CL_DEVICE_HALF_FP_CONFIG is cl_khr_fp16's: without the extension
     * there is no half arithmetic, and an OpenCL 1.2 driver may refuse
     * the query (Oclgrind does, reporting the call as an API error). */
    info->fp16_config = info->fp16
                        ? fp_config(d, 0x1033 /* CL_DEVICE_HALF_FP_CONFIG */)
                        : 0;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lt, &lt, NULL);
    info->local_mem_type = lt == CL_LOCAL ? CG_LOCAL_MEM_DEDICATED
                         : lt == CL_GLOBAL ? CG_LOCAL_MEM_GLOBAL
                         : CG_LOCAL_MEM_NONE;
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_CACHE_TYPE, sizeof ct, &ct, NULL);
    info->global_mem_cache_type = ct == CL_READ_WRITE_CACHE
                                  ? CG_CACHE_READ_WRITE
                                : ct == CL_READ_ONLY_CACHE ? CG_CACHE_READ_ONLY
                                : CG_CACHE_NONE;
    info->global_mem_cacheline_size =
        info_uint(d, CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE);
    clGetDeviceInfo(d, CL_DEVICE_PROFILING_TIMER_RESOLUTION, sizeof res, &res,
                    NULL);
    info->timer_resolution_ns = res;
    clGetDeviceInfo(d, CL_DEVICE_QUEUE_PROPERTIES, sizeof qp, &qp, NULL);
    info->queue_out_of_order =
        (qp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
    info->queue_profiling = (qp & CL_QUEUE_PROFILING_ENABLE) != 0;
    fill_optional(d, info);
}

static void
fill_info(cl_platform_id p, cl_device_id d, cg_device_info *info)
{
    cl_device_type type = 0;
    cl_device_fp_config fp64 = 0;
    cl_bool b = CL_FALSE;
    size_t sizes[16] = { 0 };

    plat_str(p, CL_PLATFORM_NAME, info->platform_name,
             sizeof info->platform_name);
    plat_str(p, CL_PLATFORM_VENDOR, info->platform_vendor,
             sizeof info->platform_vendor);
    plat_str(p, CL_PLATFORM_VERSION, info->platform_version,
             sizeof info->platform_version);
    info_str(d, CL_DEVICE_NAME, info->name, sizeof info->name);
    info_str(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    info_str(d, CL_DRIVER_VERSION, info->driver_version,
             sizeof info->driver_version);
    info_str(d, CL_DEVICE_VERSION, info->opencl_version,
             sizeof info->opencl_version);
    info_str(d, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version,
             sizeof info->opencl_c_version);
    info_str(d, CL_DEVICE_EXTENSIONS, info->extensions,
             sizeof info->extensions);

    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    info->type = (type & CL_DEVICE_TYPE_GPU) ? CG_DEVICE_GPU
               : (type & CL_DEVICE_TYPE_CPU) ? CG_DEVICE_CPU
               : (type & CL_DEVICE_TYPE_ACCELERATOR) ? CG_DEVICE_ACCELERATOR
               : CG_DEVICE_OTHER;
    info->compute_units = info_uint(d, CL_DEVICE_MAX_COMPUTE_UNITS);
    info->clock_mhz = info_uint(d, CL_DEVICE_MAX_CLOCK_FREQUENCY);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                    sizeof info->max_work_group_size,
                    &info->max_work_group_size, NULL);
    info->max_work_item_dims = info_uint(d,
                                         CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof sizes, sizes,
                    NULL);
    memcpy(info->max_work_item_sizes, sizes,
           sizeof info->max_work_item_sizes);
    info->global_mem_size = info_ulong(d, CL_DEVICE_GLOBAL_MEM_SIZE);
    info->global_mem_cache_size = info_ulong(d,
                                             CL_DEVICE_GLOBAL_MEM_CACHE_SIZE);
    info->local_mem_size = info_ulong(d, CL_DEVICE_LOCAL_MEM_SIZE);
    info->constant_mem_size = info_ulong(d,
                                         CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE);
    info->max_alloc_size = info_ulong(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    info->vector_width_char =
        info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR);
    info->vector_width_short =
        info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT);
    info->vector_width_int = info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT);
    info->vector_width_long =
        info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG);
    info->vector_width_float =
        info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT);
    info->vector_width_double =
        info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE);
    info->vector_width_half =
        info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF);
    info->fp16 = strstr(info->extensions, "cl_khr_fp16") != NULL;
    clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, NULL);
    info->fp64 = fp64 != 0 || strstr(info->extensions, "cl_khr_fp64");
    clGetDeviceInfo(d, CL_DEVICE_IMAGE_SUPPORT, sizeof b, &b, NULL);
    info->image_support = b == CL_TRUE;
    b = CL_FALSE;
    clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof b, &b, NULL);
    info->unified_memory = b == CL_TRUE;
    fill_capabilities(d, info);
}

static int
device_info(int index, cg_device_info *info)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_device_id devs[MAX_DEVICES];
    cl_uint np, nd, i;
    int status, base = 0;

    if (index < 0)
        return cg__error(CG_ENODEVICE, "device index %d is negative", index);
    status = get_platforms(plats, &np);
    if (status)
        return status;
    for (i = 0; i < np; i++) {
        nd = platform_devices(plats[i], devs, MAX_DEVICES);
        if (index < base + (int)nd) {
            memset(info, 0, sizeof *info);
            info->index = index;
            info->platform_index = (int)i;
            info->device_index = index - base;
            fill_info(plats[i], devs[index - base], info);
            return CG_OK;
        }
        base += (int)nd;
    }
    return cg__error(CG_ENODEVICE, "no OpenCL device %d (there are %d)",
                     index, base);
}

int
cg_device_get_info(int index, cg_device_info *info)
{
    cg__error_clear();
    if (!info)
        return cg__error(CG_EINVAL, "info is NULL");
    return device_info(index, info);
}

const char *
cg_device_type_name(cg_device_type type)
{
    switch (type) {
    case CG_DEVICE_CPU: return "CPU";
    case CG_DEVICE_GPU: return "GPU";
    case CG_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

static int
contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle), i;

    for (; *hay; hay++) {
        for (i = 0; i < n; i++)
            if (tolower((unsigned char)hay[i]) !=
                tolower((unsigned char)needle[i]))
                break;
        if (i == n)
            return 1;
    }
    return n == 0;
}

static int
all_digits(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || n > 6)
        return 0;
    for (i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* Does device `d` match the selector (the forms are listed in clgrad.h)? */
static int
matches(const cg_device_info *d, const char *sel)
{
    const char *colon = strchr(sel, ':');

    if (colon && all_digits(sel, (size_t)(colon - sel)) &&
        all_digits(colon + 1, strlen(colon + 1)))
        return d->platform_index == atoi(sel) &&
               d->device_index == atoi(colon + 1);
    if (all_digits(sel, strlen(sel)))
        return d->index == atoi(sel);
    if (strcasecmp(sel, "gpu") == 0)
        return d->type == CG_DEVICE_GPU;
    if (strcasecmp(sel, "cpu") == 0)
        return d->type == CG_DEVICE_CPU;
    if (strcasecmp(sel, "accelerator") == 0)
        return d->type == CG_DEVICE_ACCELERATOR;
    return contains_nocase(d->name, sel) ||
           contains_nocase(d->platform_name, sel);
}

int
cg_device_select(const char *selector, int *index)
{
    cg_device_info info;
    int count, i, status, from_env = 0;

    cg__error_clear();
    if (!index)
        return cg__error(CG_EINVAL, "index is NULL");
    status = cg_device_count(&count);
    if (status)
        return status;
    if (!selector || !*selector) {
        selector = getenv("CLGRAD_DEVICE");
        from_env = selector && *selector;
    }
    if (!selector || !*selector) {
        /* Default: the first GPU, else the first device. */
        for (i = 0; i < count; i++)
            if (device_info(i, &info) == CG_OK &&
                info.type == CG_DEVICE_GPU) {
                *index = i;
                return CG_OK;
            }
        if (count == 0)
            return cg__error(CG_ENODEVICE, "the OpenCL platforms offer no "
                             "device");
        *index = 0;
        return CG_OK;
    }
    for (i = 0; i < count; i++) {
        status = device_info(i, &info);
        if (status)
            return status;
        if (matches(&info, selector)) {
            *index = i;
            return CG_OK;
        }
    }
    cg__error(CG_ENODEVICE, "no OpenCL device matches '%s'%s; the devices "
              "are:", selector, from_env ? " (from CLGRAD_DEVICE)" : "");
    for (i = 0; i < count; i++)
        if (device_info(i, &info) == CG_OK)
            cg__error_append("\n  %d (%d:%d) %s [%s] on %s", i,
                             info.platform_index, info.device_index,
                             info.name, cg_device_type_name(info.type),
                             info.platform_name);
    return CG_ENODEVICE;
}
