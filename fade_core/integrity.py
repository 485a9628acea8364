"""Checksums of the files fade writes, and the error a damaged file raises.

A folder written as a unit (a checkpoint ``step-N/``, the warm-started base model) gets a manifest,
``SHA256SUMS``, in the format of coreutils' ``sha256sum`` (``<64 hex>  <relative path>`` per line), so
``cd <folder> && sha256sum -c SHA256SUMS`` checks it without fade. It is written last, inside the folder,
before the folder is renamed into place; :func:`verify_manifest` recomputes every digest before the
folder is read and names the first file that differs, is missing or is truncated.

Results parts carry their checksum inside the part (fade_core.store), because a part is replaced by one
atomic rename and a second file next to it could not be replaced in the same step.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

MANIFEST = "SHA256SUMS"
_CHUNK = 1 << 20


class DamagedFile(ValueError):
    """A file fade wrote earlier does not read back as written (checksum mismatch, truncation, a file
    missing from its folder, or a library that cannot parse it). ``path`` is the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = " ".join(problem.split())  # one line: a library's multi-line message folded
        super().__init__(f"{self.path}: damaged file: {self.problem}")


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def manifest_files(folder: Path, skip_dirs: Iterable[str] = (), skip_files: Iterable[str] = ()) -> list[Path]:
    """Every regular file under ``folder`` (relative paths, sorted) except the manifest itself, hidden
    temporary files, the subfolders named in ``skip_dirs`` (which have manifests of their own) and the
    top-level files named in ``skip_files``."""
    skip = set(skip_dirs)
    skip_top = set(skip_files)
    out = []
    for root, dirs, files in os.walk(folder):
        rel_root = Path(root).relative_to(folder)
        if rel_root == Path("."):
            dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            if rel_root == Path(".") and (name == MANIFEST or name in skip_top):
                continue
            if name.startswith(".") and name.endswith(".tmp"):
                continue
            out.append(rel_root / name)
    return sorted(out)


def write_manifest(folder: str | Path, skip_dirs: Iterable[str] = (), skip_files: Iterable[str] = ()) -> Path:
    """Write ``folder/SHA256SUMS`` over :func:`manifest_files` (through a temporary name and a rename)."""
    folder = Path(folder)
    lines = [f"{sha256_file(folder / rel)}  {rel.as_posix()}\n"
             for rel in manifest_files(folder, skip_dirs, skip_files)]
    tmp = folder / f".{MANIFEST}.{os.getpid()}.tmp"
    tmp.write_text("".join(lines))
    os.replace(tmp, folder / MANIFEST)
    return folder / MANIFEST


def read_manifest(folder: str | Path) -> dict[str, str] | None:
    """{relative path: hex digest} of ``folder/SHA256SUMS``, or None when the folder has none (written
    before checksums existed). A malformed manifest is itself a damaged file."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return None
    entries: dict[str, str] = {}
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or not rel or any(c not in "0123456789abcdef" for c in digest):
            raise DamagedFile(path, f"line {n} is not '<sha256>  <file>'")
        entries[rel] = digest
    return entries


def verify_manifest(folder: str | Path) -> bool:
    """Check every file listed in ``folder/SHA256SUMS``; raise :class:`DamagedFile` naming the first file
    that is missing or differs. Returns False when there is no manifest (nothing could be checked)."""
    folder = Path(folder)
    entries = read_manifest(folder)
    if entries is None:
        return False
    for rel, digest in entries.items():
        path = folder / rel
        if not path.is_file():
            raise DamagedFile(path, f"missing (listed in {folder / MANIFEST})")
        actual = sha256_file(path)
        if actual != digest:
            raise DamagedFile(path, f"sha256 {actual[:12]}... differs from {digest[:12]}... recorded in "
                                    f"{folder / MANIFEST} when it was written (truncated or changed since)")
    return True
