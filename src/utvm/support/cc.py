"""Building C from Python: locating the CRT, running its make build, compiling and linking, caching.

Every C build utvm does goes through here, so flags, caching and error reporting are uniform:
- `crt_dir()`: the CRT shipped as package data (`utvm/crt`).
- `make_crt_libs(...)`: the CRT's own standalone make build (the same one users run);
  `cached_crt_libs(...)`: the same, built once per CRT tree + crt_config.h + compiler + flags and cached.
- `compile_link(...)`: compile C sources and link an executable or a shared library.
- Outputs are cached under `cache_dir()` by a content hash of every input (sources, headers, flags,
  compiler version), so rebuilding is a dictionary lookup. Set UTVM_CACHE_DIR to move the cache.
A failed build raises `BuildError` carrying the command and the compiler's output.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path

from utvm.errors import BuildError

WARNING_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic")
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all")


def crt_dir() -> Path:
    """The standalone C runtime shipped inside the package."""
    return Path(__file__).resolve().parent.parent / "crt"


def cache_dir() -> Path:
    root = os.environ.get("UTVM_CACHE_DIR")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "utvm"
    base.mkdir(parents=True, exist_ok=True)
    return base


def cached_sources(label: str, files: Mapping[str, str]) -> Path:
    """`files` (name -> text) in a content-addressed directory `<label>-<hash>` of utvm's cache, so the builds
    of the same sources cache. It is written beside its place and renamed into it, so no build ever sees it
    half written; a process that loses the race to another with the same content drops its copy."""
    key = hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()[:20]
    d = cache_dir() / "sources" / f"{label}-{key}"
    if not d.exists():
        d.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}-", dir=d.parent))
        for name, text in files.items():
            (tmp / name).write_text(text)
        try:
            tmp.rename(d)
        except OSError:  # another process got there first with the same content
            shutil.rmtree(tmp, ignore_errors=True)
    return d


@cache
def compiler_version(cc: str) -> str:
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"C compiler {cc!r} is not usable: {exc}") from exc


def hash_inputs(paths: Iterable[Path], extra: Iterable[str] = ()) -> str:
    """Content hash of files (and every file under directories) plus extra strings."""
    h = hashlib.sha256()
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.is_file() and "__pycache__" not in q.parts))
        elif p.exists():
            files.append(p)
    for f in files:  # a file name is bytes to the system: one that is not UTF-8 hashes as those bytes
        h.update(str(f.name).encode("utf-8", "surrogateescape"))
        h.update(f.read_bytes())
    for e in extra:
        h.update(b"\0" + e.encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:20]


def run(cmd: Sequence[str], cwd: Path | None = None, what: str = "build") -> str:
    """Run a build command; raise BuildError with its output if it fails."""
    proc = subprocess.run(list(map(str, cmd)), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        from utvm.support.text import shown

        # The first line is the error line: paths in `what` and the command are the user's and may hold a
        # newline, so they are escaped here; the compiler's output follows, line by line.
        head = shown(f"{what} failed (exit {proc.returncode}): {' '.join(map(str, cmd))}")
        raise BuildError(f"{head}\n{proc.stdout}{proc.stderr}".rstrip())
    return proc.stdout


def make_crt_libs(
    build_dir: Path,
    crt_config_dir: Path,
    libs: Sequence[str] = ("common", "memory"),
    cc: str = "gcc",
    cflags: Sequence[str] = (),
    ar: str = "ar",
) -> dict[str, Path]:
    """Build CRT static libraries with the CRT's own Makefile; returns {lib: path/to/lib<lib>.a}."""
    build_dir.mkdir(parents=True, exist_ok=True)
    # make -C changes directory: relative paths would be taken from the CRT, so make them absolute.
    build_dir, crt_config_dir = Path(build_dir).resolve(), Path(crt_config_dir).resolve()
    cmd = ["make", "-s", "-C", str(crt_dir()), f"CRT_CONFIG={crt_config_dir}", f"BUILD_DIR={build_dir}",
           f"CC={cc}", f"AR={ar}", f"EXTRA_CFLAGS={' '.join(cflags)}", *libs]
    run(cmd, what=f"CRT build ({', '.join(libs)})")
    return {lib: build_dir / f"lib{lib}.a" for lib in libs}


def crt_config_headers(crt_config: Path | str) -> dict[str, str]:
    """The headers a CRT build sees through CRT_CONFIG: {file name: text}.

    `crt_config` is the text of crt_config.h (a str), a crt_config.h file, or a directory holding one
    (every *.h at its top level is taken: the Makefile puts the whole directory on the include path).
    """
    if isinstance(crt_config, str):
        return {"crt_config.h": crt_config}
    path = Path(crt_config)
    if path.is_file() and path.name == "crt_config.h":
        return {"crt_config.h": path.read_text()}
    if not (path / "crt_config.h").is_file():
        raise BuildError(f"CRT config {str(path)!r} is neither a crt_config.h nor a directory holding one")
    return {h.name: h.read_text() for h in sorted(path.glob("*.h")) if h.is_file()}


def cached_crt_libs(
    crt_config: Path | str,
    cc: str = "gcc",
    cflags: Sequence[str] = (),
    libs: Sequence[str] = ("common", "memory"),
    ar: str = "ar",
) -> dict[str, Path]:
    """make_crt_libs(), cached: {lib: path/to/lib<lib>.a}, built once per distinct input.

    `crt_config` as for `crt_config_headers` (the text of crt_config.h, the file, or its directory). The
    key is the content of the CRT tree (sources, headers, Makefile, POSIX port, and where each file sits),
    the config headers, the libraries asked for, the compiler and its version, the archiver, `cflags`
    and the CFLAGS environment variable (the CRT Makefile reads it). The entry
    `cache_dir()/crt-<key>/` holds the archives, the config used (`config/`) and `crt.txt` describing
    the build; it appears by an atomic rename (`cached_build`), so concurrent processes either find it
    complete or build their own copy, and the loser's copy is discarded.
    """
    headers = crt_config_headers(crt_config)
    wanted = list(dict.fromkeys(libs))  # the order asked for, once each
    crt = crt_dir()
    sources = [crt / "include", crt / "src", crt / "host", crt / "Makefile"]
    layout = sorted(str(p.relative_to(crt)) for d in sources[:3] for p in d.rglob("*") if p.is_file())
    extra = ["crt-libs-v1", *sorted(wanted), cc, compiler_version(cc), ar, *cflags,
             f"CFLAGS={os.environ.get('CFLAGS', '')}", *layout,
             *(f"{name}\0{text}" for name, text in sorted(headers.items()))]

    def builder(tmp: Path) -> Path:
        config_dir = tmp / "config"
        config_dir.mkdir()
        for name, text in headers.items():
            (config_dir / name).write_text(text)
        make_crt_libs(tmp, config_dir, wanted, cc=cc, cflags=cflags, ar=ar)
        shutil.rmtree(tmp / "obj", ignore_errors=True)  # the archives hold the objects
        (tmp / "crt.txt").write_text(f"libs: {' '.join(wanted)}\ncc: {cc}\nar: {ar}\ncflags: {' '.join(cflags)}\n")
        return tmp / "crt.txt"

    entry = cached_build(sources, extra, "crt.txt", builder).parent
    return {lib: entry / f"lib{lib}.a" for lib in wanted}


def compile_link(
    sources: Sequence[Path],
    output: Path,
    include_dirs: Sequence[Path] = (),
    defines: Sequence[str] = (),
    cflags: Sequence[str] = (),
    ldflags: Sequence[str] = (),
    libs: Sequence[Path] = (),
    shared: bool = False,
    cc: str = "gcc",
) -> Path:
    """Compile and link `sources` (+ static `libs`) into an executable or, with shared=True, a .so."""
    output.parent.mkdir(parents=True, exist_ok=True)
    cmd = [cc, *cflags]
    if shared:
        cmd += ["-shared", "-fPIC"]
    cmd += [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines]
    cmd += [str(s) for s in sources]
    # Static CRT libraries are wrapped in a group: their objects reference each other.
    if libs:
        cmd += ["-Wl,--start-group", *map(str, libs), "-Wl,--end-group"]
    cmd += ["-o", str(output), *ldflags]
    run(cmd, what=f"compiling {output.name}")
    return output


def cached_build(key_inputs: Iterable[Path], key_extra: Iterable[str], name: str, builder) -> Path:  # noqa: ANN001
    """Return cache_dir()/<hash>/<name>, calling builder(tmp_dir) -> Path to create it on a miss.

    The build happens in a temporary directory renamed into place, so concurrent builds never see a
    half-written output.
    """
    key = hash_inputs(key_inputs, key_extra)
    final_dir = cache_dir() / f"{Path(name).stem}-{key}"
    target = final_dir / name
    if target.exists():
        return target
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_dir()))
    try:
        built = builder(tmp)
        if built != tmp / name:
            shutil.copy2(built, tmp / name)
        try:
            tmp.rename(final_dir)
        except OSError:  # another process won the race; theirs is identical
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
