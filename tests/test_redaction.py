"""The one redaction function (kebab_mlflow/redaction.py): what it masks, what it leaves."""

from __future__ import annotations

import logging
import warnings

import pytest

from kebab_mlflow.redaction import (
    install_log_redaction,
    redacted,
    redacted_exception,
    register_url_credentials,
)


@pytest.mark.parametrize("text, expected", [
    ("API request to http://user:pw-1234@host:5000/api failed",
     "API request to http://***@host:5000/api failed"),
    ("postgresql://kebab:db-Pass@127.0.0.1:5432/mlflow", "postgresql://***@127.0.0.1:5432/mlflow"),
    ("http://u:p@ss@word@host/x", "http://***@host/x"),  # a password holding "@"
    ("http://h/search?api_key=abc123&k=5", "http://h/search?api_key=***&k=5"),
    ("headers {'Authorization': 'Basic YWRtaW46c2VjcmV0'}", "headers {'Authorization': '***'}"),
    ("sent Bearer eyJhbGciOi.JIUzI1", "sent Bearer ***"),
    ("http://host:5000/api/2.0/runs", "http://host:5000/api/2.0/runs"),  # nothing to hide
    ("Basic retrieval on q1", "Basic retrieval on q1"),
    ("", ""),
])
def test_patterns(text, expected):
    assert redacted(text) == expected


def test_secret_environment_values_are_masked_anywhere(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "env-Pw-91b2")
    monkeypatch.setenv("SERVICE_API_KEY", "a key/with+signs")
    monkeypatch.setenv("SOME_NUMBER", "env-Pw-91b2-not-secret-name")  # name not secret-looking
    text = "denied env-Pw-91b2 and a key/with+signs and a%20key%2Fwith%2Bsigns"
    assert redacted(text) == "denied *** and *** and ***"


def test_a_short_secret_is_not_masked_by_value(monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "ab")  # would mask every "ab" in every message
    assert redacted("about abc") == "about abc"


def test_registered_url_credentials_are_masked_decoded_and_as_a_basic_header():
    register_url_credentials("http://carol:p%40ss-Word-77@host/")
    assert redacted("password p@ss-Word-77 or p%40ss-Word-77") == "password *** or ***"
    assert redacted("Y2Fyb2w6cEBzcy1Xb3JkLTc3") == "***"  # base64("carol:p@ss-Word-77")


def test_every_log_record_and_warning_is_redacted(caplog):
    install_log_redaction()
    install_log_redaction()  # idempotent: one wrapper, not two
    with caplog.at_level(logging.WARNING, logger="mlflow.utils.rest_utils"):
        logging.getLogger("mlflow.utils.rest_utils").warning(
            "retrying %s", "http://admin:pw-Secret-1@h/api")
    assert caplog.messages == ["retrying http://***@h/api"]
    shown = warnings.formatwarning(UserWarning("at http://a:pw-Secret-1@h"), UserWarning,
                                   "f.py", 1)
    assert "pw-Secret-1" not in shown and "http://***@h" in shown


def test_a_logged_exception_traceback_is_redacted(caplog):
    install_log_redaction()
    try:
        raise ConnectionError("to http://admin:pw-Secret-2@h/api")
    except ConnectionError:
        with caplog.at_level(logging.ERROR, logger="kebab_test"):
            logging.getLogger("kebab_test").exception("failed")
    assert "pw-Secret-2" not in caplog.text and "http://***@h/api" in caplog.text


def test_an_exception_shown_as_a_traceback_is_redacted_in_place():
    exc = redacted_exception(RuntimeError("http://u:pw-Secret-3@h", 3))
    assert exc.args == ("http://***@h", 3)
