"""Writing the files a user names (`-o`, `--profile-plot`, ...) without ever damaging what is there.

Every output goes through here:

- `check_output_file(path, option)`: the path is not empty, and if something exists there it is a
  regular file (a directory, device node, FIFO, socket or symbolic link is refused: replacing `/dev/full`
  with a regular file, or a FIFO another program reads, or the target of a link, is never what the user
  meant). One line, naming the option and the path.
- `write_file_atomic(path, write, option)`: the content is written to a temporary file in the target's
  directory (`write(tmp_path)`), then renamed over the target in one step, so a reader never sees a
  half-written file and an interrupted or failed write leaves the old file as it was.
- `check_output_dir(path, option)` / `write_dir_atomic(path, fill, option)`: the same for a directory
  output (a project): it must not exist or be an empty real directory; it is filled in a temporary sibling
  directory and renamed into place.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from utvm.errors import UsageError

#: What a path is, by its st_mode (an lstat's: a symbolic link is one).
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISREG, "a regular file"),
)


def path_kind(mode: int) -> str:
    """'a directory', 'a FIFO', ... of an st_mode: what a refusal says a path is."""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def read_regular_file(path: str | os.PathLike[str], limit: int,
                      error: Callable[[str], Exception]) -> tuple[bytes, os.stat_result]:
    """The bytes of a file utvm reads whole (a tuning log, a board configuration, a board file) and its stat:
    a regular file (links followed) of at most `limit` bytes. What is there is looked at before anything is
    opened, and again on what was opened, which never blocks (O_NONBLOCK: a FIFO or a device is said to be
    one, never waited on or read; one swapped in meanwhile is caught by the second look); a file that grows
    past `limit` while it is read is refused too. Any refusal raises `error(why)`, `why` one of: `no such
    file`, `a symbolic link to nothing`, `a component of the path is not a directory`, `is <kind>, not a
    regular file`, `cannot be read (<reason>)`, `larger than <limit> bytes`."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error("a symbolic link to nothing" if os.path.lexists(path) else "no such file") from None
    except NotADirectoryError:
        raise error("a component of the path is not a directory") from None
    except (OSError, ValueError) as exc:
        raise error(f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if not stat.S_ISREG(mode):
        raise error(f"is {path_kind(mode)}, not a regular file")
    too_big = f"larger than {limit:,} bytes"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"cannot be read ({exc.strerror or exc})") from None
    data = bytearray()
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the look and the open
            raise error(f"is {path_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise error(too_big)
        while chunk := os.read(fd, min(1 << 20, limit + 1 - len(data))):
            data += chunk
            if len(data) > limit:  # it grew while being read
                raise error(too_big)
    except OSError as exc:
        raise error(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return bytes(data), st


def _as_path(path: str | os.PathLike[str] | None, option: str) -> Path:
    text = os.fspath(path) if path is not None else ""
    if not text or not text.strip():
        raise UsageError(f"{option}: the path is empty")
    if "\0" in text:
        raise UsageError(f"{option} {text!r}: the path contains a NUL byte")
    return Path(text)


def _existing(path: str | os.PathLike[str] | None, option: str) -> tuple[Path, os.stat_result | None]:
    """The path and what is there now (not following a link; None when nothing is)."""
    p = _as_path(path, option)
    try:
        return p, p.lstat()
    except FileNotFoundError:
        return p, None
    except OSError as exc:
        raise UsageError(f"{option} {p}: cannot be examined ({exc.strerror or exc})") from exc


def _same_file(a: os.stat_result, b: Path) -> bool:
    try:
        other = b.stat()
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (other.st_dev, other.st_ino)


def check_output_file(path: str | os.PathLike[str] | None, option: str = "-o",
                      inputs: Iterable[str | os.PathLike[str] | None] = ()) -> Path:
    """`path` as a Path if it may be written as a regular file (see the module docstring). A path that ends
    in a separator names a directory, and a path that is one of the command's `inputs` (the same file, by
    any name: a hard link, `./`) would destroy what the command reads: both are refused."""
    p, st = _existing(path, option)
    text = os.fspath(path) if path is not None else ""
    if text.endswith(("/", os.sep)):
        raise UsageError(f"{option} {text}: ends in {text[-1]!r}, which names a directory; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{option} {p}: is {path_kind(st.st_mode)}, not a regular file; refusing to replace it")
    if st is not None:
        for given in inputs:
            if given is not None and os.fspath(given) and _same_file(st, Path(given)):
                raise UsageError(f"{option} {p}: is the input {given}; refusing to overwrite what the command "
                                 "reads (give another output path)")
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_file_atomic(path: str | os.PathLike[str], write: Callable[[Path], None] | bytes, option: str = "-o",
                      mode: int = 0o666) -> Path:
    """Write a file through a temporary sibling and a rename; `write` is bytes or a callable that writes the
    temporary path. Parent directories are created. Returns the path."""
    p = check_output_file(path, option)
    parent = p.parent
    parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=parent, prefix=f".{p.name[:64]}.", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        if isinstance(write, bytes | bytearray | memoryview):
            with os.fdopen(fd, "wb") as f:
                f.write(write)
        else:
            os.close(fd)
            write(tmp)
        os.chmod(tmp, mode & ~_umask())  # as open() would have made it, not mkstemp's 0600
        check_output_file(p, option)  # nothing non-regular appeared there in the meantime
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def check_output_dir(path: str | os.PathLike[str] | None, option: str = "-o") -> Path:
    """`path` as a Path if a directory may be created there: it does not exist, or is an empty real
    directory (a symbolic link, a file or a non-empty directory is refused)."""
    p, st = _existing(path, option)
    if st is None:
        return p
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{option} {p}: is {path_kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else 'a file'}, "
                         "not a directory; give a new or empty directory")
    if any(p.iterdir()):
        raise UsageError(f"{option} {p}: the directory is not empty; give a new or empty directory")
    return p


def write_dir_atomic(path: str | os.PathLike[str], fill: Callable[[Path], None], option: str = "-o") -> Path:
    """Create directory `path` by filling a temporary sibling (`fill(tmp_dir)`) and renaming it into place;
    on any failure nothing is left behind. Returns the path."""
    p = check_output_dir(path, option)
    parent = p.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{p.name[:64]}.", suffix=".partial"))
    try:
        fill(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        check_output_dir(p, option)
        if p.exists():
            p.rmdir()  # empty (checked): replaced by the filled one
        os.replace(tmp, p)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return p
