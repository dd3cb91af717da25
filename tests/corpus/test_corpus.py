import bz2
import gzip
import io
import lzma
import re
import struct
import tarfile
import zlib

import numpy as np
import pytest

from pipeline.corpus import (
    UNKNOWN,
    austen,
    documents,
    rdata,
    stdlib_documents,
    tokenize,
    vocabulary,
    word_ids,
)
from pipeline.corpus.__main__ import main
from pipeline.corpus.rdata import lazy_load, unserialize
from pipeline.hmmlm.data import part, split_digest
from pipeline.sweep.config import register
from pipeline.sweep.main import check_overrides


def test_tokenize_keeps_inner_apostrophes_and_lowers_case():
    assert tokenize("Don't STOP-me, 'now' x2") == ["don't", "stop", "me", "now", "x"]


def test_vocabulary_ranks_by_frequency_then_alphabetically():
    texts = ["b a c", "c b d"]
    assert vocabulary(texts, 4) == ("b", "c", "a", UNKNOWN)
    assert vocabulary(texts, 5) == ("b", "c", "a", "d", UNKNOWN)
    with pytest.raises(ValueError, match=r"4 word types; n_states=6 needs at least 5 \("):
        vocabulary(texts, 6)


def test_word_ids_map_other_words_to_the_unknown_state():
    words = ("b", "c", UNKNOWN)
    ids = word_ids(["b a c", "", "zz b"], words)
    assert [doc.tolist() for doc in ids] == [[0, 2, 1], [], [2, 0]]
    assert all(doc.dtype == np.int64 for doc in ids)


def test_documents_are_the_standard_library_by_default_or_the_files_given(tmp_path):
    assert documents() is stdlib_documents() and documents("stdlib") is stdlib_documents()
    (tmp_path / "a.txt").write_text("one")
    (tmp_path / "b.txt").write_text("two")
    assert documents(tmp_path) == ("one", "two")
    assert documents(tmp_path / "a.txt") == ("one",)
    with pytest.raises(FileNotFoundError, match=r"corpus '.*nowhere' does not exist"):
        documents(tmp_path / "nowhere")


def test_default_corpus_is_large_enough_for_the_paper():
    words = vocabulary(stdlib_documents(), 7620)
    assert len(words) == 7620 and words[-1] == UNKNOWN and "the" in words[:5]


# --- Jane Austen's novels from an R lazy-load database, without R or the network -----------


def _xdr(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def _r_item(obj) -> bytes:
    """R's XDR serialisation of a str (CHARSXP), list of str (character vector), list of
    int (integer vector) or dict (a named list)."""
    if isinstance(obj, str):
        data = obj.encode()
        return _xdr(9 | (1 << 15), len(data)) + data  # a UTF-8 CHARSXP
    if isinstance(obj, dict):
        names = _xdr(2 | (1 << 10)) + _xdr(1) + _r_item("names") + _r_item(list(obj)) + _xdr(254)
        return _xdr(19 | (1 << 9), len(obj)) + b"".join(map(_r_item, obj.values())) + names
    if all(isinstance(x, str) for x in obj):
        return _xdr(16, len(obj)) + b"".join(map(_r_item, obj))
    return _xdr(13, len(obj)) + _xdr(*obj)


def _serialized(obj) -> bytes:
    return b"X\n" + _xdr(3, 0x040201, 0x030500, 5) + b"UTF-8" + _r_item(obj)


def _package(folder, novels: dict[str, list[str]]):
    """An R package folder whose lazy-load data holds ``novels``, as R writes it."""
    data = folder / "data"
    data.mkdir(parents=True)
    database, where = b"", {}
    for name, lines in novels.items():
        raw = _serialized(lines)
        entry = struct.pack(">i", len(raw)) + zlib.compress(raw)
        where[name], database = [len(database), len(entry)], database + entry
    (data / "Rdata.rdb").write_bytes(database)
    index = {"variables": where, "references": {}, "compressed": [1]}
    (data / "Rdata.rdx").write_bytes(gzip.compress(_serialized(index)))
    return folder


NOVELS = {
    "emma": ["EMMA", "", "VOLUME I", "CHAPTER I", "Emma Woodhouse, handsome,", "and rich.",
             "CHAPTER II", "Mr. Weston was a native."],
    "persuasion": ["Chapter 1", "Sir Walter Elliot, of Kellynch Hall.", "", "Chapter 2",
                   "Mr Shepherd, a civil, cautious lawyer."],
}  # fmt: skip


def _deb(path, package=None, *, data=None, name="data.tar.xz"):
    """A Debian package (ar archive) whose member ``name`` is ``data``, by default a tar.xz
    installing ``package`` where Debian does."""
    if data is None:
        payload = io.BytesIO()
        with tarfile.open(fileobj=payload, mode="w:xz") as archive:
            archive.add(package, arcname="./usr/lib/R/site-library/janeaustenr")
        data = payload.getvalue()
    members = [("debian-binary", b"2.0\n"), ("control.tar.xz", b""), (name, data)]
    out = b"!<arch>\n"
    for name, data in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    path.write_bytes(out)
    return path


DIGEST = "5b6dc8cbdbf4bef2"  # the split of the five chapters, written down once


def test_the_r_lazy_load_database_reads_back_what_r_wrote(tmp_path):
    package = _package(tmp_path / "janeaustenr", NOVELS)
    objects = lazy_load(package / "data" / "Rdata")
    assert list(objects) == ["emma", "persuasion"]
    assert objects["emma"].values == NOVELS["emma"] and objects["emma"].attributes == {}
    raw = _serialized(["a", "b"])
    for kind, compress in ((b"Z", zlib.compress), (b"2", bz2.compress), (b"X", lzma.compress)):
        blob = struct.pack(">i", len(raw)) + kind + compress(raw)
        assert unserialize(rdata._entry(blob, 3)).values == ["a", "b"]
    with pytest.raises(ValueError, match="R object of type 3 is not read here"):
        unserialize(b"X\n" + _xdr(2, 0, 0) + _xdr(3))


def test_austen_is_fetched_once_then_read_as_chapters(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError) as missing:
        documents("austen")
    assert "python -m pipeline.corpus fetch austen" in str(missing.value)
    assert "\n" not in str(missing.value)
    package = _package(tmp_path / "janeaustenr", NOVELS)
    assert main(["fetch", "austen", "--source", str(_deb(tmp_path / "r.deb", package))]) == 0
    chapters = documents("austen")
    assert chapters == (
        "EMMA\n\nVOLUME I",
        "CHAPTER I\nEmma Woodhouse, handsome,\nand rich.",
        "CHAPTER II\nMr. Weston was a native.",
        "Chapter 1\nSir Walter Elliot, of Kellynch Hall.\n",
        "Chapter 2\nMr Shepherd, a civil, cautious lawyer.",
    )
    assert austen.fetch(package) == austen.cache_folder()  # an installed package folder too
    assert documents("austen") == chapters
    # The split is fixed by each chapter's text, whatever the order of the chapters.
    assert [part(chapter) for chapter in chapters] == ["train"] * 5
    assert split_digest(chapters) == split_digest(chapters[::-1]) == DIGEST


def test_a_source_without_the_database_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    assert main(["fetch", "austen", "--source", str(tmp_path / "empty")]) == 2
    error = capsys.readouterr().err
    assert "holds no data/Rdata.rdb and data/Rdata.rdx" in error and error.count("\n") == 1
    assert not austen.cache_folder().exists()


@pytest.mark.parametrize("name", ["data.tar", "data.tar.xz"])
def test_a_deb_whose_data_tar_is_no_tar_archive_is_refused_in_one_line(
    tmp_path, monkeypatch, capsys, name
):
    """``fetch --source`` with a .deb whose data.tar is not a tar archive gave tarfile's
    traceback: one line naming the file and what to give, exit status 2, the cache
    untouched."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    deb = _deb(tmp_path / "r.deb", data=b"not a tar archive\n" * 40, name=name)
    assert main(["fetch", "austen", "--source", str(deb)]) == 2
    assert capsys.readouterr().err == (
        f"error: {deb}: its {name} is no readable tar archive (file could not be opened "
        "successfully); give the r-cran-janeaustenr .deb or an installed R package folder\n"
    )
    assert not austen.cache_folder().exists()


def _fetched_then(tmp_path, monkeypatch, damage):
    """The cache after a fetch, one of its files then damaged by ``damage(path)``: that file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    austen.fetch(_package(tmp_path / "janeaustenr", NOVELS))
    return damage(austen.cache_folder())


def _not_gzip(folder):
    (folder / "Rdata.rdx").write_bytes(b"garbage\n")
    return folder / "Rdata.rdx"


def _cut(folder):
    database = folder / "Rdata.rdb"
    database.write_bytes(database.read_bytes()[:-40])
    return database


@pytest.mark.parametrize(
    "damage, why",
    [
        (_not_gzip, r"Not a gzipped file \(b'ga'\)"),
        (_cut, r"Error -5 while decompressing data: incomplete or truncated stream"),
    ],
    ids=["not-gzip", "truncated"],
)
def test_a_damaged_cache_is_named_with_how_to_fix_it(tmp_path, monkeypatch, damage, why):
    """A cache file that is not gzip gave ``gzip.BadGzipFile``'s traceback, a truncated one an
    error blamed on ``training.n_tokens``: both name the file and the command that fetches
    the corpus again, in one line, through the library and the sweep; the file is kept."""
    damaged = _fetched_then(tmp_path, monkeypatch, damage)
    kept = damaged.read_bytes()
    expected = (
        rf"corpus 'austen' in {re.escape(str(austen.cache_folder()))} cannot be read: "
        rf"{re.escape(str(damaged))} is no readable "
        rf"R lazy-load file \({why}\); fetch it again, which replaces it: "
        r"python -m pipeline\.corpus fetch austen"
    )
    with pytest.raises(FileNotFoundError, match=rf"^{expected}$"):
        documents("austen")
    register()
    store = tmp_path / "s.zarr"
    problem = check_overrides(["kind=training", "training.corpus=austen", f"store={store}"])
    assert re.fullmatch(rf"training\.corpus: {expected}", problem), problem
    assert damaged.read_bytes() == kept and not store.exists()


def test_a_package_archive_writes_only_its_files_and_folders_inside_the_target(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in ("./usr/lib/kept.txt", "../escaped.txt", "/absolute.txt"):
            member = tarfile.TarInfo(name)
            member.size = 4
            archive.addfile(member, io.BytesIO(b"data"))
        link = tarfile.TarInfo("./usr/lib/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    buffer.seek(0)
    target = tmp_path / "target"
    target.mkdir()
    with tarfile.open(fileobj=buffer) as archive:
        austen._extract_files(archive, target)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert written == ["target", "target/usr", "target/usr/lib", "target/usr/lib/kept.txt"]
    assert (target / "usr/lib/kept.txt").read_bytes() == b"data"
