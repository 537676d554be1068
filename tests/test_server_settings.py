"""Server settings: defaults once, environment variables by field name, overrides, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from service_incident.server.settings import Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_environment_variables_are_the_upper_case_field_names() -> None:
    settings = Settings.load(
        {
            "MAX_CONCURRENT_ENVS": "64",
            "WS_PING_INTERVAL_S": "none",
            "WS_PER_MESSAGE_DEFLATE": "true",
            "SESSION_IDLE_TIMEOUT_S": "2.5",
        }
    )
    assert settings.max_concurrent_envs == 64
    assert settings.ws_ping_interval_s is None
    assert settings.ws_per_message_deflate is True
    assert settings.session_idle_timeout_s == 2.5
    assert settings.port == Settings().port  # untouched fields keep their defaults


def test_keyword_overrides_win_over_the_environment() -> None:
    assert Settings.load({"PORT": "9000"}, port=9100).port == 9100


@pytest.mark.parametrize(
    "environ",
    [
        {"MAX_CONCURRENT_ENVS": "0"},
        {"PORT": "eighty"},
        {"SESSION_IDLE_TIMEOUT_S": "-1"},
        {"LOG_LEVEL": "loud"},
        {"BUSY_POLL_US": "-1"},
        {"BUSY_POLL_US": "20000"},
    ],
)
def test_bad_values_are_refused_with_the_setting_named(environ: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="invalid server setting"):
        Settings.load(environ)


def test_the_readme_documents_every_setting() -> None:
    section = README.split("<!-- server:begin -->", 1)[1].split("<!-- server:end -->", 1)[0]
    for name in Settings.__struct_fields__:
        assert f"`{name.upper()}`" in section, name
