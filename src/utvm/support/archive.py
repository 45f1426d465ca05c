"""Reading archives a user gives us (Model Library Format tars and directories) without trusting them.

Everything is checked before a single byte is written anywhere or a member is read into memory:

- member names are relative POSIX paths inside the archive: not empty, no NUL or backslash, not absolute,
  no `..` component, no component longer than a file system takes (255 bytes), at most 1,024 bytes long;
- members are regular files or directories: symbolic and hard links, device nodes, FIFOs and anything
  else are refused (for a directory tree, links are not followed and are refused the same way);
- no member name appears twice (which copy would count?);
- at most `ArchiveLimits.max_members` members, each at most `max_member_bytes`, together at most
  `max_total_bytes` (read from the tar headers, so a compressed bomb is refused before it is inflated).

`safe_name(name)` checks one path the same way: use it for every path that comes *out of* an archive's
metadata (a source file name in metadata.json) before it is joined to a directory. Violations raise
`ArchiveError` naming the archive and the member.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import stat
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from utvm.errors import ArchiveError

MAX_NAME_BYTES = 1024
MAX_COMPONENT_BYTES = 255


@dataclass(frozen=True)
class ArchiveLimits:
    max_members: int = 10_000
    max_member_bytes: int = 512 << 20
    max_total_bytes: int = 1 << 30


DEFAULT_LIMITS = ArchiveLimits()


def safe_name(name: object, what: str = "member") -> str:
    """`name` normalised (a leading `./` dropped) if it is a safe relative path; ArchiveError otherwise."""
    if not isinstance(name, str):
        raise ArchiveError(f"{what} name {name!r} is not a string")
    shown = repr(name if len(name) <= 120 else name[:117] + "...")
    if not name:
        raise ArchiveError(f"{what} has an empty name")
    if "\0" in name or "\\" in name:
        raise ArchiveError(f"{what} {shown}: the name contains a NUL byte or a backslash")
    if name.startswith("/"):
        raise ArchiveError(f"{what} {shown}: an absolute path")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise ArchiveError(f"{what} {shown}: the name is not valid UTF-8") from None
    if len(encoded) > MAX_NAME_BYTES:
        raise ArchiveError(f"{what} {shown}: the name is {len(encoded)} bytes long (at most {MAX_NAME_BYTES})")
    parts = [p for p in PurePosixPath(name).parts if p != "."]
    if not parts:
        raise ArchiveError(f"{what} {shown}: the name names no file")
    for part in parts:
        if part == "..":
            raise ArchiveError(f"{what} {shown}: a '..' component would leave the archive")
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise ArchiveError(f"{what} {shown}: a path component longer than {MAX_COMPONENT_BYTES} bytes")
    return "/".join(parts)


def safe_file_name(name: object, what: str) -> str:
    """A plain file name (one component, no directory): for names read from metadata that are joined to a
    directory we choose."""
    clean = safe_name(name, what)
    if "/" in clean:
        raise ArchiveError(f"{what} {name!r}: must be a plain file name, not a path")
    return clean


class _Budget:
    def __init__(self, where: Path, limits: ArchiveLimits) -> None:
        self.where, self.limits = where, limits
        self.members = 0
        self.total = 0

    def add(self, name: str, size: int) -> None:
        lim = self.limits
        self.members += 1
        if self.members > lim.max_members:
            raise ArchiveError(f"{self.where}: more than {lim.max_members:,} members")
        if size > lim.max_member_bytes:
            raise ArchiveError(f"{self.where}: member {name!r} is {size:,} bytes (at most {lim.max_member_bytes:,})")
        self.total += size
        if self.total > lim.max_total_bytes:
            raise ArchiveError(f"{self.where}: the members hold more than {lim.max_total_bytes:,} bytes in all")


def _member_kind(m: tarfile.TarInfo) -> str:
    if m.issym():
        return f"a symbolic link to {m.linkname!r}"
    if m.islnk():
        return f"a hard link to {m.linkname!r}"
    if m.ischr() or m.isblk():
        return "a device node"
    if m.isfifo():
        return "a FIFO"
    return f"an entry of tar type {m.type!r}"


#: Compressed tars are inflated by us, never by tarfile's format guessing (which also tries the legacy
#: .lzma format, whose header can ask liblzma for a 4 GiB dictionary): magic -> (name, decompressor).
_COMPRESSIONS: tuple[tuple[bytes, str], ...] = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"),
                                                (b"\xfd7zXZ\x00", "xz"))
_XZ_MEMLIMIT = 256 << 20


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(wbits=31)
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=_XZ_MEMLIMIT)


def _inflate(path: Path, kind: str, limit: int) -> bytes:
    """The decompressed bytes of `path`, refused past `limit` bytes: output is produced at most 1 MiB at a
    time, so a bomb never inflates further than that past the limit."""
    dec = _decompressor(kind)
    out = bytearray()
    step = 1 << 20
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            data = chunk
            while True:
                out += dec.decompress(data, step)
                if len(out) > limit:
                    raise ArchiveError(f"{path}: inflates to more than {limit:,} bytes")
                if kind == "gzip":
                    data = dec.unconsumed_tail
                    if not data:
                        break
                elif dec.eof or dec.needs_input:
                    break
                else:
                    data = b""
    return bytes(out)


def read_tar(path: Path, limits: ArchiveLimits = DEFAULT_LIMITS, kind: str = "tar archive") -> dict[str, bytes]:
    """Every regular file of the tar at `path` (name -> bytes), after checking all members. `kind` names
    what the file should be in the error when it is no tar at all. A gzip, bzip2 or xz compressed tar is
    inflated first, bounded by the size limits."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block or never end
            raise ArchiveError(f"{path}: not a regular file")
        with path.open("rb") as f:
            head = f.read(8)
        compression = next((name for magic, name in _COMPRESSIONS if head.startswith(magic)), None)
        if compression is None:
            opened = tarfile.open(path, "r:")
        else:
            slack = 512 * (2 * limits.max_members + 16)  # tar headers and padding around the members
            opened = tarfile.open(fileobj=io.BytesIO(_inflate(path, compression, limits.max_total_bytes + slack)),
                                  mode="r:")
        with opened as tar:
            members = tar.getmembers()
            budget = _Budget(path, limits)
            files: dict[str, tarfile.TarInfo] = {}
            seen: set[str] = set()
            for m in members:
                name = safe_name(m.name, f"{path}: member")
                if name in seen:
                    raise ArchiveError(f"{path}: member {name!r} appears more than once")
                seen.add(name)
                if m.isdir():
                    budget.add(name, 0)
                    continue
                if not m.isfile():
                    raise ArchiveError(f"{path}: member {name!r} is {_member_kind(m)}; only regular files and "
                                       "directories are allowed")
                budget.add(name, m.size)
                files[name] = m
            out = {}
            for name, m in files.items():
                f = tar.extractfile(m)
                if f is None:  # cannot happen for a regular file; refuse rather than assert
                    raise ArchiveError(f"{path}: member {name!r} cannot be read")
                data = f.read(m.size + 1)
                if len(data) != m.size:
                    raise ArchiveError(f"{path}: member {name!r} holds {len(data)} bytes, its header says {m.size}")
                out[name] = data
            return out
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError, lzma.LZMAError, zlib.error,
            MemoryError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise ArchiveError(f"{path}: no such archive") from exc
        if isinstance(exc, tarfile.ReadError):  # tarfile lists every compression it tried: keep the tar one
            reason = str(exc).splitlines()[-1].removeprefix("- method tar: ")
            reason = reason.removeprefix("ReadError(").removesuffix(")").strip("'\"")
        else:
            reason = (str(exc).splitlines() or [type(exc).__name__])[-1]
        raise ArchiveError(f"{path}: not a {kind} ({reason})") from exc


def read_tree(root: Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> dict[str, bytes]:
    """Every regular file under directory `root` (relative name -> bytes); links are not followed and are
    refused, as are device nodes, FIFOs and sockets."""
    budget = _Budget(root, limits)
    found: list[tuple[str, Path, int]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = safe_name(p.relative_to(root).as_posix(), f"{root}: member")
            try:
                st = p.lstat()
            except OSError as exc:
                raise ArchiveError(f"{root}: member {rel!r} cannot be examined ({exc.strerror or exc})") from exc
            if stat.S_ISLNK(st.st_mode):
                raise ArchiveError(f"{root}: member {rel!r} is a symbolic link; only regular files and "
                                   "directories are allowed")
            if stat.S_ISDIR(st.st_mode):
                budget.add(rel, 0)
                continue
            if not stat.S_ISREG(st.st_mode):
                raise ArchiveError(f"{root}: member {rel!r} is not a regular file (a device, FIFO or socket)")
            budget.add(rel, st.st_size)
            found.append((rel, p, st.st_size))
    out = {}
    for rel, p, size in found:
        try:  # not through a link that appeared since, and never blocking on a FIFO put in its place
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise ArchiveError(f"{root}: member {rel!r} cannot be read ({exc.strerror or exc})") from exc
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ArchiveError(f"{root}: member {rel!r} is not a regular file")
            data = f.read(size + 1)
        if len(data) != size:
            raise ArchiveError(f"{root}: member {rel!r} changed while it was read")
        out[rel] = data
    return out
