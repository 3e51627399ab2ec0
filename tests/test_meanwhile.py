"""kebab_mlflow/meanwhile.py: the call runs on its own named thread; its value, or its error,
reaches the caller's thread at result()."""

from __future__ import annotations

import threading

import pytest

from kebab_mlflow.meanwhile import Meanwhile


def test_the_value_comes_from_a_second_thread():
    started = threading.Event()
    release = threading.Event()

    def call() -> str:
        started.set()
        release.wait(timeout=60)
        return threading.current_thread().name

    work = Meanwhile(call, "kebab-test")
    assert started.wait(timeout=60)  # running while this thread goes on
    release.set()
    assert work.result() == "kebab-test"
    assert work.result() == "kebab-test"  # again: the same value


def test_the_error_is_raised_on_the_callers_thread_and_join_leaves_it():
    def call() -> None:
        raise ValueError("bad file")

    work = Meanwhile(call, "kebab-test")
    work.join()  # waits, raises nothing
    with pytest.raises(ValueError, match="bad file"):
        work.result()
