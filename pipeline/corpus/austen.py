"""Jane Austen's six novels, from the R package ``janeaustenr`` as Debian ships it
(``r-cran-janeaustenr``), read without R; each chapter is a document.

``fetch`` obtains the package once (``apt-get download`` into a temporary folder, or a
``.deb`` or an installed R package folder the user names), takes its lazy-load database
(``data/Rdata.rdb``, ``.rdx``: each novel a character vector of its lines) and keeps it in
the cache folder (``cache_folder``). ``documents`` reads it from there: for every novel in
the database's order, the text before its first chapter heading (title, author, preface),
then each chapter from its heading to the next. A heading is a line matching
``HEADING`` (the convention of the package's own examples: ``Chapter 1``, ``CHAPTER IV``).

The command line (``python -m pipeline.corpus fetch austen``) calls ``fetch``.
"""

from __future__ import annotations

import functools
import io
import itertools
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath

from pipeline.corpus.rdata import lazy_load

PACKAGE = "r-cran-janeaustenr"
"""The Debian package ``fetch`` downloads."""
FETCH = "python -m pipeline.corpus fetch austen"
"""The command that fetches the corpus once."""
HEADING = re.compile(r"^chapter [\divxlc]", re.IGNORECASE)
"""A line that starts a chapter."""
_DATABASE = ("Rdata.rdb", "Rdata.rdx")
_INSTALLED = Path("usr/lib/R/site-library/janeaustenr")  # where the .deb installs the package


def cache_folder() -> Path:
    """Where the fetched corpus is kept: ``$XDG_CACHE_HOME/pipeline/corpora/austen``
    (``~/.cache`` without that variable)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pipeline" / "corpora" / "austen"


def _deb_members(deb: Path) -> dict[str, bytes]:
    """The members of a Debian package (an ``ar`` archive): name -> bytes."""
    data, members, at = deb.read_bytes(), {}, 8
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb} is not a Debian package (.deb)")
    while at + 60 <= len(data):
        try:
            name = data[at : at + 16].decode("ascii").strip().rstrip("/")
            size = int(data[at + 48 : at + 58])
        except ValueError:
            raise ValueError(
                f"{deb} is not a Debian package (.deb): its member header at byte {at} is damaged"
            ) from None
        members[name] = data[at + 60 : at + 60 + size]
        at += 60 + size + size % 2
    return members


def _extract_files(archive: tarfile.TarFile, folder: Path) -> None:
    """The regular files and folders of ``archive`` written under ``folder``; links, devices
    and any member named outside ``folder`` (absolute, or through ``..``) are left out.
    (``extractall(filter="data")`` does this from Python 3.11.4 on; 3.11.0-3.11.3 lack it.)"""
    for member in archive.getmembers():
        relative = PurePosixPath(member.name)
        if relative.is_absolute() or ".." in relative.parts:
            continue
        target = folder.joinpath(*relative.parts)
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
        elif member.isfile():
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None  # a regular file's contents
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)


def _extract_deb(deb: Path, folder: Path) -> Path:
    """The R package folder of ``deb``, extracted under ``folder``."""
    members = _deb_members(deb)
    name = next((k for k in members if k.startswith("data.tar")), None)
    if name is None:
        raise ValueError(f"{deb} holds no data.tar: not a Debian binary package")
    try:
        with tarfile.open(fileobj=io.BytesIO(members[name])) as archive:
            _extract_files(archive, folder)
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0].rstrip(":")
        raise ValueError(
            f"{deb}: its {name} is no readable tar archive ({reason}); give the {PACKAGE} .deb "
            "or an installed R package folder"
        ) from None
    return folder / _INSTALLED


def _download(folder: Path) -> Path:
    """``apt-get download`` of ``PACKAGE`` into ``folder``; the ``.deb`` file."""
    if shutil.which("apt-get") is None:
        raise RuntimeError(
            f"apt-get not found: install R's janeaustenr (or get the {PACKAGE} .deb) and run "
            f"{FETCH} --source <its folder or .deb>"
        )
    run = subprocess.run(
        ["apt-get", "download", PACKAGE], cwd=folder, capture_output=True, text=True
    )
    debs = sorted(folder.glob(f"{PACKAGE}_*.deb"))
    if run.returncode or not debs:
        lines = (run.stderr.strip() or run.stdout.strip() or "no .deb").splitlines()
        raise RuntimeError(f"apt-get download {PACKAGE} failed: {lines[-1]}")
    return debs[0]


def fetch(source: str | os.PathLike | None = None) -> Path:
    """Keep the novels in ``cache_folder()`` and return it: from ``source`` (a
    ``.deb`` of ``PACKAGE`` or an installed R package folder ``.../janeaustenr``), else
    from ``apt-get download``. The database is checked (every novel read) before it
    replaces what the cache held: a source that is no ``.deb``, holds no tar archive or a
    damaged database is a one-line ``ValueError`` naming it, and the cache is left as it was."""
    target = cache_folder()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as temporary:
        work = Path(temporary)
        package = Path(source) if source is not None else _download(work)
        if package.is_file():
            package = _extract_deb(package, work / "deb")
        data = package / "data"
        if not all((data / name).is_file() for name in _DATABASE):
            raise FileNotFoundError(f"{package} holds no data/Rdata.rdb and data/Rdata.rdx")
        _novels(data)
        aside = work / "austen"
        aside.mkdir()
        for name in _DATABASE:
            shutil.copyfile(data / name, aside / name)
        if target.exists():
            shutil.rmtree(target)
        aside.rename(target)
    _read.cache_clear()
    return target


def _novels(folder: Path) -> dict[str, list[str]]:
    """Each novel of the database in ``folder``: name -> its lines (NA lines empty)."""
    novels = {}
    for name, vector in lazy_load(folder / "Rdata").items():
        lines = getattr(vector, "values", None)
        if not isinstance(lines, list) or not all(x is None or isinstance(x, str) for x in lines):
            raise ValueError(f"{folder}: the object {name!r} is not a character vector")
        novels[name] = [line or "" for line in lines]
    return novels


def chapters(lines: list[str]) -> list[str]:
    """A novel's lines as documents: what precedes the first heading (if not blank),
    then each chapter, heading included."""
    starts = [k for k, line in enumerate(lines) if HEADING.match(line)]
    bounds = sorted({0, *starts, len(lines)})
    parts = ["\n".join(lines[a:b]) for a, b in itertools.pairwise(bounds)]
    return [part for part in parts if part.strip()]


@functools.lru_cache(maxsize=1)
def _read(folder: Path) -> tuple[str, ...]:
    return tuple(doc for lines in _novels(folder).values() for doc in chapters(lines))


def documents() -> tuple[str, ...]:
    """Every chapter of the six novels (the module's docstring), from the cache.

    Raises ``FileNotFoundError`` (one line naming the command that fetches it) before
    ``fetch``, and when the cache holds no readable corpus: a file of it damaged (not gzip,
    cut short), named. Fetching again replaces the cache; nothing here deletes it.
    """
    folder = cache_folder()
    if not all((folder / name).is_file() for name in _DATABASE):
        raise FileNotFoundError(f"corpus 'austen' is not in {folder}; fetch it once: {FETCH}")
    try:
        return _read(folder)
    except (OSError, ValueError) as error:
        raise FileNotFoundError(
            f"corpus 'austen' in {folder} cannot be read: {error}; fetch it again, which "
            f"replaces it: {FETCH}"
        ) from None
