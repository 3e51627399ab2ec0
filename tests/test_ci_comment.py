"""`kebab-mlflow ci comment` (issue 31) against a loopback fake of the GitHub REST API's issue
comment endpoints (list with pages, create, update) and of GitLab's merge-request notes: the
first push creates the comment, later pushes update the same one (found by its hidden marker
on any page); a 403 or a 5xx is exit 2 with the API's message, never a verdict, never the
token."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.comparison.pr_comment import MARKER
from tests.conftest import write

runner = CliRunner()
TOKEN = "ghs_secret-token-never-printed"
PAGE = 2  # the fake's page size: small, so that finding the marker needs the second page


@dataclass
class FakeForge:
    """The comment threads, every request seen, and a status to fail with (None: serve)."""

    comments: list[dict[str, Any]] = field(default_factory=list)
    log: list[tuple[str, str, str | None]] = field(default_factory=list)
    fail_with: int | None = None
    next_id: int = 100


def _handler(state: FakeForge, base: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            auth = self.headers.get("Authorization") or self.headers.get("PRIVATE-TOKEN")
            state.log.append((method, url.path, auth))
            if state.fail_with:
                return self._reply(state.fail_with, {"message": "Resource not accessible by "
                                                     "integration"})
            length = int(self.headers.get("Content-Length") or 0)
            payload = json.loads(self.rfile.read(length)) if length else {}
            if method == "GET":
                page = int(parse_qs(url.query).get("page", ["1"])[0])
                chunk = state.comments[(page - 1) * PAGE: page * PAGE]
                more = page * PAGE < len(state.comments)
                headers = {}
                if more and "/repos/" in url.path:
                    headers["Link"] = (f'<{base[0]}{url.path}?per_page=100&page={page + 1}>; '
                                       'rel="next"')
                elif more:
                    headers["X-Next-Page"] = str(page + 1)
                return self._reply(200, chunk, headers)
            if method == "POST":
                state.next_id += 1
                new = {"id": state.next_id, "body": payload["body"],
                       "html_url": f"https://github.test/c/{state.next_id}"}
                state.comments.append(new)
                return self._reply(201, new)
            target = int(url.path.rsplit("/", 1)[1])
            found = next(c for c in state.comments if c["id"] == target)
            found["body"] = payload["body"]
            return self._reply(200, found)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_PUT(self) -> None:
            self._serve("PUT")

    return Handler


@pytest.fixture
def forge() -> Iterator[tuple[FakeForge, str]]:
    state, base = FakeForge(), [""]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, base))
    base[0] = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, base[0]
    server.shutdown()
    server.server_close()


def _actions_env(tmp_path: Path, api: str) -> dict[str, str]:
    event = write(tmp_path / "event.json", json.dumps({"pull_request": {"number": 7}}))
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "owner/repo",
            "GITHUB_EVENT_PATH": str(event), "GITHUB_API_URL": api}


def test_the_first_push_creates_the_comment_and_later_pushes_update_it(forge, tmp_path):
    state, api = forge
    # other people's comments fill the first page: the marker is found on the second
    state.comments += [{"id": 1, "body": "LGTM"}, {"id": 2, "body": "nit: typo"}]
    env = _actions_env(tmp_path, api)
    first = write(tmp_path / "comment.md", f"{MARKER}\n### Regressed\n")
    res = runner.invoke(app, ["ci", "comment", "--file", str(first)], env=env)
    assert res.exit_code == 0, res.output
    assert "created the GitHub comment https://github.test/c/101" in res.output
    second = write(tmp_path / "comment2.md", "### Same\n")  # no marker: one is added
    res = runner.invoke(app, ["ci", "comment", "--file", str(second)], env=env)
    assert res.exit_code == 0, res.output
    assert "updated the GitHub comment https://github.test/c/101" in res.output
    assert [c["id"] for c in state.comments] == [1, 2, 101]
    assert state.comments[2]["body"] == f"{MARKER}\n### Same\n"
    assert [(m, p) for m, p, _ in state.log] == [
        ("GET", "/repos/owner/repo/issues/7/comments"),
        ("POST", "/repos/owner/repo/issues/7/comments"),
        ("GET", "/repos/owner/repo/issues/7/comments"),
        ("GET", "/repos/owner/repo/issues/7/comments"),  # page 2, from the Link header
        ("PATCH", "/repos/owner/repo/issues/comments/101")]
    assert {auth for _, _, auth in state.log} == {f"Bearer {TOKEN}"}


def test_flags_name_the_repository_and_pull_request(forge, tmp_path):
    state, api = forge
    body = write(tmp_path / "comment.md", "hello\n")
    res = runner.invoke(app, ["ci", "comment", "--file", str(body), "--repo", "o/r", "--pr",
                              "12", "--api-url", api], env={"GITHUB_TOKEN": TOKEN})
    assert res.exit_code == 0, res.output
    assert state.log[-1][:2] == ("POST", "/repos/o/r/issues/12/comments")


@pytest.mark.parametrize("status", [403, 500, 502])
def test_a_refusal_or_a_server_error_is_exit_2_with_the_reason_never_the_token(
        forge, tmp_path, status):
    state, api = forge
    state.fail_with = status
    body = write(tmp_path / "comment.md", "hello\n")
    res = runner.invoke(app, ["ci", "comment", "--file", str(body)],
                        env=_actions_env(tmp_path, api))
    assert res.exit_code == 2
    assert (f"GitHub answered GET /repos/owner/repo/issues/7/comments: {status} Resource not "
            "accessible by integration") in res.output
    assert TOKEN not in res.output and state.comments == []


def test_missing_token_repository_and_number_are_listed_at_once(tmp_path, monkeypatch):
    for name in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH"):
        monkeypatch.delenv(name, raising=False)
    body = write(tmp_path / "comment.md", "hello\n")
    res = runner.invoke(app, ["ci", "comment", "--file", str(body)])
    assert res.exit_code == 2
    assert "3 problem(s)" in res.output and "$GITHUB_TOKEN is not set" in res.output
    assert "--repo OWNER/NAME" in res.output and "--pr N" in res.output


def test_a_body_over_the_limit_is_refused_before_any_request(forge, tmp_path):
    state, api = forge
    body = write(tmp_path / "comment.md", "x" * 70_000)
    res = runner.invoke(app, ["ci", "comment", "--file", str(body)],
                        env=_actions_env(tmp_path, api))
    assert res.exit_code == 2 and "at most 65,536" in res.output and state.log == []


def test_a_gitlab_merge_request_note_is_created_then_updated(forge, tmp_path):
    state, api = forge
    state.comments += [{"id": 1, "body": "first"}, {"id": 2, "body": "second"}]
    env = {"GITLAB_TOKEN": TOKEN, "CI_API_V4_URL": f"{api}/api/v4", "CI_PROJECT_ID": "g/p",
           "CI_MERGE_REQUEST_IID": "5"}
    body = write(tmp_path / "comment.md", "### Better\n")
    for expected in ("created", "updated"):
        res = runner.invoke(app, ["ci", "comment", "--gitlab", "--file", str(body)], env=env)
        assert res.exit_code == 0, res.output
        assert f"{expected} the GitLab comment" in res.output
    notes = "/api/v4/projects/g%2Fp/merge_requests/5/notes"
    assert [(m, p) for m, p, _ in state.log] == [
        ("GET", notes), ("POST", notes), ("GET", notes), ("GET", notes),
        ("PUT", f"{notes}/101")]
    assert {auth for _, _, auth in state.log} == {TOKEN}
