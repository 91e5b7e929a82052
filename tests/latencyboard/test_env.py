from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from latencyboard.env import env_bool, env_int, env_list, env_str


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("1", True), ("YES", True), ("off", False), ("0", False), ("", True)],
    ids=["true", "one", "yes-upper", "off", "zero", "empty-uses-default"],
)
def test_env_bool(raw, expected):
    assert env_bool("FLAG", True, {"FLAG": raw}) is expected


def test_env_bool_rejects_other_words():
    with pytest.raises(ImproperlyConfigured, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG", True, {"FLAG": "maybe"})


def test_env_int_bounds_and_garbage():
    assert env_int("N", 5, {}) == 5
    assert env_int("N", 5, {"N": " 42 "}) == 42
    with pytest.raises(ImproperlyConfigured, match="N='4x' is not an integer"):
        env_int("N", 5, {"N": "4x"})
    with pytest.raises(ImproperlyConfigured, match="below the minimum 1"):
        env_int("N", 5, {"N": "0"}, minimum=1)
    with pytest.raises(ImproperlyConfigured, match="above the maximum 65535"):
        env_int("N", 5, {"N": "70000"}, maximum=65535)


def test_secrets_can_come_from_files(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    assert env_str("SECRET_KEY", "", {"SECRET_KEY_FILE": str(secret)}) == "s3cr3t"


def test_unreadable_secret_file_is_a_configuration_error(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY_FILE"):
        env_str("SECRET_KEY", "", {"SECRET_KEY_FILE": str(tmp_path / "missing")})


def test_env_list_drops_blanks():
    assert env_list("HOSTS", "", {"HOSTS": "a.example, ,b.example,"}) == ["a.example", "b.example"]
