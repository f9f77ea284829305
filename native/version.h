/*
 * version.h - "MAJOR.MINOR.PATCH" release strings: parsing, comparison, and the API version a release
 * speaks. Pure functions, thread-safe.
 */
#ifndef EPABI_VERSION_H
#define EPABI_VERSION_H

#include <stdint.h>

struct epabi_release {
    unsigned major, minor, patch;
};

/* Parses the leading "MAJOR.MINOR.PATCH" of text (a suffix such as "-dev" or ".dev2026" is ignored;
 * "1.24" is read as 1.24.0). Returns 0 on success, -1 when text is NULL or does not start that way. */
int epabi_release_parse(const char* text, struct epabi_release* out);

/* <0, 0, >0 like strcmp. */
int epabi_release_cmp(struct epabi_release a, struct epabi_release b);

/* The OrtApi version a release serves: ONNX Runtime 1.N speaks API N (true since 1.11). Releases with
 * a major above 1 are assumed to speak at least `newest`. */
uint32_t epabi_release_api_version(struct epabi_release r, uint32_t newest);

#endif
