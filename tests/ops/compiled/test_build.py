"""Building the C++ kernels: a killed build leaves no lock that hangs later builds, a timeout kills
the compiler, and without a compiler the zoo falls back to the plain ops with one warning."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import AT_THE_START_LINE, REPO, started_together
from zoo.ops._compiled import build

TINY = "extern \"C\" int zoo_tiny(void) { return 1; }\n"


@pytest.fixture
def tiny_source(tmp_path, monkeypatch):
    """A trivial C++ source in a private extensions directory: builds in seconds, not a minute."""
    source = tmp_path / "tiny.cpp"
    source.write_text(TINY)
    monkeypatch.setattr(build, "SOURCE", source)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    return source


@pytest.mark.slow  # a real compile in a subprocess (~4 s)
def test_a_stale_torch_lock_does_not_hang_the_next_build(tiny_source):
    """torch's FileBaton waits forever on the ``lock`` file a killed build leaves behind."""
    directory = build.build_directory(build.extension_name())
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "lock").touch()  # what a build killed while holding torch's baton leaves
    start = time.monotonic()
    library = build.build(timeout_s=120)
    assert library.exists() and time.monotonic() - start < 120
    assert not (directory / "lock").exists()


@pytest.mark.slow  # a real compile in a subprocess (~4 s)
def test_a_timed_out_build_is_killed_and_leaves_no_lock(tiny_source):
    directory = build.build_directory(build.extension_name())
    with pytest.raises(RuntimeError, match="was killed"):
        build.build(timeout_s=0.5)  # killed while starting up or compiling
    assert not (directory / "lock").exists()
    assert build.build(timeout_s=120).exists()  # and the next build goes through


def test_the_extension_name_carries_source_and_cpu_hashes(tiny_source, monkeypatch):
    name = build.extension_name()
    tiny_source.write_text(TINY + "// edited\n")
    assert build.extension_name() != name  # an edited source never loads a stale library
    if build.cpu_feature_tag() is not None:
        assert build.cpu_feature_tag() in name and "-march=native" in build.cflags()
    monkeypatch.setenv("ZOO_KERNELS_NATIVE", "0")
    assert "-march=native" not in build.cflags() and build.extension_name().endswith("_generic")


def test_an_edited_header_builds_anew(tiny_source):
    header = tiny_source.parent / "shared.h"
    header.write_text("#pragma once\n")
    name = build.extension_name()
    header.write_text("#pragma once\n// edited\n")
    assert build.extension_name() != name  # a source's include changed: never load the stale library


def _fresh_python(code: str, tmp_path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "OMP_NUM_THREADS": "1", **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=600)


def test_kernels_off_then_without_a_compiler_one_warning_and_the_plain_path(tmp_path):
    """One fresh process (the test process has the kernels loaded): with ``ZOO_KERNELS=off`` the
    kernels are unavailable without a build or a warning (import included); switched on again
    (read at each call) without a compiler, one warning and the plain path."""
    done = _fresh_python("""
        import os, warnings, torch
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            from zoo.ops._compiled import ops
            print(ops.available(torch.device("cpu")), os.path.exists(os.environ["TORCH_EXTENSIONS_DIR"]))
        del os.environ["ZOO_KERNELS"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, second = ops.available(torch.device("cpu")), ops.available(torch.device("cpu"))
        print(first, second, sum("compiled attention kernels are unavailable" in str(w.message) for w in caught))
    """, tmp_path, ZOO_KERNELS="off", CXX="/bin/false")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "False", "False", "False", "1"]


@pytest.mark.slow  # a real compile (~4 s)
def test_cli_build_kernels_prints_the_library(tiny_source, capsys):
    from zoo.cli import main

    assert main(["build-kernels"]) == 0
    path = capsys.readouterr().out.strip()
    assert path.endswith(".so") and os.path.exists(path)


def test_cli_build_kernels_fails_in_one_line_without_a_compiler(tiny_source, monkeypatch, capsys):
    from zoo.cli import main

    monkeypatch.setenv("CXX", "/bin/false")
    assert main(["build-kernels"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("zoo: compiling the C++ attention kernels")
    assert err[1].startswith("zoo build-kernels: error:")


def test_a_first_build_is_announced_and_a_built_library_is_not(tiny_source, capsys):
    """The first use compiles for a minute: one line says so (and how to do it ahead of time)."""
    build.build()
    err = capsys.readouterr().err
    assert err.startswith("zoo: compiling the C++ attention kernels for this machine (once per machine, about a "
                          "minute; `zoo build-kernels` does it ahead of time) ...\n")
    assert "zoo: compiled the attention kernels in " in err
    build.build()
    assert capsys.readouterr().err == ""


def test_a_library_being_built_is_not_loaded_half_written(tiny_source):
    """The linker writes the library in place: while another process holds the build lock, a build
    waits for it instead of returning the half-written file it sees (two pytest workers at once)."""
    import threading

    whole = build.build(timeout_s=120)  # a real library, to stand in for the other process's result
    content = whole.read_bytes()
    directory = whole.parent
    returned = []
    with build._build_lock(directory):  # "another process" is linking
        whole.write_bytes(content[:64])
        waiter = threading.Thread(target=lambda: returned.append(build.build(timeout_s=120)))
        waiter.start()
        waiter.join(timeout=1.0)
        assert returned == []  # still waiting on the lock, not holding a half-written path
        whole.write_bytes(content)
    waiter.join(timeout=60)
    assert returned == [whole] and whole.read_bytes() == content


def test_concurrent_first_builds_compile_once_and_all_load(tiny_source, tmp_path):
    """Two processes (two pytest workers) build the same extension at the same moment: one compiles,
    the other waits on the lock, and both get a library that loads."""
    code = textwrap.dedent(f"""
        import ctypes, pathlib
        from zoo.ops._compiled import build
        build.SOURCE = pathlib.Path({str(tiny_source)!r})
        compiled = []
        run = build._run_build
        build._run_build = lambda *a: (compiled.append(1), run(*a))
        {AT_THE_START_LINE}
        library = build.build(timeout_s=300)
        print(len(compiled), ctypes.CDLL(str(library)).zoo_tiny())
    """)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "OMP_NUM_THREADS": "1"}
    procs = started_together([sys.executable, "-c", code], cwd=REPO, env=env)
    results = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in results]
    lines = sorted(out.split() for out, _ in results)
    assert lines == [["0", "1"], ["1", "1"]]


@pytest.mark.parametrize("extensions_dir", [None, "ext"])
def test_the_build_directory_without_cpp_extension_is_torchs(tmp_path, monkeypatch, extensions_dir):
    """The folder :func:`build.build_directory` finds a built library in without importing
    ``torch.utils.cpp_extension`` is the one torch's own function names."""
    import torch
    from torch.utils.cpp_extension import _get_build_directory

    if extensions_dir is None:
        monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
        if torch.version.cuda is not None or torch.version.hip is not None:
            assert build._default_build_directory("zoo_x") is None
            return
    else:
        monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / extensions_dir))
    assert str(build._default_build_directory("zoo_x")) == _get_build_directory("zoo_x", verbose=False)


def test_loading_built_kernels_imports_no_cpp_extension():
    """A process that only loads the built library does not import ``torch.utils.cpp_extension``
    (setuptools, distutils): its start-up cost."""
    from zoo.ops._compiled import ops
    import torch

    if not ops.available(torch.device("cpu")):
        pytest.skip("no C++ kernels here")
    code = ("import sys, torch; from zoo.ops._compiled import ops; "
            "print(ops.available(torch.device('cpu')), 'torch.utils.cpp_extension' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False"], done.stdout


def test_avx512_cpus_build_with_512_bit_vectors_and_a_name_of_their_own(tiny_source, monkeypatch):
    """GCC's tuning keeps vectorized loops at 256 bits on AVX-512 CPUs; the kernels ask for 512, and the
    flag is in the library's name, so a library built without it is never loaded for it."""
    assert build.cpu_has_avx512("flags\t\t: fpu sse avx2 avx512f avx512bw\n")
    assert not build.cpu_has_avx512("flags\t\t: fpu sse avx2 fma\nmodel name\t: avx512f-free\n")
    monkeypatch.setattr(build, "cpu_feature_tag", lambda: "0123456789")
    monkeypatch.setattr(build, "cpu_has_avx512", lambda cpuinfo=None: True)
    wide, wide_name = build.cflags(), build.extension_name()
    assert "-march=native" in wide and "-mprefer-vector-width=512" in wide
    monkeypatch.setattr(build, "cpu_has_avx512", lambda cpuinfo=None: False)
    assert "-mprefer-vector-width=512" not in build.cflags() and "-march=native" in build.cflags()
    assert build.extension_name() != wide_name
    monkeypatch.setenv("ZOO_KERNELS_NATIVE", "0")  # generic code: no CPU-specific flag at all
    monkeypatch.setattr(build, "cpu_has_avx512", lambda cpuinfo=None: True)
    assert "-mprefer-vector-width=512" not in build.cflags()
