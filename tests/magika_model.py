"""The model of the ``magika`` wheel (a test dependency; nothing is vendored) and real-file inputs for it.

Inputs follow magika's standard_v3_3 preprocessing: the first 1024 bytes after leading whitespace and the
last 1024 bytes before trailing whitespace, padded with token 256; int32 of shape [N, 2048].
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import pytest

BEG = END = 1024
PAD = 256

#: magika's plan on the software adapter, as the VERBOSE "compiled" summary counts it: 45 steps (of 104 nodes), of
#: which 10 elementwise chains take 43 nodes (two of its Max clamps among them), 2 moment pairs (its expanded
#: LayerNorms' sums), 1 fused softmax (its last layer's ReduceMax, Max floor, Sub, Exp, ReduceSum, Div and the four
#: views between them) and 1 one-hot lookup (its first layer), and 17 steps that hand out views (Reshape, Squeeze,
#: Unsqueeze, identity Expand, whole Slice).
PLAN_STEPS, PLAN_CHAINS, PLAN_CHAIN_NODES, PLAN_MOMENTS, PLAN_VIEWS = 45, 10, 43, 2, 17
PLAN_SOFTMAX = 1


def model_path() -> Path:
    """Path of magika's standard_v3_3 model; skips (fails in CI) when magika is not installed."""
    try:
        import magika
    except ImportError:
        import os

        if os.environ.get("CI"):
            pytest.fail("magika is a test dependency and must be installed in CI")
        pytest.skip("magika is not installed (pip install magika)")
    path = Path(magika.__file__).parent / "models" / "standard_v3_3" / "model.onnx"
    assert path.is_file(), f"magika no longer ships {path}"
    return path


def features(data: bytes) -> np.ndarray:
    beg = list(data[:4096].lstrip()[:BEG])
    end = list(data[-4096:].rstrip()[-END:]) if data else []
    return np.array(beg + [PAD] * (BEG - len(beg)) + [PAD] * (END - len(end)) + end, dtype=np.int32)


def real_files(count: int = 6) -> list[Path]:
    """Real files of different kinds: Python sources, a shared library, a JSON file, our own C source."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    picks = [stdlib / "json" / "__init__.py", stdlib / "email" / "message.py", stdlib / "csv.py"]
    picks += sorted(stdlib.glob("lib-dynload/*.so"))[:1]
    here = Path(__file__).resolve().parent
    picks += [here.parent / "native" / "entry.c", here.parent / "pyproject.toml"]
    files = [p for p in picks if p.is_file()]
    return files[:count]


def batch() -> np.ndarray:
    return np.stack([features(p.read_bytes()) for p in real_files()])
