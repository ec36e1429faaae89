"""Sphinx configuration of dimbsvm's documentation: the guides (the README, the deploy guide, the
benchmark results) and an API reference page for every public name.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (``pip install "dimbsvm[docs]"``);
``tests/test_docs.py`` builds it with warnings as errors. The reference is generated from each
public package's ``__all__`` (``dimbsvm._doc_links.PUBLIC_PACKAGES``, which also gives the
estimators' HTML display its links) when the build starts, so a new public name gets its page
without editing anything here.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dimbsvm  # noqa: E402  (after the path: the checkout's, not an installed copy)
from dimbsvm._doc_links import PUBLIC_PACKAGES  # noqa: E402  (the packages of the reference, in order)

project = "dimbsvm"
author = "The dimbsvm developers"
copyright = "2025-2026, The dimbsvm developers"
release = version = dimbsvm.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
templates_path = ["_templates"]  # a class page documents its own members (not scikit-learn's)
html_theme = "alabaster"
html_title = f"dimbsvm {release}"

autosummary_generate = True
autodoc_default_options = {"inherited-members": False}
numpydoc_show_class_members = False  # each method is on its class's page; no member tables
numpydoc_xref_param_type = False
myst_heading_anchors = 3

#: Names in ``__all__`` that are values, not documented objects.
NOT_DOCUMENTED = {"__version__"}


def public_names() -> list[tuple[str, list[str]]]:
    """``(package, [names])`` in reference order, each object once: under the first package that exports it."""
    seen, listing = set(), []
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        names = []
        for name in module.__all__:
            thing = getattr(module, name)
            if name in NOT_DOCUMENTED or id(thing) in seen:
                continue
            seen.add(id(thing))
            names.append(name)
        listing.append((package, names))
    return listing


def api_page() -> str:
    lines = ["API reference", "=============", "",
             "Every public name of dimbsvm, by the package that exports it (a name re-exported by a later "
             "package is listed once, under the first).", ""]
    for package, names in public_names():
        lines += [package, "-" * len(package), "", f".. automodule:: {package}", "   :no-members:", "",
                  f".. currentmodule:: {package}", "", ".. autosummary::", "   :toctree: generated", ""]
        lines += [f"   {name}" for name in names] + [""]
    return "\n".join(lines)


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods: documented by scikit-learn, not here."""
    return True if name.startswith("set_") and name.endswith("_request") else None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)


def write_api_page() -> None:
    """``api.rst`` (generated, not committed), written when this configuration is read: before Sphinx looks
    for documents and autosummary generates a page per name."""
    page = Path(__file__).with_name("api.rst")
    text = api_page()
    if not page.exists() or page.read_text() != text:
        page.write_text(text)


write_api_page()
