"""The bounds on every call to S3 (dimbsvm.store.location.s3_call_limits), and fsspec applying them."""

import logging

import pytest

from dimbsvm.store.location import READ_TIMEOUT, READ_TIMEOUT_VARIABLE, s3_call_limits


def test_the_read_timeout_comes_from_the_environment_and_a_bad_value_is_a_warning(monkeypatch, caplog):
    monkeypatch.setenv(READ_TIMEOUT_VARIABLE, "2.5")
    assert s3_call_limits()["read_timeout"] == 2.5 and s3_call_limits()["connect_timeout"] == 2.5
    for bad in ("abc", "-1", "nan", "0"):
        monkeypatch.setenv(READ_TIMEOUT_VARIABLE, bad)
        with caplog.at_level(logging.WARNING, logger="dimbsvm.store.location"):
            assert s3_call_limits()["read_timeout"] == READ_TIMEOUT
        assert f"{READ_TIMEOUT_VARIABLE}={bad!r} is not a positive number of seconds" in caplog.text
    monkeypatch.delenv(READ_TIMEOUT_VARIABLE)
    assert s3_call_limits() == {"connect_timeout": 5.0, "read_timeout": READ_TIMEOUT,
                                "retries": {"total_max_attempts": 2, "mode": "standard"}}


def test_every_s3_filesystem_gets_the_limits_unless_given_its_own():
    s3fs = pytest.importorskip("s3fs")
    import fsspec.config

    assert fsspec.config.conf["s3"]["config_kwargs"] == s3_call_limits()  # dimbsvm's import set them
    fs = s3fs.S3FileSystem(anon=True, skip_instance_cache=True)
    assert fs.config_kwargs["read_timeout"] == READ_TIMEOUT
    own = s3fs.S3FileSystem(anon=True, skip_instance_cache=True, config_kwargs={"read_timeout": 99})
    assert own.config_kwargs == {"read_timeout": 99}
