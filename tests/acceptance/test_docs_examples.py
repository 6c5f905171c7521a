"""The code examples of the docs and the README, run as written against the fake service.

An example is a ```python block right after `<!-- example: NAME -->` in README.md or any
page under docs/. It runs against a fake service whose account has the credentials the
examples use (`api-user` / `secret`, also in the `INVOICING_*` variables that `from_env()`
reads); its host, `https://acme.example.com`, is replaced by the fake's URL. A block with
top-level `await` runs inside a coroutine that provides `client`, a client of the fake, as
a notebook cell would; any other block runs as a script. The web-backend examples define
an app, which the tests at the end serve.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService

pytestmark = pytest.mark.slow  # every example of the docs, run whole

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = "<!-- example: "
EXAMPLE = re.compile(
    r"^<!-- example: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)^```", re.S | re.M
)
HOST = "https://acme.example.com"
USERNAME, PASSWORD = "api-user", "secret"
APPS = {"fastapi", "aiohttp"}  # define an app: served by the tests at the end
# Run against the `fake-server` command the page starts (the test at the end), not HOST.
AGAINST_FAKE_SERVER = {"quickstart"}
FAKE_SERVER = re.compile(
    r"^<!-- fake-server: (?P<name>[\w-]+) -->\n```bash\n(?P<line>[^\n]*)\n```", re.M
)


@attrs.frozen
class Example:
    name: str
    where: str  # page:line, for tracebacks
    code: str


def collect() -> dict[str, Example]:
    """Every marked example, by name; names are unique across the pages."""
    found: dict[str, Example] = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        matches = list(EXAMPLE.finditer(text))
        marked = sum(line.startswith(MARKER) for line in text.splitlines())
        assert len(matches) == marked, f"{page}: a marker without a ```python block after it"
        for match in matches:
            line = text.count("\n", 0, match.start("code")) + 1
            where = f"{page.relative_to(ROOT)}:{line}"
            name = match["name"]
            assert name not in found, f"example {name!r} in {where} and {found[name].where}"
            found[name] = Example(name, where, match["code"])
    return found


EXAMPLES = collect()


@pytest.fixture(scope="module")
def fake() -> Any:
    """A fake service with the examples' credentials, in a thread of its own."""
    service = FakeInvoicingService(invoices=50, seed=3, tls=False, username=USERNAME)
    service.account.password = PASSWORD
    with service.serve_in_thread() as running:
        yield running


@pytest.fixture
def account_env(fake: FakeInvoicingService, monkeypatch: pytest.MonkeyPatch) -> int:
    """The client's settings in the environment, as `from_env()` reads them; an invoice id."""
    monkeypatch.setenv("INVOICING_BASE_URL", fake.base_url)
    monkeypatch.setenv("INVOICING_USERNAME", USERNAME)
    monkeypatch.setenv("INVOICING_PASSWORD", PASSWORD)
    return min(fake.account.invoices)


def run(example: Example, base_url: str) -> dict[str, Any]:
    """Execute the example (a script, or a block with top-level await given `client`)."""
    source = example.code.replace(HOST, base_url)
    code = compile(source, example.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {"__name__": f"example_{example.name.replace('-', '_')}"}
    if not code.co_flags & inspect.CO_COROUTINE:
        exec(code, namespace)
        return namespace

    async def cell() -> None:
        async with ia.InvoicingClient(base_url, auth=ia.BasicAuth(USERNAME, PASSWORD)) as client:
            namespace["client"] = client
            await eval(code, namespace)

    asyncio.run(cell())
    return namespace


def test_examples_are_found() -> None:
    assert set(EXAMPLES) >= APPS
    assert len(EXAMPLES) > len(APPS)


@pytest.mark.parametrize("name", sorted(set(EXAMPLES) - APPS - AGAINST_FAKE_SERVER))
def test_the_example_runs(
    name: str,
    fake: FakeInvoicingService,
    account_env: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # files an example writes (a SQLite store) land here
    run(EXAMPLES[name], fake.base_url)


async def test_the_fastapi_example(account_env: int, fake: FakeInvoicingService) -> None:
    app = run(EXAMPLES["fastapi"], fake.base_url)["app"]
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),  # the lifespan: one client for the app
        httpx.AsyncClient(transport=transport, base_url="http://app") as http,
    ):
        found = await http.get(f"/invoices/{account_env}")
        assert found.status_code == 200
        body = found.json()
        assert body["id"] == account_env
        assert isinstance(body["total_price_incl_tax"], str)  # money stays exact
        assert (await http.get("/invoices/999999")).status_code == 404


async def test_the_aiohttp_example(account_env: int, fake: FakeInvoicingService) -> None:
    app: web.Application = run(EXAMPLES["aiohttp"], fake.base_url)["app"]
    async with TestClient(TestServer(app)) as http:  # runs cleanup_ctx: one client
        found = await http.get(f"/invoices/{account_env}")
        assert found.status == 200
        body = await found.json()
        assert body["id"] == account_env
        assert isinstance(body["total_price_incl_tax"], str)
        assert (await http.get("/invoices/999999")).status == 404


def fake_server_lines() -> dict[str, str]:
    """The `fake-server` command each example is run against, by example name."""
    return {
        match["name"]: match["line"]
        for page in PAGES
        for match in FAKE_SERVER.finditer(page.read_text(encoding="utf-8"))
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("name", sorted(AGAINST_FAKE_SERVER))
def test_the_example_runs_against_the_fake_server_command(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line of the page, then its code, as pasted; only the port is a free one
    (the same in both), and the command runs as `python -m invoicing_async`."""
    line = fake_server_lines()[name]
    command = shlex.split(line)
    assert command[0].endswith("invoicing-async")
    assert command[1] == "fake-server"
    port = command[command.index("--port") + 1]
    mine = str(free_port())
    command[command.index("--port") + 1] = mine
    example = EXAMPLES[name]
    assert f"127.0.0.1:{port}" in example.code
    monkeypatch.chdir(tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "invoicing_async", *command[1:]],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        banner: list[str] = []
        while len(banner) < 20 and not (banner and banner[-1].startswith("Press Ctrl-C")):
            text = server.stdout.readline()
            assert text, f"the fake server ended: {banner}"
            banner.append(text)
        assert banner[-1].startswith("Press Ctrl-C"), banner
        assert f"  base URL:  http://127.0.0.1:{mine}\n" in banner
        run(attrs.evolve(example, code=example.code.replace(f":{port}", f":{mine}")), "")
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)
    out = capsys.readouterr().out
    assert "signed in as " in out
    assert re.search(r"^\d+ open invoices$", out, re.M)
    assert re.search(r"^1000 new, 0 updated, 11 requests$", out, re.M)


def test_the_readme_links_to_files_that_exist() -> None:
    """The README is read on the repository's host, outside the docs site's link check."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?://)([^)#]+)(?:#[^)]*)?\)", text)
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []
