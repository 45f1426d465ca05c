"""The user's C in evaluation firmware (`--extra-source`, `-I`, the C files of `--custom-op`): one set of rules
for every platform (docs/platforms.md, "Your own C in the evaluation firmware").

- Flags: every platform compiles the user's C with USER_CODE_FLAGS (`-std=c99 -Wall -Wextra -Werror
  -pedantic`, cc.WARNING_FLAGS): the host compiles --extra-source files and the `utvm_user_*.c` files of
  --custom-op (utvm.custom_ops.is_user_source) with them; the Cortex-M project's Makefile
  (qemu/template/Makefile, `WARNINGS`) compiles every source with the same flags (a test keeps the two equal).
- Never shadowing: a file of the user's never takes the place of one utvm provides. A user header (one
  beside an --extra-source, or any file under an -I directory) whose path is one of utvm's on the firmware's
  include path (the CRT's `tvm/...` and `dlpack/...` headers, the board support's), or whose file name is
  one utvm generates (`crt_config.h`, the model header, `utvm_test_functions.h`) at any depth, is refused
  with one line naming both files: a stray `crt_config.h` beside your source would otherwise configure
  your code differently from the CRT it links with. (A crt_config.h of your own: `--crt-config-file`.)
- Boards get the whole -I tree: `user_headers` lists every regular file under each -I directory with its
  path inside it (subdirectories kept, symbolic links to directories followed once, FIFOs and devices
  skipped, at most MAX_TREE_FILES files and MAX_TREE_BYTES bytes per directory), plus the headers beside each
  --extra-source, in the host's search order (the first of one path wins, as on the host).
- Files are staged as bytes: a source or header in any encoding reaches the compiler unchanged. A board
  project gets each --extra-source as `staged_name` (its stem in ASCII letters, digits and _, at most 64
  characters): a file name with spaces or `$`, or of 250 characters, builds there as on the host.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from utvm.errors import UsageError
from utvm.support import cc

#: The flags of the user's C on every platform.
USER_CODE_FLAGS: tuple[str, ...] = tuple(cc.WARNING_FLAGS)
#: An -I directory copied to a board holds at most this many files ...
MAX_TREE_FILES = 10_000
#: ... and this many bytes.
MAX_TREE_BYTES = 256 << 20

#: The header every firmware build generates (no file of utvm's to compare a user's with).
_GENERATED_HEADER = "crt_config.h"


def _shipped_header_dirs() -> tuple[Path, ...]:
    """The directories of the headers utvm ships beside the CRT's tree: the test library's (host), the QEMU
    board support and TVMPlatform hooks, the serial boards' glue."""
    from utvm.platform.host import INCLUDE_DIR
    from utvm.platform.qemu.project import BOARD_DIR, PLATFORM_DIR
    from utvm.platform.serial_board.platform import TEMPLATE_DIR

    return (INCLUDE_DIR, BOARD_DIR, PLATFORM_DIR, TEMPLATE_DIR)


def own_headers(system_lib_sources: Iterable[Path | str] = ()) -> dict[str, Path | None]:
    """utvm's headers on a firmware's include path: path as included -> the file (None: generated per
    build, crt_config.h). The CRT's include tree, the headers utvm ships (_shipped_header_dirs), and the
    headers beside the generated sources (the model header)."""
    out: dict[str, Path | None] = {_GENERATED_HEADER: None}
    for d in _shipped_header_dirs():
        for h in sorted(d.glob("*.h")):
            out[h.name] = h
    root = cc.crt_dir() / "include"
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[p.relative_to(root).as_posix()] = p
    for src in system_lib_sources:
        for h in sorted(Path(src).parent.glob("*.h")):
            out[h.name] = h
    return out


def tree_files(root: Path, what: str) -> list[tuple[str, Path]]:
    """Every regular file under `root` as (its path inside `root`, POSIX; the file), sorted. Symbolic links
    to directories are followed once each (a loop ends there), FIFOs, sockets and devices are skipped (never
    opened). More than MAX_TREE_FILES files or MAX_TREE_BYTES bytes: UsageError naming the directory."""
    out: list[tuple[str, Path]] = []
    total = 0
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirnames[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            try:
                fst = path.stat()
            except OSError:  # a dangling symbolic link
                continue
            if not stat.S_ISREG(fst.st_mode):
                continue
            total += fst.st_size
            out.append((path.relative_to(root).as_posix(), path))
            if len(out) > MAX_TREE_FILES or total > MAX_TREE_BYTES:
                raise UsageError(f"{what} {root}: more than {MAX_TREE_FILES:,} files or {MAX_TREE_BYTES >> 20} MiB "
                                 "under it; give the directory that holds just your headers")
    return out


def user_headers(extra_sources: Sequence[Path | str], include_dirs: Sequence[Path | str],
                 ours: Mapping[str, Path | None], what: str = "") -> dict[str, Path]:
    """The user's headers as a board's include/ gets them: path as included -> file. First the headers
    (*.h) beside each --extra-source, then every file under each -I directory; the first file of one path
    wins (the host's search order). A UsageError naming both files when one would take the place of one of
    `ours` (own_headers): the same path as included, or at any depth the file name of a header utvm
    generates. The same file (a model's own header given back) is no collision."""
    prefix = f"{what}: " if what else ""
    by_name = {rel: path for rel, path in ours.items() if "/" not in rel}
    out: dict[str, Path] = {}
    for src in extra_sources:
        for h in sorted(Path(src).parent.glob("*.h")):
            if h.is_file():
                _refuse_if_ours(f"--extra-source {src}", h.name, h, ours, by_name, prefix)
                out.setdefault(h.name, h)
    for d in include_dirs:
        for rel, path in tree_files(Path(d), f"{prefix}-I"):
            _refuse_if_ours(f"-I {d}", rel, path, ours, by_name, prefix)
            out.setdefault(rel, path)
    return out


def check_one_tree(headers: Mapping[str, Path], what: str = "") -> None:
    """UsageError when `headers` (user_headers) cannot be one directory tree, as a board's include/ is: one -I
    directory's file where another's has a directory."""
    prefix = f"{what}: " if what else ""
    for rel, path in headers.items():
        parts = rel.split("/")
        for k in range(1, len(parts)):
            if "/".join(parts[:k]) in headers:
                raise UsageError(f"{prefix}{headers['/'.join(parts[:k])]} is a file where {path} needs a "
                                 "directory (two -I directories); rename one")


def _refuse_if_ours(option: str, rel: str, path: Path, ours: Mapping[str, Path | None],
                    by_name: Mapping[str, Path | None], prefix: str) -> None:
    base = rel.rsplit("/", 1)[-1]
    key = rel if rel in ours else base if base in by_name else None
    if key is None:
        return
    theirs = ours[key]
    if theirs is not None and _same_file(theirs, path):
        return
    own = f"utvm's {key}" if theirs is None else f"utvm's {theirs}"
    hint = " (a crt_config.h of your own: --crt-config-file)" if base == "crt_config.h" else ""
    raise UsageError(f"{prefix}{option}: {path} would shadow {own}; rename or remove it{hint}")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_given_once(extra_sources: Sequence[Path | str], what: str = "") -> None:
    """UsageError when one file is given twice as an --extra-source (it would be compiled twice)."""
    prefix = f"{what}: " if what else ""
    seen: dict[Path, Path | str] = {}
    for src in extra_sources:
        key = Path(src).resolve()
        if key in seen:
            raise UsageError(f"{prefix}--extra-source {src} is given twice (as {seen[key]})"
                             if str(seen[key]) != str(src) else f"{prefix}--extra-source {src} is given twice")
        seen[key] = src


def staged_name(source: Path | str) -> str:
    """The name a user's source gets in a board's project (src/): `<safe stem>.c` (utvm.custom_ops.safe_stem:
    ASCII letters, digits and _, at most 64 characters), which make, tar and every file system take, with
    room for the compiler's `.su`/`.ci`/`.o` files beside it."""
    from utvm.custom_ops import safe_stem

    return f"{safe_stem(Path(source).stem)}.c"


def read_user_file(path: Path, what: str) -> bytes:
    """The bytes of one of the user's files (any encoding); OSError naming it when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise OSError(exc.errno, f"{what}: cannot read {path}: {exc.strerror or exc}") from exc
