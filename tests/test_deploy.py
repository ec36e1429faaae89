"""deploy/: every configuration parses and agrees with the CLI, and the TLS files start a real cluster.

Docker, Kubernetes, SLURM and a running systemd are not available here: their
files are checked for structure and for the commands they run (parsed by
dimbsvm's own argument parser). TLS is checked for real: make-certs.sh makes the
certificates, and a `dask scheduler --protocol tls` and a worker configured only
through a filled-in copy of deploy/tls/dask-tls.yaml accept TLS clients. The
object-storage setting is checked against a real S3 API server (moto): the
README's ingest and the CronJob's script, with only the Secret's variables.
"""

import ast
import configparser
import json
import os
import py_compile
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
YAML_FILES = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
SHELL_SCRIPTS = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".sh", ".sbatch"))
#: Kustomize's own files (kind Kustomization): they name manifests, they are not applied as one.
KUSTOMIZATIONS = sorted((DEPLOY / "kubernetes").rglob("kustomization.yaml"))
EXPECTED_FILES = [
    "README.md",
    "docker/Dockerfile", "docker/compose.yaml",
    "kubernetes/daskcluster.yaml", "kubernetes/retrain-cronjob.yaml", "kubernetes/pvc.yaml",
    "kubernetes/autoscaler.yaml", "kubernetes/kustomization.yaml",
    "kubernetes/object-storage/daskcluster.yaml", "kubernetes/object-storage/retrain-cronjob.yaml",
    "kubernetes/object-storage/autoscaler.yaml", "kubernetes/object-storage/kustomization.yaml",
    "kubernetes/object-storage/registry-pvc.yaml", "kubernetes/object-storage/job-configmap.yaml",
    "kubernetes/object-storage/secret.example.yaml",
    "slurm/start_cluster.py", "slurm/retrain.sbatch",
    "tls/make-certs.sh", "tls/dask-tls.yaml",
    "systemd/dask-scheduler.service", "systemd/dask-worker@.service", "systemd/dimbsvm-retrain.service",
    "systemd/dimbsvm-retrain.timer", "systemd/dimbsvm-schedule.service",
]


def _docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _one(path):
    docs = _docs(path)
    assert len(docs) == 1, f"{path} holds {len(docs)} documents"
    return docs[0]


def _check_dimbsvm_command(argv):
    """The command line parses with dimbsvm's own parser; returns the parsed args."""
    from dimbsvm.cli import _parser
    from dimbsvm.jobs.schedule import parse_cron

    assert Path(argv[0]).name == "dimbsvm", argv
    args = _parser().parse_args(argv[1:])  # SystemExit on an unknown flag or a missing argument
    if getattr(args, "cron", None):
        parse_cron(args.cron)
    job = getattr(args, "job", None)
    if job and not os.path.isabs(job):
        assert (ROOT / job).is_file(), f"{job} is not in the repository (the image's working directory)"
    return args


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env.update(PYTHONPATH=str(ROOT), DASK_LOGGING__DISTRIBUTED="warning", PYTHONWARNINGS="ignore")
    return dict(env, **extra)


def _wait_for(predicate, timeout, what, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for proc in procs:
            assert proc.poll() is None, f"{proc.args[:4]} exited with {proc.returncode} while waiting for {what}"
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def _stop(procs):
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- files and YAML ------------------------------------------------------------

def test_expected_files_exist():
    missing = [f for f in EXPECTED_FILES if not (DEPLOY / f).is_file()]
    assert not missing, missing


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path):
    assert _docs(path), f"{path} is empty"


@pytest.mark.parametrize("path", sorted(set((DEPLOY / "kubernetes").rglob("*.yaml")) - set(KUSTOMIZATIONS)),
                         ids=lambda p: str(p.relative_to(DEPLOY / "kubernetes")))
def test_kubernetes_manifests_are_well_formed(path):
    for doc in _docs(path):
        assert isinstance(doc, dict)
        assert isinstance(doc.get("apiVersion"), str) and doc["apiVersion"], path
        assert isinstance(doc.get("kind"), str) and doc["kind"], path
        assert doc.get("metadata", {}).get("name"), path


def _preloads_worker_memory(argv):
    """The worker command loads dimbsvm's malloc settings into its nanny (dimbsvm.distributed.worker_memory)."""
    argv = list(argv)
    return any(a == "--preload-nanny" and b == "dimbsvm.distributed.worker_memory" for a, b in zip(argv, argv[1:]))


def _pod_containers(pod_spec):
    return {c["name"]: c for c in pod_spec["containers"]}


def test_daskcluster_and_cronjob_agree():
    cluster = _one(DEPLOY / "kubernetes" / "daskcluster.yaml")
    assert (cluster["apiVersion"], cluster["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster")
    name = cluster["metadata"]["name"]
    worker = _pod_containers(cluster["spec"]["worker"]["spec"])["worker"]
    scheduler = _pod_containers(cluster["spec"]["scheduler"]["spec"])["scheduler"]
    assert worker["args"][:2] == ["dask", "worker"] and "--nanny" in worker["args"]
    assert _preloads_worker_memory(worker["args"])
    assert scheduler["args"][:2] == ["dask", "scheduler"]
    # workers from zero: the DaskAutoscaler beside it starts them as the retraining submits its work
    assert cluster["spec"]["worker"]["replicas"] == 0
    autoscaler = _one(DEPLOY / "kubernetes" / "autoscaler.yaml")
    assert (autoscaler["apiVersion"], autoscaler["kind"]) == ("kubernetes.dask.org/v1", "DaskAutoscaler")
    assert autoscaler["spec"]["cluster"] == name and autoscaler["spec"]["minimum"] == 0
    assert autoscaler["spec"]["maximum"] >= 1
    ports = {p["name"]: p["port"] for p in cluster["spec"]["scheduler"]["service"]["ports"]}
    assert ports["tcp-comm"] == 8786
    assert cluster["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == name

    cron = _one(DEPLOY / "kubernetes" / "retrain-cronjob.yaml")
    assert (cron["apiVersion"], cron["kind"]) == ("batch/v1", "CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (retrain,) = pod["containers"]
    argv = [*retrain.get("command", []), *retrain.get("args", [])]
    assert argv[:2] == ["dimbsvm", "retrain"]
    args = _check_dimbsvm_command(argv)
    assert args.scheduler == f"tcp://{name}-scheduler:8786"  # the Service the operator creates
    assert args.scale_from_zero and args.worker_timeout >= 300  # (a worker pod's start: scheduling, image pull)
    assert retrain["image"] == worker["image"] == scheduler["image"]
    mounts = {m["mountPath"]: m["name"] for m in retrain["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    pvcs = {d["metadata"]["name"]: d for d in _docs(DEPLOY / "kubernetes" / "pvc.yaml")}
    assert all(d["kind"] == "PersistentVolumeClaim" for d in pvcs.values())
    registry_claim = volumes[mounts[args.registry]]["persistentVolumeClaim"]["claimName"]
    assert registry_claim in pvcs
    claimed = [v["persistentVolumeClaim"]["claimName"]
               for spec in (pod, cluster["spec"]["worker"]["spec"]) for v in spec.get("volumes", [])
               if "persistentVolumeClaim" in v]
    assert set(claimed) <= set(pvcs), claimed


# -- Kubernetes with object storage (kubernetes/object-storage/) -------------------------------------------------

OBJECT_STORAGE = DEPLOY / "kubernetes" / "object-storage"
#: The placeholder the CronJob writes the night's store URL over, in the job template's data.source.
STORE_PLACEHOLDER = "@DIMBSVM_STORE@"


def _object_storage():
    """The setting's manifests, by kind (one of each), and its CronJob's pod spec and retrain container."""
    docs = {}
    for path in sorted(set(OBJECT_STORAGE.glob("*.yaml")) - set(KUSTOMIZATIONS)):
        for doc in _docs(path):
            assert doc["kind"] not in docs, f"two {doc['kind']} manifests in {OBJECT_STORAGE}"
            docs[doc["kind"]] = doc
    assert set(docs) == {"DaskCluster", "DaskAutoscaler", "CronJob", "PersistentVolumeClaim", "ConfigMap",
                         "Secret"}, set(docs)
    pod = docs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (retrain,) = pod["containers"]
    return docs, pod, retrain


def _secret_refs(container):
    return [ref["secretRef"]["name"] for ref in container.get("envFrom", []) if "secretRef" in ref]


def _botocore_env_names():
    """The environment variables botocore (s3fs's S3 client, through aiobotocore) reads for credentials,
    region and endpoint."""
    import inspect

    pytest.importorskip("botocore", reason="s3fs reads its settings through botocore")
    from botocore import configprovider, credentials

    names = {credentials.EnvProvider.ACCESS_KEY, credentials.EnvProvider.SECRET_KEY, *credentials.EnvProvider.TOKENS}
    session = getattr(configprovider, "BOTOCORE_DEFAUT_SESSION_VARIABLES", None) or \
        configprovider.BOTOCORE_DEFAULT_SESSION_VARIABLES  # (botocore's spelling, and a corrected one)
    names |= {entry[1] for entry in session.values() if isinstance(entry[1], str)}
    if "'AWS_ENDPOINT_URL'" in inspect.getsource(configprovider.ConfiguredEndpointProvider):
        names.add("AWS_ENDPOINT_URL")  # botocore >= 1.31: one endpoint for every service
    return names


def _kubernetes_expand(text, names):
    """``text`` as Kubernetes makes a container's command from it: ``$(NAME)`` of a variable the container
    defines is replaced, ``$$`` becomes ``$``, any other ``$(...)`` is left as written."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2:end]
            out.append(f"<{name}>" if name in names else text[i:end + 1])
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def test_object_storage_manifests():
    docs, pod, retrain = _object_storage()
    cluster, cron, claim, jobs, secret = (docs[k] for k in ("DaskCluster", "CronJob", "PersistentVolumeClaim",
                                                             "ConfigMap", "Secret"))
    name = cluster["metadata"]["name"]
    worker_pod = cluster["spec"]["worker"]["spec"]
    worker = _pod_containers(worker_pod)["worker"]
    scheduler_pod = cluster["spec"]["scheduler"]["spec"]
    scheduler = _pod_containers(scheduler_pod)["scheduler"]

    # the cluster of ../daskcluster.yaml, with no volume and the Secret on the workers only
    shared = _one(DEPLOY / "kubernetes" / "daskcluster.yaml")
    assert cluster["apiVersion"] == shared["apiVersion"] and name == shared["metadata"]["name"]
    assert worker["args"] == _pod_containers(shared["spec"]["worker"]["spec"])["worker"]["args"]
    assert _preloads_worker_memory(worker["args"])
    assert cluster["spec"]["scheduler"] == {**shared["spec"]["scheduler"], "spec": scheduler_pod}
    assert scheduler == {**_pod_containers(shared["spec"]["scheduler"]["spec"])["scheduler"],
                         "image": scheduler["image"]}
    assert "volumes" not in worker_pod and "volumeMounts" not in worker
    assert "volumes" not in scheduler_pod and "envFrom" not in scheduler and "env" not in scheduler
    secret_name = secret["metadata"]["name"]
    assert _secret_refs(worker) == [secret_name] and _secret_refs(retrain) == [secret_name]

    # one image, the s3 variant of the shared setting's
    assert retrain["image"] == worker["image"] == scheduler["image"]
    base = _pod_containers(shared["spec"]["worker"]["spec"])["worker"]["image"]
    assert worker["image"] == f"{base}-s3", (worker["image"], base)
    readme = (DEPLOY / "README.md").read_text()
    tags = re.findall(r"--build-arg DIMBSVM_EXTRAS=s3 -t (\S+)", readme)
    assert tags and {tag.rsplit("/", 1)[-1] for tag in tags} == {worker["image"]}, tags

    # the CronJob: as ../retrain-cronjob.yaml, mounting only the registry (RWO) and the job template
    shared_cron = _one(DEPLOY / "kubernetes" / "retrain-cronjob.yaml")
    assert (cron["apiVersion"], cron["kind"]) == ("batch/v1", "CronJob")
    assert {k: v for k, v in cron["spec"].items() if k != "jobTemplate"} == \
           {k: v for k, v in shared_cron["spec"].items() if k != "jobTemplate"}
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in retrain["volumeMounts"]}
    assert set(mounts) == set(volumes)
    claims = [v["persistentVolumeClaim"]["claimName"] for v in volumes.values() if "persistentVolumeClaim" in v]
    config_maps = [v["configMap"]["name"] for v in volumes.values() if "configMap" in v]
    assert claims == [claim["metadata"]["name"]] and config_maps == [jobs["metadata"]["name"]]
    assert len(volumes) == 2
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    shared_claims = {d["metadata"]["name"]: d for d in _docs(DEPLOY / "kubernetes" / "pvc.yaml")}
    assert claim == shared_claims[claim["metadata"]["name"]]  # the registry claim of ../pvc.yaml
    env = {e["name"]: e["value"] for e in retrain["env"]}
    template = Path(env["DIMBSVM_JOB_TEMPLATE"])
    (jobs_volume,) = (n for n, v in volumes.items() if "configMap" in v)
    assert str(template.parent) == mounts[jobs_volume] and template.name in jobs["data"]
    assert STORE_PLACEHOLDER in jobs["data"][template.name]
    prefix = env["DIMBSVM_STORE_PREFIX"]
    assert prefix.startswith("s3://") and not prefix.endswith("/")

    # the script: Kubernetes' $(NAME) expansion leaves it as written, and it ends in one dimbsvm command
    command = retrain["command"]
    assert command[:2] == ["sh", "-c"] and len(command) == 3 and "args" not in retrain
    assert _kubernetes_expand(command[2], set(env) | set(secret["stringData"])) == command[2]
    lines = command[2].replace("\\\n", " ").splitlines()  # (a line continued by the shell is one command)
    execs = [line.strip() for line in lines if line.strip().startswith("exec ")]
    assert len(execs) == 1 and shlex.split(execs[0])[1:3] == ["dimbsvm", "retrain"]
    args = _check_dimbsvm_command(shlex.split(execs[0].replace('"$job"', "/tmp/retrain.yaml"))[1:])
    assert args.scheduler == f"tcp://{name}-scheduler:8786"
    assert args.scale_from_zero and args.worker_timeout >= 300  # workers from zero, as in ../retrain-cronjob.yaml
    autoscaler = docs["DaskAutoscaler"]
    assert autoscaler == _one(DEPLOY / "kubernetes" / "autoscaler.yaml") and cluster["spec"]["worker"]["replicas"] == 0
    registry_volume = next(n for n, v in volumes.items() if "persistentVolumeClaim" in v)
    assert args.registry == mounts[registry_volume]


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS, ids=lambda p: str(p.parent.relative_to(DEPLOY)))
def test_kustomization_names_the_image_once(kustomization, tmp_path):
    """``kubectl apply -k``: every manifest of the directory but the example Secret, and every container (the
    DaskCluster's scheduler and workers, the CronJob's pod) given the one image the kustomization names."""
    directory = kustomization.parent
    spec = _one(kustomization)
    listed = {directory / name for name in spec["resources"]}
    assert listed == set(directory.glob("*.yaml")) - {kustomization, directory / "secret.example.yaml"}
    [image] = spec["images"]
    manifests = [p.read_text() for p in sorted(listed)]
    assert all(f"image: {image['name']}:{image['newTag']}" in text for text in manifests if "image:" in text)
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (its built-in Kustomize renders the directory) is not installed")
    # rendered by Kustomize itself, with the image moved to a registry as the comment says to
    copy = tmp_path / directory.name
    shutil.copytree(directory, copy)
    moved = dict(spec, images=[dict(image, newName="registry.example/team/dimbsvm", newTag="9.9.9")])
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(moved))
    rendered = subprocess.run([kubectl, "kustomize", str(copy)], capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    assert sorted(d["kind"] for d in docs) == sorted(d["kind"] for p in listed for d in _docs(p))
    images = re.findall(r"^\s*image: (\S+)", rendered.stdout, flags=re.M)
    assert len(images) == sum(text.count("image:") for text in manifests) >= 3
    assert set(images) == {"registry.example/team/dimbsvm:9.9.9"}


def test_object_storage_secret_is_an_example_of_s3fs_settings():
    docs, _, _ = _object_storage()
    secret = docs["Secret"]
    path = OBJECT_STORAGE / "secret.example.yaml"
    text = path.read_text()
    assert "EXAMPLE" in text.splitlines()[0] and "PLACEHOLDER" in text.splitlines()[0]
    data = secret["stringData"]
    assert "data" not in secret  # placeholders in plain text, never base64 that could hide a real key
    assert set(data) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"}
    assert set(data) <= _botocore_env_names(), set(data) - _botocore_env_names()
    assert "REPLACE" in data["AWS_ACCESS_KEY_ID"] and "REPLACE" in data["AWS_SECRET_ACCESS_KEY"]
    assert "REPLACE" in data["AWS_ENDPOINT_URL"] and data["AWS_ENDPOINT_URL"].startswith("https://")
    assert re.fullmatch(r"[a-z]{2}(-[a-z]+)+-[0-9]", data["AWS_DEFAULT_REGION"])  # a region's name, not a secret
    # nothing shaped like an AWS access key id anywhere under deploy/
    for other in sorted(DEPLOY.rglob("*")):
        if other.is_file():
            assert not re.search(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", other.read_text(errors="replace")), other


def _run_cronjob_script(tmp_path, env_extra=None, template=None, date="20260101"):
    """Run the object-storage CronJob's script with stand-ins for `dimbsvm` (records its argv) and `date`
    (a fixed UTC day, and only as `date -u +%Y%m%d`). Returns (completed process, argv or None)."""
    docs, _, retrain = _object_storage()
    for tool in ("sh", "sed", "grep"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    argv_file = tmp_path / "argv.json"
    argv_file.unlink(missing_ok=True)
    (bin_dir / "dimbsvm").write_text(f"#!{sys.executable}\nimport json, sys\n"
                                     f"json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w'))\n")
    (bin_dir / "date").write_text(f'#!/bin/sh\n[ "$*" = "-u +%Y%m%d" ] || {{ echo "date $*" >&2; exit 9; }}\n'
                                  f"echo {date}\n")
    for tool in ("dimbsvm", "date"):
        (bin_dir / tool).chmod(0o755)
    jobs_dir, tmp_dir = tmp_path / "jobs", tmp_path / "tmp"
    jobs_dir.mkdir(exist_ok=True)
    tmp_dir.mkdir(exist_ok=True)
    env = {e["name"]: e["value"] for e in retrain["env"]}
    name = Path(env["DIMBSVM_JOB_TEMPLATE"]).name
    (jobs_dir / name).write_text(docs["ConfigMap"]["data"][name] if template is None else template)
    env = {**os.environ, **env, "DIMBSVM_JOB_TEMPLATE": str(jobs_dir / name), "TMPDIR": str(tmp_dir),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("DIMBSVM_STORE", None)
    env.update(env_extra or {})
    env = {k: v for k, v in env.items() if v is not None}
    ran = subprocess.run(retrain["command"], env=env, capture_output=True, text=True, timeout=60)
    argv = json.loads(argv_file.read_text()) if argv_file.exists() else None
    return ran, argv


def test_object_storage_cronjob_script(tmp_path):
    from dimbsvm.jobs.spec import load_job

    docs, _, retrain = _object_storage()
    prefix = next(e["value"] for e in retrain["env"] if e["name"] == "DIMBSVM_STORE_PREFIX")
    ran, argv = _run_cronjob_script(tmp_path)
    assert ran.returncode == 0, ran.stderr
    url = f"{prefix}-20260101.zarr"
    assert ran.stdout.splitlines() == [f"data.source: {url}"]
    args = _check_dimbsvm_command(["dimbsvm", *argv])
    assert args.verb == "retrain" and Path(args.job).parent == tmp_path / "tmp"
    job = load_job(args.job)  # the schema's checks, without opening the store
    assert job.data.source == url
    # the template is jobs/retrain.yaml but for data.source
    written = yaml.safe_load(Path(args.job).read_text())
    example = yaml.safe_load((ROOT / "jobs" / "retrain.yaml").read_text())
    assert written == {**example, "data": {**example["data"], "source": url}}

    # DIMBSVM_STORE names a given store
    ran, argv = _run_cronjob_script(tmp_path, {"DIMBSVM_STORE": "s3://other-bucket/x.zarr"})
    assert ran.returncode == 0 and load_job(argv[1]).data.source == "s3://other-bucket/x.zarr"
    # a job without the placeholder would train on whatever it names: refused, dimbsvm not run
    ran, argv = _run_cronjob_script(tmp_path, template=(ROOT / "jobs" / "retrain.yaml").read_text())
    assert ran.returncode == 2 and argv is None and STORE_PLACEHOLDER in ran.stderr
    # no prefix and no store: the shell says which variable is missing
    ran, argv = _run_cronjob_script(tmp_path, {"DIMBSVM_STORE_PREFIX": None})
    assert ran.returncode != 0 and argv is None and "DIMBSVM_STORE_PREFIX" in ran.stderr


@pytest.mark.slow
def test_object_storage_ingest_and_cronjob_against_s3(s3_server, tmp_path):
    """The README's ingest and the CronJob's job, on a real S3 API, with only the Secret's variables."""
    import s3fs

    docs, _, retrain = _object_storage()
    secret = docs["Secret"]["stringData"]
    assert set(s3_server) <= set(secret), "the Secret lacks a variable the S3 server needs"
    # the environment of a pod: the Secret's keys with this server's values, no other AWS settings or files
    env = {k: v for k, v in _env().items() if not k.startswith(("AWS_", "BOTO"))}
    env.update({key: s3_server[key] for key in secret}, AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), HOME=str(tmp_path))
    prefix = next(e["value"] for e in retrain["env"] if e["name"] == "DIMBSVM_STORE_PREFIX")
    bucket = prefix[len("s3://"):].split("/", 1)[0]
    fs = s3fs.S3FileSystem(key=s3_server["AWS_ACCESS_KEY_ID"], secret=s3_server["AWS_SECRET_ACCESS_KEY"],
                           endpoint_url=s3_server["AWS_ENDPOINT_URL"], skip_instance_cache=True)
    if not fs.exists(bucket):
        fs.mkdir(bucket)

    # the README's line, as written (its $(date -u +%Y%m%d) through the stand-in date of the CronJob's run)
    readme = (DEPLOY / "README.md").read_text()
    (line,) = [m for m in readme.splitlines() if m.startswith("dimbsvm ingest yeast5 s3://")]
    assert line.startswith(f"dimbsvm ingest yeast5 {prefix}-$(date -u +%Y%m%d).zarr "), line
    ran, argv = _run_cronjob_script(tmp_path)  # the night's job; also puts the stand-in date into bin/
    assert ran.returncode == 0, ran.stderr
    real = tmp_path / "real-bin"
    real.mkdir()
    (real / "dimbsvm").write_text(f"#!{sys.executable}\nimport sys\nfrom dimbsvm.cli import main\nsys.exit(main())\n")
    (real / "dimbsvm").chmod(0o755)
    path = os.pathsep.join([str(real), str(tmp_path / "bin"), os.environ["PATH"]])  # real dimbsvm, stand-in date
    ingest = subprocess.run(["bash", "-c", line], env=dict(env, PATH=path), capture_output=True, text=True,
                            timeout=300)
    url = f"{prefix}-20260101.zarr"
    assert ingest.returncode == 0 and ingest.stdout.startswith(f"{url}: X (1484, 8)"), ingest.stderr
    assert fs.exists(f"{url[len('s3://'):]}/zarr.json")

    # every check of the night's retraining, on the job the CronJob's script wrote, from the pod's environment
    job = argv[1]
    validate = subprocess.run([str(real / "dimbsvm"), "validate", job, "--registry", str(tmp_path / "registry")],
                              env=env, capture_output=True, text=True, timeout=300)
    assert validate.returncode == 0, validate.stderr
    assert "ok, every check before a run passed" in validate.stdout and f"data: {url} (1484 rows" in validate.stdout
    # without the Secret's credentials the store cannot be read: the variables are what reaches it
    no_keys = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    no_keys["AWS_EC2_METADATA_DISABLED"] = "true"  # no instance metadata to wait for either
    refused = subprocess.run([str(real / "dimbsvm"), "validate", job, "--registry", str(tmp_path / "registry")],
                             env=no_keys, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "credentials" in refused.stderr.lower(), refused.stderr


def test_compose_services():
    compose = _one(DEPLOY / "docker" / "compose.yaml")
    services = compose["services"]
    assert {"scheduler", "worker", "retrainer"} <= set(services)
    assert services["scheduler"]["command"][:2] == ["dask", "scheduler"]
    worker = services["worker"]
    assert worker["command"][:2] == ["dask", "worker"] and "--nanny" in worker["command"]
    assert worker["command"][2] == "tcp://scheduler:8786"
    assert _preloads_worker_memory(worker["command"])
    assert worker["deploy"]["replicas"] == 2
    assert worker["deploy"]["resources"]["limits"]["memory"]
    retrainer = services["retrainer"]
    assert retrainer["command"] == ["dimbsvm", "schedule", "jobs/retrain.yaml", "--cron", "0 3 * * *",
                                    "--registry", "/registry", "--scheduler", "tcp://scheduler:8786"]
    _check_dimbsvm_command(retrainer["command"])
    assert "registry:/registry" in retrainer["volumes"]
    assert {"data", "registry"} <= set(compose["volumes"])
    for name, service in services.items():
        build = service.get("build")
        if build:
            context = (DEPLOY / "docker" / build["context"]).resolve()
            assert context == ROOT and (context / build["dockerfile"]).is_file(), name


def _readme_first_command():
    """Line 1 of the README's first code block, found as .ci/run finds line 2."""
    lines, n = [], 0
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            n += 1
            continue
        if n == 1 and line.split():
            lines.append(line)
    if shutil.which("awk") and shutil.which("bash"):
        awk = subprocess.run(["bash", "-c", "awk '/^```/{n++; next} n==1 && NF {print}' README.md | sed -n 1p"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        assert awk == lines[0]
    return lines[0]


def test_dockerfile_installs_like_the_readme():
    install = _readme_first_command().split("&&")[0].strip()
    assert install.startswith("pip install ")
    lines = (DEPLOY / "docker" / "Dockerfile").read_text().splitlines()
    assert lines[[line.startswith("FROM ") for line in lines].index(True)].split()[1] == "python:3.11-slim"
    runs = [line[len("RUN "):].strip() for line in lines if line.startswith("RUN ")]
    assert [r for r in runs if "pip install" in r] == [install, EXTRAS_RUN]  # then the extras, none by default
    assert "COPY --chown=dimbsvm:dimbsvm . ." in lines and "WORKDIR /opt/dimbsvm" in lines


EXTRAS_RUN = 'if [ -n "$DIMBSVM_EXTRAS" ]; then pip install ".[$DIMBSVM_EXTRAS]"; fi'


def _pyproject_extras():
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def test_dockerfile_extras_build_arg(tmp_path):
    """Without --build-arg the extras step runs no pip (the image is as before); with DIMBSVM_EXTRAS=s3, .[s3]."""
    lines = (DEPLOY / "docker" / "Dockerfile").read_text().splitlines()
    assert 'ARG DIMBSVM_EXTRAS=""' in lines
    assert lines.index('ARG DIMBSVM_EXTRAS=""') < lines.index(f"RUN {EXTRAS_RUN}")
    assert lines.index("RUN pip install .") < lines.index(f"RUN {EXTRAS_RUN}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "pip.log"
    (bin_dir / "pip").write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(log))}\n')
    (bin_dir / "pip").chmod(0o755)
    for value, expected in (("", ""), ("s3", "install .[s3]\n"), ("s3,gcs", "install .[s3,gcs]\n")):
        log.write_text("")
        env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", DIMBSVM_EXTRAS=value)
        ran = subprocess.run(["sh", "-c", EXTRAS_RUN], env=env, capture_output=True, text=True)
        assert ran.returncode == 0 and log.read_text() == expected, (value, ran.stderr)
    # the extras the Dockerfile and the README name exist
    assert {"s3", "gcs", "azure"} <= _pyproject_extras()
    text = (DEPLOY / "docker" / "Dockerfile").read_text() + (DEPLOY / "README.md").read_text()
    named = {extra for value in re.findall(r"--build-arg DIMBSVM_EXTRAS=([a-z0-9,]+)", text)
             for extra in value.split(",")}
    assert named and named <= _pyproject_extras(), named


# -- systemd ------------------------------------------------------------------

UNITS = {
    "dask-scheduler.service": ({"Unit", "Service", "Install"}, ["dask", "scheduler"]),
    "dask-worker@.service": ({"Unit", "Service", "Install"}, ["dask", "worker"]),
    "dimbsvm-retrain.service": ({"Unit", "Service"}, ["dimbsvm", "retrain"]),
    "dimbsvm-schedule.service": ({"Unit", "Service", "Install"}, ["dimbsvm", "schedule"]),
    "dimbsvm-retrain.timer": ({"Unit", "Timer", "Install"}, None),
}


def _unit(name):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string((DEPLOY / "systemd" / name).read_text(), source=name)
    return parser


def _exec_start(unit):
    argv = shlex.split(unit["Service"]["ExecStart"].lstrip("-@+!:"))
    # as systemd would: ${VAR} is one word, $VAR splits (here: empty extras)
    env = {"DASK_SCHEDULER_ADDRESS": "tcp://scheduler.example:8786"}
    return [env.get(a[2:-1], a) if a.startswith("${") else a for a in argv if not a.startswith("$") or a.startswith("${")]


@pytest.mark.parametrize("name", sorted(UNITS))
def test_systemd_units(name):
    sections, command = UNITS[name]
    unit = _unit(name)
    assert sections <= set(unit.sections())
    assert unit["Unit"]["Description"]
    if command is None:
        return
    service = unit["Service"]
    argv = _exec_start(unit)
    assert argv[0].startswith("/") and Path(argv[0]).name == command[0] and argv[1] == command[1], argv
    assert service["User"] == "dimbsvm"
    if command[0] == "dask" and command[1] == "worker":
        assert "--nanny" in argv and argv[2] == "tcp://scheduler.example:8786"
        assert _preloads_worker_memory(argv)
    if command[0] == "dimbsvm":
        args = _check_dimbsvm_command(argv)
        assert args.scheduler == "tcp://scheduler.example:8786" and args.registry
    if name == "dimbsvm-retrain.service":
        assert service["Type"] == "oneshot"
    if name == "dimbsvm-schedule.service":
        assert service.get("KillSignal", "SIGTERM") == "SIGTERM" and args.cron == "0 3 * * *"


def test_systemd_timer():
    timer = _unit("dimbsvm-retrain.timer")
    assert timer["Timer"]["OnCalendar"] == "*-*-* 03:00:00"
    assert timer["Timer"]["Persistent"] == "true"
    assert timer["Timer"].get("Unit", "dimbsvm-retrain.service") == "dimbsvm-retrain.service"
    assert timer["Install"]["WantedBy"] == "timers.target"


def test_systemd_analyze_verify(tmp_path):
    """systemd's own checker, with the executables pointed at stand-ins."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for exe in ("dask", "dimbsvm"):
        (bin_dir / exe).write_text("#!/bin/sh\n")
        (bin_dir / exe).chmod(0o755)
    probe = tmp_path / "probe.service"
    probe.write_text(f"[Unit]\nDescription=probe\n[Service]\nExecStart={bin_dir}/dask\n")
    ran = subprocess.run(["systemd-analyze", "verify", "--man=no", str(probe)], capture_output=True, text=True,
                         timeout=30)
    if ran.returncode != 0 or ran.stderr.strip():
        pytest.skip(f"systemd-analyze verify does not work here: {ran.stderr.strip()[:200]}")
    units = tmp_path / "units"
    units.mkdir()
    for name in UNITS:
        text = (DEPLOY / "systemd" / name).read_text().replace("/opt/dimbsvm/venv/bin/", f"{bin_dir}/")
        (units / name.replace("@.", "@1.")).write_text(text)
    for path in sorted(units.iterdir()):
        ran = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True,
                             timeout=30)
        complaints = [line for line in (ran.stdout + ran.stderr).splitlines() if str(units) in line]
        assert ran.returncode == 0 and not complaints, (path.name, ran.stdout, ran.stderr)
    ran = subprocess.run(["systemd-analyze", "calendar", "*-*-* 03:00:00"], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


# -- scripts ------------------------------------------------------------------

@pytest.mark.parametrize("path", SHELL_SCRIPTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_shell_syntax(path):
    ran = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert path.read_text().startswith("#!")


def test_sbatch_runs_dimbsvm_retrain():
    text = (DEPLOY / "slurm" / "retrain.sbatch").read_text()
    assert "#SBATCH --time=" in text
    command = [line for line in text.splitlines() if line.startswith("exec dimbsvm ")]
    assert len(command) == 1 and shlex.split(command[0])[1:3] == ["dimbsvm", "retrain"]


def test_start_cluster_compiles(tmp_path):
    py_compile.compile(str(DEPLOY / "slurm" / "start_cluster.py"), cfile=str(tmp_path / "sc.pyc"), doraise=True)


# Keywords dask-jobqueue's SLURMCluster accepts (JobQueueCluster, Job and SLURMJob).
JOBQUEUE_KEYWORDS = {
    "n_workers", "loop", "security", "shared_temp_directory", "silence_logs", "name", "asynchronous",
    "scheduler_options", "scheduler_cls", "interface", "protocol", "config_name", "cores", "memory", "processes",
    "nanny", "death_timeout", "local_directory", "worker_extra_args", "job_extra_directives", "job_script_prologue",
    "job_directives_skip", "log_directory", "shebang", "python", "job_name", "queue", "account", "walltime",
    "job_cpu", "job_mem",
}

FAKE_JOBQUEUE = '''
"""A stand-in for dask_jobqueue: an in-process LocalCluster that records its arguments."""
import json, os
from distributed import LocalCluster

KNOWN = set(json.loads(os.environ["FAKE_JOBQUEUE_KNOWN"]))


class SLURMCluster(LocalCluster):
    def __init__(self, **kwargs):
        unknown = set(kwargs) - KNOWN
        if unknown:
            raise TypeError(f"SLURMCluster got unexpected keyword arguments {sorted(unknown)}")
        with open(os.environ["FAKE_JOBQUEUE_LOG"], "w") as f:
            json.dump({k: repr(v) for k, v in kwargs.items()}, f)
        super().__init__(n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1",
                         dashboard_address=None)

    def adapt(self, minimum_jobs=None, maximum_jobs=None):
        # one worker stands for one job here (dask-jobqueue adapts jobs as LocalCluster adapts workers)
        with open(os.environ["FAKE_JOBQUEUE_LOG"] + ".adapt", "w") as f:
            json.dump({"minimum_jobs": minimum_jobs, "maximum_jobs": maximum_jobs}, f)
        return super().adapt(minimum=minimum_jobs, maximum=maximum_jobs, interval="200ms", wait_count=5)

    def job_script(self):
        return "#!/usr/bin/env bash\\n#SBATCH -J dimbsvm-worker\\n"
'''


def test_start_cluster_lifecycle_with_a_stand_in_for_dask_jobqueue(tmp_path):
    from distributed import Client

    script = DEPLOY / "slurm" / "start_cluster.py"
    fake = tmp_path / "fake"
    (fake / "dask_jobqueue").mkdir(parents=True)
    (fake / "dask_jobqueue" / "__init__.py").write_text(FAKE_JOBQUEUE)
    log = tmp_path / "kwargs.json"
    env = _env(PYTHONPATH=os.pathsep.join([str(fake), str(ROOT)]), FAKE_JOBQUEUE_LOG=str(log),
               FAKE_JOBQUEUE_KNOWN=json.dumps(sorted(JOBQUEUE_KEYWORDS)))

    real = subprocess.run([sys.executable, str(script), "--dry-run", "--port", "0"], capture_output=True, text=True,
                          env=_env(), timeout=60)
    if real.returncode == 2:  # dask-jobqueue is not installed: a clear message, not a traceback
        assert "pip install dask-jobqueue" in real.stderr and "Traceback" not in real.stderr
    else:
        assert real.returncode == 0 and "#SBATCH" in real.stdout, real.stderr

    bad = subprocess.run([sys.executable, str(script), "--dry-run", "--jobs", "2", "--min-jobs", "3"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == ("start_cluster.py: --min-jobs must be between 0 and "
                                                          "--jobs (2), got 3")
    dry = subprocess.run([sys.executable, str(script), "--dry-run"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert dry.returncode == 0 and "#SBATCH" in dry.stdout, dry.stderr

    scheduler_file = tmp_path / "run" / "scheduler.json"
    proc = subprocess.Popen([sys.executable, str(script), "--scheduler-file", str(scheduler_file), "--jobs", "2",
                             "--walltime", "01:00:00", "--log-directory", str(tmp_path / "logs")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(scheduler_file.exists, 60, "the scheduler file", procs=[proc])
        kwargs = json.loads(log.read_text())
        assert kwargs["cores"] == kwargs["processes"]  # single-threaded workers
        assert "--lifetime" in kwargs["worker_extra_args"]
        assert _preloads_worker_memory(ast.literal_eval(kwargs["worker_extra_args"]))  # (logged as repr)
        # adaptive from zero jobs to --jobs: no worker until work waits, then the work brings one
        assert json.loads(Path(f"{log}.adapt").read_text()) == {"minimum_jobs": 0, "maximum_jobs": 2}
        with Client(scheduler_file=str(scheduler_file), timeout=30) as client:
            assert not client.scheduler_info()["workers"]
            assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert not scheduler_file.exists()
        assert "wrote" in out
    finally:
        _stop([proc])


# -- TLS ----------------------------------------------------------------------

CERT_FILES = ["ca.pem", "ca.key", "scheduler.pem", "scheduler.key", "worker.pem", "worker.key", "client.pem",
              "client.key"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    out = tmp_path_factory.mktemp("certs") / "tls"
    ran = subprocess.run(["bash", str(DEPLOY / "tls" / "make-certs.sh"), "-o", str(out), "-d", "2"],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return out


def _openssl(*args):
    return subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, check=True).stdout


def test_make_certs(certs, tmp_path):
    assert sorted(p.name for p in certs.iterdir()) == sorted(CERT_FILES)
    for name in CERT_FILES:
        mode = stat.S_IMODE((certs / name).stat().st_mode)
        if name.endswith(".key"):
            assert mode == 0o600, (name, oct(mode))
    for role in ("scheduler", "worker", "client"):
        assert ": OK" in _openssl("verify", "-CAfile", certs / "ca.pem", certs / f"{role}.pem")
        san = _openssl("x509", "-in", certs / f"{role}.pem", "-noout", "-ext", "subjectAltName")
        assert "IP Address:127.0.0.1" in san and "DNS:localhost" in san

    # again with other hosts: the CA is kept, the certificates carry the new names
    again = tmp_path / "tls"
    shutil.copytree(certs, again)
    ran = subprocess.run(["bash", str(DEPLOY / "tls" / "make-certs.sh"), "-o", str(again), "sched.example.org",
                          "10.1.2.3"], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert (again / "ca.pem").read_bytes() == (certs / "ca.pem").read_bytes()
    san = _openssl("x509", "-in", again / "worker.pem", "-noout", "-ext", "subjectAltName")
    assert "DNS:sched.example.org" in san and "IP Address:10.1.2.3" in san
    assert ": OK" in _openssl("verify", "-CAfile", again / "ca.pem", again / "worker.pem")


def _leaves(tree, prefix=()):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def test_dask_tls_yaml_keys_are_distributed_config_keys():
    import distributed

    defaults = yaml.safe_load((Path(distributed.__file__).parent / "distributed.yaml").read_text())
    config = _one(DEPLOY / "tls" / "dask-tls.yaml")
    leaves = dict(_leaves(config))
    for path in leaves:
        node = defaults
        for key in path:
            assert isinstance(node, dict) and key in node, f"{'.'.join(path)} is not a distributed config key"
            node = node[key]
    assert leaves[("distributed", "comm", "require-encryption")] is True
    tls = ("distributed", "comm", "tls")
    assert {path[3:] for path in leaves if path[:3] == tls} == {
        ("ca-file",), *((role, part) for role in ("scheduler", "worker", "client") for part in ("cert", "key"))}


def test_tls_scheduler_and_worker_from_dask_tls_yaml(certs, tmp_path):
    from distributed import Client
    from distributed.security import Security

    config = _one(DEPLOY / "tls" / "dask-tls.yaml")

    def fill(node):
        for key, value in node.items():
            if isinstance(value, dict):
                fill(value)
            elif isinstance(value, str):
                assert Path(value).name in CERT_FILES, value
                node[key] = str(certs / Path(value).name)

    fill(config["distributed"]["comm"]["tls"])
    config_file = tmp_path / "dask-tls.yaml"
    config_file.write_text(yaml.safe_dump(config))
    env = _env(DASK_CONFIG=str(config_file))
    scheduler_file = tmp_path / "scheduler.json"
    procs = []

    def start(args, name):
        log = open(tmp_path / f"{name}.log", "w")
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=tmp_path, env=env, stdout=log,
                                      stderr=subprocess.STDOUT))
        log.close()

    try:
        start(["scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
               "--scheduler-file", str(scheduler_file)], "scheduler")
        _wait_for(scheduler_file.exists, 60, "the scheduler file", procs=procs)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        start(["worker", "--scheduler-file", str(scheduler_file), "--nanny", "--nthreads", "1", "--host",
               "127.0.0.1", "--no-dashboard", "--name", "w0"], "worker")

        security = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "client.pem"),
                            tls_client_key=str(certs / "client.key"), require_encryption=True)
        with Client(address, security=security, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
            assert client.submit(sum, [1, 2, 3]).result() == 6
            workers = client.scheduler_info()["workers"]
            assert workers and all(addr.startswith("tls://") for addr in workers)

        # a client configured by the same file alone (as dimbsvm is when given no --tls-* flags)
        ran = subprocess.run([sys.executable, "-c", "import sys; from distributed import Client; "
                              "c = Client(sys.argv[1], timeout=30); print(c.submit(pow, 2, 10).result()); c.close()",
                              address], capture_output=True, text=True, env=env, timeout=90)
        assert ran.returncode == 0 and ran.stdout.strip() == "1024", ran.stderr[-2000:]

        # a client whose certificate another CA signed is refused
        ran = subprocess.run(["bash", str(DEPLOY / "tls" / "make-certs.sh"), "-o", str(tmp_path / "other")],
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        intruder = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(tmp_path / "other" / "client.pem"),
                            tls_client_key=str(tmp_path / "other" / "client.key"), require_encryption=True)
        with pytest.raises((OSError, TimeoutError)):
            Client(address, security=intruder, timeout=3)
    finally:
        _stop(procs)
    assert all(proc.returncode is not None for proc in procs)
