"""Object storage's refusals are one line naming the URL, the endpoint and what to check (issue 50, poor messages).

Against real S3 API servers (moto's server mode): the session's, and one of
this module's that checks credentials (every request after the first needs
a known access key).
"""

from __future__ import annotations

import pytest

from dimbsvm.cli import main
from s3_server import moto_s3_server

CSV = "a,b,class\n" + "".join(f"{i % 7 * 0.5},{i % 3},{'pos' if i % 5 == 0 else 'neg'}\n" for i in range(60))


def _one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    return err.strip()


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(CSV)
    return path


def test_a_store_in_a_missing_bucket_names_the_url_the_bucket_and_the_endpoint(s3_bucket, s3_server, data, capsys):
    import s3fs

    assert main(["ingest", str(data), "s3://no-such-bucket-x/s.zarr"]) == 2
    line = _one_line(capsys.readouterr().err)
    endpoint = s3_server["AWS_ENDPOINT_URL"]
    assert line == (f"dimbsvm: error: s3://no-such-bucket-x/s.zarr: bucket no-such-bucket-x does not exist at "
                    f"{endpoint} (AWS_ENDPOINT_URL); create it first (dimbsvm never creates a bucket), or check the "
                    "URL and the endpoint")  # it was "The specified bucket does not exist"
    assert not s3fs.S3FileSystem().exists("no-such-bucket-x")


def test_a_run_whose_out_is_in_a_missing_bucket_names_that_url(s3_bucket, s3_server, data, tmp_path, capsys,
                                                               monkeypatch):
    monkeypatch.setenv("DIMBSVM_STAGING_DIR", str(tmp_path / "staging"))
    job = tmp_path / "job.yaml"
    job.write_text(f"name: t\ndata: {{source: {data}}}\nestimator: {{name: linear_svc}}\ncv: {{n_splits: 2}}\n")
    assert main(["run", str(job), "--out", "s3://no-such-bucket-y/run", "--no-progress", "--workers", "1"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("dimbsvm: error: s3://no-such-bucket-y/run: bucket no-such-bucket-y does not exist at "
                           f"{s3_server['AWS_ENDPOINT_URL']} (AWS_ENDPOINT_URL)")


def test_the_url_in_the_bucket_the_error_names_is_the_one_said():
    """Of a command's URLs, the line names the one in the bucket botocore's error names (s3fs' own translation)."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    from dimbsvm.store.remote_errors import describe_remote_error

    cause = ClientError({"Error": {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist",
                                   "BucketName": "second"}}, "ListObjectsV2")
    try:
        raise translate_boto_error(cause)
    except FileNotFoundError as exc:
        line = describe_remote_error(exc, ["s3://first/a.csv", "s3://second/b.zarr", "local.csv"])
    assert line.startswith("s3://second/b.zarr: bucket second does not exist at ")
    assert describe_remote_error(ValueError("not object storage"), ["s3://first/a.csv"]) is None


@pytest.fixture(scope="module")
def checking_server():
    """A moto S3 server that lets one request through unsigned (making the bucket), then wants known keys."""
    with moto_s3_server({"INITIAL_NO_AUTH_ACTION_COUNT": "1"}) as endpoint:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x",
                     region_name="us-east-1").create_bucket(Bucket="guarded")  # the one request let through
        yield {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "unknown-key",
               "AWS_SECRET_ACCESS_KEY": "unknown-secret", "AWS_DEFAULT_REGION": "us-east-1"}


def test_unknown_credentials_and_a_refused_read_name_the_url_and_the_endpoint(checking_server, data, monkeypatch,
                                                                              capsys):
    import s3fs

    for key, value in checking_server.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    endpoint = checking_server["AWS_ENDPOINT_URL"]
    assert main(["ingest", str(data), "s3://guarded/s.zarr"]) == 2
    line = _one_line(capsys.readouterr().err)  # it was "The AWS Access Key Id you provided does not exist ..."
    assert line.startswith(f"dimbsvm: error: s3://guarded/s.zarr: {endpoint} (AWS_ENDPOINT_URL) refused this "
                           "client's credentials: The AWS Access Key Id you provided does not exist")
    assert "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY" in line
    assert main(["predict", "s3://guarded/model", str(data), "--out", str(data.parent / "p.csv")]) == 2
    line = _one_line(capsys.readouterr().err)  # a HEAD request: 403 without a body, which s3fs says as "Forbidden"
    assert line.startswith(f"dimbsvm: error: s3://guarded/model: {endpoint} (AWS_ENDPOINT_URL) refused access: "
                           "Forbidden (403 on HeadObject)"), line
    assert not (data.parent / "p.csv").exists()


def test_a_full_staging_disk_names_the_staging_directory_and_how_to_move_it(s3_bucket, small_tmpfs, data, tmp_path,
                                                                            capsys, monkeypatch):
    """A run to a URL is written in a local staging directory first: a full disk there says so (it said only
    "No space left on device"), and no run is published."""
    import s3fs

    from dimbsvm.jobs.remote_run_dir import staging_dir

    monkeypatch.setenv("DIMBSVM_STAGING_DIR", str(small_tmpfs("256k") / "staging"))
    job = tmp_path / "job.yaml"
    job.write_text(f"name: t\ndata: {{source: {data}}}\nestimator: {{name: linear_svc}}\ncv: {{n_splits: 2}}\n")
    url = f"s3://{s3_bucket}/runs/full"
    assert main(["run", str(job), "--out", url, "--no-progress", "--workers", "1"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line == (f"dimbsvm: error: no space left on device while writing {staging_dir(url)}, the local staging "
                    f"directory of {url}; free space there, or set DIMBSVM_STAGING_DIR to stage runs elsewhere, and "
                    "run again (it resumes)")
    from dimbsvm.jobs.remote_run_dir import COMPLETE_MARKER

    assert not s3fs.S3FileSystem().exists(f"{s3_bucket}/runs/full/{COMPLETE_MARKER}")  # claimed, never published


def test_an_endpoint_that_does_not_answer_is_said_with_the_wait_and_its_setting(monkeypatch):
    from botocore.exceptions import ReadTimeoutError

    from dimbsvm.store.remote_errors import describe_remote_error

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("DIMBSVM_S3_READ_TIMEOUT", "3")
    try:
        try:
            raise ReadTimeoutError(endpoint_url="http://127.0.0.1:9/b/k.csv")
        except ReadTimeoutError as cause:
            raise OSError("Read timeout on endpoint URL") from cause  # as s3fs hands it on
    except OSError as exc:
        line = describe_remote_error(exc, ["s3://b/k.csv"])
    assert line == ("s3://b/k.csv: object storage at http://127.0.0.1:9 (AWS_ENDPOINT_URL) did not answer: Read "
                    "timeout on endpoint URL (each call waits 3 s, set by DIMBSVM_S3_READ_TIMEOUT; check the "
                    "endpoint and the network)")
