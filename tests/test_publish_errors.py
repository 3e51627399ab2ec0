"""The error of a failed publish names the cause (bench/bench_faults.py --only publish found
it cut off): MLflow's text for a failed request is "API request to URL failed with exception
HTTPConnectionPool(...): Max retries exceeded with url: ... (Caused by ...)", the cause at the
end; a server whose artifact disk is full answers 500 and the cause is "too many 500 error
responses". The message keeps the start and the end, redacted, on one line."""

from __future__ import annotations

import pytest

from kebab_mlflow.app import run as log
from kebab_mlflow.app.run import RunOptions, execute, gist
from kebab_mlflow.errors import TrackingError
from tests.conftest import GOLDEN, KB

URL = ("http://alice:s3cret-Pw@127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/4/"
       "0123456789abcdef0123456789abcdef/artifacts/aggregate.json")
CAUSE = "(Caused by ResponseError('too many 500 error responses'))"
FAILURE = (f"API request to {URL} failed with exception HTTPConnectionPool(host='127.0.0.1', "
           f"port=5000): Max retries exceeded with url: {URL.split('5000', 1)[1]}\n {CAUSE}")


def test_gist_keeps_start_and_end_of_a_long_text_on_one_line():
    assert gist("short\n  text") == "short text"
    text = "a" * 300 + "b" * 300
    assert gist(text, limit=25) == "a" * 10 + " ... " + "b" * 10
    assert len(gist(text)) <= 400


def test_a_failed_publish_names_the_cause_and_no_password(tmp_path, store_uri, monkeypatch):
    real = log.checkpoint

    def failing(name: str) -> None:
        if name == "metrics-logged":
            raise RuntimeError(FAILURE)  # what MLflow raises after the server's 500s
        real(name)

    monkeypatch.setattr(log, "checkpoint", failing)
    options = RunOptions(golden=str(GOLDEN), corpus=str(KB), tracking_uri=store_uri,
                         experiment="publish-error", run_name="cause")
    with pytest.raises(TrackingError) as failed:
        execute(options)
    text = str(failed.value)
    assert "lost the tracking store while publishing run" in text
    assert "too many 500 error responses" in text
    assert "API request to http://" in text
    assert "s3cret-Pw" not in text
    assert "\n" not in text.split("results kept in")[0]
