/*
 * node_desc.c - struct epabi_node from an OrtNode (Node_*, ValueInfo_*, TypeInfo accessors) and the
 * attribute readers of kernel.h (Node_GetAttributeByName + OpAttr_GetType + ReadOpAttr).
 */
#include "node_desc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shape of a tensor type: rank -1 when the host knows no shape. */
static OrtStatus* read_tensor_info(const struct epabi_api* api, const OrtTensorTypeAndShapeInfo* info,
                                   struct epabi_value_desc* out, bool* describable, char* why, size_t why_len) {
    const OrtApi* ort = api->ort;
    EPABI_RETURN_IF_ERROR(ort->GetTensorElementType(info, &out->dtype));
    if (!ort->TensorTypeAndShape_HasShape(info)) {
        out->rank = -1;
        return NULL;
    }
    size_t rank = 0;
    EPABI_RETURN_IF_ERROR(ort->GetDimensionsCount(info, &rank));
    if (rank > EPABI_MAX_RANK) {
        *describable = false;
        snprintf(why, why_len, "value '%s' has rank %zu; at most %d is supported", out->name, rank, EPABI_MAX_RANK);
        return NULL;
    }
    out->rank = (int)rank;
    if (rank > 0) EPABI_RETURN_IF_ERROR(ort->GetDimensions(info, out->dims, rank));
    /* the symbols let the plan prove two symbolic shapes equal (plan_chains.c); ORT gives "" for a static or
     * unnamed dim (TensorShape's dim_params, OrtApis::GetSymbolicDimensions, 1.24 and later alike) */
    if (rank > 0) EPABI_RETURN_IF_ERROR(ort->GetSymbolicDimensions(info, out->dim_names, rank));
    for (size_t i = 0; i < rank; ++i) {
        if (out->dim_names[i] == NULL || out->dims[i] >= 0) out->dim_names[i] = "";
        if (out->dims[i] < 0) out->dims[i] = -1;   /* symbolic or unknown */
    }
    return NULL;
}

static OrtStatus* read_const_data(const struct epabi_api* api, const OrtValueInfo* value,
                                  struct epabi_value_desc* out) {
    const OrtApi* ort = api->ort;
    bool is_const = false;
    EPABI_RETURN_IF_ERROR(ort->ValueInfo_IsConstantInitializer(value, &is_const));
    if (!is_const) return NULL;
    const OrtValue* init = NULL;
    EPABI_RETURN_IF_ERROR(ort->ValueInfo_GetInitializerValue(value, &init));
    if (init == NULL) return NULL;
    OrtTensorTypeAndShapeInfo* info = NULL;
    EPABI_RETURN_IF_ERROR(ort->GetTensorTypeAndShape(init, &info));
    size_t count = 0;
    OrtStatus* st = ort->GetTensorShapeElementCount(info, &count);
    ort->ReleaseTensorTypeAndShapeInfo(info);
    if (st != NULL) return st;
    const void* data = NULL;
    EPABI_RETURN_IF_ERROR(ort->GetTensorData(init, &data));
    /* an empty initializer has no data pointer, but it is a constant all the same (Reshape to a scalar, Gather
     * with [], ReduceSum axes=[]) */
    static const int64_t kEmpty = 0;
    out->const_data = data != NULL ? data : (const void*)&kEmpty;
    out->const_count = count;
    return NULL;
}

OrtStatus* epabi_value_describe(const struct epabi_api* api, const OrtValueInfo* value,
                                struct epabi_value_desc* out, bool* describable, char* why, size_t why_len) {
    const OrtApi* ort = api->ort;
    memset(out, 0, sizeof *out);
    out->name = "";
    out->dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    out->rank = -1;
    if (value == NULL) return NULL;   /* absent optional input */

    const char* name = NULL;
    EPABI_RETURN_IF_ERROR(ort->GetValueInfoName(value, &name));
    out->name = name != NULL ? name : "";
    const OrtTypeInfo* type = NULL;
    EPABI_RETURN_IF_ERROR(ort->GetValueInfoTypeInfo(value, &type));
    if (type == NULL) {
        *describable = false;
        snprintf(why, why_len, "value '%s' has no type information", out->name);
        return NULL;
    }
    enum ONNXType kind = ONNX_TYPE_UNKNOWN;
    EPABI_RETURN_IF_ERROR(ort->GetOnnxTypeFromTypeInfo(type, &kind));
    const OrtTensorTypeAndShapeInfo* tinfo = NULL;
    if (kind == ONNX_TYPE_TENSOR) EPABI_RETURN_IF_ERROR(ort->CastTypeInfoToTensorInfo(type, &tinfo));
    if (tinfo == NULL) {
        *describable = false;
        snprintf(why, why_len, "value '%s' is not a dense tensor (ONNX type %d)", out->name, (int)kind);
        return NULL;
    }
    EPABI_RETURN_IF_ERROR(read_tensor_info(api, tinfo, out, describable, why, why_len));
    if (!*describable) return NULL;
    return read_const_data(api, value, out);
}

/* Reads the node's value list (inputs or outputs) into descs. */
static OrtStatus* describe_values(const struct epabi_api* api, const OrtValueInfo** values, size_t n,
                                  struct epabi_value_desc* descs, bool* describable, char* why, size_t why_len) {
    for (size_t i = 0; i < n && *describable; ++i)
        EPABI_RETURN_IF_ERROR(epabi_value_describe(api, values[i], &descs[i], describable, why, why_len));
    return NULL;
}

OrtStatus* epabi_node_describe(const struct epabi_api* api, const OrtNode* node, struct epabi_node* out,
                               bool* describable, char* why, size_t why_len) {
    const OrtApi* ort = api->ort;
    memset(out, 0, sizeof *out);
    *describable = true;
    if (why_len > 0) why[0] = '\0';
    out->api = api;
    out->ort = node;
    out->name = "";
    out->op_type = "";
    out->domain = "";

    const char* s = NULL;
    EPABI_RETURN_IF_ERROR(ort->Node_GetName(node, &s));
    if (s != NULL) out->name = s;
    EPABI_RETURN_IF_ERROR(ort->Node_GetOperatorType(node, &s));
    if (s != NULL) out->op_type = s;
    EPABI_RETURN_IF_ERROR(ort->Node_GetDomain(node, &s));
    if (s != NULL) out->domain = s;
    EPABI_RETURN_IF_ERROR(ort->Node_GetSinceVersion(node, &out->since_version));

    size_t n_in = 0, n_out = 0, n_implicit = 0;
    EPABI_RETURN_IF_ERROR(ort->Node_GetNumInputs(node, &n_in));
    EPABI_RETURN_IF_ERROR(ort->Node_GetNumOutputs(node, &n_out));
    EPABI_RETURN_IF_ERROR(ort->Node_GetNumImplicitInputs(node, &n_implicit));
    if (n_implicit > 0) {
        *describable = false;
        snprintf(why, why_len, "node uses %zu values of an outer graph (control flow)", n_implicit);
        return NULL;
    }
    if (n_in > EPABI_MAX_NODE_IO || n_out > EPABI_MAX_NODE_IO) {
        *describable = false;
        snprintf(why, why_len, "node has %zu inputs and %zu outputs; at most %d each are supported", n_in, n_out,
                 EPABI_MAX_NODE_IO);
        return NULL;
    }
    out->n_in = (int)n_in;
    out->n_out = (int)n_out;

    const OrtValueInfo* values[EPABI_MAX_NODE_IO];
    if (n_in > 0) {
        EPABI_RETURN_IF_ERROR(ort->Node_GetInputs(node, values, n_in));
        EPABI_RETURN_IF_ERROR(describe_values(api, values, n_in, out->in, describable, why, why_len));
    }
    if (*describable && n_out > 0) {
        EPABI_RETURN_IF_ERROR(ort->Node_GetOutputs(node, values, n_out));
        EPABI_RETURN_IF_ERROR(describe_values(api, values, n_out, out->out, describable, why, why_len));
    }
    return NULL;
}

/* ---- attributes --------------------------------------------------------------------------------- */

/* The attribute `name` if present and of type `want`; NULL otherwise. Host errors mean "absent": a reader
 * answers true/false only, and a kernel's supports()/init() must treat an unreadable attribute as missing. */
static const OrtOpAttr* find_attr(const struct epabi_node* node, const char* name, OrtOpAttrType want) {
    const OrtApi* ort = node->api->ort;
    const OrtOpAttr* attr = NULL;
    OrtStatus* st = ort->Node_GetAttributeByName(node->ort, name, &attr);
    if (st != NULL) {
        ort->ReleaseStatus(st);   /* the host reports a missing attribute as an error */
        return NULL;
    }
    if (attr == NULL) return NULL;
    if (want == ORT_OP_ATTR_UNDEFINED) return attr;
    OrtOpAttrType type = ORT_OP_ATTR_UNDEFINED;
    st = ort->OpAttr_GetType(attr, &type);
    if (st != NULL) {
        ort->ReleaseStatus(st);
        return NULL;
    }
    return type == want ? attr : NULL;
}

static bool read_scalar(const struct epabi_node* node, const char* name, OrtOpAttrType type, void* out,
                        size_t size) {
    const OrtOpAttr* attr = find_attr(node, name, type);
    if (attr == NULL) return false;
    size_t got = 0;
    OrtStatus* st = node->api->ort->ReadOpAttr(attr, type, out, size, &got);
    if (st != NULL) {
        /* an attribute of this type without a value ("Attribute has no int64 value"): ORT's CPU kernels read the
         * protobuf default, 0, so do we */
        node->api->ort->ReleaseStatus(st);
        memset(out, 0, size);
    }
    return true;
}

bool epabi_attr_int(const struct epabi_node* node, const char* name, int64_t* out) {
    int64_t v = 0;
    if (!read_scalar(node, name, ORT_OP_ATTR_INT, &v, sizeof v)) return false;
    *out = v;
    return true;
}

bool epabi_attr_float(const struct epabi_node* node, const char* name, float* out) {
    float v = 0;
    if (!read_scalar(node, name, ORT_OP_ATTR_FLOAT, &v, sizeof v)) return false;
    *out = v;
    return true;
}

/* Arrays: ask the size first (the host answers the byte count along with a "too small" error), then read
 * everything into a temporary buffer and copy up to cap elements. */
static bool read_array(const struct epabi_node* node, const char* name, OrtOpAttrType type, size_t elem_size,
                       void* out, size_t cap, size_t* count) {
    const OrtApi* ort = node->api->ort;
    const OrtOpAttr* attr = find_attr(node, name, type);
    if (attr == NULL) return false;
    size_t bytes = 0;
    OrtStatus* st = ort->ReadOpAttr(attr, type, NULL, 0, &bytes);
    if (st != NULL) ort->ReleaseStatus(st);
    size_t n = bytes / elem_size;
    if (count != NULL) *count = n;
    if (n == 0) return true;
    void* tmp = malloc(bytes);
    if (tmp == NULL) return false;
    size_t got = 0;
    st = ort->ReadOpAttr(attr, type, tmp, bytes, &got);
    if (st != NULL) {
        ort->ReleaseStatus(st);
        free(tmp);
        return false;
    }
    size_t copy = n < cap ? n : cap;
    if (copy > 0 && out != NULL) memcpy(out, tmp, copy * elem_size);
    free(tmp);
    return true;
}

bool epabi_attr_ints(const struct epabi_node* node, const char* name, int64_t* out, size_t cap, size_t* count) {
    return read_array(node, name, ORT_OP_ATTR_INTS, sizeof(int64_t), out, cap, count);
}

bool epabi_attr_floats(const struct epabi_node* node, const char* name, float* out, size_t cap, size_t* count) {
    return read_array(node, name, ORT_OP_ATTR_FLOATS, sizeof(float), out, cap, count);
}

bool epabi_attr_string(const struct epabi_node* node, const char* name, char* buf, size_t cap) {
    const OrtApi* ort = node->api->ort;
    const OrtOpAttr* attr = find_attr(node, name, ORT_OP_ATTR_STRING);
    if (attr == NULL) return false;
    /* Hosts disagree on whether the reported size counts the terminating NUL (ORT 1.24 does, 1.32 does
     * not), so read into one spare byte and terminate there ourselves. */
    size_t bytes = 0;
    OrtStatus* st = ort->ReadOpAttr(attr, ORT_OP_ATTR_STRING, NULL, 0, &bytes);
    if (st != NULL) ort->ReleaseStatus(st);
    char* tmp = malloc(bytes + 1);
    if (tmp == NULL) return false;
    size_t got = 0;
    st = ort->ReadOpAttr(attr, ORT_OP_ATTR_STRING, tmp, bytes + 1, &got);
    if (st != NULL) {
        ort->ReleaseStatus(st);
        free(tmp);
        return false;
    }
    tmp[bytes] = '\0';
    if (cap > 0) snprintf(buf, cap, "%s", tmp);
    free(tmp);
    return true;
}

bool epabi_attr_has(const struct epabi_node* node, const char* name) {
    return find_attr(node, name, ORT_OP_ATTR_UNDEFINED) != NULL;
}

bool epabi_attr_tensor(const struct epabi_node* node, const char* name, ONNXTensorElementDataType* dtype, void* out,
                       size_t cap, size_t* count) {
    const OrtApi* ort = node->api->ort;
    const OrtOpAttr* attr = find_attr(node, name, ORT_OP_ATTR_TENSOR);
    if (attr == NULL) return false;
    OrtValue* value = NULL;
    OrtStatus* st = ort->OpAttr_GetTensorAttributeAsOrtValue(attr, &value);
    OrtTensorTypeAndShapeInfo* info = NULL;
    if (st == NULL) st = ort->GetTensorTypeAndShape(value, &info);
    size_t n = 0;
    if (st == NULL) st = ort->GetTensorElementType(info, dtype);
    if (st == NULL) st = ort->GetTensorShapeElementCount(info, &n);
    void* data = NULL;
    if (st == NULL && n > 0) st = ort->GetTensorMutableData(value, &data);
    if (st == NULL) {
        const size_t bytes = n * epabi_dtype_size(*dtype);
        if (data != NULL && out != NULL) memcpy(out, data, bytes < cap ? bytes : cap);
        *count = n;
    }
    if (info != NULL) ort->ReleaseTensorTypeAndShapeInfo(info);
    if (value != NULL) ort->ReleaseValue(value);
    if (st == NULL) return true;
    ort->ReleaseStatus(st);
    return false;
}
