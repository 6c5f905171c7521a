"""Client settings from the `INVOICING_*` environment variables (the client guide lists
them), as `InvoicingClient.from_env()` and the command line read them: secrets come from
the environment, never from arguments."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import cast

import attrs

from invoicing_async._transport.auth import Auth, BasicAuth, OAuth1Auth
from invoicing_async.errors import ConfigurationError

__all__ = ["EnvironmentSettings", "auth_from_env", "settings_from_env"]

PREFIX = "INVOICING_"
_OAUTH = ("CONSUMER_KEY", "CONSUMER_SECRET", "TOKEN", "TOKEN_SECRET")


@attrs.frozen
class EnvironmentSettings:
    """What the environment says about the account: where, how to authorize, which format."""

    base_url: str
    auth: Auth
    format: str


def auth_from_env(environ: Mapping[str, str] | None = None, *, prefix: str = PREFIX) -> Auth:
    """`OAuth1Auth` or `BasicAuth`, by which variables are set; both, neither or half a set is
    a `ConfigurationError` naming the variables."""
    env = os.environ if environ is None else environ
    oauth = {name: env.get(prefix + name) for name in _OAUTH}
    basic = {name: env.get(prefix + name) for name in ("USERNAME", "PASSWORD")}
    has_oauth = any(oauth.values())
    has_basic = any(basic.values())
    if has_oauth and has_basic:
        raise ConfigurationError(
            f"both Basic ({prefix}USERNAME) and OAuth 1 ({prefix}CONSUMER_KEY…) credentials "
            "are set in the environment: unset one set"
        )
    if has_oauth:
        missing = [prefix + name for name, value in oauth.items() if not value]
        if missing:
            raise ConfigurationError(f"OAuth 1 needs {', '.join(missing)} in the environment")
        values = cast(dict[str, str], oauth)
        return OAuth1Auth(
            values["CONSUMER_KEY"],
            values["CONSUMER_SECRET"],
            values["TOKEN"],
            values["TOKEN_SECRET"],
        )
    if not basic["USERNAME"]:
        raise ConfigurationError(
            f"no credentials in the environment: set {prefix}USERNAME and {prefix}PASSWORD, "
            f"or {prefix}CONSUMER_KEY, {prefix}CONSUMER_SECRET, {prefix}TOKEN and "
            f"{prefix}TOKEN_SECRET"
        )
    if basic["PASSWORD"] is None:
        raise ConfigurationError(f"{prefix}USERNAME is set but {prefix}PASSWORD is not")
    return BasicAuth(basic["USERNAME"], basic["PASSWORD"])


def settings_from_env(
    environ: Mapping[str, str] | None = None, *, prefix: str = PREFIX
) -> EnvironmentSettings:
    """Base URL, credentials and format from the environment (see the module's table)."""
    env = os.environ if environ is None else environ
    base_url = env.get(prefix + "BASE_URL")
    if not base_url:
        raise ConfigurationError(f"set {prefix}BASE_URL to the account's https:// address")
    fmt = env.get(prefix + "FORMAT", "xml").strip().lower() or "xml"
    if fmt not in ("xml", "json"):
        raise ConfigurationError(f"{prefix}FORMAT must be 'xml' or 'json', not {fmt!r}")
    return EnvironmentSettings(
        base_url=base_url, auth=auth_from_env(env, prefix=prefix), format=fmt
    )
