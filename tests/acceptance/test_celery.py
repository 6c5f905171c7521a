"""The guide's Celery task in a real worker with the prefork pool, on kombu's filesystem
transport: the worker imports a module-level `BlockingInvoicingClient` (and uses it) before
forking its pool, and each child's calls work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from invoicing_async.testing import FakeInvoicingService

celery = pytest.importorskip("celery")

pytestmark = pytest.mark.slow

APP = """
import os

from celery import Celery

import invoicing_async as ia

HERE = os.environ["CELERY_DIR"]
app = Celery("billing", broker="filesystem://", backend=f"file://{HERE}/results")
app.conf.broker_transport_options = {
    "data_folder_in": f"{HERE}/queue",
    "data_folder_out": f"{HERE}/queue",
    "processed_folder": f"{HERE}/processed",
    "control_folder": f"{HERE}/control",
}
client = ia.BlockingInvoicingClient.from_env(format="json")
client.current_session()  # the worker's parent uses it before forking its pool


@app.task
def read_invoice(invoice_id: int) -> list[int]:
    return [client.invoices.get(invoice_id).id or 0, os.getpid()]
"""


def test_a_prefork_worker_runs_the_task(
    service_in_thread: FakeInvoicingService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("queue", "processed", "results"):
        (tmp_path / folder).mkdir()
    (tmp_path / "billing_tasks.py").write_text(APP)
    env = {
        "CELERY_DIR": str(tmp_path),
        "INVOICING_BASE_URL": service_in_thread.base_url,
        "INVOICING_USERNAME": service_in_thread.username,
        "INVOICING_PASSWORD": service_in_thread.password,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(tmp_path))
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "billing_tasks",
            "worker",
            "--pool=prefork",
            "--concurrency=2",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "--loglevel=warning",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    try:
        import billing_tasks  # type: ignore[import-not-found]

        results = [billing_tasks.read_invoice.delay(i).get(timeout=120) for i in (1, 2, 3)]
    finally:
        worker.terminate()
        worker.wait(60)
    assert [ident for ident, _ in results] == [1, 2, 3]
    assert worker.pid not in {pid for _, pid in results}  # run in the pool's children
