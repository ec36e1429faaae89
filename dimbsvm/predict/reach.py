"""Before any row is scored on a cluster: every worker can reach where the prediction's parts are written.

The workers write the parts of a prediction output themselves. A worker on
another machine that does not share the output's directory, or that lacks
the object store's credentials (workers read them from their own
environment), found that out only after every partition was scored, and
left its parts behind on its own disk. So the workers are asked first:
each must see a file this process writes beside a local output, or reach
the bucket of a URL output with its own credentials.
"""

from __future__ import annotations

import os
import secrets

from ..exceptions import DimbsvmError, one_line
from ..store.location import filesystem, is_url

__all__ = ["check_workers_reach"]


def check_workers_reach(out: str, storage_options=None) -> None:
    """Refuse, in one line, an output some worker of the active Dask client cannot write.

    Parameters
    ----------
    out : str
        The output: an absolute local path, or a URL.
    storage_options : dict, default=None
        For a URL's filesystem.

    Raises
    ------
    DimbsvmError
        Naming the output, a worker that cannot reach it (and how many
        cannot), and why.
    """
    from ..parallel import current_client

    client = current_client()
    if client is None:  # Dask's threads in this process: it reaches what it plans
        return
    if is_url(out):
        answers = client.run(_reaches_bucket, out, storage_options)
        fix = ("each worker reads the object store's credentials and endpoint from its own environment "
               "(AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, ...)")
    else:
        directory = os.path.dirname(out)
        while not os.path.isdir(directory):  # the writers make the directories missing: their parent is probed
            directory = os.path.dirname(directory)
        probe = os.path.join(directory, f".{os.path.basename(out)}.probe-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            with open(probe, "x"):
                pass
        except OSError as exc:
            raise DimbsvmError(f"prediction output {out}: cannot write in {directory}: {exc.strerror}") from None
        try:
            answers = client.run(_sees_beside, probe)
        finally:
            os.unlink(probe)
        fix = ("the workers write the parts themselves, so the output must be on a filesystem they share with "
               "this machine at the same path (or at a URL)")
    failed = {worker: answer for worker, answer in sorted(answers.items()) if answer is not None}
    if failed:
        worker, why = next(iter(failed.items()))
        others = f" (and {len(failed) - 1} more of {len(answers)} workers)" if len(failed) > 1 else ""
        raise DimbsvmError(f"prediction output {out}: worker {worker}{others} cannot write there: {why}; {fix}")


def _sees_beside(probe: str) -> str | None:
    """On a worker: None if it sees ``probe`` and may write in its directory, else why not."""
    directory = os.path.dirname(probe)
    if not os.path.exists(probe):
        return f"it does not see {directory} as this machine does"
    if not os.access(directory, os.W_OK):
        return f"{directory} is not writable for it"
    return None


def _reaches_bucket(out: str, storage_options) -> str | None:
    """On a worker: None if its credentials reach the bucket of ``out``, else the error."""
    try:
        fs, path = filesystem(out, storage_options)
        fs.info(path.split("/", 1)[0])
    except Exception as exc:  # noqa: BLE001 - any failure is the answer, said in the client's one line
        return f"{type(exc).__name__}: {one_line(exc)}"
    return None
