/*
 * node_desc.h - builds the kernel-facing description of a graph node (struct epabi_node, kernel.h) from an
 * OrtNode through the OrtApi graph accessors. The attribute readers epabi_attr_* live in node_desc.c too.
 *
 * Ownership: every string and const_data pointer in the description is borrowed from the host's graph and
 * stays valid while that graph does (GetCapability / Compile). Thread-safety: no shared state.
 */
#ifndef EPABI_NODE_DESC_H
#define EPABI_NODE_DESC_H

#include <stdbool.h>
#include <stddef.h>

#include "kernel.h"

/* Fills *out. Returns a host error as is. When the node cannot be described in epabi_node terms (non-tensor
 * values, too many inputs, rank above EPABI_MAX_RANK, ...), returns NULL with *describable = false and a
 * short reason in why. */
OrtStatus* epabi_node_describe(const struct epabi_api* api, const OrtNode* node, struct epabi_node* out,
                               bool* describable, char* why, size_t why_len);

/* Reads name, dtype and shape of one value (value may be NULL: an absent optional input). Same contract as
 * epabi_node_describe for *describable. const_data is filled for constant initializers. */
OrtStatus* epabi_value_describe(const struct epabi_api* api, const OrtValueInfo* value,
                                struct epabi_value_desc* out, bool* describable, char* why, size_t why_len);

#endif
