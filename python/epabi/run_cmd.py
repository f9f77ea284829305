"""``epabi run``: run an ONNX model (default: the built-in MLP) through the epabi plugin EP, or any plugin EP
library (``--library PATH [--ep NAME]``) on that library's devices.

Hosts: ``emulated`` (epabi's own host of the ``--host-version`` release, default the newest; ``--hardware``
injects the hardware it offers) or ``onnxruntime`` (a pip-installed onnxruntime in this environment). Prints
each output's shape, dtype and checksums (sum, mean), the EP device, which EP ran each node, and per-run times.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from . import EP_NAME
from .cmd_common import add_host_version_option, describe_hardware, hardware, no_device_hint
from .errors import PluginLoadError
from .models import mlp, sample_inputs
from .objects import HardwareDevice
from .versions import read_min_onnxruntime_version


class RunError(RuntimeError):
    """A run that could not be set up or failed; the message is for the user."""


def _parse_device(text: str) -> tuple[str, int | None]:
    kind, _, index = text.partition(":")
    if kind not in ("auto", "software", "cpu", "gpu", "npu") or \
            (index and (kind not in ("cpu", "gpu", "npu") or not index.isdigit())):
        raise argparse.ArgumentTypeError(f"device {text!r}: expected auto, software, cpu[:N], gpu[:N] or npu[:N]")
    return kind, int(index) if index else None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"runs {text!r}: expected an integer >= 1")
    return value


def _parse_input(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"input {text!r}: expected NAME=FILE.npy")
    return name, path


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds the ``run`` subcommand to the ``epabi`` parser."""
    run = sub.add_parser("run", parents=[common], help="run an ONNX model on the epabi plugin EP",
                         description="Run an ONNX model (default: a built-in 3-layer MLP, width 64) through the "
                                     "epabi plugin EP, on epabi's emulated host or on a real onnxruntime.")
    run.add_argument("model", nargs="?", default=None, help="ONNX model file (default: the built-in MLP)")
    run.add_argument("--device", type=_parse_device, default=("auto", None), metavar="auto|software|cpu|gpu|npu[:N]",
                     help="EP device: auto (epabi's: a GPU if there is one, else the CPU software adapter; another "
                          "plugin's: its first device), software (epabi's CPU software adapter), or the N-th EP "
                          "device on a cpu, gpu or npu hardware device (default: auto)")
    run.add_argument("--host", choices=("emulated", "onnxruntime"), default="emulated",
                     help="which host loads the plugin (default: emulated)")
    run.add_argument("--input", type=_parse_input, action="append", default=[], metavar="NAME=FILE.npy",
                     help="input from a .npy file (repeatable); missing inputs are random with a fixed seed")
    run.add_argument("--runs", type=_positive, default=3, help="number of timed runs (default: 3)")
    run.add_argument("--library", default=None, metavar="PATH",
                     help="plugin EP library (default: epabi's own); the run uses its devices")
    run.add_argument("--ep", default=None, metavar="NAME",
                     help="the EP whose devices the run uses (default: epabi's EP for its library; for another "
                          "library the one EP it offers devices of)")
    run.add_argument("--name", default=None,
                     help="registration name (default: the --ep name, else epabi); some plugins (ggml) name "
                          "their EP after it")
    add_host_version_option(run)
    run.set_defaults(func=cmd_run)


def _select(devices: list[Any], kind: str, index: int | None, metadata: Any, hw_type: Any,
            ep: str | None = None, no_device: str = "", offered: list[HardwareDevice] | None = None) -> Any:
    """The EP device a run uses among a host's devices: of EP ``ep`` (default: ours if it is there, else the
    only EP listed), picked by ``kind``/``index``. ``metadata(d)`` gives a device's ep_metadata, ``hw_type(d)``
    its hardware type name (CPU, GPU, NPU); ``no_device`` is the hint for an empty list; ``offered`` the hardware
    the emulated host offered (None: onnxruntime's own discovery), named in errors."""
    names = list(dict.fromkeys(d.ep_name for d in devices))
    if ep is None:
        if not names and no_device:
            raise RunError(f"the plugin library lists no EP device. {no_device}")
        if EP_NAME in names or not names:
            ep = EP_NAME
        elif len(names) == 1:
            ep = names[0]
        else:
            raise RunError(f"the library lists devices of {len(names)} EPs ({', '.join(names)}): choose one with "
                           "--ep NAME")
    if ep not in names and (ep != EP_NAME or names):
        listed = ", ".join(names) if names else "none"
        raise RunError(f"--ep {ep}: the library lists no device of that EP (EPs with devices: {listed})"
                       + (f". {no_device}" if no_device and not names else ""))
    if ep == EP_NAME:
        return _select_ours(devices, "software" if kind == "cpu" and not index else kind, index, metadata, offered)
    mine = [d for d in devices if d.ep_name == ep]
    if kind == "software":
        raise RunError(f"--device software is the epabi plugin's CPU software adapter; for {ep} use auto, cpu, "
                       "gpu or npu")
    if kind == "auto":
        return mine[0]
    typed = [d for d in mine if hw_type(d) == kind.upper()]
    i = index or 0
    if i >= len(typed):
        have = ", ".join(hw_type(d) for d in mine)
        raise RunError(f"device {kind}:{i}: {ep} lists {len(typed)} EP device(s) on a {kind.upper()} (its devices "
                       f"are on: {have})")
    return typed[i]


def _select_ours(devices: list[Any], kind: str, index: int | None, metadata: Any,
                 offered: list[HardwareDevice] | None = None) -> Any:
    ours = [d for d in devices if d.ep_name == EP_NAME]
    gpus = [d for d in ours if metadata(d).get("device_kind") == "gpu"]
    software = [d for d in ours if metadata(d).get("device_kind") == "software"]
    hardware_text = "" if offered is None else f"; this host offered: {describe_hardware(offered)}"
    if kind == "npu" or (kind == "cpu" and index):
        there = "" if offered is None or kind != "npu" or any(hw.type.name == "NPU" for hw in offered) else \
            " (and this host offered no NPU)"
        raise RunError(f"device {kind}:{index or 0}: the epabi plugin never offers an EP device on an NPU or a "
                       f"second CPU device{there}: it offers NVIDIA GPUs (--device gpu[:N]) and one CPU software "
                       f"adapter (--device software){hardware_text}")
    if kind == "gpu" or (kind == "auto" and gpus):
        i = index or 0
        if i >= len(gpus):
            raise RunError(f"device gpu:{i}: the plugin lists {len(gpus)} GPU device(s)")
        return gpus[i]
    if not software:
        if gpus:
            raise RunError("no software-adapter device: the plugin offers it only when the host lists no GPU, and "
                           "this host lists one; use --device gpu, or with --host emulated --cpu-only to offer "
                           "the plugin only the CPU")
        if offered is not None and not any(hw.type.name == "CPU" for hw in offered):
            raise RunError(f"no software-adapter device: it sits on the CPU hardware device, and this host offered "
                           f"none ({describe_hardware(offered)}); add --hardware cpu")
        raise RunError("no software-adapter device: set EPABI_ALLOW_SOFTWARE_ADAPTER=1")
    return software[0]


def _device_facts(ep: str, kind: Any, hw: Any, vendor_id: int, vendor: str, device_id: int) -> dict[str, Any]:
    """What the result says about the chosen EP device: its EP, kind (ours: device_kind; else the hardware
    type) and the hardware device it is on."""
    hw_name = getattr(hw, "name", str(hw))
    return {"ep": ep, "device_kind": kind or hw_name.lower(),
            "device": f"{hw_name} {vendor} ({vendor_id:#06x}) device_id {device_id:#x}"}


def _feeds(model: onnx.ModelProto, inputs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    feeds = sample_inputs(model)
    for name, path in inputs:
        if name not in feeds:
            raise RunError(f"--input {name}: the model has no input of that name (inputs: {sorted(feeds)})")
        try:
            feeds[name] = np.load(path)
        except (OSError, ValueError) as exc:
            raise RunError(f"--input {name}={path}: cannot read the .npy file: {exc}") from exc
    return feeds


def _time_runs(run: Any, runs: int) -> tuple[list[Any], list[float]]:
    times = []
    outputs: list[Any] = []
    for _ in range(max(runs, 1)):
        start = time.perf_counter()
        outputs = run()
        times.append((time.perf_counter() - start) * 1e3)
    return outputs, times


def run_emulated(model: onnx.ModelProto, feeds: dict[str, np.ndarray], device: tuple[str, int | None],
                 runs: int, library: str, cpu_only: bool = False, ep: str | None = None, name: str = "epabi",
                 injected: list[HardwareDevice] | None = None, api_version: int | None = None) -> dict[str, Any]:
    """One session of epabi's emulated host of ``api_version`` (None: the newest) on the chosen EP device of
    ``library`` (registered as ``name``); ``injected``: the hardware devices the host offers instead of the
    discovered ones."""
    import epabi

    # the software adapter is offered only when no GPU is listed, so asking for it means a CPU-only host
    ours_cpu = device[0] == "software" or (device[0] == "cpu" and ep in (None, EP_NAME)
                                           and Path(library).resolve() == Path(epabi.get_library_path()).resolve())
    offered = hardware(cpu_only, injected) if injected or cpu_only else ([epabi.cpu_device()] if ours_cpu else None)
    with epabi.Host(api_version=api_version, hardware=offered) as host:
        host.register_execution_provider_library(name, library)
        factories = [f.name for lib in host.libraries for f in lib.factories]
        hint = no_device_hint(library, factories, host.hardware) if EP_NAME not in factories else ""
        dev = _select(host.get_ep_devices(), *device, metadata=lambda d: d.ep_metadata,
                      hw_type=lambda d: d.device.type.name, ep=ep, no_device=hint, offered=host.hardware)
        so = epabi.SessionOptions()
        so.add_provider_for_devices([dev])
        with epabi.InferenceSession(model, so) as session:
            outputs, times = _time_runs(lambda: session.run(None, feeds), runs)
            names = [o.name for o in session.get_outputs()]
            hw = dev.device
            return {"host": f"emulated ONNX Runtime {host.version_string}", "providers": session.get_providers(),
                    **_device_facts(dev.ep_name, dev.ep_metadata.get("device_kind"), hw.type, hw.vendor_id,
                                    hw.vendor, hw.device_id),
                    "cpu_fallback": session.cpu_fallback,
                    "placement": dict(session.node_assignment), "outputs": dict(zip(names, outputs)),
                    "run_ms": times}


def _ort_placement(session: Any) -> dict[str, str]:
    """Node -> EP from onnxruntime's assignment info; the ORT objects die with this frame, before the plugin
    library is unregistered (ORT crashes when they outlive it)."""
    placement: dict[str, str] = {}
    getter = getattr(session, "get_provider_graph_assignment_info", None)
    if getter is not None:
        for subgraph in getter():
            for node in subgraph.get_nodes():
                placement[node.name or node.op_type] = subgraph.ep_name
    return placement


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray], device: tuple[str, int | None],
                    runs: int, library: str, cpu_only: bool = False, ep: str | None = None, name: str = "epabi",
                    injected: list[HardwareDevice] | None = None, api_version: int | None = None) -> dict[str, Any]:
    """One session of a real onnxruntime on the chosen EP device of ``library`` (registered as ``name``)."""
    if injected:
        raise RunError("--hardware injects hardware into the emulated host only; onnxruntime discovers its own")
    if api_version is not None:
        raise RunError("--host-version picks the release the emulated host emulates; --host onnxruntime runs the "
                       "installed onnxruntime, of its own version")
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise RunError("--host onnxruntime: onnxruntime is not installed here "
                       f"(pip install 'onnxruntime>={read_min_onnxruntime_version()}')") from exc
    ort.register_execution_provider_library(name, library)
    try:
        return _ort_session_run(ort, model, feeds, device, runs, ep, library)
    except BaseException as exc:
        # the tracebacks' frames hold the session: drop their locals so it is released before the library is
        # unregistered (ORT crashes when a session outlives its EP library)
        _clear_frames(exc)
        raise
    finally:
        import gc

        gc.collect()
        ort.unregister_execution_provider_library(name)


def _clear_frames(exc: BaseException) -> None:
    """Clears the locals of every finished frame in exc's tracebacks, its causes' and contexts' included."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)
        todo += [e.__cause__, e.__context__]


def _ort_session_run(ort: Any, model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                     device: tuple[str, int | None], runs: int, ep: str | None = None,
                     library: str = "") -> dict[str, Any]:
    """One onnxruntime session on the chosen EP device: placement, outputs and per-run times (the library is
    registered)."""
    def hw_type(d: Any) -> str:
        return getattr(d.device.type, "name", str(d.device.type))

    ours = library and Path(library).resolve() == Path(_our_library()).resolve()
    hint = "" if ours else (f"hint: onnxruntime lists no EP device of {Path(library).name} on this machine; its "
                            "hardware cannot be injected (--host emulated --hardware ... can)")
    # ORT's own devices (CPUExecutionProvider...) are not the library's
    listed = [d for d in ort.get_ep_devices() if d.ep_name not in _ORT_BUILTIN_EPS]
    dev = _select(listed, *device, metadata=lambda d: dict(d.ep_metadata), hw_type=hw_type, ep=ep, no_device=hint)
    hw = dev.device
    facts = _device_facts(dev.ep_name, dict(dev.ep_metadata).get("device_kind"), hw.type, hw.vendor_id, hw.vendor,
                          hw.device_id)
    so = ort.SessionOptions()
    if logging.getLogger("epabi").isEnabledFor(logging.INFO):
        so.log_severity_level = 1  # -v: show the plugin's INFO messages (why a node stays on the CPU)
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_provider_for_devices([dev], {})
    session = ort.InferenceSession(model.SerializeToString(), sess_options=so, enable_fallback=0)
    providers = session.get_providers()
    if providers[0] != dev.ep_name:
        raise RunError(f"onnxruntime did not use the plugin EP (providers: {providers})")
    placement = _ort_placement(session)
    # a partial, not a lambda: a closure cell would keep the session alive from a failed run's traceback
    outputs, times = _time_runs(functools.partial(session.run, None, feeds), runs)
    names = [o.name for o in session.get_outputs()]
    result = {"host": f"onnxruntime {ort.__version__}", "providers": providers, **facts,
              "cpu_fallback": "onnxruntime", "placement": placement, "outputs": dict(zip(names, outputs)),
              "run_ms": times}
    session = dev = so = None  # released before the library is unregistered (ORT crashes otherwise)
    return result


#: onnxruntime's built-in EPs, which ``get_ep_devices`` lists beside the plugin's.
_ORT_BUILTIN_EPS = ("CPUExecutionProvider",)


def _our_library() -> str:
    import epabi

    return epabi.get_library_path()


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    outputs = {}
    for name, value in result["outputs"].items():
        arr = np.asarray(value)
        numeric = arr.dtype.kind in "fiub"
        outputs[name] = {"shape": list(arr.shape), "dtype": str(arr.dtype),
                         "sum": float(arr.astype(np.float64).sum()) if numeric else None,
                         "mean": float(arr.astype(np.float64).mean()) if numeric and arr.size else None}
    return {**result, "outputs": outputs}


def _gpu_unusable(exc: BaseException) -> bool:
    """The selected GPU EP device claimed no node (the CUDA backend could not load), see _require_claims."""
    return isinstance(exc, RunError) and "claims no node" in str(exc)


def _require_claims(result: dict[str, Any]) -> dict[str, Any]:
    """Our GPU EP device that claims no node (no CUDA driver or NVRTC): say so rather than run on the CPU."""
    if result["ep"] == EP_NAME and result["device_kind"] == "gpu" and EP_NAME not in result["placement"].values():
        raise RunError("the GPU EP device claims no node: the CUDA backend is not available (run with -v for the "
                       "plugin's reason: the CUDA library it could not load)")
    return result


def cmd_run(args: argparse.Namespace) -> int:
    """The ``run`` subcommand; raises RunError for problems the user must fix."""
    import epabi

    if args.verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logging.getLogger("epabi").addHandler(handler)
        logging.getLogger("epabi").setLevel(logging.INFO)
    if args.device[0] in ("auto", "software", "cpu"):
        os.environ.setdefault("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    try:
        if args.model is None:
            model, label = mlp(), "built-in MLP (3 layers, width 64, batch 1)"
        else:
            if not Path(args.model).is_file():
                raise RunError(f"model {args.model}: no such file")
            model, label = epabi.session.load_model(args.model)[0], args.model
        feeds = _feeds(model, args.input)
        # absolute: onnxruntime resolves a relative library path against its own package folder, not the
        # working directory (1.24.4 to 1.32.0 observed)
        library = os.path.abspath(args.library) if args.library else epabi.get_library_path()
        runner = functools.partial(run_emulated if args.host == "emulated" else run_onnxruntime,
                                   ep=args.ep, name=args.name or args.ep or "epabi", injected=args.hardware,
                                   api_version=args.host_version)
        try:
            raw = _require_claims(runner(model, feeds, args.device, args.runs, library, args.cpu_only))
        except (epabi.OrtStatusError, RunError) as exc:
            # auto on a GPU machine whose CUDA libraries are missing: the GPU device claims nothing, the CPU
            # software adapter (offered only when no GPU is listed) can run it
            if args.device[0] != "auto" or args.cpu_only or args.hardware or not _gpu_unusable(exc):
                raise
            print(f"note: the GPU EP device cannot run this session ({str(exc).splitlines()[0]}); "
                  "using the CPU software adapter", file=sys.stderr)
            raw = runner(model, feeds, ("software", None), args.runs, library, True)
        result = _summary(raw)
    except (epabi.OrtStatusError, epabi.ConductError, epabi.HostLimitationError, PluginLoadError) as exc:
        raise RunError(str(exc)) from exc
    except Exception as exc:  # onnxruntime raises its own exception types
        if type(exc).__module__.startswith("onnxruntime"):
            raise RunError(f"{type(exc).__name__}: {exc}") from exc
        raise
    result["model"] = label
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"model: {label}")
    print(f"host: {result['host']}; providers: {', '.join(result['providers'])}; device: {result['device_kind']}"
          f" ({result['device']})")
    print(f"EP: {result['ep']}; CPU fallback: {result['cpu_fallback']}")
    for name, out in result["outputs"].items():
        sums = "" if out["sum"] is None else f" sum={out['sum']:.6g}"
        means = "" if out["mean"] is None else f" mean={out['mean']:.6g}"
        print(f"output {name}: {out['dtype']}{out['shape']}{sums}{means}")
    on_ep = [n for n, ep in result["placement"].items() if ep == result["ep"]]
    print(f"nodes on {result['ep']}: {len(on_ep)} of {len(result['placement'])}")
    for node, ep in result["placement"].items():
        print(f"  {node}: {ep}")
    print("run ms: " + ", ".join(f"{t:.3f}" for t in result["run_ms"]))
    return 0
