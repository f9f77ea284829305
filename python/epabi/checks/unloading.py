"""Why a shared library stays mapped after ``dlclose``, read from its ELF file: the reasons glibc has to keep a
library loaded that ``release_and_unload`` names when a plugin does not unload.

* ``DF_1_NODELETE`` (linked with ``-z nodelete``): never unloaded;
* ``STB_GNU_UNIQUE`` symbols (C++ inline/template statics, with GCC's default ``--enable-gnu-unique-object``):
  glibc marks the library not unloadable once it binds one;
* imports of ``__cxa_thread_atexit_impl`` / ``__cxa_thread_atexit`` (C++ ``thread_local`` or Rust thread-local
  values with destructors): glibc keeps the library loaded until every thread that made such a value exits.

Needs pyelftools (the ``test`` extra); without it, or for a file that is not ELF, no reason is given.
"""

from __future__ import annotations

#: DT_FLAGS_1 bit of ``-z nodelete``.
_DF_1_NODELETE = 0x8
_THREAD_ATEXIT = ("__cxa_thread_atexit_impl", "__cxa_thread_atexit")


def stay_loaded_reasons(path: str) -> list[str]:
    """What in the ELF file ``path`` keeps it loaded, in words (empty: nothing found, or unknown)."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.dynamic import DynamicSection
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
    except ImportError:
        return []
    reasons: list[str] = []
    try:
        with open(path, "rb") as stream:
            elf = ELFFile(stream)
            dynamic = elf.get_section_by_name(".dynamic")
            if isinstance(dynamic, DynamicSection):
                flags = [t.entry.d_val for t in dynamic.iter_tags() if t.entry.d_tag == "DT_FLAGS_1"]
                if any(f & _DF_1_NODELETE for f in flags):
                    reasons.append("it is linked with -z nodelete")
            symbols = elf.get_section_by_name(".dynsym")
            if isinstance(symbols, SymbolTableSection):
                unique = 0
                imports: set[str] = set()
                for sym in symbols.iter_symbols():
                    if sym["st_shndx"] == "SHN_UNDEF":
                        imports.add(sym.name.split("@")[0])
                    elif sym["st_info"]["bind"] in ("STB_GNU_UNIQUE", "STB_LOOS"):  # pyelftools names 10 STB_LOOS
                        unique += 1
                if unique:
                    reasons.append(f"it defines {unique} STB_GNU_UNIQUE symbols, which make glibc keep it loaded for "
                                   "the life of the process")
                atexit = [name for name in _THREAD_ATEXIT if name in imports]
                if atexit:
                    reasons.append(f"it may register thread-local destructors (it imports {atexit[0]}), and glibc "
                                   "keeps a library loaded while a thread that made one is alive")
    except (ELFError, OSError):
        return []
    return reasons
