"""The client a competent user would write instead of ours: aiohttp, xmltodict or json,
sqlite3, 4 requests in flight. Same requests as our sync engine (one sync list, then
sync-fetch batches of 100 for new and changed ids), same SQLite file layout in spirit
(id, revision, the document as JSON). Kept small and honest: it is the baseline."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import xmltodict

HEADERS = {"xml": "application/xml", "json": "application/json"}


def _members(body: bytes, fmt: str) -> list[dict[str, Any]]:
    if fmt == "json":
        return [item.get("invoice", item) for item in json.loads(body)]
    root = xmltodict.parse(body)["invoices"]
    if not root or "invoice" not in root:
        return []
    items = root["invoice"]
    return items if isinstance(items, list) else [items]


def _int(value: Any) -> int:
    return int(value["#text"] if isinstance(value, dict) else value)


async def sync(base_url: str, user: str, password: str, ca: Path, db: Path, fmt: str) -> int:
    """One sync run; returns the number of invoices written."""
    store = sqlite3.connect(db)
    store.execute(
        "CREATE TABLE IF NOT EXISTS invoices (id INTEGER PRIMARY KEY, revision INTEGER, doc TEXT)"
    )
    known = dict(store.execute("SELECT id, revision FROM invoices"))
    headers = {
        "Authorization": aiohttp.encode_basic_auth(user, password),
        "Accept": HEADERS[fmt],
        "Content-Type": HEADERS[fmt],
    }
    context = ssl.create_default_context(cafile=str(ca))
    api = f"{base_url}/api/v1.0"
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(f"{api}/invoices/sync_list_ids.xml", ssl=context) as resp:
            listed = {_int(m["id"]): _int(m["revision"]) for m in _members(await resp.read(), fmt)}
        wanted = sorted(i for i, rev in listed.items() if known.get(i) != rev)
        gate = asyncio.Semaphore(4)
        written = 0

        async def fetch(ids: list[int]) -> None:
            nonlocal written
            if fmt == "json":
                body = json.dumps({"invoices": {"ids": ids}}).encode()
            else:
                body = xmltodict.unparse({"invoices": {"ids": {"id": ids}}}).encode()
            async with (
                gate,
                http.post(f"{api}/invoices/sync_fetch_ids.xml", data=body, ssl=context) as resp,
            ):
                members = _members(await resp.read(), fmt)
            rows = [(_int(m["id"]), _int(m["revision"]), json.dumps(m)) for m in members]
            with store:
                store.executemany("INSERT OR REPLACE INTO invoices VALUES (?, ?, ?)", rows)
            written += len(rows)

        await asyncio.gather(*(fetch(wanted[i : i + 100]) for i in range(0, len(wanted), 100)))
    store.close()
    return written
