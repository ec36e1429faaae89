"""Where an estimator's documentation page is: the link of scikit-learn's HTML representation.

The documentation (``docs/``, built by Sphinx) has a page for every public
name, listed under the first package of :data:`PUBLIC_PACKAGES` that exports
it. :class:`DocLinked` gives scikit-learn's estimator display that page's
address (``_doc_link_*``, as scikit-learn's own estimators have theirs).
"""

from __future__ import annotations

import importlib

__all__ = ["DOCS_URL", "PUBLIC_PACKAGES", "DocLinked", "documented_page"]

#: Where the built documentation is published (``Documentation`` in pyproject.toml).
DOCS_URL = "https://dimbsvm.github.io/dimbsvm/"
#: The packages whose ``__all__`` is the public API, in the order of the reference page.
PUBLIC_PACKAGES = ("dimbsvm", "dimbsvm.svm", "dimbsvm.features", "dimbsvm.graph", "dimbsvm.metrics",
                   "dimbsvm.datasets", "dimbsvm.predict", "dimbsvm.artifacts", "dimbsvm.estimators",
                   "dimbsvm.model_selection", "dimbsvm.jobs", "dimbsvm.store", "dimbsvm.distributed",
                   "dimbsvm.parallel", "dimbsvm.report")


def documented_page(thing) -> str | None:
    """The reference page of ``thing`` (``"generated/dimbsvm.OTHRClassifier.html"``), None if it is not public.

    Examples
    --------
    >>> from dimbsvm.svm import OTHRClassifier
    >>> documented_page(OTHRClassifier)
    'generated/dimbsvm.OTHRClassifier.html'
    """
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            if getattr(module, name, None) is thing:
                return f"generated/{package}.{name}.html"
    return None


class DocLinked:
    """Mixin: scikit-learn's HTML display of the estimator links to its page of dimbsvm's documentation."""

    _doc_link_module = "dimbsvm"
    _doc_link_template = "{url}"

    def _doc_link_url_param_generator(self) -> dict:
        page = documented_page(type(self))
        return {"url": DOCS_URL + (page or "api.html")}
