"""The plugin library exports exactly CreateEpFactories and ReleaseEpFactory (read from the ELF itself)."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF check (Linux build)")


def _defined_dynamic_symbols(path: str) -> set[str]:
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as fh:
        dynsym = ELFFile(fh).get_section_by_name(".dynsym")
        return {
            sym.name
            for sym in dynsym.iter_symbols()
            if sym.name
            and sym["st_shndx"] != "SHN_UNDEF"
            and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
        }


def test_exactly_two_symbols_are_exported(library_path: str) -> None:
    assert _defined_dynamic_symbols(library_path) == {"CreateEpFactories", "ReleaseEpFactory"}


def test_library_carries_origin_rpath(library_path: str) -> None:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with open(library_path, "rb") as fh:
        elf = ELFFile(fh)
        paths = [
            tag.runpath if tag.entry.d_tag == "DT_RUNPATH" else tag.rpath
            for section in elf.iter_sections()
            if isinstance(section, DynamicSection)
            for tag in section.iter_tags()
            if tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH")
        ]
    assert "$ORIGIN" in paths
