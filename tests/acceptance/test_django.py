"""The guide's Django view, served by Django's test client: a view that creates and sends
an invoice through a module-level `BlockingInvoicingClient`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

django = pytest.importorskip("django")

from django.conf import settings  # noqa: E402
from django.http import HttpRequest, JsonResponse  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import path  # noqa: E402

import invoicing_async as ia  # noqa: E402
from invoicing_async import models as m  # noqa: E402
from invoicing_async.testing import FakeInvoicingService  # noqa: E402

CLIENT: list[ia.BlockingInvoicingClient] = []


def checkout(request: HttpRequest) -> JsonResponse:
    client = CLIENT[0]
    line = m.InvoiceDetail(
        description="Order " + request.POST["order"], price=request.POST["total"], tax_rate_id=1
    )
    invoice = client.with_options(max_wait=0).invoices.create(
        m.Invoice(contact_id=int(request.POST["contact"]), details=[line])
    )
    invoice = client.invoices.send_invoice(invoice, send_method="email")
    return JsonResponse({"id": invoice.id, "state": invoice.state})


urlpatterns = [path("checkout", checkout)]


@pytest.fixture
def django_app(service_in_thread: FakeInvoicingService) -> Iterator[Client]:
    if not settings.configured:
        settings.configure(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"], DEBUG=True)
        django.setup()
    with ia.BlockingInvoicingClient(
        service_in_thread.base_url, auth=service_in_thread.auth, format="json"
    ) as client:
        CLIENT[:] = [client]
        yield Client()
    CLIENT.clear()


def test_a_view_creates_and_sends_an_invoice(
    django_app: Client, service_in_thread: FakeInvoicingService
) -> None:
    response = django_app.post("/checkout", {"order": "1234", "total": "25.00", "contact": "7"})
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "open"
    assert service_in_thread.account.invoices[body["id"]].state == "open"
