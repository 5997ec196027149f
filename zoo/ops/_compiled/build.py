"""Compile the C++ attention kernels at first use (or ahead of time: ``zoo build-kernels``).

The sources ship as package data (``cpu/*.cpp``: the attention ops, the sparse product; ``cpu/*.h``: what
they share); :func:`load_cpu_kernels` compiles them into one library once per machine into the torch extensions
directory (``TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``) and loads it, which registers the
``torch.ops.zoo_kernels`` ops.

* Flags: ``-O3 -fno-trapping-math`` (without the latter GCC keeps LeakyReLU's select as a
  branch: measured 12x slower) and ``-march=native`` (with 512-bit vectors on an AVX-512 CPU,
  :func:`cflags`) — only with a hash of the CPU's features in the extension's name, so a cache
  directory shared by different machines never loads code built for another CPU.  The hash of the
  sources and flags is in the name too: an edited source or a changed flag builds anew.
* The build runs in a subprocess with a timeout (``ZOO_KERNELS_BUILD_TIMEOUT`` seconds).  torch's
  own build lock (a ``lock`` file, ``FileBaton``) is left behind when a build is killed, and every
  later load would then wait on it forever; builds here hold an ``fcntl`` lock instead (released
  by the OS when the process dies) and, holding it, remove any stale ``lock`` file first.
* No compiler, a failed or timed-out build: one warning, and the callers keep the plain torch
  path.  ``ZOO_KERNELS=off`` disables the compiled kernels altogether.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Iterator, List, Optional

try:
    import fcntl
except ImportError:  # not POSIX: no lock between concurrent builds (torch's own baton still applies)
    fcntl = None

SOURCE = Path(__file__).resolve().parent / "cpu" / "attention.cpp"
#: Seconds a build may take before it is killed (a loaded 2-core machine needs about a minute).
DEFAULT_TIMEOUT_S = 900.0
BASE_FLAGS = ["-O3", "-fno-trapping-math"]


def kernels_disabled() -> bool:
    """Whether ``ZOO_KERNELS`` switches the compiled kernels off (``off``, ``0``, ``false``, ``no``)."""
    return os.environ.get("ZOO_KERNELS", "").strip().lower() in ("off", "0", "false", "no")


def cpu_feature_tag() -> Optional[str]:
    """A short hash of this CPU's model and feature flags (``/proc/cpuinfo``), or None if unknown."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    keep = sorted({line.strip() for line in text.splitlines()
                   if line.split(":")[0].strip() in ("flags", "model name", "Features", "CPU part")})
    if not keep:
        return None
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()[:10]


def cpu_has_avx512(cpuinfo: Optional[str] = None) -> bool:
    """Whether this CPU (or the ``cpuinfo`` text given) has AVX-512: ``avx512f`` among ``/proc/cpuinfo``'s flags."""
    try:
        text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    except OSError:
        return False
    return any(line.split(":")[0].strip() == "flags" and "avx512f" in line.split() for line in text.splitlines())


def cflags() -> List[str]:
    """The compiler flags: :data:`BASE_FLAGS`, ``-march=native`` where the CPU is known (and
    ``ZOO_KERNELS_NATIVE`` is not ``0``), and there, on an AVX-512 CPU, 512-bit vectors.  GCC's tuning
    for these CPUs keeps its vectorized loops at 256 bits; the per-edge loops over 64 channels (the
    GATv2 backward's) run faster at 512.  Only the vector width changes, never an operation's order or
    contraction (the loops are element-wise or sum in fixed lanes), so the numbers are those of the
    256-bit build bitwise (checked on the paper graphs' kernel outputs, ``docs/notes/performance.md``)."""
    if cpu_feature_tag() is None or os.environ.get("ZOO_KERNELS_NATIVE", "1") == "0":
        return list(BASE_FLAGS)
    return BASE_FLAGS + ["-march=native"] + (["-mprefer-vector-width=512"] if cpu_has_avx512() else [])


def sources() -> List[Path]:
    """The C++ sources of the one library: every ``.cpp`` beside :data:`SOURCE`."""
    return sorted(SOURCE.parent.glob("*.cpp"))


def headers() -> List[Path]:
    """The headers the sources include (``cpu/*.h``): part of the build's hash, not compiled alone."""
    return sorted(SOURCE.parent.glob("*.h"))


def extension_name() -> str:
    """``zoo_attention_<hash of the sources, headers and flags>_<cpu tag | generic>``."""
    digest = hashlib.sha256()
    for path in sources() + headers():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(" ".join(cflags()).encode())  # a change of flags builds anew too
    source = digest.hexdigest()[:10]
    native = "-march=native" in cflags()
    return f"zoo_attention_{source}_{cpu_feature_tag() if native else 'generic'}"


def build_directory(name: str) -> Path:
    """torch's build directory of the extension ``name``.  Where it is the default one and the library
    is built there, it is found without importing ``torch.utils.cpp_extension`` (with setuptools: a
    start-up cost of every process that only loads the library)."""
    known = _default_build_directory(name)
    if known is not None and (known / f"{name}.so").exists():
        return known
    from torch.utils.cpp_extension import _get_build_directory
    return Path(_get_build_directory(name, verbose=False))


def _default_build_directory(name: str) -> Optional[Path]:
    """Where ``torch.utils.cpp_extension`` builds ``name`` on a CPU-only torch: ``TORCH_EXTENSIONS_DIR``,
    else torch's cache root and a ``py<version>_cpu`` folder; None on a CUDA / ROCm torch (torch names
    those folders) or where torch's cache root cannot be read.  Used only to find a library already
    built (tests/ops/compiled/test_build.py checks it against torch's own function)."""
    import torch

    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root is not None:
        return Path(root) / name
    if torch.version.hip is not None or torch.version.cuda is not None:
        return None
    try:
        from torch._appdirs import user_cache_dir
    except ImportError:
        return None
    folder = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}_cpu"
    return Path(os.path.realpath(user_cache_dir(appname="torch_extensions"))) / folder / name


@contextlib.contextmanager
def _build_lock(directory: Path) -> Iterator[None]:
    """An OS file lock beside the build directory: freed when its holder dies, unlike torch's."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    with open(directory.parent / f"{directory.name}.zoo-lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process is building: say why this one waits (a build takes ~10 s)
            print(f"zoo: waiting for another process building the compiled attention kernels in {directory}",
                  file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def clear_stale_baton(directory: Path) -> bool:
    """Remove torch's ``lock`` file left by a killed build; call only while holding
    :func:`_build_lock` (no other build can then be running).  Returns whether one was removed."""
    baton = directory / "lock"
    if baton.exists():
        baton.unlink()
        return True
    return False


def _run_build(name: str, directory: Path, timeout_s: float) -> None:
    """Build in a child process (its own process group, so a timeout kills the compiler too)."""
    code = "import sys; from zoo.ops._compiled.build import _compile_here; _compile_here(*sys.argv[1:])"
    cmd = [sys.executable, "-c", code, name, str(directory), *map(str, sources())]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        clear_stale_baton(directory)
        raise RuntimeError(f"the build took more than {timeout_s:.0f} s (ZOO_KERNELS_BUILD_TIMEOUT) and was killed")
    if proc.returncode != 0:
        tail = log.decode(errors="replace").strip().splitlines()[-6:]
        raise RuntimeError("the build failed:\n  " + "\n  ".join(tail))


def _announced_build(name: str, directory: Path, timeout_s: float) -> None:
    """The build, with a line before and after: a first use that is silent for a minute looks hung."""
    print("zoo: compiling the C++ attention kernels for this machine (once per machine, about a minute; "
          "`zoo build-kernels` does it ahead of time) ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    _run_build(name, directory, timeout_s)
    print(f"zoo: compiled the attention kernels in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)


def build(timeout_s: Optional[float] = None) -> Path:
    """Compile the extension if it is not built yet and return the shared library's path."""
    name = extension_name()
    directory = build_directory(name)
    library = directory / f"{name}.so"
    timeout_s = float(os.environ.get("ZOO_KERNELS_BUILD_TIMEOUT", DEFAULT_TIMEOUT_S)) if timeout_s is None else timeout_s
    # The existence check waits for the lock too: the linker writes the library in place, so a
    # library seen while another process builds it may be half written (two pytest workers at once).
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_build_lock(directory))
        except OSError:  # a read-only cache: nothing builds there, so a library there is whole
            if library.exists():
                return library
            raise
        if not library.exists():  # (another process may have built it while we waited)
            clear_stale_baton(directory)
            _announced_build(name, directory, timeout_s)
    if not library.exists():
        raise RuntimeError(f"the build finished but left no {library}")
    return library


def load_cpu_kernels() -> bool:
    """Build (first time) and load the C++ kernels; False if ``ZOO_KERNELS=off`` (read at each call)
    or, with one warning, if that is impossible (the build is tried once per process)."""
    return not kernels_disabled() and _load_cpu_kernels()


@functools.lru_cache(maxsize=None)
def _load_cpu_kernels() -> bool:
    import torch
    if hasattr(torch.ops.zoo_kernels, "gat_forward"):
        return True
    try:
        torch.ops.load_library(str(build()))
    except Exception as exc:  # no compiler, failed build, timeout: keep the plain path
        warnings.warn(f"zoo: the compiled attention kernels are unavailable, using the plain torch ops "
                      f"(slower; set ZOO_KERNELS=off to silence this): {exc}", RuntimeWarning, stacklevel=2)
        return False
    return True


def build_for_cli() -> int:
    """``zoo build-kernels``: build ahead of time (clusters: once per machine type); 1 if impossible."""
    if kernels_disabled():
        print("zoo build-kernels: ZOO_KERNELS is off: nothing to build", file=sys.stderr)
        return 1
    try:
        print(build())
    except (RuntimeError, OSError) as exc:
        print(f"zoo build-kernels: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _compile_here(name: str, directory: str, *source: str) -> None:
    from torch.utils.cpp_extension import load
    os.makedirs(directory, exist_ok=True)
    load(name=name, sources=list(source), extra_cflags=cflags(), build_directory=directory,
         is_python_module=False, verbose=False)


def main(argv: Optional[List[str]] = None) -> int:
    argparse.ArgumentParser(description="Build the zoo's compiled attention kernels (as `zoo build-kernels`).",
                            ).parse_args(argv)
    return build_for_cli()


if __name__ == "__main__":
    sys.exit(main())
