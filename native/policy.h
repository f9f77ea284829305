/*
 * policy.h - behaviour of ours that depends on the host's API version, each with its reason. ABI facts (when
 * a member exists) are in abi_since.h; these are choices, so they may differ from a member's since-version.
 */
#ifndef EPABI_POLICY_H
#define EPABI_POLICY_H

enum epabi_policy_since {
    /* Hosts 1.27+ mark compile-only sessions with session.compile_only; older ones only say ep.context_enable,
     * which then also makes a session compile-only for the virtual device (options.c). */
    EPABI_POLICY_COMPILE_ONLY_KEY = 27,
    /* OrtEp::IsConcurrentRunSupported exists since 1.24, but we answer it only from 1.28 on, as the plugin has
     * since its first release; older hosts keep their default (concurrent runs allowed). */
    EPABI_POLICY_CONCURRENT_RUN = 28,
};

#endif
