"""The pytest plugin (`pytest_invoicing_async`), run on users' test files by `pytester`:
its fixtures, the `invoicing` marker, strict routes, in auto and strict asyncio modes."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

# Warnings are errors as a strict project sets them, in its ini file (where the plugin's own
# filter for Python 3.10's SSL layer can follow them; `-W` would override it).
_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\nfilterwarnings = error\n"
AUTO = _INI + "asyncio_mode = auto\n"
STRICT = _INI + "asyncio_mode = strict\n"


def run(pytester: pytest.Pytester, code: str, ini: str = AUTO) -> pytest.RunResult:
    pytester.makeini(ini)
    pytester.makepyfile(textwrap.dedent(code))
    return pytester.runpytest_inprocess("-p", "no:cacheprovider")


def test_loading_the_plugin_imports_neither_the_package_nor_aiohttp() -> None:
    code = (
        "import sys; import pytest_invoicing_async; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'aiohttp', 'invoicing_async'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_fixtures_and_the_marker_in_auto_mode(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import datetime as dt
        import pytest

        @pytest.mark.invoicing(invoices=12, seed=3, format="json", limit=50)
        async def test_generated(invoicing_fake, invoicing_client):
            assert len(await invoicing_client.invoices.list()) == 12
            assert invoicing_client.budget.limit == 50
            assert invoicing_fake.account.requests[-1].path.endswith("invoices.xml")

        async def test_fresh_service_each_test(invoicing_fake, invoicing_client):
            assert await invoicing_client.invoices.list() == []
            assert len(invoicing_fake.account.requests) == 1

        @pytest.mark.invoicing(now=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc))
        def test_the_clock(invoicing_clock):
            invoicing_clock.advance(days=2)
            assert invoicing_clock.today() == dt.date(2030, 1, 3)

        def test_nothing_asked_for():
            pass
        """,
    )
    result.assert_outcomes(passed=4)


def test_the_same_seed_gives_the_same_faults(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import pytest
        import invoicing_async as ia

        SEEN = []

        @pytest.mark.parametrize("turn", [1, 2])
        @pytest.mark.invoicing(seed=7, faults={"error_rate": 0.5, "only_paths": ("current",)})
        async def test_faults(invoicing_fake, turn):
            async with invoicing_fake.client(retry=ia.RetryPolicy.none()) as client:
                outcomes = []
                for _ in range(12):
                    try:
                        await client.current_session()
                        outcomes.append("ok")
                    except ia.ServerError:
                        outcomes.append("500")
            SEEN.append(outcomes)
            assert "ok" in outcomes and "500" in outcomes

        def test_repeated():
            assert SEEN[0] == SEEN[1]

        @pytest.mark.invoicing(faults={"no_such_fault": 1.0})
        async def test_misspelt(invoicing_fake):
            pass
        """,
    )
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*FaultPlan has no fault 'no_such_fault'*"])


def test_strict_mode_needs_no_asyncio_mark_on_the_fixtures(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import pytest

        @pytest.mark.asyncio
        @pytest.mark.invoicing(invoices=2)
        async def test_strict(invoicing_client):
            assert len(await invoicing_client.invoices.list()) == 2

        @pytest.mark.asyncio
        async def test_routes(invoicing_mock):
            invoicing_mock.get("/current_session").respond(body="<user><name>Ann</name></user>")
            async with invoicing_mock.client() as client:
                assert (await client.current_session()).name == "Ann"
        """,
        ini=STRICT,
    )
    result.assert_outcomes(passed=2)


def test_strict_routes(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import pytest
        from invoicing_async import models as m

        async def test_answered_and_recorded(invoicing_mock):
            invoicing_mock.get("/invoices/42").respond(model=m.Invoice(id=42, revision=3))
            invoicing_mock.put("/invoices/42", body=lambda b: b"paid" in b).respond(200)
            async with invoicing_mock.client(format="json") as client:
                assert (await client.invoices.get(42)).revision == 3
            assert [c.request.method for c in invoicing_mock.calls] == ["GET"]
            invoicing_mock.assert_all_called = False

        async def test_unexpected(invoicing_mock):
            async with invoicing_mock.client() as client:
                try:
                    await client.invoices.get(7)
                except Exception:
                    pass  # swallowed by the code under test: the teardown still fails

        async def test_uncalled(invoicing_mock):
            invoicing_mock.get("/invoices/1").respond(model=m.Invoice(id=1))

        @pytest.mark.invoicing(assert_all_called=False)
        async def test_opted_out(invoicing_mock):
            invoicing_mock.get("/invoices/1")

        async def test_a_failing_test_is_not_blamed_twice(invoicing_mock):
            invoicing_mock.get("/invoices/1")
            assert False, "the test's own failure"
        """,
    )
    result.assert_outcomes(passed=4, failed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_unexpected*",
            "*unexpected request: GET https://acme.example.com/api/v1.0/invoices/7.xml*",
            "*ERROR at teardown of test_uncalled*",
            "*route never called: GET /invoices/1*",
        ]
    )
    assert "teardown of test_a_failing_test" not in result.stdout.str()


def _open_sockets() -> int:
    fds = os.listdir("/proc/self/fd")
    count = 0
    for fd in fds:
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts sockets in /proc")
def test_the_blocking_fixtures_serve_tests_that_are_not_async(pytester: pytest.Pytester) -> None:
    """A plain `def` test (a Django view's, a Celery task's) gets a blocking client of a
    fake served from its own thread, configured by the marker, writes-once included."""
    result = run(
        pytester,
        """
        import pytest
        from invoicing_async import models as m

        @pytest.mark.invoicing(invoices=4, format="json", limit=40)
        def test_reads(invoicing_threaded_fake, invoicing_blocking_client):
            assert len(list(invoicing_blocking_client.invoices.iter())) == 4
            assert invoicing_blocking_client.budget.limit == 40
            assert len(invoicing_threaded_fake.account.requests) == 1

        @pytest.mark.invoicing(faults={"applied_drop_rate": 1.0})
        def test_a_keyed_create_happens_once_when_every_answer_is_lost(
            invoicing_threaded_fake, invoicing_blocking_client
        ):
            invoice = m.Invoice(contact_id=1, details=[m.InvoiceDetail(description="a", tax_rate_id=1)])
            first = invoicing_blocking_client.invoices.create(invoice, idempotency_key="k-1")
            again = invoicing_blocking_client.invoices.create(invoice, idempotency_key="k-1")
            assert first.id == again.id
            assert len(invoicing_threaded_fake.account.invoices) == 1
            sent = [r.method for r in invoicing_threaded_fake.account.requests]
            assert sent.count("POST") == 1, "the answer was lost and settled by looking"

        def test_fresh_service_each_test(invoicing_threaded_fake, invoicing_blocking_client):
            assert invoicing_blocking_client.invoices.list() == []
        """,
    )
    result.assert_outcomes(passed=3)


def test_many_tests_leave_no_sockets_threads_or_tasks(pytester: pytest.Pytester) -> None:
    """Each test's service and client are closed: nothing outlives the run."""
    sockets, threads = _open_sockets(), threading.active_count()
    result = run(
        pytester,
        """
        import pytest

        @pytest.mark.parametrize("n", range(20))
        @pytest.mark.invoicing(invoices=3)
        async def test_each(invoicing_fake, invoicing_client, invoicing_mock, n):
            assert len(await invoicing_client.invoices.list()) == 3
            invoicing_mock.get("/current_session").respond(body="<user><name>A</name></user>")
            async with invoicing_mock.client() as client:
                await client.current_session()
        """,
    )
    result.assert_outcomes(passed=20)
    gc.collect()
    assert _open_sockets() <= sockets
    assert threading.active_count() <= threads
    assert [t for t in gc.get_objects() if isinstance(t, asyncio.Task) and not t.done()] == []


GUIDE = Path(__file__).parents[3] / "docs" / "guide" / "testing-your-application.md"
PYTEST_EXAMPLE = re.compile(
    r"^<!-- pytest-example: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)^```", re.S | re.M
)


@pytest.mark.parametrize(
    "code", [m["code"] for m in PYTEST_EXAMPLE.finditer(GUIDE.read_text("utf-8"))]
)
def test_the_guide_examples_pass_as_user_tests(pytester: pytest.Pytester, code: str) -> None:
    result = run(pytester, code)
    assert result.ret == 0, result.stdout.str()
