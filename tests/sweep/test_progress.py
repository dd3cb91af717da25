"""What a user sees while a sweep runs: rates and ETAs from finished cells only."""

import io
import re
import time

import numpy as np

from pipeline.kinds.training import sweep as training
from pipeline.kinds.training.grid import TrainingCell
from pipeline.kinds.training.tasks import train_cell
from pipeline.sweep.config import validate
from pipeline.sweep.progress import Progress, follow

from helpers import corpus_folder
from sweeping import composed


def test_the_eta_waits_for_finished_cells_and_counts_from_them():
    stream = io.StringIO()
    progress = Progress(10, already=2, interval=0, stream=stream)
    time.sleep(1.0)  # the cluster's start: no rate may include it
    progress.advance(finished=2)
    assert stream.getvalue().splitlines()[-1] == "4/10 cells, ETA after the first cells"
    time.sleep(0.1)
    progress.advance(finished=2)
    last = stream.getvalue().splitlines()[-1]
    rate = float(re.fullmatch(r"6/10 cells, ([\d.]+) cells/s, ETA 0:00:0\d", last).group(1))
    assert 8 < rate <= 20  # 2 cells in 0.1 s (or a little more), not 4 in 1.1 s
    progress.advance(finished=3, failed=1)
    progress.close()
    assert re.fullmatch(r"9/10 cells, 1 failed, \d+ s", stream.getvalue().splitlines()[-1])


def test_tasks_advance_the_line_and_the_eta_follows_the_last_minutes():
    """Counted tasks (models, references...) move the line before any cell finishes; the ETA
    is the tasks left at the rate of the window's samples, older ones forgotten."""
    stream, counts = io.StringIO(), [(0, 100)]
    progress = Progress(10, interval=0, stream=stream, tasks=lambda: counts[-1], window=0.3)
    progress.tick()
    assert (
        stream.getvalue().splitlines()[-1] == "0/10 cells, tasks 0/100, ETA after the first tasks"
    )
    counts.append((10, 100))
    progress.tick()  # the first finished tasks: a moment, not yet a rate
    time.sleep(0.5)
    counts.append((60, 100))
    progress.tick()
    line = stream.getvalue().splitlines()[-1]
    rate = float(re.fullmatch(r"0/10 cells, tasks 60/100, ([\d.]+) tasks/s, ETA 0:00:0\d", line)[1])
    assert 60 < rate <= 100  # 50 tasks in 0.5 s or a little more
    time.sleep(0.5)
    counts.append((70, 100))
    progress.tick()  # the window keeps only the last two samples: 10 tasks in 0.5 s
    line = stream.getvalue().splitlines()[-1]
    rate = float(re.fullmatch(r"0/10 cells, tasks 70/100, ([\d.]+) tasks/s, ETA 0:00:0\d", line)[1])
    assert 10 < rate <= 20


def test_a_cell_says_how_far_it_is_and_the_line_ends_with_its_latest_words():
    stream = io.StringIO()
    progress = Progress(4, interval=0, stream=stream)
    progress.hear("kernel_4 n=16 seed 0", "epoch 1/3, validation perplexity 812.4")
    progress.tick()
    assert stream.getvalue().splitlines()[-1] == (
        "0/4 cells, ETA after the first cells; kernel_4 n=16 seed 0: epoch 1/3, "
        "validation perplexity 812.4"
    )
    progress.advance(finished=4)  # every cell done: the line says so, without old words
    progress.close()
    assert re.fullmatch(r"4/4 cells, \d+ s", stream.getvalue().splitlines()[-1])


def test_a_training_cell_on_a_worker_reports_each_epochs_validation_perplexity(client, tmp_path):
    """An HMM LM cell trained in a task on a real worker tells the sweep's progress each epoch
    and its validation perplexity as it goes, the same numbers its result stores."""
    corpus = corpus_folder(tmp_path / "texts", " ".join(["the cat sat on the mat and the dog"] * 8))
    cfg = composed("experiment=lm_smoke", f"training.corpus={corpus}", "training.n_tokens=8")
    validate(cfg)
    settings = training.grid(cfg).settings
    progress = Progress(1, interval=3600, stream=io.StringIO())
    with follow(client, progress):
        values = client.submit(train_cell, TrainingCell(8, "kernel_2", 0), settings).result()
        deadline = time.monotonic() + 30  # events travel worker -> scheduler -> client
        while len(progress.said) < values.epochs and time.monotonic() < deadline:
            time.sleep(0.05)
    cells = {cell for cell, _ in progress.said}
    assert cells == {"kernel_2 n=8 seed 0"}
    said = [
        re.fullmatch(r"epoch (\d)/3, validation perplexity ([\d.]+)", t) for _, t in progress.said
    ]
    assert [int(m[1]) for m in said] == list(range(1, values.epochs + 1))
    np.testing.assert_allclose(
        [float(m[2]) for m in said], values.perplexity[1 : values.epochs + 1], rtol=1e-4
    )
