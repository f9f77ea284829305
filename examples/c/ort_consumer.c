/*
 * ort_consumer.c - a C application that runs a model on the epabi plugin EP inside real ONNX Runtime, with no
 * header of ONNX Runtime's: only epabi's declaration of the C ABI, epabi/ort_abi.h (find_package(epabi)).
 *
 *   ort_consumer LIBONNXRUNTIME PLUGIN MODEL.onnx [--env KEY=VALUE]... [--option KEY=VALUE]... [--runs N]
 *                [--log-level 0..4]
 *
 * 1. dlopen()s ONNX Runtime's shared library (the Python wheel ships it as onnxruntime/capi/libonnxruntime.so.*)
 *    and takes the API of ONNX Runtime 1.24 (API 24: every function used here exists since then) from
 *    OrtGetApiBase().
 * 2. Creates the environment with CreateEnvWithOptions. Its config entries carry process-wide defaults for the
 *    EP, keyed "ep_factory.EpAbiExecutionProvider.<key>" (ORT's convention for environment-level EP options);
 *    the default set is min_num_runs_before_cuda_graph_capture=1, and --env KEY=VALUE options replace it.
 * 3. Registers the plugin (RegisterExecutionProviderLibrary) and prints every EP device (GetEpDevices).
 * 4. Creates a session on the first EpAbiExecutionProvider device with the provider options
 *    enable_cuda_graph=1 on hosts >= 1.26 (graph capture; --option KEY=VALUE options replace them) and prints
 *    the EP each node was assigned to (session config session.record_ep_graph_assignment_info=1).
 * 5. Binds pre-allocated float32 inputs and outputs once (IOBinding) and runs N times (default 3), writing new
 *    input values into the same buffers before each run: with graph capture the first call captures and the
 *    later ones replay on the updated inputs. Prints every output of every run.
 * 6. Tears down in the order ONNX Runtime needs: binding, values and session before the plugin library is
 *    unregistered (unregistering it while one of its sessions lives crashes ONNX Runtime 1.24.4 to 1.32.0), the
 *    environment last.
 *
 * Element i of input k in run r is ((7i + 5k + 3r) mod 17 - 8) / 8, exactly representable, so a test can
 * recompute the inputs. Output lines: "output <name> run <r> shape [d0,...]: v0 v1 ..." (%.9g). Errors print
 * "error: <step>: <message>" on stderr and exit 1; usage errors exit 2. Handles float32 tensors of static shape
 * only (others are refused by name). Single-threaded.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "epabi/ort_abi.h"

enum { CONSUMER_API = 24 };       /* the API whose functions and OrtEnvCreationOptions layout are used here */
enum { GRAPH_CAPTURE_API = 26 };  /* ONNX Runtime drives an EP's graph capture from 1.26 on */
enum { MAX_KV = 32, MAX_TENSORS = 16, MAX_RANK = 8 };

static const char kEpName[] = "EpAbiExecutionProvider";
static const char kEnvPrefix[] = "ep_factory.EpAbiExecutionProvider.";

struct kv {
    const char* key;
    const char* value;
};

struct args {
    const char* ort_library;
    const char* plugin;
    const char* model;
    struct kv env[MAX_KV];
    size_t n_env;
    bool env_given;
    struct kv options[MAX_KV];
    size_t n_options;
    bool options_given;
    int runs;
    int log_level;
};

struct tensor {
    char* name;
    float* data;
    size_t count;
    int64_t dims[MAX_RANK];
    size_t rank;
    OrtValue* value;
};

/* Everything the program creates, released by teardown() whatever step failed. */
struct app {
    const OrtApi* api;
    OrtEnv* env;
    bool registered;
    OrtSessionOptions* session_options;
    OrtSession* session;
    OrtMemoryInfo* cpu_memory;
    OrtIoBinding* binding;
    OrtRunOptions* run_options;
    struct tensor inputs[MAX_TENSORS];
    size_t n_inputs;
    struct tensor outputs[MAX_TENSORS];
    size_t n_outputs;
};

static bool ok(const struct app* a, OrtStatus* status, const char* step) {
    if (status == NULL) return true;
    fprintf(stderr, "error: %s: %s\n", step, a->api->GetErrorMessage(status));
    a->api->ReleaseStatus(status);
    return false;
}

static int usage(const char* message) {
    fprintf(stderr, "ort_consumer: %s\nusage: ort_consumer LIBONNXRUNTIME PLUGIN MODEL.onnx [--env KEY=VALUE]... "
                    "[--option KEY=VALUE]... [--runs N] [--log-level 0..4]\n", message);
    return 2;
}

/* Splits "KEY=VALUE" in place (argv strings are writable). */
static bool split_kv(char* text, struct kv* out) {
    char* eq = strchr(text, '=');
    if (eq == NULL || eq == text) return false;
    *eq = '\0';
    out->key = text;
    out->value = eq + 1;
    return true;
}

static int parse_args(int argc, char** argv, struct args* out) {
    memset(out, 0, sizeof *out);
    out->runs = 3;
    out->log_level = ORT_LOGGING_LEVEL_WARNING;
    int positional = 0;
    for (int i = 1; i < argc; ++i) {
        const char* arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(arg, "--env") == 0 || strcmp(arg, "--option") == 0) {
            bool env = arg[2] == 'e';
            struct kv* list = env ? out->env : out->options;
            size_t* n = env ? &out->n_env : &out->n_options;
            if (!has_value || *n == MAX_KV || !split_kv(argv[++i], &list[*n])) return usage("bad --env/--option");
            ++*n;
            if (env) out->env_given = true; else out->options_given = true;
        } else if (strcmp(arg, "--runs") == 0 && has_value) {
            out->runs = atoi(argv[++i]);
            if (out->runs < 1) return usage("--runs needs a positive count");
        } else if (strcmp(arg, "--log-level") == 0 && has_value) {
            out->log_level = atoi(argv[++i]);
            if (out->log_level < ORT_LOGGING_LEVEL_VERBOSE || out->log_level > ORT_LOGGING_LEVEL_FATAL)
                return usage("--log-level is 0 (verbose) to 4 (fatal)");
        } else if (arg[0] == '-') {
            return usage("unknown option");
        } else {
            const char** slots[] = {&out->ort_library, &out->plugin, &out->model};
            if (positional == 3) return usage("too many arguments");
            *slots[positional++] = arg;
        }
    }
    if (positional != 3) return usage("LIBONNXRUNTIME, PLUGIN and MODEL are required");
    if (!out->env_given) out->env[out->n_env++] = (struct kv){"min_num_runs_before_cuda_graph_capture", "1"};
    return 0;
}

/* "1.32.0" -> 32; -1 when the release string is not 1.N.x. */
static int api_of_release(const char* release) {
    if (release == NULL || strncmp(release, "1.", 2) != 0) return -1;
    return atoi(release + 2);
}

static const char* hardware_type_name(OrtHardwareDeviceType type) {
    return type == OrtHardwareDeviceType_CPU ? "CPU" : type == OrtHardwareDeviceType_GPU ? "GPU" : "NPU";
}

static void print_devices(const struct app* a, const OrtEpDevice* const* devices, size_t n) {
    const OrtApi* api = a->api;
    for (size_t i = 0; i < n; ++i) {
        const OrtHardwareDevice* hw = api->EpDevice_Device(devices[i]);
        printf("ep device %zu: %s (vendor %s) on %s hardware, vendor id 0x%04x, device id 0x%04x", i,
               api->EpDevice_EpName(devices[i]), api->EpDevice_EpVendor(devices[i]),
               hardware_type_name(api->HardwareDevice_Type(hw)), (unsigned)api->HardwareDevice_VendorId(hw),
               (unsigned)api->HardwareDevice_DeviceId(hw));
        const char* const* keys = NULL;
        const char* const* values = NULL;
        size_t count = 0;
        api->GetKeyValuePairs(api->EpDevice_EpMetadata(devices[i]), &keys, &values, &count);
        for (size_t k = 0; k < count; ++k) printf("%s %s=%s", k == 0 ? ";" : "", keys[k], values[k]);
        printf("\n");
    }
}

static bool create_env(struct app* a, const struct args* args) {
    const OrtApi* api = a->api;
    OrtKeyValuePairs* config = NULL;
    api->CreateKeyValuePairs(&config);
    for (size_t i = 0; i < args->n_env; ++i) {
        char key[256];
        snprintf(key, sizeof key, "%s%s", kEnvPrefix, args->env[i].key);
        api->AddKeyValuePair(config, key, args->env[i].value);
        printf("env default: %s=%s\n", key, args->env[i].value);
    }
    OrtEnvCreationOptions options;
    memset(&options, 0, sizeof options);
    options.version = CONSUMER_API;
    options.logging_severity_level = args->log_level;
    options.log_id = "ort_consumer";
    options.config_entries = config;   /* copied by ONNX Runtime */
    bool created = ok(a, api->CreateEnvWithOptions(&options, &a->env), "CreateEnvWithOptions");
    api->ReleaseKeyValuePairs(config);
    return created;
}

static bool print_assignment(const struct app* a) {
    const OrtApi* api = a->api;
    const OrtEpAssignedSubgraph* const* subgraphs = NULL;
    size_t n = 0;
    if (!ok(a, api->Session_GetEpGraphAssignmentInfo(a->session, &subgraphs, &n), "Session_GetEpGraphAssignmentInfo"))
        return false;
    for (size_t s = 0; s < n; ++s) {
        const char* ep = NULL;
        const OrtEpAssignedNode* const* nodes = NULL;
        size_t n_nodes = 0;
        if (!ok(a, api->EpAssignedSubgraph_GetEpName(subgraphs[s], &ep), "EpAssignedSubgraph_GetEpName") ||
            !ok(a, api->EpAssignedSubgraph_GetNodes(subgraphs[s], &nodes, &n_nodes), "EpAssignedSubgraph_GetNodes"))
            return false;
        for (size_t i = 0; i < n_nodes; ++i) {
            const char* name = NULL;
            if (!ok(a, api->EpAssignedNode_GetName(nodes[i], &name), "EpAssignedNode_GetName")) return false;
            printf("node %s: %s\n", name, ep);
        }
    }
    return true;
}

/* Name, static shape and a CPU buffer wrapped in an OrtValue for input (is_input) or output `index`. */
static bool make_tensor(struct app* a, bool is_input, size_t index, struct tensor* t) {
    const OrtApi* api = a->api;
    OrtAllocator* allocator = NULL;
    char* name = NULL;
    OrtTypeInfo* type_info = NULL;
    const OrtTensorTypeAndShapeInfo* info = NULL;
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    if (!ok(a, api->GetAllocatorWithDefaultOptions(&allocator), "GetAllocatorWithDefaultOptions")) return false;
    OrtStatus* st = is_input ? api->SessionGetInputName(a->session, index, allocator, &name)
                             : api->SessionGetOutputName(a->session, index, allocator, &name);
    if (!ok(a, st, "SessionGet{Input,Output}Name")) return false;
    t->name = strdup(name);
    ok(a, api->AllocatorFree(allocator, name), "AllocatorFree");
    if (t->name == NULL) return false;
    st = is_input ? api->SessionGetInputTypeInfo(a->session, index, &type_info)
                  : api->SessionGetOutputTypeInfo(a->session, index, &type_info);
    if (!ok(a, st, "SessionGet{Input,Output}TypeInfo")) return false;
    bool good = ok(a, api->CastTypeInfoToTensorInfo(type_info, &info), "CastTypeInfoToTensorInfo") && info != NULL &&
                ok(a, api->GetTensorElementType(info, &type), "GetTensorElementType") &&
                ok(a, api->GetDimensionsCount(info, &t->rank), "GetDimensionsCount") && t->rank <= MAX_RANK &&
                ok(a, api->GetDimensions(info, t->dims, t->rank), "GetDimensions");
    api->ReleaseTypeInfo(type_info);
    if (!good) {
        fprintf(stderr, "error: cannot read the type of '%s' (a tensor of rank <= %d expected)\n", t->name, MAX_RANK);
        return false;
    }
    if (type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        fprintf(stderr, "error: '%s' has element type %d; this example handles float32 only\n", t->name, (int)type);
        return false;
    }
    t->count = 1;
    for (size_t d = 0; d < t->rank; ++d) {
        if (t->dims[d] < 0) {
            fprintf(stderr, "error: '%s' has a dynamic dimension %zu; this example needs static shapes\n", t->name, d);
            return false;
        }
        t->count *= (size_t)t->dims[d];
    }
    t->data = calloc(t->count > 0 ? t->count : 1, sizeof(float));
    if (t->data == NULL) return false;
    return ok(a, api->CreateTensorWithDataAsOrtValue(a->cpu_memory, t->data, t->count * sizeof(float), t->dims,
                                                     t->rank, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &t->value),
              "CreateTensorWithDataAsOrtValue");
}

static void fill_inputs(struct app* a, int run) {
    for (size_t k = 0; k < a->n_inputs; ++k)
        for (size_t i = 0; i < a->inputs[k].count; ++i)
            a->inputs[k].data[i] = (float)((int)((7 * i + 5 * k + 3 * (size_t)run) % 17) - 8) / 8.0f;
}

static void print_output(const struct tensor* t, int run) {
    printf("output %s run %d shape [", t->name, run);
    for (size_t d = 0; d < t->rank; ++d) printf("%s%lld", d ? "," : "", (long long)t->dims[d]);
    printf("]:");
    for (size_t i = 0; i < t->count; ++i) printf(" %.9g", (double)t->data[i]);
    printf("\n");
}

static bool run_model(struct app* a, const struct args* args, int host_api) {
    const OrtApi* api = a->api;
    if (!create_env(a, args)) return false;
    if (!ok(a, api->RegisterExecutionProviderLibrary(a->env, "epabi", args->plugin), "RegisterExecutionProviderLibrary"))
        return false;
    a->registered = true;

    const OrtEpDevice* const* devices = NULL;
    size_t n_devices = 0;
    if (!ok(a, api->GetEpDevices(a->env, &devices, &n_devices), "GetEpDevices")) return false;
    print_devices(a, devices, n_devices);
    const OrtEpDevice* device = NULL;
    for (size_t i = 0; i < n_devices && device == NULL; ++i)
        if (strcmp(api->EpDevice_EpName(devices[i]), kEpName) == 0) device = devices[i];
    if (device == NULL) {
        fprintf(stderr, "error: no %s device (without an NVIDIA GPU, set EPABI_ALLOW_SOFTWARE_ADAPTER=1)\n", kEpName);
        return false;
    }

    struct kv options[MAX_KV];
    size_t n_options = args->n_options;
    memcpy(options, args->options, sizeof options);
    if (!args->options_given && host_api >= GRAPH_CAPTURE_API) options[n_options++] = (struct kv){"enable_cuda_graph", "1"};
    const char* keys[MAX_KV];
    const char* values[MAX_KV];
    for (size_t i = 0; i < n_options; ++i) {
        keys[i] = options[i].key;
        values[i] = options[i].value;
        printf("provider option: %s=%s\n", keys[i], values[i]);
    }
    if (!ok(a, api->CreateSessionOptions(&a->session_options), "CreateSessionOptions") ||
        !ok(a, api->AddSessionConfigEntry(a->session_options, "session.record_ep_graph_assignment_info", "1"),
            "AddSessionConfigEntry") ||
        !ok(a, api->SessionOptionsAppendExecutionProvider_V2(a->session_options, a->env, &device, 1, keys, values,
                                                             n_options),
            "SessionOptionsAppendExecutionProvider_V2") ||
        !ok(a, api->CreateSession(a->env, args->model, a->session_options, &a->session), "CreateSession") ||
        !print_assignment(a))
        return false;

    if (!ok(a, api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &a->cpu_memory), "CreateCpuMemoryInfo") ||
        !ok(a, api->SessionGetInputCount(a->session, &a->n_inputs), "SessionGetInputCount") ||
        !ok(a, api->SessionGetOutputCount(a->session, &a->n_outputs), "SessionGetOutputCount"))
        return false;
    if (a->n_inputs > MAX_TENSORS || a->n_outputs > MAX_TENSORS) {
        fprintf(stderr, "error: the model has more than %d inputs or outputs\n", MAX_TENSORS);
        a->n_inputs = a->n_outputs = 0;
        return false;
    }
    if (!ok(a, api->CreateIoBinding(a->session, &a->binding), "CreateIoBinding")) return false;
    for (size_t i = 0; i < a->n_inputs; ++i)
        if (!make_tensor(a, true, i, &a->inputs[i]) ||
            !ok(a, api->BindInput(a->binding, a->inputs[i].name, a->inputs[i].value), "BindInput"))
            return false;
    for (size_t i = 0; i < a->n_outputs; ++i)
        if (!make_tensor(a, false, i, &a->outputs[i]) ||
            !ok(a, api->BindOutput(a->binding, a->outputs[i].name, a->outputs[i].value), "BindOutput"))
            return false;

    if (!ok(a, api->CreateRunOptions(&a->run_options), "CreateRunOptions")) return false;
    for (int r = 0; r < args->runs; ++r) {
        fill_inputs(a, r);   /* in place: the bound buffers, which a captured graph replays on */
        if (!ok(a, api->RunWithBinding(a->session, a->run_options, a->binding), "RunWithBinding")) return false;
        for (size_t i = 0; i < a->n_outputs; ++i) print_output(&a->outputs[i], r);
    }
    return true;
}

static void free_tensors(const OrtApi* api, struct tensor* list, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (list[i].value != NULL) api->ReleaseValue(list[i].value);
        free(list[i].data);
        free(list[i].name);
    }
}

static void teardown(struct app* a) {
    const OrtApi* api = a->api;
    if (a->run_options != NULL) api->ReleaseRunOptions(a->run_options);
    if (a->binding != NULL) api->ReleaseIoBinding(a->binding);
    free_tensors(api, a->inputs, a->n_inputs);
    free_tensors(api, a->outputs, a->n_outputs);
    if (a->cpu_memory != NULL) api->ReleaseMemoryInfo(a->cpu_memory);
    if (a->session != NULL) api->ReleaseSession(a->session);
    if (a->session_options != NULL) api->ReleaseSessionOptions(a->session_options);
    /* only now, with no session of the plugin left */
    if (a->registered) ok(a, api->UnregisterExecutionProviderLibrary(a->env, "epabi"), "UnregisterExecutionProviderLibrary");
    if (a->env != NULL) api->ReleaseEnv(a->env);
}

int main(int argc, char** argv) {
    struct args args;
    int bad = parse_args(argc, argv, &args);
    if (bad != 0) return bad;

    /* ONNX Runtime stays loaded until the process exits: it keeps threads and static state. */
    void* library = dlopen(args.ort_library, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        fprintf(stderr, "error: dlopen %s: %s\n", args.ort_library, dlerror());
        return 1;
    }
    const OrtApiBase* (*get_api_base)(void) = NULL;
    void* symbol = dlsym(library, "OrtGetApiBase");
    memcpy(&get_api_base, &symbol, sizeof symbol);   /* object to function pointer, without a cast ISO C forbids */
    if (get_api_base == NULL) {
        fprintf(stderr, "error: %s exports no OrtGetApiBase\n", args.ort_library);
        return 1;
    }
    const OrtApiBase* base = get_api_base();
    const char* release = base->GetVersionString();
    int host_api = api_of_release(release);
    printf("onnxruntime %s\n", release);
    if (host_api < CONSUMER_API) {
        fprintf(stderr, "error: onnxruntime %s is older than 1.24, the first release with CreateEnvWithOptions\n",
                release);
        return 1;
    }
    struct app app;
    memset(&app, 0, sizeof app);
    app.api = base->GetApi(CONSUMER_API);
    if (app.api == NULL) {
        fprintf(stderr, "error: onnxruntime %s returned no API %d\n", release, CONSUMER_API);
        return 1;
    }
    bool good = run_model(&app, &args, host_api);
    teardown(&app);
    fflush(stdout);
    return good ? 0 : 1;
}
