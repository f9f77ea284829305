#include "version.h"

#include <ctype.h>
#include <stdlib.h>

static int read_number(const char** p, unsigned* out) {
    if (!isdigit((unsigned char)**p)) return -1;
    char* end = NULL;
    unsigned long v = strtoul(*p, &end, 10);
    if (v > 100000UL) return -1;
    *out = (unsigned)v;
    *p = end;
    return 0;
}

int epabi_release_parse(const char* text, struct epabi_release* out) {
    if (text == NULL || out == NULL) return -1;
    const char* p = text;
    struct epabi_release r = {0, 0, 0};
    if (read_number(&p, &r.major) != 0 || *p != '.') return -1;
    ++p;
    if (read_number(&p, &r.minor) != 0) return -1;
    if (*p == '.' && isdigit((unsigned char)p[1])) {
        ++p;
        if (read_number(&p, &r.patch) != 0) return -1;
    }
    *out = r;
    return 0;
}

int epabi_release_cmp(struct epabi_release a, struct epabi_release b) {
    if (a.major != b.major) return a.major < b.major ? -1 : 1;
    if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
    if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
    return 0;
}

uint32_t epabi_release_api_version(struct epabi_release r, uint32_t newest) {
    if (r.major > 1) return newest;
    if (r.major == 0) return 0;
    return r.minor;
}
