/*
 * abi_since.h - the API versions at which ONNX Runtime ABI members we fill or call appeared.
 *
 * Facts of the ABI, not choices of ours: each value restates a since mark of native/include/epabi/ort_abi.h
 * and is named EPABI_SINCE_<struct>_<member>, which tests/test_abi_since.py checks against that header. The
 * host reads (or serves) a member only when both sides know it, so a member is filled, or called, only when
 * the negotiated version reaches its value (epabi_has). Behaviour choices keyed on versions are in policy.h.
 */
#ifndef EPABI_ABI_SINCE_H
#define EPABI_ABI_SINCE_H

enum epabi_abi_since {
    EPABI_SINCE_OrtAllocator_Reserve = 18,
    EPABI_SINCE_OrtAllocator_GetStats = 23,
    EPABI_SINCE_OrtAllocator_Shrink = 25,
    EPABI_SINCE_OrtEpApi_GetEnvConfigEntries = 24,
    EPABI_SINCE_OrtEp_Sync = 25,
    EPABI_SINCE_OrtEp_CreateProfiler = 25,      /* with OrtEpProfilerImpl and OrtEpApi's ProfilingEvent functions */
    EPABI_SINCE_OrtEp_IsGraphCaptureEnabled = 26,   /* with IsGraphCaptured, ReplayGraph and the policy query */
    EPABI_SINCE_OrtEp_ReleaseCapturedGraph = 27,
    EPABI_SINCE_OrtApi_KernelContext_GetPreallocatedOutput = 30,
};

#endif
