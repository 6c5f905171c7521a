"""Settings from the environment: which credentials, which format, and clear refusals."""

from __future__ import annotations

import pytest

import invoicing_async as ia
from invoicing_async._transport.environment import auth_from_env, settings_from_env

OAUTH = {
    "INVOICING_CONSUMER_KEY": "ck",
    "INVOICING_CONSUMER_SECRET": "cs",
    "INVOICING_TOKEN": "tk",
    "INVOICING_TOKEN_SECRET": "ts",
}


def test_basic_credentials_and_defaults() -> None:
    env = {
        "INVOICING_BASE_URL": "https://acme.example.com",
        "INVOICING_USERNAME": "api",
        "INVOICING_PASSWORD": "pw",
    }
    settings = settings_from_env(env)
    assert settings.base_url == "https://acme.example.com"
    assert settings.auth == ia.BasicAuth("api", "pw")
    assert settings.format == "xml"


def test_oauth_credentials_and_json() -> None:
    env = {"INVOICING_BASE_URL": "https://acme.example.com", "INVOICING_FORMAT": " JSON ", **OAUTH}
    settings = settings_from_env(env)
    assert settings.auth == ia.OAuth1Auth("ck", "cs", "tk", "ts")
    assert settings.format == "json"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "INVOICING_BASE_URL"),
        ({"INVOICING_BASE_URL": "https://a", "INVOICING_FORMAT": "yaml"}, "FORMAT must be"),
        ({"INVOICING_BASE_URL": "https://a"}, "no credentials"),
        ({"INVOICING_BASE_URL": "https://a", "INVOICING_USERNAME": "u"}, "PASSWORD is not"),
        (
            {"INVOICING_BASE_URL": "https://a", "INVOICING_CONSUMER_KEY": "ck"},
            "INVOICING_CONSUMER_SECRET, INVOICING_TOKEN, INVOICING_TOKEN_SECRET",
        ),
        (
            {
                "INVOICING_BASE_URL": "https://a",
                "INVOICING_USERNAME": "u",
                "INVOICING_PASSWORD": "p",
                **OAUTH,
            },
            "both Basic",
        ),
    ],
)
def test_missing_or_conflicting_settings_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ia.ConfigurationError, match=message) as info:
        settings_from_env(env)
    assert isinstance(info.value, ValueError)
    for secret in ("cs", "ts", "p"):
        assert f"'{secret}'" not in str(info.value)


def test_a_prefix_serves_several_accounts_in_one_environment() -> None:
    env = {"ACME_USERNAME": "a", "ACME_PASSWORD": "1", "INVOICING_USERNAME": "b"}
    assert auth_from_env(env, prefix="ACME_") == ia.BasicAuth("a", "1")
