/*
 * epabi/ort_abi.h - epabi's own declaration of the ONNX Runtime plugin execution provider C ABI.
 *
 * One declaration, two readers: the C plugin compiles against this file and the Python host feeds it
 * to cffi (python/epabi/_ffi.py strips the preprocessor lines). Therefore everything between the
 * include block and the final #endif must stay plain C declarations that cffi understands: no macros,
 * no inline functions, no conditional blocks.
 *
 * Layout rules (LP64: x86-64, aarch64): function tables are arrays of 8-byte pointers. Tables that
 * start with a uint32_t version field have 4 bytes of padding after it, so member k sits at byte 8*k.
 * Members are only ever appended. Each member line ends with its slot index and the ONNX Runtime API
 * version it appeared in ("since 1.N" = API N; "since vN" = the oldest numbered API versions); the
 * host reads those marks to decide which members a host of a given version may touch, and
 * tests/test_abi_layout.py checks every offset against the reference facts sheet.
 *
 * Source followed: ONNX Runtime 1.22-1.30 public headers (onnxruntime_c_api.h, onnxruntime_ep_c_api.h),
 * restated independently. OrtApi declares only the slots epabi calls or serves; the rest is reserved
 * padding named reserved_<first>_<last>.
 *
 * Windows: ORTCHAR_T is wchar_t and ORT_API_CALL is __stdcall there; both are irrelevant on the
 * 64-bit Linux targets this file is written for (see README, "Platforms").
 */
#ifndef EPABI_ORT_ABI_H
#define EPABI_ORT_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- versions --------------------------------------------------------------------------------- */

/* The newest API whose plugin-side layouts (OrtEp, OrtEpFactory, ...) this file declares in full. */
enum { EPABI_ORT_API_VERSION = 30 };
/* The newest API whose host-side tables (OrtApi, OrtEpApi) this file lays out, new slots as padding where
 * their declarations are not known: what the Python host can emulate. The plugin does not use it. */
enum { EPABI_ORT_HOST_API_VERSION = 32 };

/* ---- opaque handles (owned by whoever created them; see each Create/Release pair) ------------- */

typedef char ORTCHAR_T;
typedef struct OrtAllocator OrtAllocator;
typedef struct OrtApi OrtApi;
typedef struct OrtApiBase OrtApiBase;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
typedef struct OrtDataTransferImpl OrtDataTransferImpl;
typedef struct OrtDataType OrtDataType;
typedef struct OrtDeviceEpIncompatibilityDetails OrtDeviceEpIncompatibilityDetails;
typedef struct OrtEnv OrtEnv;
typedef struct OrtEp OrtEp;
typedef struct OrtEpApi OrtEpApi;
typedef struct OrtEpAssignedNode OrtEpAssignedNode;
typedef struct OrtEpAssignedSubgraph OrtEpAssignedSubgraph;
typedef struct OrtEpDevice OrtEpDevice;
typedef struct OrtEpFactory OrtEpFactory;
typedef struct OrtEpGraphSupportInfo OrtEpGraphSupportInfo;
typedef struct OrtEpProfilerImpl OrtEpProfilerImpl;
typedef struct OrtExternalInitializerInfo OrtExternalInitializerInfo;
typedef struct OrtExternalResourceImporterImpl OrtExternalResourceImporterImpl;
typedef struct OrtGraph OrtGraph;
typedef struct OrtGraphicsInteropConfig OrtGraphicsInteropConfig;
typedef struct OrtHardwareDevice OrtHardwareDevice;
typedef struct OrtIoBinding OrtIoBinding;
typedef struct OrtKernelContext OrtKernelContext;
typedef struct OrtKernelDef OrtKernelDef;
typedef struct OrtKernelDefBuilder OrtKernelDefBuilder;
typedef struct OrtKernelImpl OrtKernelImpl;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtKernelRegistry OrtKernelRegistry;
typedef struct OrtKeyValuePairs OrtKeyValuePairs;
typedef struct OrtLogger OrtLogger;
typedef struct OrtLoopKernelHelper OrtLoopKernelHelper;
typedef struct OrtMemoryDevice OrtMemoryDevice;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtModel OrtModel;
typedef struct OrtModelEditorApi OrtModelEditorApi;
typedef struct OrtModelMetadata OrtModelMetadata;
typedef struct OrtNode OrtNode;
typedef struct OrtNodeComputeContext OrtNodeComputeContext;
typedef struct OrtNodeComputeInfo OrtNodeComputeInfo;
typedef struct OrtOpAttr OrtOpAttr;
typedef struct OrtOpSchema OrtOpSchema;
typedef struct OrtOpSchemaTypeConstraint OrtOpSchemaTypeConstraint;
typedef struct OrtProfilingEvent OrtProfilingEvent;
typedef struct OrtProfilingEventsContainer OrtProfilingEventsContainer;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtScanKernelHelper OrtScanKernelHelper;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtSharedPrePackedWeightCache OrtSharedPrePackedWeightCache;
typedef struct OrtStatus OrtStatus;
typedef struct OrtSyncNotificationImpl OrtSyncNotificationImpl;
typedef struct OrtSyncStream OrtSyncStream;
typedef struct OrtSyncStreamImpl OrtSyncStreamImpl;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtThreadingOptions OrtThreadingOptions;
typedef struct OrtTypeInfo OrtTypeInfo;
typedef struct OrtValue OrtValue;
typedef struct OrtValueInfo OrtValueInfo;

/* Made by a kernel-registry plugin for KernelRegistry_AddKernel; the host calls it once per node it assigns to
 * that kernel, with the state the plugin registered and the node's kernel info (since 1.24). */
typedef OrtStatus* (*OrtKernelCreateFunc)(void* kernel_create_func_state, const OrtKernelInfo* info, OrtKernelImpl** kernel_out);
/* A pointer-sized callback that epabi passes through but never calls; declared without parameters. */
typedef void (*OrtExperimentalFnPtr)(void);

/* ---- enums (values fixed by ONNX Runtime; a C enum is 4 bytes) ------------------------------- */

typedef enum OrtErrorCode {
    ORT_OK = 0, ORT_FAIL = 1, ORT_INVALID_ARGUMENT = 2, ORT_NO_SUCHFILE = 3, ORT_NO_MODEL = 4,
    ORT_ENGINE_ERROR = 5, ORT_RUNTIME_EXCEPTION = 6, ORT_INVALID_PROTOBUF = 7, ORT_MODEL_LOADED = 8,
    ORT_NOT_IMPLEMENTED = 9, ORT_INVALID_GRAPH = 10, ORT_EP_FAIL = 11, ORT_MODEL_LOAD_CANCELED = 12,
    ORT_MODEL_REQUIRES_COMPILATION = 13, ORT_NOT_FOUND = 14, ORT_DEVICE_RESET = 15
} OrtErrorCode;

typedef enum OrtHardwareDeviceType {
    OrtHardwareDeviceType_CPU = 0, OrtHardwareDeviceType_GPU = 1, OrtHardwareDeviceType_NPU = 2
} OrtHardwareDeviceType;

typedef enum OrtMemoryInfoDeviceType {
    OrtMemoryInfoDeviceType_CPU = 0, OrtMemoryInfoDeviceType_GPU = 1, OrtMemoryInfoDeviceType_FPGA = 2,
    OrtMemoryInfoDeviceType_NPU = 3
} OrtMemoryInfoDeviceType;

typedef enum OrtDeviceMemoryType {
    OrtDeviceMemoryType_DEFAULT = 0, OrtDeviceMemoryType_HOST_ACCESSIBLE = 5
} OrtDeviceMemoryType;

typedef enum OrtAllocatorType {
    OrtInvalidAllocator = -1, OrtDeviceAllocator = 0, OrtArenaAllocator = 1, OrtReadOnlyAllocator = 2
} OrtAllocatorType;

typedef enum OrtMemType {
    OrtMemTypeCPUInput = -2, OrtMemTypeCPUOutput = -1, OrtMemTypeCPU = -1, OrtMemTypeDefault = 0
} OrtMemType;

typedef enum ONNXTensorElementDataType {
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 = 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 = 3,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16 = 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16 = 5,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 = 6, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 = 7,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING = 8, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL = 9,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 = 10, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE = 11,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32 = 12, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64 = 13,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64 = 14, ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128 = 15,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 = 16, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN = 17,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ = 18, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2 = 19,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ = 20, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4 = 21,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4 = 22, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT4E2M1 = 23,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT2 = 24, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT2 = 25,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E8M0 = 26
} ONNXTensorElementDataType;

typedef enum ONNXType {
    ONNX_TYPE_UNKNOWN = 0, ONNX_TYPE_TENSOR = 1, ONNX_TYPE_SEQUENCE = 2, ONNX_TYPE_MAP = 3,
    ONNX_TYPE_OPAQUE = 4, ONNX_TYPE_SPARSETENSOR = 5, ONNX_TYPE_OPTIONAL = 6
} ONNXType;

typedef enum OrtGraphCaptureNodeAssignmentPolicy {
    OrtGraphCaptureNodeAssignmentPolicy_ALL_NODES_ON_EP = 0,
    OrtGraphCaptureNodeAssignmentPolicy_ALLOW_CPU_FOR_SHAPES = 1
} OrtGraphCaptureNodeAssignmentPolicy;

typedef enum OrtLoggingLevel {
    ORT_LOGGING_LEVEL_VERBOSE = 0, ORT_LOGGING_LEVEL_INFO = 1, ORT_LOGGING_LEVEL_WARNING = 2,
    ORT_LOGGING_LEVEL_ERROR = 3, ORT_LOGGING_LEVEL_FATAL = 4
} OrtLoggingLevel;

typedef enum OrtEpDataLayout { OrtEpDataLayout_NCHW = 0, OrtEpDataLayout_NHWC = 1 } OrtEpDataLayout;

typedef enum OrtOpAttrType {
    ORT_OP_ATTR_UNDEFINED = 0, ORT_OP_ATTR_INT = 1, ORT_OP_ATTR_INTS = 2, ORT_OP_ATTR_FLOAT = 3,
    ORT_OP_ATTR_FLOATS = 4, ORT_OP_ATTR_STRING = 5, ORT_OP_ATTR_STRINGS = 6, ORT_OP_ATTR_GRAPH = 7,
    ORT_OP_ATTR_TENSOR = 8
} OrtOpAttrType;

typedef enum OrtCompiledModelCompatibility {
    OrtCompiledModelCompatibility_EP_NOT_APPLICABLE = 0,
    OrtCompiledModelCompatibility_EP_SUPPORTED_OPTIMAL = 1,
    OrtCompiledModelCompatibility_EP_SUPPORTED_PREFER_RECOMPILATION = 2,
    OrtCompiledModelCompatibility_EP_UNSUPPORTED = 3
} OrtCompiledModelCompatibility;

typedef enum OrtWeightlessSupport {
    OrtWeightlessSupport_NONE = 0, OrtWeightlessSupport_EXTERNAL_ONLY = 1, OrtWeightlessSupport_ALL = 2
} OrtWeightlessSupport;

typedef enum OrtProfilingEventCategory {
    OrtProfilingEventCategory_SESSION = 0, OrtProfilingEventCategory_NODE = 1,
    OrtProfilingEventCategory_KERNEL = 2, OrtProfilingEventCategory_API = 3
} OrtProfilingEventCategory;

/* ---- plain data structs ------------------------------------------------------------------------ */

/* A host's sink for log messages (CreateEnvWithOptions); param is the custom_logging_param given with it. */
typedef void (*OrtLoggingFunction)(void* param, OrtLoggingLevel severity, const char* category, const char* logid,
                                   const char* code_location, const char* message);

/* Argument of OrtApi::CreateEnvWithOptions (since 1.24; 48 bytes). version must be 24 or more (the layout the
 * caller fills: ORT 1.24.4 to 1.32.0 refuse less); logging_severity_level an OrtLoggingLevel; log_id non-NULL;
 * the rest may be NULL. config_entries (copied by ORT) are the environment's config entries, which plugins read
 * with OrtEpApi::GetEnvConfigEntries; "ep_factory.<EP name>.<key>" keys are environment-level EP options. */
typedef struct OrtEnvCreationOptions {
    uint32_t version;
    int32_t logging_severity_level;
    const char* log_id;
    OrtLoggingFunction custom_logging_function;
    void* custom_logging_param;
    const OrtThreadingOptions* threading_options;
    const OrtKeyValuePairs* config_entries;
} OrtEnvCreationOptions;

/* Passed by the plugin to EpGraphSupportInfo_AddNodesToFuse; 8 bytes (since 1.23). */
typedef struct OrtNodeFusionOptions {
    uint32_t ort_version_supported;
    bool drop_constant_initializers;
} OrtNodeFusionOptions;

/* Filled by OrtEp::GetAvailableResource (since 1.26); 56 bytes. */
typedef struct OrtResourceCount {
    uint32_t kind;
    uint32_t reserved;
    union { uint64_t total_bytes; uint64_t reserved_words[6]; } value;
} OrtResourceCount;

/* ---- host-implemented tables ------------------------------------------------------------------ */

struct OrtApiBase {
    const OrtApi* (*GetApi)(uint32_t version); /* 0 since v1 */
    const char* (*GetVersionString)(void); /* 1 since v1 */
};

struct OrtApi {
    OrtStatus* (*CreateStatus)(OrtErrorCode code, const char* msg); /* 0 since v1 */
    OrtErrorCode (*GetErrorCode)(const OrtStatus* status); /* 1 since v1 */
    const char* (*GetErrorMessage)(const OrtStatus* status); /* 2 since v1 */
    void* reserved_3_6[4];
    OrtStatus* (*CreateSession)(const OrtEnv* env, const ORTCHAR_T* model_path, const OrtSessionOptions* options, OrtSession** out); /* 7 since v1 */
    void* reserved_8_9[2];
    OrtStatus* (*CreateSessionOptions)(OrtSessionOptions** options); /* 10 since v1 */
    void* reserved_11_29[19];
    OrtStatus* (*SessionGetInputCount)(const OrtSession* session, size_t* out); /* 30 since v1 */
    OrtStatus* (*SessionGetOutputCount)(const OrtSession* session, size_t* out); /* 31 since v1 */
    void* reserved_32_32[1];
    OrtStatus* (*SessionGetInputTypeInfo)(const OrtSession* session, size_t index, OrtTypeInfo** type_info); /* 33 since v1 */
    OrtStatus* (*SessionGetOutputTypeInfo)(const OrtSession* session, size_t index, OrtTypeInfo** type_info); /* 34 since v1 */
    void* reserved_35_35[1];
    OrtStatus* (*SessionGetInputName)(const OrtSession* session, size_t index, OrtAllocator* allocator, char** value); /* 36 since v1 */
    OrtStatus* (*SessionGetOutputName)(const OrtSession* session, size_t index, OrtAllocator* allocator, char** value); /* 37 since v1 */
    void* reserved_38_38[1];
    OrtStatus* (*CreateRunOptions)(OrtRunOptions** out); /* 39 since v1 */
    void* reserved_40_47[8];
    OrtStatus* (*CreateTensorAsOrtValue)(OrtAllocator* allocator, const int64_t* shape, size_t shape_len, ONNXTensorElementDataType type, OrtValue** out); /* 48 since v1 */
    OrtStatus* (*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo* info, void* p_data, size_t p_data_len, const int64_t* shape, size_t shape_len, ONNXTensorElementDataType type, OrtValue** out); /* 49 since v1 */
    OrtStatus* (*IsTensor)(const OrtValue* value, int* out); /* 50 since v1 */
    OrtStatus* (*GetTensorMutableData)(OrtValue* value, void** out); /* 51 since v1 */
    void* reserved_52_54[3];
    OrtStatus* (*CastTypeInfoToTensorInfo)(const OrtTypeInfo* type_info, const OrtTensorTypeAndShapeInfo** out); /* 55 since v1 */
    OrtStatus* (*GetOnnxTypeFromTypeInfo)(const OrtTypeInfo* type_info, enum ONNXType* out); /* 56 since v1 */
    OrtStatus* (*CreateTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo** out); /* 57 since v1 */
    OrtStatus* (*SetTensorElementType)(OrtTensorTypeAndShapeInfo* info, enum ONNXTensorElementDataType type); /* 58 since v1 */
    OrtStatus* (*SetDimensions)(OrtTensorTypeAndShapeInfo* info, const int64_t* dim_values, size_t dim_count); /* 59 since v1 */
    OrtStatus* (*GetTensorElementType)(const OrtTensorTypeAndShapeInfo* info, enum ONNXTensorElementDataType* out); /* 60 since v1 */
    OrtStatus* (*GetDimensionsCount)(const OrtTensorTypeAndShapeInfo* info, size_t* out); /* 61 since v1 */
    OrtStatus* (*GetDimensions)(const OrtTensorTypeAndShapeInfo* info, int64_t* dim_values, size_t dim_values_length); /* 62 since v1 */
    OrtStatus* (*GetSymbolicDimensions)(const OrtTensorTypeAndShapeInfo* info, const char* dim_params[], size_t dim_params_length); /* 63 since v1 */
    OrtStatus* (*GetTensorShapeElementCount)(const OrtTensorTypeAndShapeInfo* info, size_t* out); /* 64 since v1 */
    OrtStatus* (*GetTensorTypeAndShape)(const OrtValue* value, OrtTensorTypeAndShapeInfo** out); /* 65 since v1 */
    OrtStatus* (*GetTypeInfo)(const OrtValue* value, OrtTypeInfo** out); /* 66 since v1 */
    OrtStatus* (*GetValueType)(const OrtValue* value, enum ONNXType* out); /* 67 since v1 */
    OrtStatus* (*CreateMemoryInfo)(const char* name, enum OrtAllocatorType type, int id, enum OrtMemType mem_type, OrtMemoryInfo** out); /* 68 since v1 */
    OrtStatus* (*CreateCpuMemoryInfo)(enum OrtAllocatorType type, enum OrtMemType mem_type, OrtMemoryInfo** out); /* 69 since v1 */
    OrtStatus* (*CompareMemoryInfo)(const OrtMemoryInfo* info1, const OrtMemoryInfo* info2, int* out); /* 70 since v1 */
    OrtStatus* (*MemoryInfoGetName)(const OrtMemoryInfo* ptr, const char** out); /* 71 since v1 */
    OrtStatus* (*MemoryInfoGetId)(const OrtMemoryInfo* ptr, int* out); /* 72 since v1 */
    OrtStatus* (*MemoryInfoGetMemType)(const OrtMemoryInfo* ptr, OrtMemType* out); /* 73 since v1 */
    OrtStatus* (*MemoryInfoGetType)(const OrtMemoryInfo* ptr, OrtAllocatorType* out); /* 74 since v1 */
    OrtStatus* (*AllocatorAlloc)(OrtAllocator* ort_allocator, size_t size, void** out); /* 75 since v1 */
    OrtStatus* (*AllocatorFree)(OrtAllocator* ort_allocator, void* p); /* 76 since v1 */
    OrtStatus* (*AllocatorGetInfo)(const OrtAllocator* ort_allocator, const OrtMemoryInfo** out); /* 77 since v1 */
    OrtStatus* (*GetAllocatorWithDefaultOptions)(OrtAllocator** out); /* 78 since v1 */
    void* reserved_79_84[6];
    OrtStatus* (*KernelInfoGetAttribute_float)(const OrtKernelInfo* info, const char* name, float* out); /* 85 since v1 */
    OrtStatus* (*KernelInfoGetAttribute_int64)(const OrtKernelInfo* info, const char* name, int64_t* out); /* 86 since v1 */
    OrtStatus* (*KernelInfoGetAttribute_string)(const OrtKernelInfo* info, const char* name, char* out, size_t* size); /* 87 since v1 */
    OrtStatus* (*KernelContext_GetInputCount)(const OrtKernelContext* context, size_t* out); /* 88 since v1 */
    OrtStatus* (*KernelContext_GetOutputCount)(const OrtKernelContext* context, size_t* out); /* 89 since v1 */
    OrtStatus* (*KernelContext_GetInput)(const OrtKernelContext* context, size_t index, const OrtValue** out); /* 90 since v1 */
    OrtStatus* (*KernelContext_GetOutput)(OrtKernelContext* context, size_t index, const int64_t* dim_values, size_t dim_count, OrtValue** out); /* 91 since v1 */
    void (*ReleaseEnv)(OrtEnv*); /* 92 since v1 */
    void (*ReleaseStatus)(OrtStatus*); /* 93 since v1 */
    void (*ReleaseMemoryInfo)(OrtMemoryInfo*); /* 94 since v1 */
    void (*ReleaseSession)(OrtSession*); /* 95 since v1 */
    void (*ReleaseValue)(OrtValue*); /* 96 since v1 */
    void (*ReleaseRunOptions)(OrtRunOptions*); /* 97 since v1 */
    void (*ReleaseTypeInfo)(OrtTypeInfo*); /* 98 since v1 */
    void (*ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo*); /* 99 since v1 */
    void (*ReleaseSessionOptions)(OrtSessionOptions*); /* 100 since v1 */
    void* reserved_101_111[11];
    OrtStatus* (*ModelMetadataGetProducerName)(const OrtModelMetadata* model_metadata, OrtAllocator* allocator, char** value); /* 112 since v2 */
    OrtStatus* (*ModelMetadataGetGraphName)(const OrtModelMetadata* model_metadata, OrtAllocator* allocator, char** value); /* 113 since v2 */
    OrtStatus* (*ModelMetadataGetDomain)(const OrtModelMetadata* model_metadata, OrtAllocator* allocator, char** value); /* 114 since v2 */
    OrtStatus* (*ModelMetadataGetDescription)(const OrtModelMetadata* model_metadata, OrtAllocator* allocator, char** value); /* 115 since v2 */
    OrtStatus* (*ModelMetadataLookupCustomMetadataMap)(const OrtModelMetadata* model_metadata, OrtAllocator* allocator, const char* key, char** value); /* 116 since v2 */
    OrtStatus* (*ModelMetadataGetVersion)(const OrtModelMetadata* model_metadata, int64_t* value); /* 117 since v2 */
    void (*ReleaseModelMetadata)(OrtModelMetadata*); /* 118 since v2 */
    void* reserved_119_122[4];
    OrtStatus* (*ModelMetadataGetCustomMetadataMapKeys)(const OrtModelMetadata* model_metadata, OrtAllocator* allocator, char*** keys, int64_t* num_keys); /* 123 since v3 */
    void* reserved_124_129[6];
    OrtStatus* (*AddSessionConfigEntry)(OrtSessionOptions* options, const char* config_key, const char* config_value); /* 130 since v5 */
    void* reserved_131_131[1];
    void (*ReleaseAllocator)(OrtAllocator*); /* 132 since v5 */
    OrtStatus* (*RunWithBinding)(OrtSession* session, const OrtRunOptions* run_options, const OrtIoBinding* binding_ptr); /* 133 since v5 */
    OrtStatus* (*CreateIoBinding)(OrtSession* session, OrtIoBinding** out); /* 134 since v5 */
    void (*ReleaseIoBinding)(OrtIoBinding*); /* 135 since v5 */
    OrtStatus* (*BindInput)(OrtIoBinding* binding_ptr, const char* name, const OrtValue* val_ptr); /* 136 since v5 */
    OrtStatus* (*BindOutput)(OrtIoBinding* binding_ptr, const char* name, const OrtValue* val_ptr); /* 137 since v5 */
    void* reserved_138_157[20];
    OrtStatus* (*ModelMetadataGetGraphDescription)(const OrtModelMetadata* model_metadata, OrtAllocator* allocator, char** value); /* 158 since v7 */
    void* reserved_159_161[3];
    OrtStatus* (*KernelInfoGetAttributeArray_float)(const OrtKernelInfo* info, const char* name, float* out, size_t* size); /* 162 since v8 */
    OrtStatus* (*KernelInfoGetAttributeArray_int64)(const OrtKernelInfo* info, const char* name, int64_t* out, size_t* size); /* 163 since v8 */
    void* reserved_164_164[1];
    OrtStatus* (*AddRunConfigEntry)(OrtRunOptions* options, const char* config_key, const char* config_value); /* 165 since v8 */
    void* reserved_166_192[27];
    OrtStatus* (*KernelContext_GetGPUComputeStream)(const OrtKernelContext* context, void** out); /* 193 since v10 */
    OrtStatus* (*GetTensorMemoryInfo)(const OrtValue* value, const OrtMemoryInfo** mem_info); /* 194 since v10 */
    void* reserved_195_216[22];
    OrtStatus* (*CopyKernelInfo)(const OrtKernelInfo* info, OrtKernelInfo** info_copy); /* 217 since 1.12 */
    void (*ReleaseKernelInfo)(OrtKernelInfo*); /* 218 since 1.12 */
    void* reserved_219_224[6];
    void (*MemoryInfoGetDeviceType)(const OrtMemoryInfo* ptr, OrtMemoryInfoDeviceType* out); /* 225 since 1.14 */
    void* reserved_226_229[4];
    OrtStatus* (*KernelInfo_GetInputCount)(const OrtKernelInfo* info, size_t* out); /* 230 since 1.14 */
    OrtStatus* (*KernelInfo_GetOutputCount)(const OrtKernelInfo* info, size_t* out); /* 231 since 1.14 */
    OrtStatus* (*KernelInfo_GetInputName)(const OrtKernelInfo* info, size_t index, char* out, size_t* size); /* 232 since 1.14 */
    OrtStatus* (*KernelInfo_GetOutputName)(const OrtKernelInfo* info, size_t index, char* out, size_t* size); /* 233 since 1.14 */
    OrtStatus* (*KernelInfo_GetInputTypeInfo)(const OrtKernelInfo* info, size_t index, OrtTypeInfo** type_info); /* 234 since 1.14 */
    OrtStatus* (*KernelInfo_GetOutputTypeInfo)(const OrtKernelInfo* info, size_t index, OrtTypeInfo** type_info); /* 235 since 1.14 */
    OrtStatus* (*KernelInfoGetAttribute_tensor)(const OrtKernelInfo* info, const char* name, OrtAllocator* allocator, OrtValue** out); /* 236 since v14 */
    OrtStatus* (*HasSessionConfigEntry)(const OrtSessionOptions* options, const char* config_key, int* out); /* 237 since 1.14 */
    OrtStatus* (*GetSessionConfigEntry)(const OrtSessionOptions* options, const char* config_key, char* config_value, size_t* size); /* 238 since 1.14 */
    void* reserved_239_243[5];
    OrtStatus* (*KernelInfo_GetNodeName)(const OrtKernelInfo* info, char* out, size_t* size); /* 244 since 1.15 */
    OrtStatus* (*KernelInfo_GetLogger)(const OrtKernelInfo* info, const OrtLogger** logger); /* 245 since 1.15 */
    OrtStatus* (*KernelContext_GetLogger)(const OrtKernelContext* context, const OrtLogger** logger); /* 246 since 1.15 */
    OrtStatus* (*Logger_LogMessage)(const OrtLogger* logger, OrtLoggingLevel log_severity_level, const char* message, const ORTCHAR_T* file_path, int line_number, const char* func_name); /* 247 since 1.15 */
    OrtStatus* (*Logger_GetLoggingSeverityLevel)(const OrtLogger* logger, OrtLoggingLevel* out); /* 248 since 1.15 */
    OrtStatus* (*KernelInfoGetConstantInput_tensor)(const OrtKernelInfo* info, size_t index, int* is_constant, const OrtValue** out); /* 249 since 1.15 */
    void* reserved_250_252[3];
    OrtStatus* (*KernelContext_GetAllocator)(const OrtKernelContext* context, const OrtMemoryInfo* mem_info, OrtAllocator** out); /* 253 since 1.15 */
    void* reserved_254_264[11];
    OrtStatus* (*KernelContext_GetResource)(const OrtKernelContext* context, int resource_version, int resource_id, void** resource); /* 265 since 1.16 */
    void* reserved_266_271[6];
    OrtStatus* (*ReadOpAttr)(const OrtOpAttr* op_attr, OrtOpAttrType type, void* data, size_t len, size_t* out); /* 272 since 1.17 */
    void* reserved_273_273[1];
    OrtStatus* (*KernelContext_ParallelFor)(const OrtKernelContext* context, void (*fn)(void*, size_t), size_t total, size_t num_batch, void* usr_data); /* 274 since 1.17 */
    void* reserved_275_276[2];
    OrtStatus* (*KernelContext_GetScratchBuffer)(const OrtKernelContext* context, const OrtMemoryInfo* mem_info, size_t count_or_bytes, void** out); /* 277 since 1.18 */
    OrtStatus* (*KernelInfoGetAllocator)(const OrtKernelInfo* info, OrtMemType mem_type, OrtAllocator** out); /* 278 since 1.18 */
    void* reserved_279_284[6];
    void (*ReleaseValueInfo)(OrtValueInfo*); /* 285 since 1.22 */
    void (*ReleaseNode)(OrtNode*); /* 286 since 1.22 */
    void (*ReleaseGraph)(OrtGraph*); /* 287 since 1.22 */
    void (*ReleaseModel)(OrtModel*); /* 288 since 1.22 */
    OrtStatus* (*GetValueInfoName)(const OrtValueInfo* value_info, const char** name); /* 289 since 1.22 */
    OrtStatus* (*GetValueInfoTypeInfo)(const OrtValueInfo* value_info, const OrtTypeInfo** type_info); /* 290 since 1.22 */
    const OrtModelEditorApi* (*GetModelEditorApi)(void); /* 291 since 1.22 */
    void* reserved_292_294[3];
    void (*CreateKeyValuePairs)(OrtKeyValuePairs** out); /* 295 since 1.22 */
    void (*AddKeyValuePair)(OrtKeyValuePairs* kvps, const char* key, const char* value); /* 296 since 1.22 */
    const char* (*GetKeyValue)(const OrtKeyValuePairs* kvps, const char* key); /* 297 since 1.22 */
    void (*GetKeyValuePairs)(const OrtKeyValuePairs* kvps, const char* const** keys, const char* const** values, size_t* num_entries); /* 298 since 1.22 */
    void (*RemoveKeyValuePair)(OrtKeyValuePairs* kvps, const char* key); /* 299 since 1.22 */
    void (*ReleaseKeyValuePairs)(OrtKeyValuePairs*); /* 300 since 1.22 */
    OrtStatus* (*RegisterExecutionProviderLibrary)(OrtEnv* env, const char* registration_name, const ORTCHAR_T* path); /* 301 since 1.22 */
    OrtStatus* (*UnregisterExecutionProviderLibrary)(OrtEnv* env, const char* registration_name); /* 302 since 1.22 */
    OrtStatus* (*GetEpDevices)(const OrtEnv* env, const OrtEpDevice* const** ep_devices, size_t* num_ep_devices); /* 303 since 1.22 */
    OrtStatus* (*SessionOptionsAppendExecutionProvider_V2)(OrtSessionOptions* session_options, OrtEnv* env, const OrtEpDevice* const* ep_devices, size_t num_ep_devices, const char* const* ep_option_keys, const char* const* ep_option_vals, size_t num_ep_options); /* 304 since 1.22 */
    void* reserved_305_306[2];
    OrtHardwareDeviceType (*HardwareDevice_Type)(const OrtHardwareDevice* device); /* 307 since 1.22 */
    uint32_t (*HardwareDevice_VendorId)(const OrtHardwareDevice* device); /* 308 since 1.22 */
    const char* (*HardwareDevice_Vendor)(const OrtHardwareDevice* device); /* 309 since 1.22 */
    uint32_t (*HardwareDevice_DeviceId)(const OrtHardwareDevice* device); /* 310 since 1.22 */
    const OrtKeyValuePairs* (*HardwareDevice_Metadata)(const OrtHardwareDevice* device); /* 311 since 1.22 */
    const char* (*EpDevice_EpName)(const OrtEpDevice* ep_device); /* 312 since 1.22 */
    const char* (*EpDevice_EpVendor)(const OrtEpDevice* ep_device); /* 313 since 1.22 */
    const OrtKeyValuePairs* (*EpDevice_EpMetadata)(const OrtEpDevice* ep_device); /* 314 since 1.22 */
    const OrtKeyValuePairs* (*EpDevice_EpOptions)(const OrtEpDevice* ep_device); /* 315 since 1.22 */
    const OrtHardwareDevice* (*EpDevice_Device)(const OrtEpDevice* ep_device); /* 316 since 1.22 */
    const OrtEpApi* (*GetEpApi)(void); /* 317 since 1.22 */
    OrtStatus* (*GetTensorSizeInBytes)(const OrtValue* ort_value, size_t* size); /* 318 since 1.23 */
    OrtStatus* (*AllocatorGetStats)(const OrtAllocator* ort_allocator, OrtKeyValuePairs** out); /* 319 since 1.23 */
    OrtStatus* (*CreateMemoryInfo_V2)(const char* name, enum OrtMemoryInfoDeviceType device_type, uint32_t vendor_id, int32_t device_id, enum OrtDeviceMemoryType mem_type, size_t alignment, enum OrtAllocatorType allocator_type, OrtMemoryInfo** out); /* 320 since 1.23 */
    OrtDeviceMemoryType (*MemoryInfoGetDeviceMemType)(const OrtMemoryInfo* ptr); /* 321 since 1.23 */
    uint32_t (*MemoryInfoGetVendorId)(const OrtMemoryInfo* ptr); /* 322 since 1.23 */
    OrtStatus* (*ValueInfo_GetValueProducer)(const OrtValueInfo* value_info, const OrtNode** producer_node, size_t* producer_output_index); /* 323 since 1.23 */
    OrtStatus* (*ValueInfo_GetValueNumConsumers)(const OrtValueInfo* value_info, size_t* num_consumers); /* 324 since 1.23 */
    OrtStatus* (*ValueInfo_GetValueConsumers)(const OrtValueInfo* value_info, const OrtNode** nodes, int64_t* input_indices, size_t num_consumers); /* 325 since 1.23 */
    OrtStatus* (*ValueInfo_GetInitializerValue)(const OrtValueInfo* value_info, const OrtValue** initializer_value); /* 326 since 1.23 */
    OrtStatus* (*ValueInfo_GetExternalInitializerInfo)(const OrtValueInfo* value_info, OrtExternalInitializerInfo** info); /* 327 since 1.23 */
    OrtStatus* (*ValueInfo_IsRequiredGraphInput)(const OrtValueInfo* value_info, bool* is_required_graph_input); /* 328 since 1.23 */
    OrtStatus* (*ValueInfo_IsOptionalGraphInput)(const OrtValueInfo* value_info, bool* is_optional_graph_input); /* 329 since 1.23 */
    OrtStatus* (*ValueInfo_IsGraphOutput)(const OrtValueInfo* value_info, bool* is_graph_output); /* 330 since 1.23 */
    OrtStatus* (*ValueInfo_IsConstantInitializer)(const OrtValueInfo* value_info, bool* is_constant_initializer); /* 331 since 1.23 */
    OrtStatus* (*ValueInfo_IsFromOuterScope)(const OrtValueInfo* value_info, bool* is_from_outer_scope); /* 332 since 1.23 */
    OrtStatus* (*Graph_GetName)(const OrtGraph* graph, const char** graph_name); /* 333 since 1.23 */
    OrtStatus* (*Graph_GetModelPath)(const OrtGraph* graph, const ORTCHAR_T** model_path); /* 334 since 1.23 */
    OrtStatus* (*Graph_GetOnnxIRVersion)(const OrtGraph* graph, int64_t* onnx_ir_version); /* 335 since 1.23 */
    OrtStatus* (*Graph_GetNumOperatorSets)(const OrtGraph* graph, size_t* num_operator_sets); /* 336 since 1.23 */
    OrtStatus* (*Graph_GetOperatorSets)(const OrtGraph* graph, const char** domains, int64_t* opset_versions, size_t num_operator_sets); /* 337 since 1.23 */
    OrtStatus* (*Graph_GetNumInputs)(const OrtGraph* graph, size_t* num_inputs); /* 338 since 1.23 */
    OrtStatus* (*Graph_GetInputs)(const OrtGraph* graph, const OrtValueInfo** inputs, size_t num_inputs); /* 339 since 1.23 */
    OrtStatus* (*Graph_GetNumOutputs)(const OrtGraph* graph, size_t* num_outputs); /* 340 since 1.23 */
    OrtStatus* (*Graph_GetOutputs)(const OrtGraph* graph, const OrtValueInfo** outputs, size_t num_outputs); /* 341 since 1.23 */
    OrtStatus* (*Graph_GetNumInitializers)(const OrtGraph* graph, size_t* num_initializers); /* 342 since 1.23 */
    OrtStatus* (*Graph_GetInitializers)(const OrtGraph* graph, const OrtValueInfo** initializers, size_t num_initializers); /* 343 since 1.23 */
    OrtStatus* (*Graph_GetNumNodes)(const OrtGraph* graph, size_t* num_nodes); /* 344 since 1.23 */
    OrtStatus* (*Graph_GetNodes)(const OrtGraph* graph, const OrtNode** nodes, size_t num_nodes); /* 345 since 1.23 */
    OrtStatus* (*Graph_GetParentNode)(const OrtGraph* graph, const OrtNode** node); /* 346 since 1.23 */
    OrtStatus* (*Graph_GetGraphView)(const OrtGraph* src_graph, const OrtNode** nodes, size_t num_nodes, OrtGraph** dst_graph); /* 347 since 1.23 */
    OrtStatus* (*Node_GetId)(const OrtNode* node, size_t* node_id); /* 348 since 1.23 */
    OrtStatus* (*Node_GetName)(const OrtNode* node, const char** node_name); /* 349 since 1.23 */
    OrtStatus* (*Node_GetOperatorType)(const OrtNode* node, const char** operator_type); /* 350 since 1.23 */
    OrtStatus* (*Node_GetDomain)(const OrtNode* node, const char** domain_name); /* 351 since 1.23 */
    OrtStatus* (*Node_GetSinceVersion)(const OrtNode* node, int* since_version); /* 352 since 1.23 */
    OrtStatus* (*Node_GetNumInputs)(const OrtNode* node, size_t* num_inputs); /* 353 since 1.23 */
    OrtStatus* (*Node_GetInputs)(const OrtNode* node, const OrtValueInfo** inputs, size_t num_inputs); /* 354 since 1.23 */
    OrtStatus* (*Node_GetNumOutputs)(const OrtNode* node, size_t* num_outputs); /* 355 since 1.23 */
    OrtStatus* (*Node_GetOutputs)(const OrtNode* node, const OrtValueInfo** outputs, size_t num_outputs); /* 356 since 1.23 */
    OrtStatus* (*Node_GetNumImplicitInputs)(const OrtNode* node, size_t* num_implicit_inputs); /* 357 since 1.23 */
    OrtStatus* (*Node_GetImplicitInputs)(const OrtNode* node, const OrtValueInfo** implicit_inputs, size_t num_implicit_inputs); /* 358 since 1.23 */
    OrtStatus* (*Node_GetNumAttributes)(const OrtNode* node, size_t* num_attributes); /* 359 since 1.23 */
    OrtStatus* (*Node_GetAttributes)(const OrtNode* node, const OrtOpAttr** attributes, size_t num_attributes); /* 360 since 1.23 */
    OrtStatus* (*Node_GetAttributeByName)(const OrtNode* node, const char* attribute_name, const OrtOpAttr** attribute); /* 361 since 1.23 */
    OrtStatus* (*OpAttr_GetTensorAttributeAsOrtValue)(const OrtOpAttr* attribute, OrtValue** attr_tensor); /* 362 since 1.23 */
    OrtStatus* (*OpAttr_GetType)(const OrtOpAttr* attribute, OrtOpAttrType* type); /* 363 since 1.23 */
    OrtStatus* (*OpAttr_GetName)(const OrtOpAttr* attribute, const char** name); /* 364 since 1.23 */
    OrtStatus* (*Node_GetNumSubgraphs)(const OrtNode* node, size_t* num_subgraphs); /* 365 since 1.23 */
    OrtStatus* (*Node_GetSubgraphs)(const OrtNode* node, const OrtGraph** subgraphs, size_t num_subgraphs, const char** attribute_names); /* 366 since 1.23 */
    OrtStatus* (*Node_GetGraph)(const OrtNode* node, const OrtGraph** graph); /* 367 since 1.23 */
    OrtStatus* (*Node_GetEpName)(const OrtNode* node, const char** out); /* 368 since 1.23 */
    void (*ReleaseExternalInitializerInfo)(OrtExternalInitializerInfo*); /* 369 since 1.23 */
    const ORTCHAR_T* (*ExternalInitializerInfo_GetFilePath)(const OrtExternalInitializerInfo* info); /* 370 since 1.23 */
    int64_t (*ExternalInitializerInfo_GetFileOffset)(const OrtExternalInitializerInfo* info); /* 371 since 1.23 */
    size_t (*ExternalInitializerInfo_GetByteSize)(const OrtExternalInitializerInfo* info); /* 372 since 1.23 */
    const char* (*GetRunConfigEntry)(const OrtRunOptions* options, const char* config_key); /* 373 since 1.23 */
    const OrtMemoryInfo* (*EpDevice_MemoryInfo)(const OrtEpDevice* ep_device, OrtDeviceMemoryType memory_type); /* 374 since 1.23 */
    OrtStatus* (*CreateSharedAllocator)(OrtEnv* env, const OrtEpDevice* ep_device, OrtDeviceMemoryType mem_type, OrtAllocatorType allocator_type, const OrtKeyValuePairs* allocator_options, OrtAllocator** allocator); /* 375 since 1.23 */
    OrtStatus* (*GetSharedAllocator)(OrtEnv* env, const OrtMemoryInfo* mem_info, OrtAllocator** allocator); /* 376 since 1.23 */
    OrtStatus* (*ReleaseSharedAllocator)(OrtEnv* env, const OrtEpDevice* ep_device, OrtDeviceMemoryType mem_type); /* 377 since 1.23 */
    OrtStatus* (*GetTensorData)(const OrtValue* value, const void** out); /* 378 since 1.23 */
    OrtStatus* (*GetSessionOptionsConfigEntries)(const OrtSessionOptions* options, OrtKeyValuePairs** out); /* 379 since 1.23 */
    void* reserved_380_383[4];
    void* (*SyncStream_GetHandle)(OrtSyncStream* stream); /* 384 since 1.23 */
    void* reserved_385_385[1];
    OrtStatus* (*CopyTensors)(const OrtEnv* env, const OrtValue* const* src_tensors, OrtValue* const* dst_tensors, OrtSyncStream* stream, size_t num_tensors); /* 386 since 1.23 */
    OrtStatus* (*Graph_GetModelMetadata)(const OrtGraph* graph, OrtModelMetadata** out); /* 387 since 1.23 */
    void* reserved_388_389[2];
    bool (*TensorTypeAndShape_HasShape)(const OrtTensorTypeAndShapeInfo* info); /* 390 since 1.24 */
    OrtStatus* (*KernelInfo_GetConfigEntries)(const OrtKernelInfo* info, OrtKeyValuePairs** out); /* 391 since 1.24 */
    OrtStatus* (*KernelInfo_GetOperatorDomain)(const OrtKernelInfo* info, char* out, size_t* size); /* 392 since 1.24 */
    OrtStatus* (*KernelInfo_GetOperatorType)(const OrtKernelInfo* info, char* out, size_t* size); /* 393 since 1.24 */
    OrtStatus* (*KernelInfo_GetOperatorSinceVersion)(const OrtKernelInfo* info, int* since_version); /* 394 since 1.24 */
    void* reserved_395_405[11];
    OrtStatus* (*CreateEnvWithOptions)(const OrtEnvCreationOptions* options, OrtEnv** out); /* 406 since 1.24 */
    OrtStatus* (*Session_GetEpGraphAssignmentInfo)(const OrtSession* session, const OrtEpAssignedSubgraph* const** ep_subgraphs, size_t* num_ep_subgraphs); /* 407 since 1.24 */
    OrtStatus* (*EpAssignedSubgraph_GetEpName)(const OrtEpAssignedSubgraph* ep_subgraph, const char** out); /* 408 since 1.24 */
    OrtStatus* (*EpAssignedSubgraph_GetNodes)(const OrtEpAssignedSubgraph* ep_subgraph, const OrtEpAssignedNode* const** ep_nodes, size_t* num_ep_nodes); /* 409 since 1.24 */
    OrtStatus* (*EpAssignedNode_GetName)(const OrtEpAssignedNode* ep_node, const char** out); /* 410 since 1.24 */
    void* reserved_411_413[3];
    OrtStatus* (*GetTensorElementTypeAndShapeDataReference)(const OrtValue* value, ONNXTensorElementDataType* elem_type, const int64_t** shape_data, size_t* shape_data_count); /* 414 since 1.24 */
    void* reserved_415_416[2];
    OrtStatus* (*KernelInfoGetAttributeArray_string)(const OrtKernelInfo* info, const char* name, OrtAllocator* allocator, char*** out, size_t* size); /* 417 since 1.25 */
    void* reserved_418_420[3];
    OrtStatus* (*SessionReleaseCapturedGraph)(OrtSession* session, int graph_annotation_id); /* 421 since 1.27 */
    OrtExperimentalFnPtr (*GetExperimentalFunction)(const char* name); /* 422 since 1.28 */
    OrtStatus* (*KernelContext_GetSyncStream)(const OrtKernelContext* context, OrtSyncStream** out); /* 423 since 1.28 */
    OrtStatus* (*SessionOptionsSetWeightlessSourceModelBuffer)(OrtSessionOptions* options, const void* source_model_data, size_t source_model_data_length); /* 424 since 1.29 */
    OrtStatus* (*KernelContext_GetPreallocatedOutput)(const OrtKernelContext* context, size_t output_index, OrtValue** output); /* 425 since 1.30 */
    /* 426-427 appeared in 1.31, 428 in 1.32 (the 1.31.1/1.32.0 tables have 428/429 slots); no header of those
     * releases was available, so they stay padding: python/epabi/ort_api_slots.py says what their machine code
     * shows them to be. */
    void* reserved_426_428[3]; /* API 31 and 32 */
};

struct OrtEpApi {
    OrtStatus* (*CreateEpDevice)(OrtEpFactory* ep_factory, const OrtHardwareDevice* hardware_device, const OrtKeyValuePairs* ep_metadata, const OrtKeyValuePairs* ep_options, OrtEpDevice** ep_device); /* 0 since 1.22 */
    void (*ReleaseEpDevice)(OrtEpDevice*); /* 1 since 1.22 */
    OrtStatus* (*EpGraphSupportInfo_AddNodesToFuse)(OrtEpGraphSupportInfo* graph_support_info, const OrtNode* const* nodes, size_t num_nodes, const OrtNodeFusionOptions* node_fusion_options); /* 2 since 1.23 */
    OrtStatus* (*EpGraphSupportInfo_AddSingleNode)(OrtEpGraphSupportInfo* graph_support_info, const OrtNode* node); /* 3 since 1.23 */
    const char* (*NodeComputeContext_NodeName)(const OrtNodeComputeContext* context); /* 4 since 1.23 */
    OrtStatus* (*EpDevice_AddAllocatorInfo)(OrtEpDevice* ep_device, const OrtMemoryInfo* allocator_memory_info); /* 5 since 1.23 */
    const OrtMemoryDevice* (*MemoryInfo_GetMemoryDevice)(const OrtMemoryInfo* memory_info); /* 6 since 1.23 */
    const OrtMemoryDevice* (*Value_GetMemoryDevice)(const OrtValue* value); /* 7 since 1.23 */
    bool (*MemoryDevice_AreEqual)(const OrtMemoryDevice* a, const OrtMemoryDevice* b); /* 8 since 1.23 */
    OrtMemoryInfoDeviceType (*MemoryDevice_GetDeviceType)(const OrtMemoryDevice* memory_device); /* 9 since 1.23 */
    OrtDeviceMemoryType (*MemoryDevice_GetMemoryType)(const OrtMemoryDevice* memory_device); /* 10 since 1.23 */
    uint32_t (*MemoryDevice_GetVendorId)(const OrtMemoryDevice* memory_device); /* 11 since 1.23 */
    uint32_t (*MemoryDevice_GetDeviceId)(const OrtMemoryDevice* memory_device); /* 12 since 1.23 */
    const OrtSyncStreamImpl* (*SyncStream_GetImpl)(const OrtSyncStream* stream); /* 13 since 1.23 */
    uint64_t (*SyncStream_GetSyncId)(const OrtSyncStream* stream); /* 14 since 1.23 */
    uint64_t (*GetSyncIdForLastWaitOnSyncStream)(const OrtSyncStream* producer_stream, const OrtSyncStream* consumer_stream); /* 15 since 1.23 */
    OrtStatus* (*CreateHardwareDevice)(OrtHardwareDeviceType type, uint32_t vendor_id, uint32_t device_id, const char* vendor_name, const OrtKeyValuePairs* metadata, OrtHardwareDevice** hardware_device); /* 16 since 1.24 */
    void (*ReleaseHardwareDevice)(OrtHardwareDevice*); /* 17 since 1.24 */
    OrtStatus* (*CreateKernelRegistry)(OrtKernelRegistry** kernel_registry); /* 18 since 1.24 */
    void (*ReleaseKernelRegistry)(OrtKernelRegistry*); /* 19 since 1.24 */
    OrtStatus* (*KernelRegistry_AddKernel)(OrtKernelRegistry* kernel_registry, const OrtKernelDef* kernel_def, OrtKernelCreateFunc kernel_create_func, void* kernel_create_func_state); /* 20 since 1.24 */
    OrtStatus* (*CreateKernelDefBuilder)(OrtKernelDefBuilder** kernel_def_builder_out); /* 21 since 1.24 */
    void (*ReleaseKernelDefBuilder)(OrtKernelDefBuilder*); /* 22 since 1.24 */
    OrtStatus* (*KernelDefBuilder_SetOperatorType)(OrtKernelDefBuilder* kernel_def_builder, const char* op_type); /* 23 since 1.24 */
    OrtStatus* (*KernelDefBuilder_SetDomain)(OrtKernelDefBuilder* kernel_def_builder, const char* domain); /* 24 since 1.24 */
    OrtStatus* (*KernelDefBuilder_SetSinceVersion)(OrtKernelDefBuilder* kernel_def_builder, int since_version_start, int since_version_end); /* 25 since 1.24 */
    OrtStatus* (*KernelDefBuilder_SetExecutionProvider)(OrtKernelDefBuilder* kernel_def_builder, const char* ep_name); /* 26 since 1.24 */
    OrtStatus* (*KernelDefBuilder_SetInputMemType)(OrtKernelDefBuilder* kernel_def_builder, size_t input_index, OrtMemType mem_type); /* 27 since 1.24 */
    OrtStatus* (*KernelDefBuilder_SetOutputMemType)(OrtKernelDefBuilder* kernel_def_builder, size_t output_index, OrtMemType mem_type); /* 28 since 1.24 */
    OrtStatus* (*KernelDefBuilder_AddTypeConstraint)(OrtKernelDefBuilder* kernel_def_builder, const char* arg_name, const OrtDataType* const* types, size_t num_types); /* 29 since 1.24 */
    OrtStatus* (*KernelDefBuilder_AddInputOutputAliases)(OrtKernelDefBuilder* kernel_def_builder, int const* input_indices, int const* output_indices, size_t num_io_indices); /* 30 since 1.24 */
    OrtStatus* (*KernelDefBuilder_AddInputOutputMutableAliases)(OrtKernelDefBuilder* kernel_def_builder, int const* input_indices, int const* output_indices, size_t num_io_indices); /* 31 since 1.24 */
    OrtStatus* (*KernelDefBuilder_Build)(OrtKernelDefBuilder* kernel_def_builder, OrtKernelDef** kernel_def_out); /* 32 since 1.24 */
    void (*ReleaseKernelDef)(OrtKernelDef*); /* 33 since 1.24 */
    const char* (*KernelDef_GetOperatorType)(const OrtKernelDef* kernel_def); /* 34 since 1.24 */
    const char* (*KernelDef_GetDomain)(const OrtKernelDef* kernel_def); /* 35 since 1.24 */
    OrtStatus* (*KernelDef_GetSinceVersion)(const OrtKernelDef* kernel_def, int* start_version, int* end_version); /* 36 since 1.24 */
    const char* (*KernelDef_GetExecutionProvider)(const OrtKernelDef* kernel_def); /* 37 since 1.24 */
    OrtStatus* (*KernelDef_GetInputMemType)(const OrtKernelDef* kernel_def, size_t input_index, OrtMemType* mem_type); /* 38 since 1.24 */
    OrtStatus* (*KernelDef_GetOutputMemType)(const OrtKernelDef* kernel_def, size_t output_index, OrtMemType* mem_type); /* 39 since 1.24 */
    OrtStatus* (*GetTensorDataType)(ONNXTensorElementDataType elem_type, const OrtDataType** out); /* 40 since 1.24 */
    OrtStatus* (*EpGraphSupportInfo_LookUpKernel)(OrtEpGraphSupportInfo* graph_support_info, const OrtNode* node, const OrtKernelDef** out_kernel_def); /* 41 since 1.24 */
    OrtStatus* (*SharedPrePackedWeightCache_StoreWeightData)(OrtSharedPrePackedWeightCache* prepacked_weight_cache, void** buffer_data_ptrs, size_t* buffer_data_sizes, size_t num_buffers); /* 42 since 1.24 */
    OrtStatus* (*KernelInfo_GetEp)(const OrtKernelInfo* info, const OrtEp** ep); /* 43 since 1.24 */
    OrtStatus* (*DeviceEpIncompatibilityDetails_SetDetails)(OrtDeviceEpIncompatibilityDetails* details, uint32_t reasons_bitmask, int32_t error_code, const char* notes); /* 44 since 1.24 */
    OrtStatus* (*CreateIfKernel)(const OrtKernelInfo* kernel_info, OrtKernelImpl** kernel_out); /* 45 since 1.24 */
    OrtStatus* (*CreateLoopKernel)(const OrtKernelInfo* kernel_info, OrtLoopKernelHelper* helper, OrtKernelImpl** kernel_out); /* 46 since 1.24 */
    OrtStatus* (*CreateScanKernel)(const OrtKernelInfo* kernel_info, OrtScanKernelHelper* helper, OrtKernelImpl** kernel_out); /* 47 since 1.24 */
    void (*ReleaseKernelImpl)(OrtKernelImpl*); /* 48 since 1.24 */
    OrtStatus* (*GetEnvConfigEntries)(OrtKeyValuePairs** config_entries); /* 49 since 1.24 */
    OrtStatus* (*GetOpSchema)(const char* name, int max_inclusive_version, const char* domain, OrtOpSchema** out_schema); /* 50 since 1.25 */
    void (*ReleaseOpSchema)(OrtOpSchema*); /* 51 since 1.25 */
    OrtStatus* (*OpSchema_GetSinceVersion)(const OrtOpSchema* schema, int* out); /* 52 since 1.25 */
    OrtStatus* (*OpSchema_GetNumInputs)(const OrtOpSchema* schema, size_t* out); /* 53 since 1.25 */
    OrtStatus* (*OpSchema_GetInputName)(const OrtOpSchema* schema, size_t index, const char** out); /* 54 since 1.25 */
    OrtStatus* (*OpSchema_GetInputTypeConstraint)(const OrtOpSchema* schema, size_t index, const OrtOpSchemaTypeConstraint** out); /* 55 since 1.25 */
    OrtStatus* (*OpSchema_GetNumOutputs)(const OrtOpSchema* schema, size_t* out); /* 56 since 1.25 */
    OrtStatus* (*OpSchema_GetOutputName)(const OrtOpSchema* schema, size_t index, const char** out); /* 57 since 1.25 */
    OrtStatus* (*OpSchema_GetOutputTypeConstraint)(const OrtOpSchema* schema, size_t index, const OrtOpSchemaTypeConstraint** out); /* 58 since 1.25 */
    OrtStatus* (*OpSchema_GetTypeConstraintCount)(const OrtOpSchema* schema, size_t* out); /* 59 since 1.25 */
    OrtStatus* (*OpSchema_GetTypeConstraint)(const OrtOpSchema* schema, size_t index, const OrtOpSchemaTypeConstraint** out); /* 60 since 1.25 */
    OrtStatus* (*OpSchemaTypeConstraint_GetTypeParamName)(const OrtOpSchemaTypeConstraint* type_constraint, const char** out); /* 61 since 1.25 */
    OrtStatus* (*OpSchemaTypeConstraint_GetAllowedTypes)(const OrtOpSchemaTypeConstraint* type_constraint, const char* const** out_types, size_t* num_types); /* 62 since 1.25 */
    OrtStatus* (*OpSchemaTypeConstraint_GetInputIndices)(const OrtOpSchemaTypeConstraint* type_constraint, const size_t** out_indices, size_t* count); /* 63 since 1.25 */
    OrtStatus* (*OpSchemaTypeConstraint_GetOutputIndices)(const OrtOpSchemaTypeConstraint* type_constraint, const size_t** out_indices, size_t* count); /* 64 since 1.25 */
    OrtStatus* (*CreateProfilingEvent)(OrtProfilingEventCategory category, int32_t process_id, int32_t thread_id, const char* event_name, int64_t timestamp_us, int64_t duration_us, const char* const* arg_keys, const char* const* arg_values, size_t num_args, OrtProfilingEvent** out); /* 65 since 1.25 */
    void (*ReleaseProfilingEvent)(OrtProfilingEvent*); /* 66 since 1.25 */
    OrtStatus* (*ProfilingEvent_GetCategory)(const OrtProfilingEvent* event, OrtProfilingEventCategory* out); /* 67 since 1.25 */
    OrtStatus* (*ProfilingEvent_GetName)(const OrtProfilingEvent* event, const char** out); /* 68 since 1.25 */
    OrtStatus* (*ProfilingEvent_GetTimestampUs)(const OrtProfilingEvent* event, int64_t* out); /* 69 since 1.25 */
    OrtStatus* (*ProfilingEvent_GetDurationUs)(const OrtProfilingEvent* event, int64_t* out); /* 70 since 1.25 */
    OrtStatus* (*ProfilingEvent_GetArgValue)(const OrtProfilingEvent* event, const char* key, const char** out); /* 71 since 1.25 */
    OrtStatus* (*ProfilingEventsContainer_AddEvents)(OrtProfilingEventsContainer* events_container, const OrtProfilingEvent* const* events, size_t num_events); /* 72 since 1.25 */
    OrtStatus* (*SessionOptionsGetWeightlessSourceModelBuffer)(const OrtSessionOptions* session_options, const void** source_model_data, size_t* source_model_data_length); /* 73 since 1.29 */
    /* 74-77 appeared in 1.31 (78 slots in 1.31.1 and 1.32.0); padding, as OrtApi 426-428 (ort_api_slots.py). */
    void* reserved_74_77[4]; /* API 31 */
};

/* OrtModelEditorApi (OrtApi::GetModelEditorApi): building and augmenting models. Layout of the ORT 1.30 header;
 * the table appeared in 1.22 and is append-only (members added after 1.22, if any, are UNVERIFIED and marked 1.22). */
struct OrtModelEditorApi {
    OrtStatus* (*CreateTensorTypeInfo)(const OrtTensorTypeAndShapeInfo* tensor_info, OrtTypeInfo** type_info); /* 0 since 1.22 */
    OrtStatus* (*CreateSparseTensorTypeInfo)(const OrtTensorTypeAndShapeInfo* tensor_info, OrtTypeInfo** type_info); /* 1 since 1.22 */
    OrtStatus* (*CreateMapTypeInfo)(ONNXTensorElementDataType map_key_type, const OrtTypeInfo* map_value_type, OrtTypeInfo** type_info); /* 2 since 1.22 */
    OrtStatus* (*CreateSequenceTypeInfo)(const OrtTypeInfo* sequence_type, OrtTypeInfo** type_info); /* 3 since 1.22 */
    OrtStatus* (*CreateOptionalTypeInfo)(const OrtTypeInfo* contained_type, OrtTypeInfo** type_info); /* 4 since 1.22 */
    OrtStatus* (*CreateValueInfo)(const char* name, const OrtTypeInfo* type_info, OrtValueInfo** value_info); /* 5 since 1.22 */
    OrtStatus* (*CreateNode)(const char* operator_name, const char* domain_name, const char* node_name, const char* const* input_names, size_t input_names_len, const char* const* output_names, size_t output_names_len, OrtOpAttr** attributes, size_t attribs_len, OrtNode** node); /* 6 since 1.22 */
    OrtStatus* (*CreateGraph)(OrtGraph** graph); /* 7 since 1.22 */
    OrtStatus* (*SetGraphInputs)(OrtGraph* graph, OrtValueInfo** inputs, size_t inputs_len); /* 8 since 1.22 */
    OrtStatus* (*SetGraphOutputs)(OrtGraph* graph, OrtValueInfo** outputs, size_t outputs_len); /* 9 since 1.22 */
    OrtStatus* (*AddInitializerToGraph)(OrtGraph* graph, const char* name, OrtValue* tensor, bool data_is_external); /* 10 since 1.22 */
    OrtStatus* (*AddNodeToGraph)(OrtGraph* graph, OrtNode* node); /* 11 since 1.22 */
    OrtStatus* (*CreateModel)(const char* const* domain_names, const int* opset_versions, size_t opset_entries_len, OrtModel** model); /* 12 since 1.22 */
    OrtStatus* (*AddGraphToModel)(OrtModel* model, OrtGraph* graph); /* 13 since 1.22 */
    OrtStatus* (*CreateSessionFromModel)(const OrtEnv* env, const OrtModel* model, const OrtSessionOptions* options, OrtSession** out); /* 14 since 1.22 */
    OrtStatus* (*CreateModelEditorSession)(const OrtEnv* env, const ORTCHAR_T* model_path, const OrtSessionOptions* options, OrtSession** out); /* 15 since 1.22 */
    OrtStatus* (*CreateModelEditorSessionFromArray)(const OrtEnv* env, const void* model_data, size_t model_data_length, const OrtSessionOptions* options, OrtSession** out); /* 16 since 1.22 */
    OrtStatus* (*SessionGetOpsetForDomain)(const OrtSession* session, const char* domain, int* opset); /* 17 since 1.22 */
    OrtStatus* (*ApplyModelToModelEditorSession)(OrtSession* session, OrtModel* model); /* 18 since 1.22 */
    OrtStatus* (*FinalizeModelEditorSession)(OrtSession* session, const OrtSessionOptions* options, void* prepacked_weights_container); /* 19 since 1.22 */
};

/* ---- plugin-implemented tables ---------------------------------------------------------------- */

/* Returned by CreateEpFactories; the plugin owns it until ReleaseEpFactory. */
struct OrtEpFactory {
    uint32_t ort_version_supported; /* 0 since 1.22 */
    const char* (*GetName)(const OrtEpFactory* this_ptr); /* 1 since 1.22 */
    const char* (*GetVendor)(const OrtEpFactory* this_ptr); /* 2 since 1.22 */
    OrtStatus* (*GetSupportedDevices)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices, size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices, size_t* num_ep_devices); /* 3 since 1.22 */
    OrtStatus* (*CreateEp)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices, const OrtKeyValuePairs* const* ep_metadata_pairs, size_t num_devices, const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** ep); /* 4 since 1.22 */
    void (*ReleaseEp)(OrtEpFactory* this_ptr, OrtEp* ep); /* 5 since 1.22 */
    uint32_t (*GetVendorId)(const OrtEpFactory* this_ptr); /* 6 since 1.23 */
    const char* (*GetVersion)(const OrtEpFactory* this_ptr); /* 7 since 1.23 */
    OrtStatus* (*ValidateCompiledModelCompatibilityInfo)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices, size_t num_devices, const char* compatibility_info, OrtCompiledModelCompatibility* model_compatibility); /* 8 since 1.23 */
    OrtStatus* (*CreateAllocator)(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info, const OrtKeyValuePairs* allocator_options, OrtAllocator** allocator); /* 9 since 1.23 */
    void (*ReleaseAllocator)(OrtEpFactory* this_ptr, OrtAllocator* allocator); /* 10 since 1.23 */
    OrtStatus* (*CreateDataTransfer)(OrtEpFactory* this_ptr, OrtDataTransferImpl** data_transfer); /* 11 since 1.23 */
    bool (*IsStreamAware)(const OrtEpFactory* this_ptr); /* 12 since 1.23 */
    OrtStatus* (*CreateSyncStreamForDevice)(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device, const OrtKeyValuePairs* stream_options, OrtSyncStreamImpl** stream); /* 13 since 1.23 */
    OrtStatus* (*GetHardwareDeviceIncompatibilityDetails)(OrtEpFactory* this_ptr, const OrtHardwareDevice* hw, OrtDeviceEpIncompatibilityDetails* details); /* 14 since 1.24 */
    OrtStatus* (*CreateExternalResourceImporterForDevice)(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device, OrtExternalResourceImporterImpl** out_importer); /* 15 since 1.24 */
    OrtStatus* (*GetNumCustomOpDomains)(OrtEpFactory* this_ptr, size_t* num_domains); /* 16 since 1.24 */
    OrtStatus* (*GetCustomOpDomains)(OrtEpFactory* this_ptr, OrtCustomOpDomain** domains, size_t num_domains); /* 17 since 1.24 */
    OrtStatus* (*InitGraphicsInterop)(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device, const OrtGraphicsInteropConfig* config); /* 18 since 1.25 */
    OrtStatus* (*DeinitGraphicsInterop)(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device); /* 19 since 1.25 */
    OrtStatus* (*SelectBestModelCandidate)(OrtEpFactory* this_ptr, const OrtHardwareDevice* device, const OrtKeyValuePairs* const* candidates, size_t num_candidates, const OrtSessionOptions* session_options, size_t* selected_index); /* 20 since 1.28 */
};

/* Returned by OrtEpFactory::CreateEp; the plugin owns it until OrtEpFactory::ReleaseEp. */
struct OrtEp {
    uint32_t ort_version_supported; /* 0 since 1.22 */
    const char* (*GetName)(const OrtEp* this_ptr); /* 1 since 1.22 */
    OrtStatus* (*GetCapability)(OrtEp* this_ptr, const OrtGraph* graph, OrtEpGraphSupportInfo* graph_support_info); /* 2 since 1.23 */
    OrtStatus* (*Compile)(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count, OrtNodeComputeInfo** node_compute_infos, OrtNode** ep_context_nodes); /* 3 since 1.23 */
    void (*ReleaseNodeComputeInfos)(OrtEp* this_ptr, OrtNodeComputeInfo** node_compute_infos, size_t num_node_compute_infos); /* 4 since 1.23 */
    OrtStatus* (*GetPreferredDataLayout)(OrtEp* this_ptr, OrtEpDataLayout* preferred_data_layout); /* 5 since 1.23 */
    OrtStatus* (*ShouldConvertDataLayoutForOp)(OrtEp* this_ptr, const char* domain, const char* op_type, OrtEpDataLayout target_data_layout, int* should_convert); /* 6 since 1.23 */
    OrtStatus* (*SetDynamicOptions)(OrtEp* this_ptr, const char* const* option_keys, const char* const* option_values, size_t num_options); /* 7 since 1.23 */
    OrtStatus* (*OnRunStart)(OrtEp* this_ptr, const OrtRunOptions* run_options); /* 8 since 1.23 */
    OrtStatus* (*OnRunEnd)(OrtEp* this_ptr, const OrtRunOptions* run_options, bool sync_stream); /* 9 since 1.23 */
    OrtStatus* (*CreateAllocator)(OrtEp* this_ptr, const OrtMemoryInfo* memory_info, OrtAllocator** allocator); /* 10 since 1.23 */
    OrtStatus* (*CreateSyncStreamForDevice)(OrtEp* this_ptr, const OrtMemoryDevice* memory_device, OrtSyncStreamImpl** stream); /* 11 since 1.23 */
    const char* (*GetCompiledModelCompatibilityInfo)(OrtEp* this_ptr, const OrtGraph* graph); /* 12 since 1.23 */
    OrtStatus* (*GetKernelRegistry)(OrtEp* this_ptr, const OrtKernelRegistry** kernel_registry); /* 13 since 1.24 */
    OrtStatus* (*IsConcurrentRunSupported)(OrtEp* this_ptr, bool* is_supported); /* 14 since 1.24 */
    OrtStatus* (*Sync)(OrtEp* this_ptr); /* 15 since 1.25 */
    OrtStatus* (*CreateProfiler)(OrtEp* this_ptr, OrtEpProfilerImpl** profiler); /* 16 since 1.25 */
    bool (*IsGraphCaptureEnabled)(const OrtEp* this_ptr); /* 17 since 1.26 */
    bool (*IsGraphCaptured)(const OrtEp* this_ptr, int graph_annotation_id); /* 18 since 1.26 */
    OrtStatus* (*ReplayGraph)(OrtEp* this_ptr, int graph_annotation_id); /* 19 since 1.26 */
    OrtGraphCaptureNodeAssignmentPolicy (*GetGraphCaptureNodeAssignmentPolicy)(const OrtEp* this_ptr); /* 20 since 1.26 */
    OrtStatus* (*GetAvailableResource)(const OrtEp* this_ptr, OrtResourceCount* available); /* 21 since 1.26 */
    OrtStatus* (*OnSessionInitializationEnd)(OrtEp* this_ptr); /* 22 since 1.27 */
    OrtStatus* (*GetDefaultMemoryDevice)(const OrtEp* this_ptr, const OrtMemoryDevice** device); /* 23 since 1.27 */
    OrtStatus* (*ReleaseCapturedGraph)(OrtEp* this_ptr, int graph_annotation_id); /* 24 since 1.27 */
    OrtStatus* (*GetWeightlessSupport)(const OrtEp* this_ptr, OrtWeightlessSupport* support); /* 25 since 1.29 */
};

/* Returned by OrtEp::CreateProfiler, which hosts 1.25+ call once per session when they register the EP, profiling
 * on or off; the host calls Release when the session's profiler goes. With profiling on, StartProfiling comes once
 * when the profile starts (ep_profiling_start_offset_ns: nanoseconds elapsed since the host's profiling start, on
 * the host's clock), StartEvent/StopEvent around each of the host's own profile events (the same correlation id
 * for both; StopEvent hands the finished event, readable with OrtEpApi::ProfilingEvent_*), EndProfiling once when
 * the profile is written: the EP adds its events (timestamps in microseconds since the host's profiling start)
 * with OrtEpApi::ProfilingEventsContainer_AddEvents. A host refuses a profiler declaring a version below 25 or
 * missing Release, StartProfiling or EndProfiling; StartEvent and StopEvent may be NULL. Slot order checked against
 * the calls onnxruntime 1.32.0 makes (tests/test_abi_layout.py). */
struct OrtEpProfilerImpl {
    uint32_t ort_version_supported; /* 0 since 1.25 */
    void (*Release)(OrtEpProfilerImpl* this_ptr); /* 1 since 1.25 */
    OrtStatus* (*StartProfiling)(OrtEpProfilerImpl* this_ptr, int64_t ep_profiling_start_offset_ns); /* 2 since 1.25 */
    OrtStatus* (*StartEvent)(OrtEpProfilerImpl* this_ptr, uint64_t ort_event_correlation_id); /* 3 since 1.25 */
    OrtStatus* (*StopEvent)(OrtEpProfilerImpl* this_ptr, uint64_t ort_event_correlation_id, const OrtProfilingEvent* ort_event); /* 4 since 1.25 */
    OrtStatus* (*EndProfiling)(OrtEpProfilerImpl* this_ptr, OrtProfilingEventsContainer* events_container); /* 5 since 1.25 */
};

/* One per fused node, returned by OrtEp::Compile; released by OrtEp::ReleaseNodeComputeInfos. */
struct OrtNodeComputeInfo {
    uint32_t ort_version_supported; /* 0 since 1.23 */
    OrtStatus* (*CreateState)(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* compute_context, void** compute_state); /* 1 since 1.23 */
    OrtStatus* (*Compute)(OrtNodeComputeInfo* this_ptr, void* compute_state, OrtKernelContext* kernel_context); /* 2 since 1.23 */
    void (*ReleaseState)(OrtNodeComputeInfo* this_ptr, void* compute_state); /* 3 since 1.23 */
};

/* One per node a kernel-registry EP runs, made by its OrtKernelCreateFunc; the host calls Release when the
 * session ends. Two 4-byte fields share slot 0 (ort_version_supported @0, flags @4); PrePackWeight and
 * SetSharedPrePackedWeight are read only when ort_version_supported >= 24, Compute and Release always. */
struct OrtKernelImpl {
    uint32_t ort_version_supported; /* 0 since 1.24 */
    uint32_t flags; /* 0 since 1.24 */
    OrtStatus* (*Compute)(OrtKernelImpl* this_ptr, OrtKernelContext* context); /* 1 since 1.24 */
    void (*Release)(OrtKernelImpl* this_ptr); /* 2 since 1.24 */
    OrtStatus* (*PrePackWeight)(OrtKernelImpl* this_ptr, const OrtValue* tensor, int input_index, OrtAllocator* allocator, OrtSharedPrePackedWeightCache* prepacked_weight_cache, bool* is_packed); /* 3 since 1.24 */
    OrtStatus* (*SetSharedPrePackedWeight)(OrtKernelImpl* this_ptr, const void* const* buffer_data_ptrs, const size_t* buffer_data_sizes, size_t num_buffers, int input_index); /* 4 since 1.24 */
};

/* Returned by OrtEpFactory::CreateDataTransfer; the host calls Release when done with it. */
struct OrtDataTransferImpl {
    uint32_t ort_version_supported; /* 0 since 1.23 */
    void (*Release)(OrtDataTransferImpl* this_ptr); /* 1 since 1.23 */
    bool (*CanCopy)(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src_memory_device, const OrtMemoryDevice* dst_memory_device); /* 2 since 1.23 */
    OrtStatus* (*CopyTensors)(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors, OrtValue** dst_tensors, OrtSyncStream** streams, size_t num_tensors); /* 3 since 1.23 */
};

/* Returned by CreateSyncStreamForDevice; the host calls Release. */
struct OrtSyncStreamImpl {
    uint32_t ort_version_supported; /* 0 since 1.23 */
    void (*Release)(OrtSyncStreamImpl* this_ptr); /* 1 since 1.23 */
    void* (*GetHandle)(OrtSyncStreamImpl* this_ptr); /* 2 since 1.23 */
    OrtStatus* (*CreateNotification)(OrtSyncStreamImpl* this_ptr, OrtSyncNotificationImpl** notification); /* 3 since 1.23 */
    OrtStatus* (*Flush)(OrtSyncStreamImpl* this_ptr); /* 4 since 1.23 */
    OrtStatus* (*OnSessionRunEnd)(OrtSyncStreamImpl* this_ptr); /* 5 since 1.23 */
};

struct OrtSyncNotificationImpl {
    uint32_t ort_version_supported; /* 0 since 1.23 */
    void (*Release)(OrtSyncNotificationImpl* this_ptr); /* 1 since 1.23 */
    OrtStatus* (*Activate)(OrtSyncNotificationImpl* this_ptr); /* 2 since 1.23 */
    OrtStatus* (*WaitOnDevice)(OrtSyncNotificationImpl* this_ptr, OrtSyncStream* consumer_stream); /* 3 since 1.23 */
    OrtStatus* (*WaitOnHost)(OrtSyncNotificationImpl* this_ptr); /* 4 since 1.23 */
};

/* Implemented by whoever hands the allocator out (plugin allocators, or the host's default allocator). */
struct OrtAllocator {
    uint32_t version; /* 0 since v1 */
    void* (*Alloc)(OrtAllocator* this_, size_t size); /* 1 since v1 */
    void (*Free)(OrtAllocator* this_, void* p); /* 2 since v1 */
    const OrtMemoryInfo* (*Info)(const OrtAllocator* this_); /* 3 since v1 */
    void* (*Reserve)(OrtAllocator* this_, size_t size); /* 4 since 1.18 */
    OrtStatus* (*GetStats)(const OrtAllocator* this_, OrtKeyValuePairs** out); /* 5 since 1.23 */
    void* (*AllocOnStream)(OrtAllocator* this_, size_t size, OrtSyncStream* stream); /* 6 since 1.23 */
    OrtStatus* (*Shrink)(OrtAllocator* this_); /* 7 since 1.25 */
};

/* The two symbols a plugin library exports (resolved by name with dlsym). */
OrtStatus* CreateEpFactories(const char* registration_name, const OrtApiBase* ort_api_base, const OrtLogger* default_logger, OrtEpFactory** factories, size_t max_factories, size_t* num_factories);
OrtStatus* ReleaseEpFactory(OrtEpFactory* factory);

#endif /* EPABI_ORT_ABI_H */
