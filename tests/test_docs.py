"""The documentation site (issue 54, item 6): built by Sphinx with warnings as errors, a page for every
public name, and the estimators' HTML display linking to theirs.

The truth for "every public name" is each public package's ``__all__``
(``dimbsvm._doc_links.PUBLIC_PACKAGES``), read here independently of the
page the build generated from it.
"""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator

from dimbsvm._doc_links import DOCS_URL, PUBLIC_PACKAGES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("sphinx", reason="the docs extra: pip install 'dimbsvm[docs]' (in dev)")
    pytest.importorskip("numpydoc", reason="the docs extra: pip install 'dimbsvm[docs]' (in dev)")
    pytest.importorskip("myst_parser", reason="the docs extra: pip install 'dimbsvm[docs]' (in dev)")
    out = tmp_path_factory.mktemp("docs") / "html"
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q",
                            str(ROOT / "docs"), str(out)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-5000:]
    return out


def _public():
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            if name != "__version__":
                yield package, name, getattr(module, name)


def test_every_public_name_has_a_page(site):
    pages = {path.name for path in (site / "generated").glob("*.html")}
    missing = []
    seen = {}
    for package, name, thing in _public():
        seen.setdefault(id(thing), f"{package}.{name}.html")  # re-exports: the first package's page
        if seen[id(thing)] not in pages:
            missing.append(f"{package}.{name}")
    assert not missing, missing
    assert len(pages) == len(seen) >= 150


def test_the_guides_are_pages(site):
    for page, heading in (("guide.html", "dimbsvm"), ("deploy.html", "Kubernetes"),
                          ("results.html", "KEEL"), ("ARCHITECTURE.html", "Architecture"),
                          ("changelog.html", "Unreleased")):
        assert heading in (site / page).read_text(), page


def test_every_public_estimator_displays_a_link_to_its_page(site):
    estimators = [(f"{package}.{name}", thing) for package, name, thing in _public()
                  if isinstance(thing, type) and issubclass(thing, BaseEstimator)]
    assert len(estimators) >= 9
    for label, cls in estimators:
        link = cls()._get_doc_link()
        assert link.startswith(DOCS_URL), (label, link)
        assert (site / link.removeprefix(DOCS_URL)).is_file(), (label, link)
        assert link in cls()._repr_html_(), label
