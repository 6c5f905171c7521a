"""mkdocs hook: the docs' diagrams, drawn as inline SVG when the site is built.

A page writes `<!-- diagram: NAME -->` on a line of its own, NAME one of `DIAGRAMS`. The
SVG is inline, so it renders offline (no script, no CDN), its text follows the theme's
colours and stays searchable, and it carries a `<title>` and a `<desc>` for screen
readers. The layers are those of the import-linter contract in pyproject.toml
(tests/acceptance/test_diagrams.py checks that they agree). An unknown NAME fails the build.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from html import escape
from typing import NamedTuple

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

MARKER = re.compile(r"^<!--\s*diagram:\s*(?P<name>[\w-]+)\s*-->$", re.M)
WIDTH = 720
_MONO = "font-family=\"ui-monospace, 'Roboto Mono', monospace\""


class Layer(NamedTuple):
    """A box of the layers diagram: the contract's layers it stands for, top first."""

    title: str
    role: str
    contract: tuple[str, ...]


# Top to bottom, as in [tool.importlinter] `layers`; each `contract` entry is one of its lines.
LAYERS = (
    Layer("integrations", "the dlt source; python -m invoicing_async", ("__main__ | contrib",)),
    Layer("command line", "demo, sync, db, accounts, worker, enqueue, status", ("_cli",)),
    Layer("jobs", "accounts, the sync task and the dispatcher on procrastinate", ("_jobs",)),
    Layer(
        "account run", "one run of one account: client, budget, store, engine", ("_account_run",)
    ),
    Layer(
        "blocking client",
        "BlockingInvoicingClient: the async client run from plain code",
        ("_blocking",),
    ),
    Layer(
        "sync, stores, push", "the plan, the engine, the stores; push", ("sync", "_push", "_sync")
    ),
    Layer("client", "InvoicingClient: lifecycle, per-call options", ("_client",)),
    Layer("resources", "each operation of the specification", ("_resources",)),
    Layer("writes once", "idempotency keys, the write journal, settling by looking", ("_writes",)),
    Layer(
        "transport and budget", "auth, retries, errors; the rate budget", ("_transport", "_budget")
    ),
    Layer("models", "the attrs models and their one converter", ("models", "_models")),
    Layer("wire formats", "bytes ⇄ values: XML, JSON, decimals, dates", ("_wire",)),
    Layer("log output", "text or JSON lines, secrets redacted", ("_logs",)),
    Layer(
        "errors and foundations",
        "every exception; pools, SQLite files, secrets",
        ("_postgres : _sqlite : _secrets : _extras : _telemetry : errors : _version",),
    ),
    Layer("text", "printable text: control characters made inert", ("_text",)),
)


def modules(layer: Layer) -> list[str]:
    """The modules a layer's box names, in the contract's order."""
    return [name.strip() for line in layer.contract for name in re.split(r"[|:]", line)]


def svg(name: str, height: int, title: str, desc: str, body: Sequence[str]) -> str:
    """An accessible inline SVG: role img, labelled by its `<title>` and `<desc>`."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="diagram-svg" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="{name}-title {name}-desc" font-size="13" fill="currentColor">'
        f'<title id="{name}-title">{escape(title)}</title>'
        f'<desc id="{name}-desc">{escape(desc)}</desc>'
        f'<defs><marker id="{name}-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        f'<path d="M0 0L10 5L0 10z" fill="currentColor"/></marker></defs>'
        + "".join(body)
        + "</svg>"
    )


def box(x: float, y: float, w: float, h: float, *, dashed: bool = False) -> str:
    """A rounded box in the theme's colours (docs/stylesheets/extra.css)."""
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    return (
        f'<rect class="diagram__box" x="{x}" y="{y}" width="{w}" height="{h}" rx="6" '
        f'fill="none" stroke="currentColor" stroke-width="1.2"{dash}/>'
    )


def text(x: float, y: float, content: str, *, style: str = "", anchor: str = "start") -> str:
    """One line of text; `style` is "bold", "mono", "small" or a mix."""
    attrs = [f'x="{x}" y="{y}"']
    if anchor != "start":
        attrs.append(f'text-anchor="{anchor}"')
    if "bold" in style:
        attrs.append('font-weight="700"')
    if "mono" in style:
        attrs.append(_MONO)
    if "small" in style:
        attrs.append('font-size="11.5"')
    return f"<text {' '.join(attrs)}>{escape(content)}</text>"


def arrow(name: str, points: Sequence[tuple[float, float]], *, dashed: bool = False) -> str:
    """A line through `points`, with an arrowhead at the last."""
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    return (
        f'<path d="{_path(points)}" fill="none" stroke="currentColor" stroke-width="1.4"{dash} '
        f'marker-end="url(#{name}-arrow)"/>'
    )


def layers() -> str:
    """The layers, top to bottom, and the fake service beside them."""
    row, gap, top, left, right = 40, 6, 8, 34, 574
    height = top + len(LAYERS) * (row + gap)
    body = [
        arrow("layers", [(14, top + 4), (14, height - gap - 4)]),
        f'<text x="0" y="0" font-size="11.5" text-anchor="middle" '
        f'transform="translate(9 {height / 2}) rotate(-90)">'
        f"each layer imports only the layers below it</text>",
    ]
    for index, layer in enumerate(LAYERS):
        y = top + index * (row + gap)
        body += [
            box(left, y, right - left, row),
            text(left + 10, y + 17, layer.title, style="bold"),
            text(left + 172, y + 17, layer.role, style="small"),
            text(left + 10, y + 33, ", ".join(modules(layer)), style="mono small"),
        ]
    fake = [
        "invoicing_async",
        "  .testing",
        "(the fake service)",
        "may import any",
        "layer; production",
    ]
    fake += ["code never", "imports it"]
    body.append(box(590, top, WIDTH - 591, height - top - gap, dashed=True))
    body += [text(600, top + 24 + 18 * i, line, style="small") for i, line in enumerate(fake)]
    desc = "Layers from top to bottom, each importing only those below: " + "; ".join(
        f"{layer.title} ({', '.join(modules(layer))}): {layer.role}" for layer in LAYERS
    )
    return svg(
        "layers",
        height,
        "The layers of invoicing_async",
        desc + ". Beside them the fake service, invoicing_async.testing, which may import "
        "anything and which production code never imports.",
        body,
    )


def budget_hour() -> str:
    """One account's hour: a burst of takes, the server's remaining, units coming back."""
    x0, x1, y_full, y_empty = 64.0, 700.0, 58.0, 198.0
    minutes = 80

    def x(minute: float) -> float:
        return round(x0 + (x1 - x0) * minute / minutes, 1)

    def y(units: float) -> float:
        return round(y_empty - (y_empty - y_full) * units / 350, 1)

    server = [(x(0), y(350)), (x(1.5), y(0)), (x(60), y(0)), (x(61.5), y(350)), (x(80), y(350))]
    ours = [(x(0), y(350)), (x(1.5), y(0)), (x(61), y(0)), (x(62.5), y(350)), (x(80), y(350))]
    body = [
        # axes: units left, minutes below
        f'<path d="M{x0} {y_full - 8}V{y_empty}H{x1}" fill="none" stroke="currentColor"/>',
        text(x0 - 6, y(350) + 4, "350", anchor="end", style="small"),
        text(x0 - 6, y(0) + 4, "0", anchor="end", style="small"),
        *(
            text(x(m), y_empty + 16, f"{m} min", anchor="middle", style="small")
            for m in (0, 20, 40, 60, 80)
        ),
        # the period, from the burst's arrival to its units' return
        arrow("budget-hour", [(x(30), 22), (x(0), 22)]),
        arrow("budget-hour", [(x(30), 22), (x(60), 22)]),
        text(
            x(30), 16, "period: 3600 s (the server's sliding hour)", anchor="middle", style="small"
        ),
        # the takes: all 350 at once
        f'<rect class="diagram__takes" x="{x(0)}" y="{y(350)}" width="{x(1.5) - x(0)}" '
        f'height="{y(0) - y(350)}" opacity="0.35"/>',
        f'<rect class="diagram__takes" x="{x(61)}" y="{y(120)}" width="{x(62.5) - x(61)}" '
        f'height="{y(0) - y(120)}" opacity="0.35"/>',
        text(x(2.5), y(300), "350 takes at once: a first sync", style="small"),
        text(x(2.5), y(300) + 14, "runs at full speed", style="small"),
        # the server's remaining and the budget's
        f'<path d="{_path(server)}" fill="none" stroke="currentColor" stroke-width="2"/>',
        f'<path class="diagram__ours" d="{_path(ours)}" fill="none" stroke-width="2.5" '
        f'stroke-dasharray="6 4"/>',
        text(x(12), y(0) - 22, "0 left: a request waits at most max_wait (60 s),", style="small"),
        text(x(12), y(0) - 8, "else RateLimitExceeded at once, nothing sent", style="small"),
        text(
            x(59), y(350) + 62, "each unit comes back one period after", anchor="end", style="small"
        ),
        text(x(59), y(350) + 76, "its response arrived: never before", anchor="end", style="small"),
        text(x(59), y(350) + 90, "the server's hour has passed it", anchor="end", style="small"),
        # legend
        f'<path d="M{x0} 244h28" stroke="currentColor" stroke-width="2"/>',
        text(x0 + 34, 248, "the server's X-RateLimit-Remaining", style="small"),
        f'<path class="diagram__ours" d="M{x0 + 268} 244h28" stroke-width="2.5" '
        f'stroke-dasharray="6 4"/>',
        text(x0 + 302, 248, "the budget's remaining (it follows the server's)", style="small"),
        f'<rect class="diagram__takes" x="{x0}" y="256" width="28" height="9" opacity="0.35"/>',
        text(x0 + 34, 265, "takes (a unit per request, retries included)", style="small"),
    ]
    desc = (
        "One account's hour with a limit of 350 requests. At minute 0 all 350 units are "
        "taken at once and the server's X-RateLimit-Remaining falls to 0; until the period "
        "of 3600 seconds has passed a request waits at most max_wait, else raises "
        "RateLimitExceeded without being sent. At minute 60 the server's hour has slid past "
        "the burst and its remaining climbs back to 350; each of the budget's units comes "
        "back one period after its response arrived, so just after the server's, never before."
    )
    return svg("budget-hour", 274, "The rate budget's hour", desc, body)


def fleet() -> str:
    """The fleet: commands and workers meeting in PostgreSQL, runs against the service."""
    left, w, h, gap = 100, 400, 50, 34
    boxes = [
        ("the command line", "accounts import / add, enqueue, status"),
        ("PostgreSQL", "the job queue (procrastinate), accounts, runs, budgets, stores"),
        ("workers", "invoicing-async worker, on each machine"),
        ("accounts", "one run at a time (queue lock + advisory lock)"),
        ("the Invoicing Service", "one host per account, 350 requests an hour"),
    ]
    steps = [
        "rows of accounts; a job per account",
        "jobs: due accounts, queued every minute",
        "a run: secrets read, budget taken",
        "sync list, then a fetch per 100 changed",
    ]
    body: list[str] = []
    for index, (title, detail) in enumerate(boxes):
        y = 6 + index * (h + gap)
        body += [
            box(left, y, w, h),
            text(left + w / 2, y + 20, title, anchor="middle", style="bold"),
            text(left + w / 2, y + 38, detail, anchor="middle", style="small"),
        ]
        if index < len(steps):
            middle = left + w / 2
            body.append(arrow("fleet", [(middle, y + h), (middle, y + h + gap)]))
            body.append(
                text(middle - 10, y + h + gap / 2 + 4, steps[index], anchor="end", style="small")
            )
    workers_y, postgres_y = 6 + 2 * (h + gap) + h / 2, 6 + (h + gap) + h / 2
    body += [
        arrow(
            "fleet",
            [
                (left + w, workers_y),
                (left + w + 30, workers_y),
                (left + w + 30, postgres_y),
                (left + w, postgres_y),
            ],
            dashed=True,
        ),
        text(left + w + 40, postgres_y + 30, "each run's outcome and", style="small"),
        text(left + w + 40, postgres_y + 44, "next due time, budget", style="small"),
        text(left + w + 40, postgres_y + 58, "takes, the invoices", style="small"),
        text(left + w + 40, 24, "one database: nothing", style="small"),
        text(left + w + 40, 38, "else is shared between", style="small"),
        text(left + w + 40, 52, "the machines", style="small"),
    ]
    desc = (
        "The command line writes accounts and jobs into PostgreSQL; a periodic task queues "
        "each due account; workers on each machine take the jobs, one run of an account at "
        "a time, and each run syncs one account against its host of the Invoicing Service "
        "(the sync list, then a fetch per 100 changed invoices) under the host's shared "
        "budget. Workers write each run's outcome, the budget's takes and the invoices back "
        "into PostgreSQL."
    )
    return svg("fleet", 6 + len(boxes) * (h + gap) - gap + 6, "A fleet on PostgreSQL", desc, body)


def _path(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{'M' if i == 0 else 'L'}{x} {y}" for i, (x, y) in enumerate(points))


DIAGRAMS: dict[str, Callable[[], str]] = {
    "layers": layers,
    "budget-hour": budget_hour,
    "fleet": fleet,
}


def render(markdown: str) -> str:
    """`markdown` with each diagram marker replaced by its figure."""

    def figure(match: re.Match[str]) -> str:
        draw = DIAGRAMS.get(match["name"])
        if draw is None:
            raise LookupError(f"no diagram {match['name']!r} (known: {', '.join(DIAGRAMS)})")
        return f'<figure class="diagram">\n{draw()}\n</figure>'

    return MARKER.sub(figure, markdown)


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the page's diagram markers with their SVG."""
    del config, files  # part of the hook's signature
    try:
        return render(markdown)
    except LookupError as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from exc
