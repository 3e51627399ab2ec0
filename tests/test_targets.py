"""`--target`: Python, HTTP and command-line targets (issue 9).

Real servers and real processes: a ThreadingHTTPServer on a loopback port in a thread, and
subprocesses of the shipped example command-line target.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.errors import Problem, TargetError
from kebab_mlflow.records import VERSION_KEYS, Answer, Hit, VersionSnapshot
from kebab_mlflow.targets import load_target
from kebab_mlflow.targets.http import HttpTarget
from kebab_mlflow.targets.reply import ReplyError, parse_answer, parse_hits, parse_reply
from kebab_mlflow.targets.spec import TargetOptions
from tests.conftest import GOLDEN, ROOT, write

TARGETS = ROOT / "fixtures" / "targets"
PY = shlex.quote(sys.executable)
CLI = shlex.quote(str(TARGETS / "cli_target.py"))
VERSIONS = {k: f"{k[:5]}-1" for k in VERSION_KEYS}
runner = CliRunner()


# --------------------------------------------------------------------------- a test server


class Behaviour:
    """What the test server does, keyed by the query text's first word."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.versions: dict | None = dict(VERSIONS)
        self.arrived = threading.Condition(self.lock)
        self.in_flight = self.max_in_flight = 0

    def gather(self, n: int) -> None:
        """Hold this request until ``n`` are in flight at once (the event), 30 s at most."""
        with self.arrived:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.arrived.notify_all()
            self.arrived.wait_for(lambda: self.max_in_flight >= n, timeout=300)
            self.in_flight -= 1

    def reply(self, request: dict) -> tuple[int, bytes]:
        query = request["query"]
        word = query.split()[0] if query.split() else ""
        with self.lock:
            self.attempts[query] += 1
            self.bodies.append(request)
            attempt = self.attempts[query]
        if word == "sleep":  # "sleep 0.1 ..." sleeps that many seconds
            time.sleep(float(query.split()[1]))
        if word == "gather":  # "gather 8 ...": held until 8 requests are in flight together
            self.gather(int(query.split()[1]))
        if word == "flaky" and attempt <= 2:
            return 500, b'{"error": "warming up"}'
        if word == "missing":
            return 404, b"no such index"
        if word == "garbage":
            return 200, b"<html>oops</html>"
        if word == "dupes":
            return 200, json.dumps({"hits": [_hit("a#0"), _hit("a#0")]}).encode()
        if word == "noid":
            return 200, json.dumps({"hits": [{"doc_id": "a", "score": 1}]}).encode()
        hits = [_hit(f"{query}#{i}", score=3.0 - i) for i in range(min(request["k"], 3))]
        answer = ({"text": f"about {query}", "citations": [hits[0]["chunk_id"]],
                   "refusal_reason": None, "confidence": 0.5} if request["ask"] else None)
        return 200, json.dumps({"hits": hits, "answer": answer}).encode()


def _hit(chunk_id: str, score: float = 1.0) -> dict:
    return {"chunk_id": chunk_id, "doc_id": chunk_id.split("#")[0], "score": score}


def _serve(behaviour: Behaviour):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, data: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        def do_GET(self):  # noqa: N802
            if self.path == "/api/versions" and behaviour.versions is not None:
                self._send(200, json.dumps(behaviour.versions).encode())
            else:
                self._send(404, b"not found")

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send(*behaviour.reply(body))

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    server.daemon_threads = True
    server.block_on_close = False
    server.request_queue_size = 64  # the default backlog (5) drops SYNs at concurrency 8
    server.server_bind()
    server.server_activate()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    return server


@pytest.fixture
def behaviour():
    return Behaviour()


@pytest.fixture
def server(behaviour):
    srv = _serve(behaviour)
    yield f"http://127.0.0.1:{srv.server_address[1]}/api/search"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def fixture_server():
    """The shipped example HTTP target, searching fixtures/kb."""
    sys.path.insert(0, str(TARGETS))
    try:
        import http_target
    finally:
        sys.path.remove(str(TARGETS))
    srv = http_target.make_server(0)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/search"
    srv.shutdown()
    srv.server_close()


# --------------------------------------------------------------------------- replies


def test_hits_rank_by_reply_order_and_accept_hits_or_dicts():
    hits = parse_hits([{"chunk_id": "d1#0", "doc_id": "d1", "score": 2},
                       Hit(chunk_id="d2#3", doc_id="d2", score=1.5, rank=7, text="t")])
    assert hits == (Hit(chunk_id="d1#0", doc_id="d1", score=2.0, rank=1),
                    Hit(chunk_id="d2#3", doc_id="d2", score=1.5, rank=2, text="t"))
    assert parse_hits([]) == ()


@pytest.mark.parametrize("items, message", [
    ({"chunk_id": "a"}, "'hits' is a dict, not a list"),
    ([{"doc_id": "a", "score": 1}], "bad hits: hit 0: missing 'chunk_id'"),
    ([{"chunk_id": "a#0", "score": 1}], "bad hits: hit 0: missing 'doc_id'"),
    ([{"chunk_id": 3, "doc_id": "a", "score": 1}], "hit 0: 'chunk_id' is a int, not a string"),
    ([{"chunk_id": "a#0", "doc_id": "a", "score": "9"}], "hit 0: 'score' is a str, not a number"),
    ([{"chunk_id": "a#0", "doc_id": "a", "score": True}], "'score' is a bool, not a number"),
    ([{"chunk_id": "a#0", "doc_id": "a", "score": float("nan")}], "'score' is nan, not a finite"),
    ([{"chunk_id": "", "doc_id": "a", "score": 1}], "hit 0: 'chunk_id' is empty"),
    (["a#0"], "hit 0 is a str, not an object"),
    ([_hit("a#0"), _hit("b#0"), _hit("a#0")], "duplicate chunk id 'a#0' at hits 0 and 2"),
])
def test_bad_hits_say_what_is_wrong(items, message):
    with pytest.raises(ReplyError) as info:
        parse_hits(items)
    assert message in str(info.value)


def test_every_problem_of_a_reply_is_listed():
    with pytest.raises(ReplyError) as info:
        parse_hits([{"score": "x"}, _hit("a#0")])
    assert str(info.value) == ("bad hits: hit 0: missing 'chunk_id'; hit 0: missing 'doc_id'; "
                               "hit 0: 'score' is a str, not a number")


def test_answers_are_parsed_and_validated():
    assert parse_answer({"text": "x", "citations": ["a#0"], "confidence": 1}) == Answer(
        text="x", citations=("a#0",), refusal_reason=None, confidence=1.0)
    assert parse_answer(None) is None
    with pytest.raises(ReplyError) as info:
        parse_answer({"citations": "a#0", "confidence": 1.5, "refusal_reason": 3})
    assert str(info.value) == (
        "bad answer: missing 'text'; 'citations' is not a list of strings; 'refusal_reason' "
        "is a int, not a string or null; 'confidence' is 1.5, not a number in [0, 1] or null")
    with pytest.raises(ReplyError, match="the reply has no 'hits' \\(keys: results\\)"):
        parse_reply({"results": []}, ask=False)
    # answers of queries that did not ask are dropped, not validated
    assert parse_reply({"hits": [], "answer": "junk"}, ask=False) == ((), None)


# --------------------------------------------------------------------------- http


def test_http_success_keeps_order_ranks_answers_and_versions(server, behaviour):
    target = load_target(server, concurrency=4)
    assert target.versions == VersionSnapshot(**VERSIONS)
    replies = target.run_many([("alpha", True), ("beta", False), ("gamma", True)], 2)
    assert [r[2] for r in replies] == [None, None, None]
    assert [[(h.chunk_id, h.rank) for h in r[0]] for r in replies] == [
        [("alpha#0", 1), ("alpha#1", 2)], [("beta#0", 1), ("beta#1", 2)],
        [("gamma#0", 1), ("gamma#1", 2)]]
    assert replies[0][1] == Answer(text="about alpha", citations=("alpha#0",), refusal_reason=None,
                                   confidence=0.5)
    assert replies[1][1] is None
    assert sorted(b["query"] for b in behaviour.bodies) == ["alpha", "beta", "gamma"]
    assert {(b["query"], b["k"], b["ask"]) for b in behaviour.bodies} == {
        ("alpha", 2, True), ("beta", 2, False), ("gamma", 2, True)}


def test_http_timeout_is_a_per_query_error(server, behaviour):
    target = load_target(server + "?timeout=0.2&retries=3")
    [(hits, answer, error, seconds)] = target.run_many([("sleep 1.0", False)], 5)
    assert hits == () and answer is None
    assert error == f"timed out after 0.2 s waiting for {server}"
    assert seconds > 0.15  # it waited for the timeout
    # timeouts are not retried: the server saw one request (counted, not timed, so a loaded
    # machine cannot fail it)
    assert behaviour.attempts["sleep 1.0"] == 1


def test_http_500s_are_retried_with_backoff_then_succeed(server, behaviour):
    target = load_target(server + "?retries=2&backoff=0.05")
    start = time.perf_counter()
    [(hits, _, error, _)] = target.run_many([("flaky one", False)], 1)
    assert error is None and [h.chunk_id for h in hits] == ["flaky one#0"]
    assert behaviour.attempts["flaky one"] == 3
    assert time.perf_counter() - start >= 0.05 + 0.1  # waited 0.05 s, then 0.1 s

    target = load_target(server + "?retries=1&backoff=0")
    [(hits, _, error, _)] = target.run_many([("flaky two", False)], 1)
    assert error == (f"HTTP 500 Internal Server Error from {server}: "
                     "'{\"error\": \"warming up\"}' (after 2 attempts)")
    assert behaviour.attempts["flaky two"] == 2


def test_http_4xx_is_not_retried(server, behaviour):
    [(_, _, error, _)] = load_target(server).run_many([("missing index", False)], 1)
    assert error == f"HTTP 404 Not Found from {server}: 'no such index'"
    assert behaviour.attempts["missing index"] == 1


@pytest.mark.parametrize("query, message", [
    ("garbage", "the reply is not valid JSON (Expecting value at line 1 column 1): "
                "'<html>oops</html>'"),
    ("dupes", "bad hits: duplicate chunk id 'a#0' at hits 0 and 1"),
    ("noid", "bad hits: hit 0: missing 'chunk_id'"),
])
def test_http_bad_replies_become_query_errors(server, query, message):
    [(hits, _, error, _)] = load_target(server).run_many([(query, False)], 3)
    assert (hits, error) == ((), message)


def test_http_connection_errors_are_retried_then_reported(server):
    target = load_target(server + "?retries=2&backoff=0.01")
    target.url = f"http://127.0.0.1:{_free_port()}/api/search"  # nobody listens there
    [(_, _, error, _)] = target.run_many([("alpha", False)], 1)
    assert error.startswith(f"cannot connect to {target.url}: ")
    assert error.endswith("(after 3 attempts)")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_http_target_fails_before_any_run():
    url = f"http://127.0.0.1:{_free_port()}/search"
    with pytest.raises(TargetError, match="the target is not reachable: cannot connect"):
        load_target(url + "?retries=0")


@pytest.fixture
def cli_warnings() -> None:
    """Library warnings rendered as the CLI renders them (``warning: ...`` on stderr). Installed
    here, not left to an earlier test's CLI call: run alone, this file saw none."""
    from kebab_mlflow.cli.console import install

    install()


def test_missing_versions_are_unknown_with_a_warning(server, behaviour, capsys, cli_warnings):
    behaviour.versions = None  # GET /versions -> 404
    target = load_target(server + "?index_version=ix-9&retries=0")
    assert target.versions.index_version == "ix-9"
    assert target.versions.parser_version == "unknown"
    err = capsys.readouterr().err
    assert err.startswith(f"warning: target {server}?index_version=ix-9&retries=0 reports no "
                          "parser_version, chunker_version, embedding_version, "
                          "prompt_template_version (HTTP 404 Not Found from ")
    assert "recorded as 'unknown' — compare treats 'unknown' as a mismatch" in err

    behaviour.versions = {"parser_version": "p2", "chunker_version": 7}
    target = load_target(server)
    assert (target.versions.parser_version, target.versions.chunker_version,
            target.versions.embedding_version) == ("p2", "7", "unknown")
    assert "reports no embedding_version, index_version, prompt_template_version;" in (
        capsys.readouterr().err)


def test_configured_versions_skip_the_versions_call(server, behaviour, capsys, cli_warnings):
    behaviour.versions = None
    spec = server + "?" + "&".join(f"{k}=c{i}" for i, k in enumerate(VERSION_KEYS))
    target = load_target(spec)
    assert target.versions.as_dict() == {k: f"c{i}" for i, k in enumerate(VERSION_KEYS)}
    assert target.url == server
    assert capsys.readouterr().err == ""


def test_a_concurrent_target_has_concurrency_requests_in_flight(server, behaviour):
    """--concurrency 8 keeps 8 requests in flight at once (the event: the server sees the 8th
    arrive while the others wait), and the replies keep their order."""
    queries = [(f"gather 8 q{i}", False) for i in range(16)]
    parallel_replies = load_target(server, concurrency=8).run_many(queries, 1)
    assert behaviour.max_in_flight == 8
    assert [r[0][0].chunk_id for r in parallel_replies] == [f"{q}#0" for q, _ in queries]


def test_backoff_is_exponential_capped_and_seeded():
    def waits(jitter, seed, key="q"):
        t = HttpTarget("s", "http://x", TargetOptions(backoff_s=0.5, jitter=jitter, seed=seed),
                       VersionSnapshot(), 1)
        return [t.backoff(a, key) for a in range(7)]

    assert waits(0.0, 0) == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    jittered = waits(0.5, 1)
    assert jittered == waits(0.5, 1)  # same seed, same waits
    assert jittered != waits(0.5, 2) and jittered != waits(0.5, 1, key="other")
    assert all(b <= w <= 1.5 * b for w, b in zip(jittered, waits(0.0, 0), strict=True))


# --------------------------------------------------------------------------- cmd


def test_cmd_target_replies_and_query_cannot_inject(tmp_path):
    log = tmp_path / "log.jsonl"
    target = load_target(f"cmd:{PY} {CLI} --json --k {{k}} --ask {{ask}} --log {log} {{query}}",
                         concurrency=2)
    evil = ("; rm -rf / $(touch pwned) `touch pwned2` | tee pwned3 && echo {k} '\"\n"
            "What is the budget of the Bayline Tram Extension?")
    replies = target.run_many([(evil, True), ("-k 5 --versions", False)], 3)
    assert [r[2] for r in replies] == [None, None]
    assert [json.loads(line) for line in log.read_text().splitlines()] in (
        [evil, "-k 5 --versions"], ["-k 5 --versions", evil])
    assert not any((tmp_path / n).exists() for n in ("pwned", "pwned2", "pwned3"))
    hits, answer, _, _ = replies[0]
    assert [h.rank for h in hits] == [1, 2, 3] and hits[0].chunk_id == "harbor-transit#2"
    assert "48.5 million euros" in answer.text and answer.citations == ("harbor-transit#2",)
    assert target.command(evil, 3, True)[-1] == evil


def test_cmd_request_on_stdin_when_the_template_has_no_query(tmp_path):
    target = load_target(f"cmd:{PY} {CLI} --json")
    [(hits, answer, error, _)] = target.run_many([("Bayline tram budget", False)], 2)
    assert error is None and len(hits) == 2 and answer is None


@pytest.mark.parametrize("template, message", [
    (f"{PY} -c 'import sys; sys.stderr.write(\"index locked\"); sys.exit(3)'",
     "exit status 3; stderr: 'index locked'"),
    (f"{PY} -c 'print(\"oops\")'",
     "stdout is not valid JSON (Expecting value at line 1 column 1): 'oops'"),
    (f"{PY} -c 'print(1)'", "the reply is a int, not an object with 'hits'"),
    (f"{PY} {CLI} --sleep-ms 60000 {{query}}?timeout=0.3",
     "timed out after 0.3 s (command killed)"),
])
def test_cmd_failures_become_query_errors(template, message):
    [(hits, _, error, seconds)] = load_target("cmd:" + template).run_many([("q", False)], 1)
    assert (hits, error) == ((), message)
    assert seconds < 30  # the timed-out command would sleep a minute: it was killed


def test_cmd_placeholders_are_substituted_inside_arguments_once():
    target = load_target(f"cmd:{PY} --q={{query}} -k{{k}} '{{ask}} and {{query}}'")
    assert target.command("{k} x y", 5, False)[1:] == ["--q={k} x y", "-k5",
                                                       "false and {k} x y"]


# --------------------------------------------------------------------------- python


class Protocolish:
    versions = VersionSnapshot(**{k: f"v{i}" for i, k in enumerate(VERSION_KEYS)})

    def search(self, query, k):
        if query == "boom":
            raise ValueError("index offline")
        if query == "dupes":
            return [_hit("a#0"), _hit("a#0")]
        return [Hit(chunk_id=f"{query}#{i}", doc_id=query, score=1.0 / (i + 1),
                    rank=99) for i in range(k)]

    def ask(self, query, hits):
        return {"text": query, "citations": [hits[0].chunk_id], "confidence": 0.25}


def make_protocolish():
    return Protocolish()


def plain_function(query, k):
    return [{"chunk_id": f"{query}#0", "doc_id": query, "score": 1}][:k]


def wrong_arity(query):
    return []


not_callable = 42


def test_python_targets_objects_classes_factories_and_functions(capsys, cli_warnings):
    for attr in ("Protocolish", "make_protocolish"):
        target = load_target(f"python:tests.test_targets:{attr}", concurrency=3)
        assert target.versions.index_version == "v3"
        replies = target.run_many([("x", True), ("boom", False), ("dupes", False)], 2)
        assert replies[0][:3] == ((Hit(chunk_id="x#0", doc_id="x", score=1.0, rank=1),
                                   Hit(chunk_id="x#1", doc_id="x", score=0.5, rank=2)),
                                  Answer(text="x", citations=("x#0",), refusal_reason=None,
                                         confidence=0.25), None)
        assert replies[1][2] == "ValueError: index offline"
        assert replies[2][2] == "bad hits: duplicate chunk id 'a#0' at hits 0 and 1"
    assert capsys.readouterr().err == ""
    target = load_target("python:tests.test_targets:plain_function")
    assert target.answers is False
    assert target.run_many([("y", True)],
                           3)[0][:3] == ((Hit(chunk_id="y#0", doc_id="y", score=1.0, rank=1),),
                                         None, None)
    assert "reports no parser_version" in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("ftp://host/x", "unknown target kind ftp: in --target 'ftp://host/x'"),
    ("python:tests.nope_module:x", "cannot import tests.nope_module; is it installed"),
    ("python:tests.test_targets:Nope", "tests.test_targets has no attribute 'Nope' (it has: "),
    ("python:tests.test_targets", "expected python:package.module:attr"),
    ("python:tests.test_targets:wrong_arity", "a function target takes (query, k); this one "
                                              "takes 1 required argument(s)"),
    ("python:tests.test_targets:not_callable", "is a int, not a pipeline, class, factory"),
    ("python:/no/such/file.py:x", "no such file /no/such/file.py"),
    ("python:tests.test_targets:plain_function?timeout=3", "python targets accept "
                                                            "parser_version"),
    ("cmd:", "the command template is empty"),
    ("cmd:no-such-program-kebab {query}", "program 'no-such-program-kebab' not found"),
    ("cmd:python 'unclosed {query}", "cannot split the command template: No closing quotation"),
    ("http://127.0.0.1:1/x?timeout=abc&retries=-1", "bad options in --target"),
])
def test_unusable_specs_raise_target_error(spec, message):
    with pytest.raises(TargetError) as info:
        load_target(spec)
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_bad_option_values_are_all_reported():
    with pytest.raises(TargetError) as info:
        load_target("http://127.0.0.1:1/x?timeout=abc&retries=-1")
    assert info.value.problems == (
        Problem("timeout='abc' is not a float >= 0.001", "--target"),
        Problem("retries='-1' is not a int >= 0", "--target"))
    with pytest.raises(TargetError, match="--concurrency must be an integer >= 1, got 0"):
        load_target("cmd:true", concurrency=0)


# --------------------------------------------------------------------------- end to end


def test_logged_options_keep_keys_and_passwords_out():
    from kebab_mlflow.targets.spec import logged_options

    spec = (" http://u:pw@h/s?token=SECRET&retries=3&seed=7&index_version=v2"
            "&versions_url=http://u:pw@h/v%3Fkey%3DSECRET ")
    assert logged_options(spec) == {"retries": "3", "seed": "7", "versions_url": "http://h/v"}
    assert logged_options("cmd:search {query}?timeout=5") == {"timeout": "5"}
    assert logged_options("python:pkg.mod:Pipe") == {}


def test_run_with_each_target_kind_end_to_end(store_uri, fixture_server, tmp_path, monkeypatch):
    import yaml
    from mlflow.tracking import MlflowClient

    fixture = yaml.safe_load(GOLDEN.read_text())  # a 10-query slice keeps the test quick
    golden = write(tmp_path / "g.yaml", yaml.safe_dump({**fixture,
                                                        "queries": fixture["queries"][::4]}))
    specs = {
        "python": f"python:{TARGETS / 'python_target.py'}:TinyPipeline",
        "http": f"{fixture_server}?retries=1&jitter=0.2&seed=7",
        "cmd": f"cmd:{PY} {CLI} --json --k {{k}} --ask {{ask}} {{query}}?index_version=cli-1",
        "function": "python:fixtures.targets.python_target:search_only",
    }
    monkeypatch.syspath_prepend(str(ROOT))  # the module form imports from the working folder
    client = MlflowClient(tracking_uri=store_uri)
    metrics = {}
    for kind, spec in specs.items():
        res = runner.invoke(app, ["run", "--golden", str(golden), "--target", spec,
                                  "--concurrency", "4", "--tracking-uri", store_uri, "--json",
                                  "--run-name", kind])
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        run = client.get_run(out["run_id"])
        assert run.info.status == "FINISHED" and run.data.params["backend"] == "target"
        assert run.data.params["preset"] == run.data.tags["kebab.preset"] == "target"
        assert run.data.params["target"] == spec.split("?")[0]
        assert run.data.params["n_queries"] == "11"
        if kind == "http":  # the target's own options are params; the jitter seed with them
            assert {k: v for k, v in run.data.params.items() if k.startswith("target.")} == {
                "target.retries": "1", "target.jitter": "0.2", "target.seed": "7"}
        metrics[kind] = out["metrics"]
        if kind in ("python", "http"):
            assert run.data.params["index_version"] == "tiny-tfidf-1"
            assert "warning" not in res.stderr
        else:
            assert run.data.params["parser_version"] == "unknown"
            assert "reports no parser_version, chunker_version" in res.stderr
    assert client.get_run(json.loads(res.stdout)["run_id"]).data.params["index_version"] == (
        "unknown")
    # the same search engine reached three ways gives the same numbers
    for kind in ("http", "cmd"):
        for name in ("mrr", "hit_at_5", "ndcg_at_10_doc", "contains_all", "error_rate"):
            assert metrics[kind][name] == metrics["python"][name], (kind, name)
    assert metrics["python"]["error_rate"] == 0.0 and metrics["python"]["hit_at_5"] > 0.9
    assert metrics["http"]["latency/p95_ms"] >= metrics["http"]["latency/p50_ms"] > 0
    # a search-only function cannot answer: its ask queries are errors under the current
    # runner, or answerless (error_rate 0) once the runner honours `target.answers = False`
    ask_share = sum(bool(q.get("ask")) for q in fixture["queries"][::4]) / 11
    assert metrics["function"]["error_rate"] in (0.0, ask_share)


def test_bad_target_exits_2_and_creates_no_run(store_uri, tmp_path):
    res = runner.invoke(app, ["run", "--golden", str(GOLDEN), "--tracking-uri", store_uri,
                              "--target", "python:tests.test_targets:Nope"])
    assert res.exit_code == 2
    assert "tests.test_targets has no attribute 'Nope'" in res.output
    assert not Path(store_uri.removeprefix("sqlite:///")).exists()
