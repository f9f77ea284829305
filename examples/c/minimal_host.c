/*
 * minimal_host.c - the plugin EP ABI without ONNX Runtime: a host of its own, in C, that loads a plugin EP
 * library and drives CreateEpFactories ... ReleaseEpFactory, as ONNX Runtime does at
 * RegisterExecutionProviderLibrary and UnregisterExecutionProviderLibrary.
 *
 *   minimal_host PLUGIN [--env KEY=VALUE]...
 *
 * It serves an OrtApi/OrtEpApi table of ONNX Runtime 1.24.4 (API 24; layouts from epabi/ort_abi.h) in which only
 * the few functions a plugin needs for factory creation and device listing are real: statuses, key-value pairs,
 * the hardware-device getters, a logger, CreateEpDevice/ReleaseEpDevice, GetEnvConfigEntries (the --env
 * entries) and CreateHardwareDevice/ReleaseHardwareDevice (for a plugin's virtual devices). Every other slot is a trap that names its table and exits with status 70: a plugin asking for
 * more than this host offers is reported, not crashed on. The host offers the plugin one CPU
 * hardware device and nothing else, and sets EPABI_CUDA_DISCOVERY=0 for epabi's plugin, which would otherwise
 * create GPU hardware devices of its own on a machine with NVIDIA GPUs (that needs memory infos, not served
 * here). For epabi's plugin, set EPABI_ALLOW_SOFTWARE_ADAPTER=1 to get its CPU software adapter.
 *
 * Prints the negotiated factory's name, vendor, vendor id and version (the last two only when the factory
 * declares API 23 or newer, where they appeared), its EP devices with their metadata, the result of
 * ReleaseEpFactory and of unloading the library, and the statuses and key-value sets still alive at the end:
 * the plugin must release every status it was handed or made and every key-value set it created (exit status
 * 3 otherwise). Exit status 1: the library or a plugin call failed.
 *
 * Single-threaded: the counters below are plain statics, as a host's served functions have no context pointer.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "epabi/ort_abi.h"

enum { HOST_API = 24, MAX_FACTORIES = 4, MAX_EP_DEVICES = 8, MAX_ENV = 16 };
static const char kHostRelease[] = "1.24.4";

/* ---- the host's objects (the plugin sees them only as opaque pointers) ------------------------- */

struct OrtStatus {
    OrtErrorCode code;
    char* message;
};

struct OrtKeyValuePairs {
    size_t count;
    size_t capacity;
    char** keys;
    char** values;
};

struct OrtHardwareDevice {
    OrtHardwareDeviceType type;
    uint32_t vendor_id;
    uint32_t device_id;
    const char* vendor;
    OrtKeyValuePairs* metadata;
};

struct OrtEpDevice {
    OrtEpFactory* factory;
    const OrtHardwareDevice* device;
    OrtKeyValuePairs* ep_metadata;
    OrtKeyValuePairs* ep_options;
};

struct OrtLogger {
    OrtLoggingLevel min_level;
};

static long g_live_statuses;
static long g_live_kvps;
static OrtKeyValuePairs* g_env_config;

/* ---- OrtApi: statuses -------------------------------------------------------------------------- */

static OrtStatus* CreateStatus(OrtErrorCode code, const char* msg) {
    OrtStatus* st = calloc(1, sizeof *st);
    if (st == NULL) return NULL;
    st->code = code;
    st->message = strdup(msg != NULL ? msg : "");
    ++g_live_statuses;
    return st;
}

static OrtErrorCode GetErrorCode(const OrtStatus* status) { return status->code; }

static const char* GetErrorMessage(const OrtStatus* status) {
    return status->message != NULL ? status->message : "(out of memory)";
}

static void ReleaseStatus(OrtStatus* status) {
    if (status == NULL) return;
    --g_live_statuses;
    free(status->message);
    free(status);
}

/* ---- OrtApi: key-value pairs (insertion order kept; adding an existing key replaces its value) --- */

static void CreateKeyValuePairs(OrtKeyValuePairs** out) {
    *out = calloc(1, sizeof **out);
    if (*out != NULL) ++g_live_kvps;
}

static void AddKeyValuePair(OrtKeyValuePairs* kvps, const char* key, const char* value) {
    if (kvps == NULL || key == NULL || value == NULL) return;
    for (size_t i = 0; i < kvps->count; ++i) {
        if (strcmp(kvps->keys[i], key) == 0) {
            char* copy = strdup(value);
            if (copy == NULL) return;
            free(kvps->values[i]);
            kvps->values[i] = copy;
            return;
        }
    }
    if (kvps->count == kvps->capacity) {
        size_t capacity = kvps->capacity ? 2 * kvps->capacity : 8;
        char** keys = realloc(kvps->keys, capacity * sizeof *keys);
        if (keys == NULL) return;
        kvps->keys = keys;
        char** values = realloc(kvps->values, capacity * sizeof *values);
        if (values == NULL) return;
        kvps->values = values;
        kvps->capacity = capacity;
    }
    char* k = strdup(key);
    char* v = strdup(value);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return;
    }
    kvps->keys[kvps->count] = k;
    kvps->values[kvps->count++] = v;
}

static const char* GetKeyValue(const OrtKeyValuePairs* kvps, const char* key) {
    if (kvps == NULL || key == NULL) return NULL;
    for (size_t i = 0; i < kvps->count; ++i)
        if (strcmp(kvps->keys[i], key) == 0) return kvps->values[i];
    return NULL;
}

static void GetKeyValuePairs(const OrtKeyValuePairs* kvps, const char* const** keys, const char* const** values,
                             size_t* num_entries) {
    *keys = (const char* const*)kvps->keys;
    *values = (const char* const*)kvps->values;
    *num_entries = kvps->count;
}

static void ReleaseKeyValuePairs(OrtKeyValuePairs* kvps) {
    if (kvps == NULL) return;
    --g_live_kvps;
    for (size_t i = 0; i < kvps->count; ++i) {
        free(kvps->keys[i]);
        free(kvps->values[i]);
    }
    free(kvps->keys);
    free(kvps->values);
    free(kvps);
}

static OrtKeyValuePairs* copy_kvps(const OrtKeyValuePairs* from) {
    OrtKeyValuePairs* out = NULL;
    CreateKeyValuePairs(&out);
    for (size_t i = 0; from != NULL && out != NULL && i < from->count; ++i)
        AddKeyValuePair(out, from->keys[i], from->values[i]);
    return out;
}

/* ---- OrtApi: hardware devices and the logger ----------------------------------------------------- */

static OrtHardwareDeviceType HardwareDevice_Type(const OrtHardwareDevice* d) { return d->type; }
static uint32_t HardwareDevice_VendorId(const OrtHardwareDevice* d) { return d->vendor_id; }
static const char* HardwareDevice_Vendor(const OrtHardwareDevice* d) { return d->vendor; }
static uint32_t HardwareDevice_DeviceId(const OrtHardwareDevice* d) { return d->device_id; }
static const OrtKeyValuePairs* HardwareDevice_Metadata(const OrtHardwareDevice* d) { return d->metadata; }

static OrtStatus* Logger_LogMessage(const OrtLogger* logger, OrtLoggingLevel level, const char* message,
                                    const ORTCHAR_T* file_path, int line_number, const char* func_name) {
    (void)file_path;
    (void)line_number;
    (void)func_name;
    static const char kLevels[] = "VIWEF";
    if (level >= logger->min_level && level <= ORT_LOGGING_LEVEL_FATAL)
        fprintf(stderr, "[plugin %c] %s\n", kLevels[level], message);
    return NULL;
}

static OrtStatus* Logger_GetLoggingSeverityLevel(const OrtLogger* logger, OrtLoggingLevel* out) {
    *out = logger->min_level;
    return NULL;
}

/* ---- OrtEpApi ------------------------------------------------------------------------------------ */

static OrtStatus* CreateEpDevice(OrtEpFactory* factory, const OrtHardwareDevice* hardware_device,
                                 const OrtKeyValuePairs* ep_metadata, const OrtKeyValuePairs* ep_options,
                                 OrtEpDevice** out) {
    if (factory == NULL || hardware_device == NULL || out == NULL)
        return CreateStatus(ORT_INVALID_ARGUMENT, "CreateEpDevice: NULL factory, hardware device or output");
    *out = NULL;
    OrtEpDevice* d = calloc(1, sizeof *d);
    if (d == NULL) return CreateStatus(ORT_FAIL, "CreateEpDevice: out of memory");
    d->factory = factory;
    d->device = hardware_device;
    d->ep_metadata = copy_kvps(ep_metadata);   /* the plugin keeps (and releases) its own sets */
    d->ep_options = copy_kvps(ep_options);
    *out = d;
    return NULL;
}

static void ReleaseEpDevice(OrtEpDevice* d) {
    if (d == NULL) return;
    ReleaseKeyValuePairs(d->ep_metadata);
    ReleaseKeyValuePairs(d->ep_options);
    free(d);
}

/* A plugin's own hardware device (epabi's plugin makes one for its virtual device when the environment has
 * allow_virtual_devices=1); the plugin releases it with ReleaseHardwareDevice. */
static OrtStatus* CreateHardwareDevice(OrtHardwareDeviceType type, uint32_t vendor_id, uint32_t device_id,
                                       const char* vendor_name, const OrtKeyValuePairs* metadata,
                                       OrtHardwareDevice** out) {
    if (out == NULL || vendor_name == NULL)
        return CreateStatus(ORT_INVALID_ARGUMENT, "CreateHardwareDevice: NULL vendor name or output");
    *out = NULL;
    OrtHardwareDevice* d = calloc(1, sizeof *d);
    char* vendor = strdup(vendor_name);
    if (d == NULL || vendor == NULL) {
        free(d);
        free(vendor);
        return CreateStatus(ORT_FAIL, "CreateHardwareDevice: out of memory");
    }
    *d = (OrtHardwareDevice){type, vendor_id, device_id, vendor, copy_kvps(metadata)};
    *out = d;
    return NULL;
}

static void ReleaseHardwareDevice(OrtHardwareDevice* d) {
    if (d == NULL) return;
    ReleaseKeyValuePairs(d->metadata);
    free((char*)d->vendor);
    free(d);
}

static OrtStatus* GetEnvConfigEntries(OrtKeyValuePairs** out) {
    if (out == NULL) return CreateStatus(ORT_INVALID_ARGUMENT, "GetEnvConfigEntries: NULL output");
    *out = copy_kvps(g_env_config);   /* a copy the caller releases, as in ONNX Runtime */
    return NULL;
}

/* ---- the tables ---------------------------------------------------------------------------------- */

static OrtApi g_api;
static OrtEpApi g_ep_api;

static const OrtEpApi* GetEpApi(void) { return &g_ep_api; }

static const OrtApi* GetApi(uint32_t version) { return version >= 1 && version <= HOST_API ? &g_api : NULL; }

static const char* GetVersionString(void) { return kHostRelease; }

static const OrtApiBase g_base = {GetApi, GetVersionString};

/* One trap per table: it is called through a pointer of another function type, takes no argument, and exits
 * before the caller could use a result. Naming the very function is the job of epabi's Python host, whose traps
 * know every slot's name. */
static void* trap_ort_api(void) {
    fprintf(stderr, "minimal_host: the plugin called an OrtApi function this host does not serve\n");
    exit(70);
}

static void* trap_ep_api(void) {
    fprintf(stderr, "minimal_host: the plugin called an OrtEpApi function this host does not serve\n");
    exit(70);
}

static void fill_with(void* table, size_t bytes, void* (*trap)(void)) {
    void** slots = table;
    for (size_t i = 0; i < bytes / sizeof(void*); ++i) memcpy(&slots[i], &trap, sizeof trap);
}

static void make_tables(void) {
    fill_with(&g_api, sizeof g_api, trap_ort_api);
    fill_with(&g_ep_api, sizeof g_ep_api, trap_ep_api);
    g_api.CreateStatus = CreateStatus;
    g_api.GetErrorCode = GetErrorCode;
    g_api.GetErrorMessage = GetErrorMessage;
    g_api.ReleaseStatus = ReleaseStatus;
    g_api.CreateKeyValuePairs = CreateKeyValuePairs;
    g_api.AddKeyValuePair = AddKeyValuePair;
    g_api.GetKeyValue = GetKeyValue;
    g_api.GetKeyValuePairs = GetKeyValuePairs;
    g_api.ReleaseKeyValuePairs = ReleaseKeyValuePairs;
    g_api.HardwareDevice_Type = HardwareDevice_Type;
    g_api.HardwareDevice_VendorId = HardwareDevice_VendorId;
    g_api.HardwareDevice_Vendor = HardwareDevice_Vendor;
    g_api.HardwareDevice_DeviceId = HardwareDevice_DeviceId;
    g_api.HardwareDevice_Metadata = HardwareDevice_Metadata;
    g_api.Logger_LogMessage = Logger_LogMessage;
    g_api.Logger_GetLoggingSeverityLevel = Logger_GetLoggingSeverityLevel;
    g_api.GetEpApi = GetEpApi;
    g_ep_api.CreateEpDevice = CreateEpDevice;
    g_ep_api.ReleaseEpDevice = ReleaseEpDevice;
    g_ep_api.GetEnvConfigEntries = GetEnvConfigEntries;
    g_ep_api.CreateHardwareDevice = CreateHardwareDevice;
    g_ep_api.ReleaseHardwareDevice = ReleaseHardwareDevice;
}

/* ---- driving the plugin ---------------------------------------------------------------------------- */

typedef OrtStatus* (*CreateEpFactoriesFn)(const char*, const OrtApiBase*, const OrtLogger*, OrtEpFactory**, size_t,
                                          size_t*);
typedef OrtStatus* (*ReleaseEpFactoryFn)(OrtEpFactory*);

static bool ok(OrtStatus* status, const char* step) {
    if (status == NULL) return true;
    fprintf(stderr, "error: %s: [%d] %s\n", step, (int)status->code, GetErrorMessage(status));
    ReleaseStatus(status);
    return false;
}

static void* symbol(void* library, const char* name) {
    void* p = dlsym(library, name);
    if (p == NULL) fprintf(stderr, "error: the plugin exports no %s\n", name);
    return p;
}

static void print_kvps(const char* label, const OrtKeyValuePairs* kvps) {
    printf("  %s:", label);
    for (size_t i = 0; kvps != NULL && i < kvps->count; ++i) printf(" %s=%s", kvps->keys[i], kvps->values[i]);
    printf("\n");
}

/* Lists the devices of one factory, prints them and releases them (the host owns EP devices). */
static bool list_devices(OrtEpFactory* f, const OrtHardwareDevice* cpu) {
    OrtEpDevice* devices[MAX_EP_DEVICES] = {0};
    size_t n = 0;
    const OrtHardwareDevice* offered[] = {cpu};
    if (!ok(f->GetSupportedDevices(f, offered, 1, devices, MAX_EP_DEVICES, &n), "GetSupportedDevices")) return false;
    if (n > MAX_EP_DEVICES) {
        fprintf(stderr, "error: GetSupportedDevices reported %zu devices into room for %d\n", n, MAX_EP_DEVICES);
        return false;
    }
    printf("ep devices: %zu\n", n);
    for (size_t i = 0; i < n; ++i) {
        const OrtEpDevice* d = devices[i];
        static const char* const kTypes[] = {"CPU", "GPU", "NPU"};
        printf("ep device %zu: %s on %s hardware (vendor %s)\n", i, f->GetName(f),
               (unsigned)d->device->type < 3 ? kTypes[d->device->type] : "unknown", d->device->vendor);
        print_kvps("hardware metadata", d->device->metadata);
        print_kvps("ep metadata", d->ep_metadata);
        print_kvps("ep options", d->ep_options);
        ReleaseEpDevice(devices[i]);
    }
    return true;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: minimal_host PLUGIN [--env KEY=VALUE]...\n");
        return 2;
    }
    make_tables();
    CreateKeyValuePairs(&g_env_config);
    for (int i = 2; i < argc; ++i) {
        char* eq = i + 1 < argc && strcmp(argv[i], "--env") == 0 ? strchr(argv[i + 1], '=') : NULL;
        if (eq == NULL) {
            fprintf(stderr, "usage: minimal_host PLUGIN [--env KEY=VALUE]...\n");
            return 2;
        }
        *eq = '\0';
        AddKeyValuePair(g_env_config, argv[++i], eq + 1);
    }
    setenv("EPABI_CUDA_DISCOVERY", "0", 1);

    void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        fprintf(stderr, "error: dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    CreateEpFactoriesFn create = NULL;
    ReleaseEpFactoryFn release = NULL;
    void* p = symbol(library, "CreateEpFactories");
    memcpy(&create, &p, sizeof p);
    p = symbol(library, "ReleaseEpFactory");
    memcpy(&release, &p, sizeof p);
    if (create == NULL || release == NULL) return 1;

    OrtLogger logger = {ORT_LOGGING_LEVEL_WARNING};
    OrtHardwareDevice cpu = {OrtHardwareDeviceType_CPU, 0, 0, "minimal_host", NULL};
    CreateKeyValuePairs(&cpu.metadata);
    OrtEpFactory* factories[MAX_FACTORIES] = {0};
    size_t n = 0;
    printf("host: ONNX Runtime %s (API %d), as minimal_host serves it\n", kHostRelease, HOST_API);
    bool good = ok(create("epabi", &g_base, &logger, factories, MAX_FACTORIES, &n), "CreateEpFactories");
    if (good && n > MAX_FACTORIES) {
        fprintf(stderr, "error: CreateEpFactories reported %zu factories into room for %d\n", n, MAX_FACTORIES);
        good = false;
        n = 0;
    }
    if (good) printf("factories: %zu\n", n);
    for (size_t i = 0; good && i < n; ++i) {
        OrtEpFactory* f = factories[i];
        printf("factory %zu: name %s, vendor %s, declares API %u\n", i, f->GetName(f), f->GetVendor(f),
               (unsigned)f->ort_version_supported);
        if (f->ort_version_supported >= 23)   /* members of API 23: read only when the factory declares them */
            printf("factory %zu: vendor id 0x%04x, version %s\n", i, (unsigned)f->GetVendorId(f), f->GetVersion(f));
        good = list_devices(f, &cpu);
    }
    for (size_t i = 0; i < n; ++i) {
        if (ok(release(factories[i]), "ReleaseEpFactory")) printf("ReleaseEpFactory %zu: OK\n", i);
        else good = false;
    }
    int closed = dlclose(library);
    printf("library unloaded: %s\n", closed == 0 ? "yes" : dlerror());
    ReleaseKeyValuePairs(cpu.metadata);
    ReleaseKeyValuePairs(g_env_config);
    printf("statuses alive: %ld, key-value sets alive: %ld\n", g_live_statuses, g_live_kvps);
    fflush(stdout);
    if (!good) return 1;
    return g_live_statuses == 0 && g_live_kvps == 0 ? 0 : 3;
}
