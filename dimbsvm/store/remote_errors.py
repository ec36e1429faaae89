"""Object storage's refusals said with the URL and the endpoint they concern.

s3fs turns botocore's errors into Python's (``PermissionError("Forbidden")``,
``FileNotFoundError("The specified bucket does not exist")``) and keeps the
request's details only in ``__cause__``; neither names the object or the
server. :func:`describe_remote_error` finds such an error (raised here or in
a worker: tracebacks come back through Dask) and writes one line naming the
URL the command gave, the endpoint the filesystem package was configured
with, what was refused, and what to check.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from ..exceptions import one_line

__all__ = ["describe_remote_error", "endpoint_of", "from_storage_client", "raised_by_object_storage"]

#: Packages whose errors (or frames in an error's traceback) mean object storage refused or failed a call.
_PACKAGES = ("botocore", "aiobotocore", "s3fs", "gcsfs", "adlfs", "google.auth", "google.api_core", "azure.core")

#: Codes that mean the credentials, not the object, are wrong.
_CREDENTIAL_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
                     "AuthorizationHeaderMalformed", "InvalidClientTokenId")


def from_storage_client(exc: BaseException) -> bool:
    """Whether ``exc``'s class is an object-storage client's (botocore, s3fs, gcsfs, Google's and Azure's clients)."""
    return any(cls.__module__.startswith(_PACKAGES) for cls in type(exc).__mro__)


def raised_by_object_storage(exc: BaseException) -> bool:
    """Whether ``exc`` (or its explicit cause) comes from an object-storage client: its class, or its traceback's
    frames."""
    for error in _causes(exc):
        if from_storage_client(error):
            return True
        tb = error.__traceback__
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename.replace("\\", "/")
            if any(f"/{package.replace('.', '/')}/" in filename for package in _PACKAGES):
                return True
            tb = tb.tb_next
    return False


def _causes(exc):
    """``exc`` and its explicit causes (``raise ... from``), innermost last; not ``__context__``: an error
    raised while handling another is its own."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__


def endpoint_of(url: str) -> str:
    """The server a URL's filesystem package talks to, and where that was set.

    Examples
    --------
    >>> endpoint_of("gs://bucket/x")
    "Google Cloud Storage's endpoint"
    """
    scheme = urlsplit(url).scheme
    if scheme in ("s3", "s3a"):
        import fsspec.config

        configured = fsspec.config.conf.get("s3", {})
        given = configured.get("endpoint_url") or configured.get("client_kwargs", {}).get("endpoint_url")
        if given:
            return f"{given} (fsspec's s3 configuration)"
        for variable in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
            if os.environ.get(variable):
                return f"{os.environ[variable]} ({variable})"
        return "AWS S3 (no AWS_ENDPOINT_URL is set)"
    if scheme in ("gs", "gcs"):
        return "Google Cloud Storage's endpoint"
    if scheme in ("az", "abfs", "abfss"):
        return "Azure Blob Storage's endpoint"
    return f"the {scheme}:// endpoint"


def _unanswered(exc) -> bool:
    """Whether the endpoint did not answer (timeouts, connections lost), anywhere in ``exc``'s causes."""
    names = {"ConnectTimeoutError", "ReadTimeoutError", "EndpointConnectionError", "ConnectionClosedError"}
    return any(any(cls.__name__ in names for cls in type(error).__mro__) or "Read timeout on endpoint" in str(error)
               for error in _causes(exc))


def _client_error(exc):
    """The botocore ``ClientError`` behind ``exc`` (itself or a cause), or None."""
    return next((error for error in _causes(exc) if hasattr(error, "response") and hasattr(error, "operation_name")),
                None)


def describe_remote_error(exc: BaseException, urls) -> str | None:
    """One line for an object-storage error, or None for any other error.

    Parameters
    ----------
    exc : BaseException
    urls : iterable of str
        The URLs the command named (its sources, stores and outputs); the
        line names the ones in the bucket the error names, else all of them.
    """
    if not raised_by_object_storage(exc):
        return None
    urls = [url for url in dict.fromkeys(urls) if "://" in str(url)]
    client_error = _client_error(exc)
    details = client_error.response.get("Error", {}) if client_error is not None else {}
    code, bucket = str(details.get("Code", "")), details.get("BucketName")
    if bucket:
        urls = [url for url in urls if urlsplit(url).netloc == bucket] or urls
    where = urls[0] if len(urls) == 1 else ("one of " + ", ".join(urls) if urls else "object storage")
    endpoint = endpoint_of(urls[0]) if urls else "the configured endpoint"
    refused = one_line(exc)
    if _unanswered(exc):
        from .location import READ_TIMEOUT_VARIABLE, s3_call_limits

        return (f"{where}: object storage at {endpoint} did not answer: {refused} (each call waits "
                f"{s3_call_limits()['read_timeout']:g} s, set by {READ_TIMEOUT_VARIABLE}; check the endpoint and the "
                "network)")
    if client_error is not None and client_error.operation_name:
        refused += f" ({code or 'error'} on {client_error.operation_name})"
    if code == "NoSuchBucket":
        name = f"bucket {bucket}" if bucket else "the bucket"
        return (f"{where}: {name} does not exist at {endpoint}; create it first (dimbsvm never creates a bucket), "
                "or check the URL and the endpoint")
    if code in _CREDENTIAL_CODES:
        return (f"{where}: {endpoint} refused this client's credentials: {refused}; check AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and that they belong to this endpoint")
    if isinstance(exc, PermissionError) or code in ("403", "AccessDenied", "Forbidden"):
        return (f"{where}: {endpoint} refused access: {refused}; check that the credentials (AWS_ACCESS_KEY_ID, "
                "AWS_PROFILE, ...) may read and write this bucket")
    return f"{where}: object storage at {endpoint} failed: {refused}"
