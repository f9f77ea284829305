/*
 * cudnn_loader_unit.c - native/cuda/cuda_cudnn_load.c on its own: loads cuDNN as the plugin does (the environment
 * picks where: EPABI_CUDNN_LIB_DIR, EPABI_CUDNN) and prints what it found, one KEY=VALUE a line, for
 * tests/test_cudnn_loader.py, which points it at folders of fake libcudnn.so.9 builds. When a library loaded, it
 * also calls cudnnCreate through the table (a fake answers a known handle) and says which libcudnn_*.so.9 of the
 * library's folder are open in the process (dlopen RTLD_NOLOAD). Build from the repository root:
 *
 *   gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Inative/include -Inative -Inative/kernels -Inative/cuda \
 *       tests/native/cudnn_loader_unit.c native/cuda/cuda_cudnn_load.c -ldl -lpthread -o /tmp/cudnn_unit
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda_cudnn.h"

int main(int argc, char** argv) {
    const char* why = NULL;
    const struct epabi_cudnn* lib = epabi_cudnn_load(&why);
    const char* again = NULL;
    if (epabi_cudnn_load(&again) != lib || again != why) {   /* once per process */
        printf("error=second load differs\n");
        return 1;
    }
    if (lib == NULL) {
        printf("loaded=0\nwhy=%s\n", why != NULL ? why : "(null)");
        return 0;
    }
    epabi_cudnn_handle h = NULL;
    int st = lib->Create(&h);
    printf("loaded=1\nversion=%zu\ncudart=%zu\npath=%s\nsublibraries=%d\ncreate=%d\nhandle=%p\n", lib->version,
           lib->cudart_version, lib->path, lib->sublibraries, st, h);
    for (int i = 1; i < argc; ++i)   /* sub-library paths to look for */
        printf("open %s=%d\n", argv[i], dlopen(argv[i], RTLD_NOW | RTLD_NOLOAD) != NULL);
    return 0;
}
