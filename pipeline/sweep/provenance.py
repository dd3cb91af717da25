"""What a results store records about how it was made, and never a secret.

The store's attributes hold the resolved config with its secrets redacted (``public_config``)
and nothing from the environment: no certificate or key contents, no tokens. A secret is
found by the key that holds it (``SECRET_WORDS``: ``password: ...``, ``api_token: ...``) and
by how it reads in any string (``SECRET_PATTERNS``, ``looks_like_a_token``): an
``export NAME=value``, ``NAME=value`` or ``--name value`` whose name is secret-looking, a
``--comment`` directive, the password of a URL, a private key, a token. ``python -m
pipeline.sweep --cfg`` prints the config redacted the same way (``shown_config``), and
Hydra's record of a multirun holds it so (``pipeline.sweep.multirun``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import itertools
import os
import platform
import re
import subprocess
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from pipeline.sweep.config import as_dict, compose
from pipeline.sweep.config.compose import compose_with_hydra
from pipeline.sweep.config.errors import ConfigError

PACKAGES = (
    "topp-pipeline",
    "numpy",
    "scipy",
    "numba",
    "dask",
    "distributed",
    "zarr",
    "xarray",
    "hydra-core",
    "threadpoolctl",
)


SECRET_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie")
"""A name holding one of these, in any case, names a secret: a config key (``password``,
``api_token``), an environment variable (``WANDB_API_KEY``, ``HF_AUTH``) or a command-line
option (``--db-pass``)."""
REDACTED = "<redacted>"

_WORDS = "|".join(SECRET_WORDS)
_WORD = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|\S+)"""
"""A shell word: double-quoted, single-quoted, or up to the next blank."""
_ENTRY = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[^,}]+)"""
"""A flow mapping's value: double-quoted, single-quoted, or up to the next entry or the end."""
SECRET_PATTERNS = (
    # a PEM private key, to its end
    re.compile(
        r"(?P<keep>)-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)",
        re.DOTALL,
    ),
    # a batch job's free-text comment (--comment=..., --comment ...), to the end of the line
    re.compile(r"(?P<keep>--comment(?:=|[ \t]+))\S.*"),
    # the password of a URL: scheme://user:password@host
    re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+(?=@)"),
    # NAME=value, export NAME=value, --name=value with a secret-looking name
    re.compile(
        rf"(?P<keep>(?<![\w-])-{{0,2}}(?:[A-Za-z_][\w-]*?)?(?:{_WORDS})[\w-]*=){_WORD}", re.I
    ),
    # --name value, setenv NAME value with a secret-looking name
    re.compile(
        rf"(?P<keep>(?:(?<![\w-])--?|\bsetenv[ \t]+)[\w-]*?(?:{_WORDS})[\w-]*[ \t]+)(?!-){_WORD}",
        re.I,
    ),
    # a secret-looking key of a flow mapping, to the entry's end: an override's
    # {username: me, password: x} (as Hydra records it, or joined into a folder's name)
    re.compile(rf"(?P<keep>[{{,][ \t]*[\w-]*?(?:{_WORDS})[\w-]*[ \t]*:[ \t]*){_ENTRY}", re.I),
    # tokens of well-known services: GitHub, Hugging Face, GitLab, OpenAI-style, Slack, AWS,
    # Google, PyPI, npm; JSON web tokens
    re.compile(
        r"(?P<keep>)\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|hf_[A-Za-z0-9]{20,}"
        r"|glpat-[\w-]{20,}|sk-[\w-]{20,}|xox[abposr]-[\w-]{10,}|AKIA[0-9A-Z]{16}"
        r"|AIza[\w-]{35}|pypi-[\w-]{16,}|npm_[A-Za-z0-9]{36}"
        r"|eyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,})"
    ),
)
"""How a secret reads inside a string; the group ``keep`` is kept, the rest is redacted."""
_RUN = re.compile(r"[A-Za-z0-9+/_-]{32,}={0,2}")
"""A run of base64 (or base64url) characters long enough to be a token."""
_ABSENT = object()


def looks_like_a_token(run: str) -> bool:
    """Whether a run of 32 or more base64 characters reads as random: upper case, lower
    case and digits, changing class at least 45% of the time (a random one: about 64%; a
    path or a CamelCase name: under 40%), and not a path (no leading ``/``, at most two)."""
    body = run.rstrip("=")
    if body.startswith("/") or body.count("/") > 2:
        return False
    classes = [c.isupper() - c.islower() + 2 * c.isdigit() for c in body]  # 1, -1, 2, or 0
    if not {1, -1, 2} <= set(classes):
        return False
    changes = sum(a != b for a, b in itertools.pairwise(classes))
    return changes >= 0.45 * (len(body) - 1)


def redacted_text(text: str) -> str:
    """``text`` with every secret ``SECRET_PATTERNS`` and ``looks_like_a_token`` find in it
    replaced by ``REDACTED``; the rest as it was."""
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(lambda match: match["keep"] + REDACTED, text)
    return _RUN.sub(lambda match: _redacted_run(match[0]), text)


def _redacted_run(run: str) -> str:
    """A run of base64 characters redacted if it looks like a token, else each part of it
    between slashes that does (a token as a path's last part: ``/scratch/<token>``)."""
    if looks_like_a_token(run):
        return REDACTED
    parts = run.split("/")
    return "/".join(REDACTED if _RUN.fullmatch(p) and looks_like_a_token(p) else p for p in parts)


SECRET_NOUNS = frozenset(
    ("password", "passwd", "passphrase", "pass", "pwd", "pin", "secret", "token", "key")
)
"""The last word of a key (split at ``_``, ``-`` and ``.``) that makes even a number under it a
secret (``api_password: 12345``, ``pin: 1234``); a count of secret-looking things is none
(``n_tokens: 200``, ``n_keys: 3``: their last words are plural)."""


def _secret_key(name, value) -> bool:
    """Whether config key ``name`` holds a secret: a secret-looking name over a string or a
    non-empty list or mapping, or a number under a name that ends in a ``SECRET_NOUNS`` word (a
    flag or null is none: ``password_auth: true``)."""
    lowered = str(name).lower()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return re.split(r"[_.-]", lowered)[-1] in SECRET_NOUNS
    named = any(word in lowered for word in SECRET_WORDS)
    return named and isinstance(value, str | list | dict) and bool(value)


def redacted(node):
    """Plain config values (``OmegaConf.to_container``'s) with every secret redacted: the
    whole value of a secret key, the secret parts of any other string."""
    if isinstance(node, dict):
        return {
            name: REDACTED if _secret_key(name, value) else redacted(value)
            for name, value in node.items()
        }
    if isinstance(node, list):
        return [redacted(value) for value in node]
    return redacted_text(node) if isinstance(node, str) else node


def public_config(cfg) -> str:
    """The resolved config as YAML, its secrets redacted (``redacted``)."""
    return OmegaConf.to_yaml(redacted(OmegaConf.to_container(cfg, resolve=True)))


def shown_config(args: argparse.Namespace, *, job_name: str) -> str | None:
    """What Hydra's ``--cfg job|hydra|all`` (with ``--package``, ``--resolve``) prints for the
    command line ``args`` (Hydra's arguments), its secrets redacted as in the store
    (``redacted``); None when ``args`` ask for no ``--cfg``, or for Hydra's help, which Hydra
    answers. ``job_name``: Hydra's name of the job (the name of the file of its main
    function). Overrides that do not compose raise ``ConfigError`` in one line.
    """
    if args.cfg is None or args.hydra_help:
        return None
    cfg, _ = compose(args.overrides)  # a one-line error where they do not compose
    if args.cfg != "job":
        cfg = compose_with_hydra(args.overrides, job_name=job_name)
    if args.resolve:
        OmegaConf.resolve(cfg)
    plain = as_dict(cfg)
    if args.cfg == "hydra":  # as Hydra shows it: without the help texts
        hydra = plain["hydra"]
        plain = {"hydra": {k: v for k, v in hydra.items() if k not in ("help", "hydra_help")}}
    public = OmegaConf.create(redacted(plain))
    package = None if args.package == "_global_" else args.package
    if package is None:
        return OmegaConf.to_yaml(public)
    found = OmegaConf.select(public, package, default=_ABSENT)
    if found is _ABSENT:
        raise ConfigError("--package", f"{package!r} is not in the config")
    if not OmegaConf.is_config(found):
        return f"{found}\n"
    return f"# @package {package}\n{OmegaConf.to_yaml(found)}"


def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def git_commit() -> str:
    """The commit of the repository holding this package, or 'unknown'."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty else "")


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas() -> str:
    info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    return f"{info.get('name', 'unknown')} {info.get('version', '')}".strip()


def memory() -> str:
    """Total memory of this machine, e.g. '23.5 GiB'."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return "unknown"
    return f"{pages * size / 2**30:.1f} GiB"


def provenance() -> dict[str, str]:
    """Host, CPU, memory, BLAS, package versions and git commit of the client process."""
    return {
        "host": platform.node(),
        "cpu": f"{cpu()}, {os.cpu_count()} cores",
        "memory": memory(),
        "platform": platform.platform(),
        "blas": blas(),
        "versions": "\n".join(f"{k} {v}" for k, v in versions().items()),
        "git_commit": git_commit(),
    }
