"""Release metadata: the built wheel's license and version, CITATION.cff and CHANGELOG.md, one version source."""

import email.parser
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

import dimbsvm
from dimbsvm._version import __version__

ROOT = Path(__file__).resolve().parents[1]
#: PEP 639 metadata (``license`` as an SPDX expression, ``license-files``) needs this setuptools.
SETUPTOOLS_PEP639 = 77


def _setuptools_major():
    try:
        return int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_has_one_source():
    project = _pyproject()["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dimbsvm._version.__version__"}
    assert dimbsvm.__version__ == __version__
    # the version is written in exactly one module of the package
    written = [path.relative_to(ROOT).as_posix() for path in (ROOT / "dimbsvm").rglob("*.py")
               if re.search(r"^__version__\s*=", path.read_text(), flags=re.MULTILINE)]
    assert written == ["dimbsvm/_version.py"]


def test_license_metadata_is_pep_639():
    project = _pyproject()["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639 forbids both
    requires = _pyproject()["build-system"]["requires"]
    assert f"setuptools>={SETUPTOOLS_PEP639}" in requires
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n")
    assert "Copyright (c) 2026, the dimbsvm developers" in text


def test_citation_cff():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert {"cff-version", "message", "title", "authors", "version"} <= set(citation)
    assert citation["cff-version"] == "1.2.0"
    assert citation["version"] == dimbsvm.__version__
    assert citation["license"] == "BSD-3-Clause"
    assert citation["authors"] == [{"name": "The dimbsvm developers"}]
    assert citation["repository-code"] == "https://github.com/dimbsvm/dimbsvm"
    references = citation["references"]
    # what the Citation File Format's schema requires of every reference
    assert all(ref.get("type") and ref.get("title") and ref.get("authors") for ref in references)
    by_title = {ref["title"].strip(): ref for ref in references}
    act = by_title["Adaptive Feature-Space Conformal Transformation for Imbalanced-Data Learning"]
    assert [a["family-names"] for a in act["authors"]] == ["Wu", "Chang"]
    fisher = by_title["Similarity Kernel Learning"]
    assert [a["family-names"] for a in fisher["authors"]] == ["Daróczy", "Buza", "Benczúr"]
    # the five papers dimbsvm implements, each with the DOI the publisher's record gives where a text states none
    assert len(references) == 5
    assert {str(ref.get("doi")) for ref in references} >= {
        "10.1016/j.knosys.2014.12.007", "10.1186/s40064-016-3315-x", "10.1007/978-3-642-20841-6_10"}
    # the release date is the changelog's
    assert f"## [{citation['version']}] - {citation['date-released']}" in (ROOT / "CHANGELOG.md").read_text()


def test_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, flags=re.MULTILINE)
    assert text.index("## [Unreleased]") < text.index(f"## [{__version__}]")
    assert releases[0][0] == __version__  # the newest release is this version
    # the names the compatibility paragraph quotes exist
    from dimbsvm.store.layout import STORE_FORMAT

    assert f"`dimbsvm.store.layout.STORE_FORMAT` (now {STORE_FORMAT})" in text
    from dimbsvm.artifacts import MODEL_FORMAT, READABLE_MODEL_FORMATS

    assert f"(`dimbsvm.artifacts.MODEL_FORMAT`, today `{MODEL_FORMAT}`)" in text
    assert "`dimbsvm.artifacts.READABLE_MODEL_FORMATS`: today\n  `dimbsvm-model-1`" in text
    assert READABLE_MODEL_FORMATS == {"dimbsvm-model-1"}


def _build_wheel(tmp_path):
    if (major := _setuptools_major()) is None or major < SETUPTOOLS_PEP639:
        pytest.skip(f"building the wheel needs setuptools>={SETUPTOOLS_PEP639} installed (PEP 639 metadata; "
                    f"found {importlib.metadata.version('setuptools') if major else 'none'}); "
                    "nothing is downloaded at test time")
    # a copy of what the wheel is built from: the build writes build/ and *.egg-info beside pyproject.toml
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "dimbsvm", src / "dimbsvm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path / "wheel"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = list(out.glob("dimbsvm-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_carries_license_and_version(tmp_path):
    wheel = _build_wheel(tmp_path)
    assert wheel.name.startswith(f"dimbsvm-{dimbsvm.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licenses = [n for n in names if re.fullmatch(r"dimbsvm-[^/]+\.dist-info/licenses/LICENSE", n)]
        assert len(licenses) == 1, names
        assert archive.read(licenses[0]).decode() == (ROOT / "LICENSE").read_text()
        metadata_name = next(n for n in names if re.fullmatch(r"dimbsvm-[^/]+\.dist-info/METADATA", n))
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode())
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata["Version"] == dimbsvm.__version__
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["License"] is None  # the expression replaces the free-text field
    classifiers = metadata.get_all("Classifier")
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert metadata["Author"] == "The dimbsvm developers"
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL"))
    assert urls["Source"] == "https://github.com/dimbsvm/dimbsvm"
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["version"] == metadata["Version"]
