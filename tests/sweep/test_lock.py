"""One writer per store: real processes racing for a store's lock (``StoreLock``)."""

import multiprocessing
import os
import platform
import re
import signal

import pytest

from pipeline.sweep.config import ConfigError
from pipeline.sweep.lock import StoreLock, check_unlocked, lock_path

FORK = multiprocessing.get_context("fork")


def _hold(store, held, release):
    with StoreLock(store):
        held.set()
        release.wait(30)


def _try(store, barrier, results):
    barrier.wait()
    try:
        with StoreLock(store):
            results.put(("held", os.getpid()))
            barrier.wait()  # hold until the other has tried
    except ConfigError as error:
        results.put(("refused", str(error)))
        barrier.wait()


def _holder(store):
    """A process holding ``store``'s lock, and the event that lets it go."""
    held, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold, args=(store, held, release))
    holder.start()
    assert held.wait(30)
    return holder, release


def test_a_second_writer_is_refused_in_one_line_naming_the_holder(tmp_path):
    store = tmp_path / "r.zarr"
    holder, release = _holder(store)
    with pytest.raises(ConfigError) as refused:
        StoreLock(store).acquire()
    message = str(refused.value)
    pattern = (
        rf"store: {re.escape(str(store))} is locked by a sweep on "
        rf"{re.escape(platform.node())} \(PID {holder.pid}, since "
        r"\d{4}-\d\d-\d\dT[0-9:]+\+00:00\); "
        r"wait for it to finish or stop it, then run the same command again \(reading the store "
        r"needs no lock\)"
    )
    assert re.fullmatch(pattern, message), message
    with pytest.raises(ConfigError) as checked:  # what a sweep checks before Hydra starts
        check_unlocked(store)
    assert str(checked.value) == message
    release.set()
    holder.join(30)
    with StoreLock(store):  # free again once its holder is done
        assert lock_path(store).is_file()
    assert not lock_path(store).exists()
    check_unlocked(store)


def test_two_writers_started_together_twenty_times_exactly_one_holds(tmp_path):
    store = tmp_path / "r.zarr"
    for _ in range(20):
        barrier, results = FORK.Barrier(2), FORK.Queue()
        racers = [FORK.Process(target=_try, args=(store, barrier, results)) for _ in range(2)]
        for racer in racers:
            racer.start()
        outcomes = sorted(results.get(timeout=30)[0] for _ in racers)
        for racer in racers:
            racer.join(30)
        assert outcomes == ["held", "refused"]


def test_a_killed_holders_lock_is_taken_over(tmp_path):
    store = tmp_path / "r.zarr"
    holder, _ = _holder(store)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(30)
    assert lock_path(store).is_file()  # left behind, naming a dead holder
    with StoreLock(store):
        assert str(os.getpid()) in lock_path(store).read_text()


def _hold_with_store(store, held, release):
    with StoreLock(store) as lock:
        store.mkdir()  # as a sweep makes its store under the lock
        lock.hold_store()
        held.set()
        release.wait(30)


def test_a_lock_file_deleted_mid_run_admits_no_second_writer(tmp_path):
    """The holder's lock file is removed while it writes: a second writer makes a new lock
    file but finds the store's folder held, and is refused; the holder's release leaves the
    lock file it does not hold alone."""
    store = tmp_path / "r.zarr"
    held, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold_with_store, args=(store, held, release))
    holder.start()
    assert held.wait(30)
    lock_path(store).unlink()
    with pytest.raises(ConfigError, match=rf"^store: {re.escape(str(store))} is locked by "):
        StoreLock(store).acquire()
    with pytest.raises(ConfigError, match="is locked by"):
        check_unlocked(store)
    stranger = "a lock file the holder did not make"
    lock_path(store).write_text(stranger)
    release.set()
    holder.join(30)
    assert holder.exitcode == 0
    assert lock_path(store).read_text() == stranger  # not the holder's to remove
    with StoreLock(store):  # free again once its holder is done
        assert str(os.getpid()) in lock_path(store).read_text()


def test_a_directory_where_the_lock_file_belongs_is_named_in_one_line_and_kept(tmp_path):
    """Not the sweep's to remove: the check before the sweep and the lock itself refuse it,
    naming the path and what to do."""
    store = tmp_path / "r.zarr"
    lock_path(store).mkdir()
    (lock_path(store) / "someones.txt").write_text("kept")
    expected = (
        f"store: {lock_path(store)} is a directory, where the store's lock file belongs; it "
        "should be a file: remove or rename it, then run the same command again"
    )
    with pytest.raises(ConfigError) as checked:
        check_unlocked(store)
    with pytest.raises(ConfigError) as taken:
        StoreLock(store).acquire()
    assert str(checked.value) == str(taken.value) == expected
    assert (lock_path(store) / "someones.txt").read_text() == "kept"
