"""CLI command: ``ci comment`` — post ``compare --format pr-comment`` to the pull request.

One comment per pull request, updated in place on later pushes: the comment carrying the
hidden marker (:data:`kebab_mlflow.comparison.pr_comment.MARKER`) is found by listing the
pull request's comments (every page) and edited; without one a comment is created. Through
the GitHub REST API (issue comments: a pull request is an issue) with ``$GITHUB_TOKEN``; the
repository and the number come from the Actions environment (``$GITHUB_REPOSITORY``, the
event file ``$GITHUB_EVENT_PATH``) or ``--repo`` / ``--pr``; the API base is
``$GITHUB_API_URL`` (Actions sets it; GitHub Enterprise needs it), else api.github.com.
``--gitlab`` posts a merge-request note the same way (``$CI_API_V4_URL``, ``$CI_PROJECT_ID``,
``$CI_MERGE_REQUEST_IID``, ``$GITLAB_TOKEN``).

Any refusal or failure of the API (403, 404, 5xx, no answer) is exit 2 (OutputError): the
comment was not posted, which says nothing about the verdict (exit 1 is ``compare``'s). The
token is sent only in the Authorization / PRIVATE-TOKEN header, never printed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from kebab_mlflow.cli.app import _App, app

ci_app = _App(help="Continuous integration: post a comparison where reviewers read it.",
              no_args_is_help=True)
app.add_typer(ci_app, name="ci")

GITHUB_API = "https://api.github.com"
PER_PAGE = 100
TIMEOUT_S = 30
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')


@dataclass(frozen=True, kw_only=True)
class Forge:
    """One comment thread's endpoints: list (paged), create, update."""

    name: str  # GitHub | GitLab
    list_url: str
    create_url: str
    update_url: str  # with {id}
    update_method: str  # PATCH (GitHub) | PUT (GitLab)
    headers: Mapping[str, str]


@ci_app.command("comment")
def comment(
    file: Annotated[Path, typer.Option("--file", help="the comment's markdown (compare "
                                       "--format pr-comment --out FILE)")],
    repo: Annotated[str | None, typer.Option(
        help="owner/name (default: $GITHUB_REPOSITORY)")] = None,
    pr: Annotated[int | None, typer.Option(
        help="pull request number (default: from $GITHUB_EVENT_PATH)")] = None,
    api_url: Annotated[str | None, typer.Option(
        help="REST API base (default: $GITHUB_API_URL, else https://api.github.com)")] = None,
    gitlab: Annotated[bool, typer.Option(
        "--gitlab", help="post a GitLab merge-request note instead ($CI_API_V4_URL, "
        "$CI_PROJECT_ID, $CI_MERGE_REQUEST_IID, $GITLAB_TOKEN)")] = False,
) -> None:
    """Post FILE to the pull request, or update the comment an earlier push posted.

    Exit 0 = posted; 2 = bad input or the API refused (the verdict is compare's exit code)."""
    from kebab_mlflow.comparison.pr_comment import MARKER

    body = _read_body(file, MARKER)
    forge = (_gitlab(api_url, repo, pr) if gitlab else _github(api_url, repo, pr))
    existing = next((c for c in _comments(forge) if MARKER in str(c.get("body", ""))), None)
    if existing is None:
        posted = _request(forge, "POST", forge.create_url, {"body": body})
        action = "created"
    else:
        url = forge.update_url.format(id=existing["id"])
        posted = _request(forge, forge.update_method, url, {"body": body})
        action = "updated"
    where = posted.get("html_url") or posted.get("id") or ""
    typer.echo(f"{action} the {forge.name} comment {where}".rstrip())


def _read_body(file: Path, marker: str) -> str:
    from kebab_mlflow.comparison.pr_comment import GITHUB_COMMENT_LIMIT
    from kebab_mlflow.errors import InputError

    try:
        body = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read --file {file}: {exc.strerror or exc}") from None
    if marker not in body:  # the marker is how the next push finds this comment again
        body = f"{marker}\n{body}"
    if len(body) > GITHUB_COMMENT_LIMIT:
        raise InputError(f"--file {file} has {len(body):,} characters; a comment holds at "
                         f"most {GITHUB_COMMENT_LIMIT:,} (compare --format pr-comment fits)")
    return body


def _github(api_url: str | None, repo: str | None, pr: int | None) -> Forge:
    from kebab_mlflow.errors import InputError, Problem

    token = os.environ.get("GITHUB_TOKEN")
    repo = repo or os.environ.get("GITHUB_REPOSITORY")
    number = pr if pr is not None else _event_number(os.environ.get("GITHUB_EVENT_PATH"))
    problems = [Problem(what) for what, missing in (
        ("$GITHUB_TOKEN is not set (in Actions: env: GITHUB_TOKEN: ${{ github.token }}, "
         "with permissions: pull-requests: write)", not token),
        ("no repository: pass --repo OWNER/NAME or set $GITHUB_REPOSITORY", not repo),
        ("no pull request number: pass --pr N, or run on a pull_request event "
         "($GITHUB_EVENT_PATH)", number is None)) if missing]
    if problems:
        raise InputError("cannot post the comment", problems)
    base = (api_url or os.environ.get("GITHUB_API_URL") or GITHUB_API).rstrip("/")
    issue = f"{base}/repos/{repo}/issues"
    return Forge(name="GitHub", list_url=f"{issue}/{number}/comments?per_page={PER_PAGE}",
                 create_url=f"{issue}/{number}/comments",
                 update_url=f"{issue}/comments/{{id}}", update_method="PATCH",
                 headers={"Authorization": f"Bearer {token}",
                          "Accept": "application/vnd.github+json",
                          "X-GitHub-Api-Version": "2022-11-28"})


def _gitlab(api_url: str | None, project: str | None, mr: int | None) -> Forge:
    from urllib.parse import quote

    from kebab_mlflow.errors import InputError, Problem

    token = os.environ.get("GITLAB_TOKEN")
    base = (api_url or os.environ.get("CI_API_V4_URL") or "").rstrip("/")
    project = project or os.environ.get("CI_PROJECT_ID")
    iid = mr if mr is not None else os.environ.get("CI_MERGE_REQUEST_IID")
    problems = [Problem(what) for what, missing in (
        ("$GITLAB_TOKEN is not set (a project access token with the api scope)", not token),
        ("no API base: pass --api-url or set $CI_API_V4_URL", not base),
        ("no project: pass --repo ID or set $CI_PROJECT_ID", not project),
        ("no merge request: pass --pr IID or set $CI_MERGE_REQUEST_IID", not iid)) if missing]
    if problems:
        raise InputError("cannot post the note", problems)
    notes = f"{base}/projects/{quote(str(project), safe='')}/merge_requests/{iid}/notes"
    return Forge(name="GitLab", list_url=f"{notes}?per_page={PER_PAGE}", create_url=notes,
                 update_url=f"{notes}/{{id}}", update_method="PUT",
                 headers={"PRIVATE-TOKEN": str(token)})


def _event_number(path: str | None) -> int | None:
    """The pull request's number in an Actions event file (pull_request, issue_comment)."""
    if not path:
        return None
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for holder in (event.get("pull_request"), event.get("issue"), event):
        number = holder.get("number") if isinstance(holder, dict) else None
        if isinstance(number, int) and not isinstance(number, bool):
            return number
    return None


def _comments(forge: Forge) -> Iterator[dict[str, Any]]:
    """Every comment of the thread, page after page (GitHub's Link rel="next", GitLab's
    X-Next-Page)."""
    url: str | None = forge.list_url
    while url:
        page, headers = _call(forge, "GET", url, None)
        if not isinstance(page, list):
            raise _refused(forge, "GET", url, "the comment list is not a JSON array")
        yield from (c for c in page if isinstance(c, dict))
        url = _next_page(forge, url, headers)


def _next_page(forge: Forge, url: str, headers: Mapping[str, str]) -> str | None:
    link = _NEXT_LINK.search(headers.get("Link", ""))
    if link:
        return link.group(1)
    following = headers.get("X-Next-Page", "").strip()
    if forge.name == "GitLab" and following:
        base = re.sub(r"[?&]page=\d+", "", url)
        return f"{base}{'&' if '?' in base else '?'}page={following}"
    return None


def _request(forge: Forge, method: str, url: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    reply, _ = _call(forge, method, url, payload)
    return reply if isinstance(reply, dict) else {}


def _call(forge: Forge, method: str, url: str, payload: Mapping[str, Any] | None
          ) -> tuple[Any, dict[str, str]]:
    import urllib.error
    import urllib.request

    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        **forge.headers, "User-Agent": "kebab-mlflow",
        **({"Content-Type": "application/json"} if data is not None else {})})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:  # noqa: S310
            text = reply.read().decode("utf-8", "replace")
            headers = dict(reply.headers.items())
    except urllib.error.HTTPError as exc:
        raise _refused(forge, method, url, f"{exc.code} {_api_message(exc)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _refused(forge, method, url, f"no answer ({reason})") from None
    try:
        return (json.loads(text) if text.strip() else {}), headers
    except ValueError:
        raise _refused(forge, method, url, "the answer is not JSON") from None


def _api_message(exc: Any) -> str:
    """The API's own ``message`` (GitHub) or ``message``/``error`` (GitLab), short."""
    try:
        detail = json.loads(exc.read().decode("utf-8", "replace"))
    except (ValueError, OSError):
        return str(exc.reason)
    message = detail.get("message") or detail.get("error") if isinstance(detail, dict) else None
    return str(message or exc.reason)[:300]


def _refused(forge: Forge, method: str, url: str, what: str) -> Exception:
    from urllib.parse import urlsplit

    from kebab_mlflow.errors import OutputError

    path = urlsplit(url).path  # never the query string or the headers (the token)
    return OutputError(f"the comment was not posted: {forge.name} answered {method} {path}: "
                       f"{what}")
