#!/usr/bin/env python3
"""Compile-checks the CUDA kernels without a GPU: NVRTC needs no device.

What it checks, in order:
  1. layout: gcc compiles native/kernels/launch_args.h and prints sizeof/offsetof of every member of every
     launch block; the numbers must equal the generated static_assert block in native/cuda/cuda_kernels.cu
     (--update-layout rewrites that block from gcc's numbers). NVRTC then re-checks them on its side: a
     block whose layout differs between the two compilers fails the NVRTC compilation.
  2. NVRTC: compiles cuda_kernels.cu with launch_args.h as the in-memory header "launch_args.h", with the
     options cuda_module.c uses (read from its EPABI_NVRTC_OPTIONS line) and --gpu-architecture=sm_<arch>
     (CUBIN, the normal path), then compute_<arch> (PTX, the fallback path); prints the logs.
  3. names: every kernel of EPABI_CUDA_KERNEL_LIST (cuda_launch_internal.h, the table cuda_module.c looks
     up) must be an `.entry` of the PTX, i.e. an unmangled extern "C" __global__ function.
  4. chains: gcc builds a driver around cuda_chain_jit.c's own generator, which writes the programs of a few sample
     chains (every op kind, immediates, dense and broadcast inputs, several outputs); NVRTC must compile each with
     the same headers and options, into a module whose entry is `epabi_chain`.

Usage: tools/check_nvrtc.py [--nvrtc PATH/libnvrtc.so] [--arch 90] [--update-layout]
libnvrtc is searched as: --nvrtc, $EPABI_CUDA_LIB_DIR, the nvidia-* wheels of this Python (the test extra
installs nvidia-cuda-nvrtc), $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, the system path.
Exit status 0 when everything passes.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import re
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CU = os.path.join(ROOT, "native", "cuda", "cuda_kernels.cu")
ARGS_H = os.path.join(ROOT, "native", "kernels", "launch_args.h")
MODULE_C = os.path.join(ROOT, "native", "cuda", "cuda_module.c")
MATH_H = os.path.join(ROOT, "native", "cuda", "cuda_math.cuh")
CHAIN_JIT_C = os.path.join(ROOT, "native", "cuda", "cuda_chain_jit.c")
LIST_H = os.path.join(ROOT, "native", "cuda", "cuda_launch_internal.h")
BEGIN = "// BEGIN GENERATED LAYOUT CHECK"
END = "// END GENERATED LAYOUT CHECK"
SONAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")


def find_nvrtc(explicit: str | None) -> str:
    if explicit:
        return explicit
    dirs = []
    if os.environ.get("EPABI_CUDA_LIB_DIR"):
        dirs.append(os.environ["EPABI_CUDA_LIB_DIR"])
    site = sysconfig.get_paths().get("purelib", "")
    dirs += [os.path.join(site, "nvidia", "cu13", "lib"), os.path.join(site, "nvidia", "cuda_nvrtc", "lib")]
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            dirs.append(os.path.join(os.environ[env], "lib64"))
    dirs.append("/usr/local/cuda/lib64")
    for d in dirs:
        for s in SONAMES:
            p = os.path.join(d, s)
            if os.path.exists(p):
                return p
    return SONAMES[0]   # the system search path


# ---- 1. layout ----------------------------------------------------------------------------------------

def parse_structs(text: str) -> dict[str, list[str]]:
    """{struct name: [member names]} of the C side of launch_args.h (the part after #else)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    structs = {}
    for m in re.finditer(r"struct\s+(\w+)\s*\{(.*?)\}\s*;", text, flags=re.S):
        name, body = m.group(1), m.group(2)
        members = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            # "const float* a", "bool trans_a, trans_b", "int64_t strides[3][EPABI_MAX_RANK]"
            head = re.match(r"^((?:const\s+)?(?:unsigned\s+|signed\s+)?(?:struct\s+|enum\s+)?\w+)\s*(.*)$", decl)
            if not head:
                raise SystemExit(f"cannot parse member '{decl}' of struct {name}")
            for d in head.group(2).split(","):
                d = d.strip().lstrip("*").strip()
                ident = re.match(r"^(?:const\s+)?\**\s*(\w+)", d)
                if not ident:
                    raise SystemExit(f"cannot parse declarator '{d}' of struct {name}")
                members.append(ident.group(1))
        structs[name] = members
    return structs


def gcc_layout(structs: dict[str, list[str]]) -> list[str]:
    prog = ['#include <stddef.h>', '#include <stdio.h>', '#include "launch_args.h"', "int main(void) {"]
    for s in structs:
        prog.append(f'    printf("static_assert(sizeof({s}) == %zu, \\"{s} layout\\");\\n", sizeof(struct {s}));')
    # member offsets need __builtin_offsetof, which older NVRTCs (13.0) lack: the .cu defines EP_HAVE_OFFSETOF
    prog.append('    printf("#if EP_HAVE_OFFSETOF\\n");')
    for s, members in structs.items():
        for f in members:
            prog.append(f'    printf("static_assert(EP_OFF({s}, {f}) == %zu, \\"{s}.{f}\\");\\n", '
                        f"offsetof(struct {s}, {f}));")
    prog.append('    printf("#endif\\n");')
    prog += ["    return 0;", "}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write("\n".join(prog) + "\n")
        inc = [f"-I{os.path.join(ROOT, p)}" for p in ("native", "native/include", "native/kernels")]
        subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", *inc, src, "-o", exe], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def check_dtypes() -> bool:
    """The ONNXTensorElementDataType values launch_args.h restates for NVRTC equal ort_abi.h's."""
    with open(ARGS_H) as f:
        header = f.read()
    rtc = header.split("#if defined(__CUDACC_RTC__)", 1)[1].split("#else", 1)[0]
    with open(os.path.join(ROOT, "native", "include", "epabi", "ort_abi.h")) as f:
        abi = f.read()
    pattern = r"(ONNX_TENSOR_ELEMENT_DATA_TYPE_\w+)\s*=\s*(\d+)"
    ours, theirs = dict(re.findall(pattern, rtc)), dict(re.findall(pattern, abi))
    wrong = [f"{k} = {v} (ort_abi.h: {theirs.get(k)})" for k, v in ours.items() if theirs.get(k) != v]
    if not ours or wrong:
        print("dtypes: launch_args.h's NVRTC values differ from ort_abi.h:", "; ".join(wrong) or "none found")
        return False
    print(f"dtypes: OK ({len(ours)} ONNXTensorElementDataType values match ort_abi.h)")
    return True


def check_layout(update: bool) -> bool:
    with open(ARGS_H) as f:
        header = f.read()
    c_part = header.split("#else", 1)[1] if "#else" in header else header
    structs = parse_structs(c_part)
    lines = gcc_layout(structs)
    with open(CU) as f:
        cu = f.read()
    start, stop = cu.find(BEGIN), cu.find(END)
    if start < 0 or stop < 0:
        print(f"layout: markers '{BEGIN}' / '{END}' missing in {CU}")
        return False
    current = cu[start + len(BEGIN):stop].strip().splitlines()
    if current == lines:
        print(f"layout: OK ({len(structs)} blocks, {len(lines)} asserts match gcc)")
        return True
    if update:
        cu = cu[:start + len(BEGIN)] + "\n" + "\n".join(lines) + "\n" + cu[stop:]
        with open(CU, "w") as f:
            f.write(cu)
        print(f"layout: rewrote the generated block of {os.path.relpath(CU, ROOT)} ({len(lines)} asserts)")
        return True
    missing = [line for line in lines if line not in current]
    print("layout: the generated block of cuda_kernels.cu is stale (run with --update-layout); differences:")
    for line in missing[:20]:
        print("   gcc says:", line)
    return False


# ---- 2. NVRTC --------------------------------------------------------------------------------------------

# ---- 4. chains -----------------------------------------------------------------------------------------

# Sample chains for the generator, as C initialisers of struct chain_args (the fields generate() reads). Operands:
# r >= 0 a register, -1 - k input k, IMM an immediate (alpha for a, beta for b).
CHAIN_SAMPLES = [
    # magika's GELU-tanh over a dense input: scalar immediates, Tanh, one output
    "{.n_ops = 9, .n_in = 1, .n_out = 1, .rank = 1, .dims = {260096}, .strides = {{1}}, .ops = {"
    "{CHAIN_BINARY, OP_MUL, IMM, -1, -1, 0.5f, 0}, {CHAIN_BINARY, OP_MUL, -1, -1, -1, 0, 0},"
    "{CHAIN_BINARY, OP_MUL, 1, -1, -1, 0, 0}, {CHAIN_BINARY, OP_MUL, IMM, 2, -1, 0.044715f, 0},"
    "{CHAIN_BINARY, OP_ADD, -1, 3, -1, 0, 0}, {CHAIN_BINARY, OP_MUL, IMM, 4, -1, 0.7978846f, 0},"
    "{CHAIN_UNARY, UN_TANH, 5, 0, -1, 0, 0}, {CHAIN_BINARY, OP_ADD, IMM, 6, -1, 1.0f, 0},"
    "{CHAIN_BINARY, OP_MUL, 0, 7, 0, 0, 0}}}",
    # a broadcast bias over rank 3, Clip, LeakyRelu, Max/Min, Div by an immediate, two outputs
    "{.n_ops = 6, .n_in = 3, .n_out = 2, .rank = 3, .dims = {2, 512, 508},"
    " .strides = {{260096, 508, 1}, {0, 1, 0}, {0, 0, 1}}, .ops = {"
    "{CHAIN_BINARY, OP_ADD, -1, -2, -1, 0, 0}, {CHAIN_CLIP, 0, 0, 0, 0, -1.0f, 6.0f},"
    "{CHAIN_UNARY, UN_LEAKY_RELU, 1, 0, -1, 0.01f, 0}, {CHAIN_BINARY, OP_MAX, 2, -3, -1, 0, 0},"
    "{CHAIN_BINARY, OP_DIV, 3, IMM, -1, 0, 3.0f}, {CHAIN_BINARY, OP_MIN, 4, -1, 1, 0, 0}}}",
]


def chain_programs() -> list[str]:
    """The programs cuda_chain_jit.c's generate() writes for CHAIN_SAMPLES, from a gcc-built driver."""
    # the file's CUDA calls never run here: stubs of exactly their declarations (a drifted one fails to compile)
    prog = ['#include "cuda_chain_jit.c"', "#define IMM EPABI_CHAIN_IMMEDIATE",
            "OrtStatus* epabi_error(const struct epabi_api* api, OrtErrorCode code, const char* fmt, ...) "
            "{ (void)api; (void)code; (void)fmt; return NULL; }",
            "const char* epabi_cuda_error_text(const struct epabi_cuda_driver* cu, epabi_cu_result r) "
            "{ (void)cu; (void)r; return \"\"; }",
            "void epabi_cuda_relax(const struct epabi_cuda_driver* cu, struct epabi_cuda_relaxed* r) "
            "{ (void)cu; (void)r; }",
            "void epabi_cuda_unrelax(const struct epabi_cuda_driver* cu, struct epabi_cuda_relaxed* r) "
            "{ (void)cu; (void)r; }",
            "OrtStatus* epabi_cuda_program_load(const struct epabi_api* api, const struct epabi_cuda_libs* libs, "
            "const struct epabi_cuda_module* kernels, const char* source, const char* name, epabi_cu_module* out) "
            "{ (void)api; (void)libs; (void)kernels; (void)source; (void)name; *out = NULL; return NULL; }",
            "int main(void) {"]
    for i, sample in enumerate(CHAIN_SAMPLES):
        prog += [f"    {{ static const struct chain_args a{i} = {sample};",
                 "      static char buf[SOURCE_CHARS]; struct text t = {buf, 0, false};",
                 f"      generate(&a{i}, &t); if (t.overflow) return 1; fputs(buf, stdout); fputs(\"\\f\", stdout); }}"]
    prog += ["    return 0;", "}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "chains.c"), os.path.join(tmp, "chains")
        with open(src, "w") as f:
            f.write("\n".join(prog) + "\n")
        inc = [f"-I{os.path.join(ROOT, p)}" for p in ("native", "native/include", "native/kernels", "native/cuda")]
        subprocess.run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", *inc, src, "-o", exe,
                        "-lpthread"], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return [p for p in out.split("\f") if p.strip()]


def module_options() -> list[str]:
    with open(MODULE_C) as f:
        text = f.read()
    m = re.search(r"#define\s+EPABI_NVRTC_OPTIONS\s+(.*)", text)
    if not m:
        raise SystemExit("cuda_module.c has no '#define EPABI_NVRTC_OPTIONS ...' line")
    return re.findall(r'"([^"]*)"', m.group(1))


class Nvrtc:
    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def compile(self, src: str, headers: list[tuple[str, str]], options: list[str],
                want_ptx: bool) -> tuple[int, str, bytes]:
        prog = ctypes.c_void_p()
        n = len(headers)
        hsrc = (ctypes.c_char_p * max(n, 1))(*[h[1].encode() for h in headers])
        hname = (ctypes.c_char_p * max(n, 1))(*[h[0].encode() for h in headers])
        rc = self.lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"cuda_kernels.cu", n, hsrc, hname)
        if rc != 0:
            return rc, "nvrtcCreateProgram failed", b""
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = self.lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        self.lib.nvrtcGetProgramLog(prog, log)
        image = b""
        if rc == 0:
            get_size, get = (self.lib.nvrtcGetPTXSize, self.lib.nvrtcGetPTX) if want_ptx else \
                (self.lib.nvrtcGetCUBINSize, self.lib.nvrtcGetCUBIN)
            get_size(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            get(prog, buf)
            image = buf.raw
        self.lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return rc, log.value.decode(errors="replace"), image

    def error(self, rc: int) -> str:
        return self.lib.nvrtcGetErrorString(rc).decode()


def kernel_list() -> list[str]:
    with open(LIST_H) as f:
        text = f.read()
    m = re.search(r"#define\s+EPABI_CUDA_KERNEL_LIST\(X\)((?:.*\\\n)*.*)", text)
    if not m:
        raise SystemExit("cuda_launch_internal.h has no EPABI_CUDA_KERNEL_LIST(X)")
    return re.findall(r"X\((\w+)\)", m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvrtc", help="path of libnvrtc.so")
    ap.add_argument("--arch", default="90", help="compute capability digits, e.g. 90 (default) or 80")
    ap.add_argument("--update-layout", action="store_true", help="rewrite the layout block from gcc's numbers")
    args = ap.parse_args()

    ok = check_layout(args.update_layout)
    ok = check_dtypes() and ok

    path = find_nvrtc(args.nvrtc)
    nv = Nvrtc(path)
    print(f"nvrtc: {path} (version {nv.version[0]}.{nv.version[1]})")
    with open(CU) as f:
        src = f.read()
    with open(ARGS_H) as f:
        headers = [("launch_args.h", f.read())]
    with open(MATH_H) as f:
        headers.append(("cuda_math.cuh", f.read()))
    base = module_options()
    entries = set()
    for arch, want_ptx in ((f"sm_{args.arch}", False), (f"compute_{args.arch}", True)):
        options = [f"--gpu-architecture={arch}", *base]
        rc, log, image = nv.compile(src, headers, options, want_ptx)
        status = "OK" if rc == 0 else f"FAILED ({nv.error(rc)})"
        kind = "PTX" if want_ptx else "CUBIN"
        print(f"nvrtc {' '.join(options)}: {status}, {len(image)} bytes of {kind}")
        if log.strip():
            print(log.rstrip())
        if rc != 0:
            ok = False
        elif want_ptx:
            entries = set(re.findall(r"\.entry\s+(\w+)\s*\(", image.decode(errors="replace")))

    names = kernel_list()
    if entries:
        missing = [n for n in names if n not in entries]
        unused = sorted(entries - set(names))
        if missing:
            ok = False
            print("names: kernels looked up but not defined (extern \"C\" __global__):", ", ".join(missing))
        else:
            print(f"names: OK (all {len(names)} kernels of EPABI_CUDA_KERNEL_LIST are entries of the module)")
        if unused:
            print("names: note, kernels defined but never looked up:", ", ".join(unused))
    programs = chain_programs()
    for i, chain in enumerate(programs):
        options = [f"--gpu-architecture=compute_{args.arch}", *base]
        rc, log, image = nv.compile(chain, headers, options, True)
        has_entry = rc == 0 and re.search(r"\.entry\s+epabi_chain\s*\(", image.decode(errors="replace"))
        print(f"chains: sample {i} ({chain.count(chr(10))} lines): {'OK' if has_entry else 'FAILED'}")
        if log.strip():
            print(log.rstrip())
        if not has_entry:
            ok = False
            print(chain)
    if len(programs) != len(CHAIN_SAMPLES):
        ok = False
        print(f"chains: the driver wrote {len(programs)} programs for {len(CHAIN_SAMPLES)} samples")
    print("check_nvrtc:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
