"""No secret reaches the store's config or ``python -m pipeline.sweep --cfg``: values under
secret-looking keys, and secret-looking parts of any string (``pipeline.sweep.provenance``);
everything else is kept as it was written."""

import dataclasses
import sys

import pytest
import yaml
from omegaconf import OmegaConf

from pipeline.sweep.config import CONFIG_DIR, SHIPPED_CLUSTERS, compose, register
from pipeline.sweep.config.clusters import load_clusters
from pipeline.sweep.config.compose import compose_with_hydra
from pipeline.sweep.main import main
from pipeline.sweep.multirun import RECORD, SecretFreeRecord
from pipeline.sweep.provenance import REDACTED, public_config, redacted, redacted_text

GITHUB = "ghp_R4nd0mLooking1234567890abcdefGHIJ"
HUGGING_FACE = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm12345678"
BASE64 = "lg8iZHnwIr1lQ4Gj7ZF20eLkJ9wwXXj0uE20PPfM"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"

SECRET_LINES = {
    # kind: (key of the slurm entry, the line as written, as stored and shown)
    "export_token": (
        "job_script_prologue",
        "export WANDB_API_TOKEN=wandb-0001",
        "export WANDB_API_TOKEN=<redacted>",
    ),
    "export_key": ("job_script_prologue", "export OPENAI_API_KEY=oa-0002", None),
    "export_secret": ("job_script_prologue", "export AWS_SECRET_ACCESS_KEY=aws-0003", None),
    "export_password_quoted": (
        "job_script_prologue",
        "export DB_PASSWORD='two words 0004' && echo ok",
        "export DB_PASSWORD=<redacted> && echo ok",
    ),
    "export_pass": ("job_script_prologue", "export SMTP_PASS=smtp-0005", None),
    "export_pwd": ("job_script_prologue", "export MYSQL_PWD=mysql-0006", None),
    "export_auth": ("job_script_prologue", "export HF_AUTH=auth-0007", None),
    "export_credential": ("job_script_prologue", "export GH_CREDENTIALS=cred-0008", None),
    "export_cookie": ("job_script_prologue", "export SESSION_COOKIE=cookie-0009", None),
    "lowercase_export": ("job_script_prologue", "export api_token=lower-0010", None),
    "assignment_before_a_command": (
        "job_script_prologue",
        "WANDB_API_KEY=wandb-0011 python -m train",
        "WANDB_API_KEY=<redacted> python -m train",
    ),
    "csh_setenv": (
        "job_script_prologue",
        "setenv API_TOKEN csh-0012",
        "setenv API_TOKEN <redacted>",
    ),
    "option_and_value": (
        "job_script_prologue",
        "huggingface-cli login --token tok-0013",
        "huggingface-cli login --token <redacted>",
    ),
    "option_equals_value": (
        "job_script_prologue",
        "mlflow login --password=pw-0014",
        "mlflow login --password=<redacted>",
    ),
    "comment_directive_equals": (
        "job_extra_directives",
        "--comment=ticket 42: deploy comment-0015",
        "--comment=<redacted>",
    ),
    "comment_directive_space": (
        "job_extra_directives",
        "--comment comment-0016",
        "--comment <redacted>",
    ),
    "export_within_a_directive": (
        "job_extra_directives",
        "--export=ALL,HF_TOKEN=directive-0017",
        "--export=ALL,HF_TOKEN=<redacted>",
    ),
    "github_token_in_a_url": (
        "job_script_prologue",
        f"git clone https://{GITHUB}@github.com/me/data",
        "git clone https://<redacted>@github.com/me/data",
    ),
    "hugging_face_token": (
        "job_script_prologue",
        f"echo {HUGGING_FACE} > ~/.cache/huggingface/token",
        "echo <redacted> > ~/.cache/huggingface/token",
    ),
    "base64_token_in_a_header": (
        "job_script_prologue",
        f"curl -H 'X-Api: {BASE64}' https://example.org",
        "curl -H 'X-Api: <redacted>' https://example.org",
    ),
    "token_in_a_path": ("local_directory", f"/scratch/{BASE64}", "/scratch/<redacted>"),
    "token_in_any_string": ("account", HUGGING_FACE, REDACTED),
    "url_password": (
        "job_script_prologue",
        "pip install -i https://me:pw-0018@pypi.example.org/simple mine",
        "pip install -i https://me:<redacted>@pypi.example.org/simple mine",
    ),
    "private_key": ("job_script_prologue", f"echo '{PEM}' > key", "echo '<redacted>' > key"),
}
"""Each kind of line that carries a secret. A stored line of None: the name, =<redacted>."""
KEPT = {
    "job_script_prologue": [
        "export OMP_NUM_THREADS=1",
        "module load python/3.11",
        "source /opt/venv/bin/activate",
        "cd $SLURM_SUBMIT_DIR",
        "export PATH=$HOME/bin:$PATH",
    ],
    "job_extra_directives": ["--exclusive", "--qos=high", "--mail-user=me@example.org"],
}
"""Lines that look like those but hold no secret: kept as they are."""


def secret(line: str) -> str:
    """The secret in one of ``SECRET_LINES``: what the stored line leaves out."""
    for kind, (_, written, _) in SECRET_LINES.items():
        if written == line:
            stored = stored_line(kind)
            head, _, tail = stored.partition(REDACTED)
            return written[len(head) : len(written) - len(tail)]
    raise KeyError(line)


def stored_line(kind: str) -> str:
    _, written, stored = SECRET_LINES[kind]
    return stored or written.partition("=")[0] + "=" + REDACTED


def leaky_entry() -> dict:
    """The repository's slurm entry with every line of ``SECRET_LINES`` and ``KEPT``."""
    entry = {"kind": "slurm", "host": "127.0.0.1", **KEPT}
    entry["job_script_prologue"] = list(KEPT["job_script_prologue"])
    entry["job_extra_directives"] = list(KEPT["job_extra_directives"])
    for where, written, _ in SECRET_LINES.values():
        if where in KEPT:
            entry[where].append(written)
        else:
            entry[where] = written
    return entry


@pytest.fixture(scope="module")
def cluster_file(tmp_path_factory):
    """A ``dask_cluster.yaml`` whose ``slurm`` entry is ``leaky_entry``; the repository's
    clusters are registered again afterwards."""
    entries = yaml.safe_load(SHIPPED_CLUSTERS.read_text())
    path = tmp_path_factory.mktemp("leaky") / "dask_cluster.yaml"
    path.write_text(yaml.safe_dump({**entries, "slurm": leaky_entry()}))
    yield path
    register(load_clusters(SHIPPED_CLUSTERS))


@pytest.fixture(scope="module")
def stored(cluster_file) -> str:
    """The config a sweep on the leaky entry stores."""
    cfg, _ = compose(["experiment=smoke", "cluster=slurm"], clusters=load_clusters(cluster_file))
    return public_config(cfg)


def test_the_leaky_entry_holds_every_secret(cluster_file):
    entry = load_clusters(cluster_file)["slurm"]
    for where, written, _ in SECRET_LINES.values():
        value = getattr(entry, where)
        assert written == value or written in value


@pytest.mark.parametrize("kind", sorted(SECRET_LINES))
def test_each_kind_of_secret_is_redacted_in_the_stored_config(stored, kind):
    where, written, _ = SECRET_LINES[kind]
    lines = yaml.safe_load(stored)["cluster"][where]
    assert stored_line(kind) == lines or stored_line(kind) in lines
    assert secret(written) not in stored


def test_lines_without_secrets_are_stored_as_written(stored):
    cluster = yaml.safe_load(stored)["cluster"]
    for where, lines in KEPT.items():
        assert cluster[where][: len(lines)] == lines


def test_secret_keys_are_redacted_numbers_and_flags_kept():
    cfg = OmegaConf.create(
        {
            "cluster": {
                "connect_options": {"password": "hunter2", "passphrase": "x", "port": 22},
                "security": {"key": "/home/me/key.pem", "cert": "/home/me/cert.pem"},
                "password_auth": True,
            },
            "grid": {"horizon": 5},
            "training": {"n_tokens": 200},
            "api_token": "t0ken",
            "api_password": 982451653,
            "db": {"pin": 4271},
            "exclude_keys": [],
        }
    )
    text = public_config(cfg)
    for value in ("hunter2", "t0ken", "/home/me/key.pem", "982451653", "4271"):
        assert value not in text
    assert text.count(REDACTED) == 6
    for kept in ("cert: /home/me/cert.pem", "horizon: 5", "port: 22", "n_tokens: 200"):
        assert kept in text
    assert "password_auth: true" in text and "exclude_keys: []" in text


def test_configs_without_secrets_are_stored_as_they_are():
    """Nothing of the default config, of any experiment or of any cluster entry of the
    repository looks like a secret (paths, module names, hashes are no tokens)."""
    default, _ = compose([])
    documents = [OmegaConf.to_container(default, resolve=True)]
    documents += [
        yaml.safe_load(p.read_text()) for p in [*CONFIG_DIR.rglob("*.yaml"), SHIPPED_CLUSTERS]
    ]
    documents += [dataclasses.asdict(e) for e in load_clusters(SHIPPED_CLUSTERS).values()]
    for document in documents:
        assert redacted(document) == document


def shown(monkeypatch, capsys, folder, *argv: str) -> str:
    """What ``python -m pipeline.sweep <argv>`` prints in ``folder``."""
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "argv", ["pipeline.sweep", *argv])
    main()
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_cfg_job_prints_the_stored_config(cluster_file, stored, monkeypatch, capsys):
    out = shown(
        monkeypatch,
        capsys,
        cluster_file.parent,
        "--cfg",
        "job",
        "experiment=smoke",
        "cluster=slurm",
    )
    assert out == stored
    for _, written, _ in SECRET_LINES.values():
        assert secret(written) not in out


def test_cfg_all_and_hydra_redact_the_command_line_too(cluster_file, monkeypatch, capsys):
    overrides = [
        "cluster=slurm",
        "cluster.job_extra_directives=['--comment=cli-0019']",
        f"cluster.queue={GITHUB}",
        "cluster.security.key=cli-0020",
    ]
    for flags in (["--cfg", "all"], ["--cfg", "hydra"], ["-c", "all", "--resolve"]):
        out = shown(monkeypatch, capsys, cluster_file.parent, *flags, *overrides)
        for value in ("cli-0019", GITHUB, "cli-0020"):
            assert value not in out, (flags, value)
        assert "--comment=<redacted>" in out and "key=<redacted>" in out
    assert "cluster=slurm" in out  # the overrides as Hydra records them


def test_cfg_package_selects_after_redacting(cluster_file, monkeypatch, capsys):
    folder = cluster_file.parent
    out = shown(monkeypatch, capsys, folder, "--cfg", "job", "-p", "cluster", "cluster=slurm")
    assert out.startswith("# @package cluster\n") and "--comment=<redacted>" in out
    argv = ["--cfg", "job", "--package", "cluster.account", "cluster=slurm"]
    assert shown(monkeypatch, capsys, folder, *argv) == f"{REDACTED}\n"


def test_a_secret_key_of_a_flow_mapping_is_redacted_in_any_string():
    """An override's mapping as Hydra records it (``hydra.overrides.task``) and as it joins
    the overrides into ``hydra.job.override_dirname``."""
    cases = {
        "cluster.connect_options={username: me, password: hunter2}": (
            "cluster.connect_options={username: me, password: <redacted>}"
        ),
        "cluster.connect_options={username:me,passphrase:'two words'},experiment=smoke": (
            "cluster.connect_options={username:me,passphrase:<redacted>},experiment=smoke"
        ),
        "grid.methods={topp:[0.5,0.9],topk:[3]}": "grid.methods={topp:[0.5,0.9],topk:[3]}",
    }
    for written, shown in cases.items():
        assert redacted_text(written) == shown


def test_the_multirun_record_holds_the_config_redacted(tmp_path):
    """What Hydra's basic sweeper saves between the start of the multirun and of its first
    job goes nowhere; the record left in its place is the config redacted (an ssh password
    given on the command line: in the config and in the overrides Hydra records)."""
    password = "hunter2-0021"
    overrides = ["cluster=ssh", f"+cluster.connect_options.password={password}"]
    config = compose_with_hydra([*overrides, f"hydra.sweep.dir={tmp_path}"], job_name="main")
    record = SecretFreeRecord()
    record.on_multirun_start(config)
    OmegaConf.save(config, tmp_path / RECORD)  # as Hydra's basic sweeper saves it
    assert (tmp_path / RECORD).is_symlink()
    record.on_job_start(config)
    saved = (tmp_path / RECORD).read_text()
    assert password not in saved and not (tmp_path / RECORD).is_symlink()
    assert "password: <redacted>" in saved  # the config
    assert "+cluster.connect_options.password=<redacted>" in saved  # the overrides
    assert [path.name for path in tmp_path.iterdir()] == [RECORD]


def test_a_multirun_without_secrets_keeps_hydras_record(tmp_path):
    config = compose_with_hydra([f"hydra.sweep.dir={tmp_path}"], job_name="main")
    SecretFreeRecord().on_multirun_start(config)
    assert list(tmp_path.iterdir()) == []  # Hydra's sweeper writes it as it is


def test_a_multirun_whose_record_cannot_be_kept_free_of_secrets_stops(tmp_path, capsys):
    """Hydra makes a callback's exception a warning and saves the record all the same: the
    callback stops the multirun itself, in one line, before the sweeper writes."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    overrides = ["cluster=ssh", "+cluster.connect_options.password=hunter2-0023"]
    config = compose_with_hydra([*overrides, f"hydra.sweep.dir={blocker}/m"], job_name="main")
    with pytest.raises(SystemExit) as exited:
        SecretFreeRecord().on_multirun_start(config)
    (line,) = capsys.readouterr().err.splitlines()
    assert exited.value.code == 2
    assert line.startswith(f"error: {blocker}/m/{RECORD}: cannot keep the secrets of the config")
