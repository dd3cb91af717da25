"""The one timing policy of every sweep kind: runs interleaved in rounds."""

import time

import numba
import pytest

from pipeline.sweep.timing import Timing, blas_threads, clocked


def test_rounds_call_every_run_once_a_round_in_alternating_order():
    calls = []

    def run(name):
        calls.append(name)
        return len(calls)

    found = Timing(repeats=3, max_repeats=10).rounds({n: lambda n=n: run(n) for n in "abc"})
    assert "".join(calls) == "abccbaabc"
    assert found == {"a": [1, 6, 7], "b": [2, 5, 8], "c": [3, 4, 9]}


def test_rounds_go_on_for_min_seconds_and_stop_at_max_repeats():
    assert len(Timing(1, min_seconds=3600, max_repeats=4).rounds({"a": lambda: 0})["a"]) == 4
    found = Timing(2, min_seconds=0.05, max_repeats=1000).rounds({"a": lambda: time.sleep(0.01)})
    assert len(found["a"]) >= 5  # each round sleeps at least 0.01 s


def test_nothing_is_run_with_timing_off():
    def fail():
        raise AssertionError("ran")

    assert Timing(3, enabled=False).rounds({"a": fail}) == {"a": []}


def test_threads_are_fixed_while_timing_and_restored_after():
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    before = numba.get_num_threads()
    seen = Timing(1, threads=1).rounds({"a": lambda: (blas_threads(), numba.get_num_threads())})
    assert seen == {"a": [(1, 1)]}
    assert numba.get_num_threads() == before


def test_clocked_returns_the_result_and_its_seconds():
    result, seconds = clocked(lambda: time.sleep(0.02) or "done")()
    assert result == "done" and seconds == pytest.approx(0.02, abs=0.5) and seconds >= 0.02
