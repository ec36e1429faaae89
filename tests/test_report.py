"""The run report, the out-of-fold predictions and the added metrics.

Truths: the metrics against hand-counted confusion cells and a brute-force
average precision; the out-of-fold files against the defining property of
k-fold cross-validation (every row tested exactly once per repeat) and
against scikit-learn's metrics recomputed from them; the report's figures
decoded as images; a headless Chromium screenshot where Chromium is installed.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from sklearn.metrics import f1_score, recall_score, roc_auc_score

from dimbsvm.datasets import load_keel
from dimbsvm.jobs.data import load_job_data
from dimbsvm.jobs import load_oof, run_job, validate_job
from dimbsvm.model_selection.scoring import metrics_from_predictions

ALL_QUALITY = ["g_mean", "f_measure", "auc", "a_mean", "precision", "recall", "specificity",
               "average_precision", "mcc", "balanced_accuracy"]


def test_added_metrics_equal_their_definitions_from_counts():
    rng = np.random.RandomState(0)
    y = (rng.rand(200) < 0.2).astype(int)
    score = y * 0.8 + rng.normal(scale=0.5, size=200)
    y_pred = (score > 0.4).astype(int)
    tp = np.sum((y == 1) & (y_pred == 1))
    fp = np.sum((y == 0) & (y_pred == 1))
    tn = np.sum((y == 0) & (y_pred == 0))
    fn = np.sum((y == 1) & (y_pred == 0))
    got = metrics_from_predictions(y, y_pred, score, metrics=ALL_QUALITY, pos_label=1)
    assert got["precision"] == pytest.approx(tp / (tp + fp))
    assert got["recall"] == pytest.approx(tp / (tp + fn))
    assert got["specificity"] == pytest.approx(tn / (tn + fp))
    assert got["balanced_accuracy"] == pytest.approx((tp / (tp + fn) + tn / (tn + fp)) / 2)
    assert got["balanced_accuracy"] == pytest.approx(got["a_mean"])
    mcc = (tp * tn - fp * fn) / np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    assert got["mcc"] == pytest.approx(mcc)
    # average precision: sum over the positives ranked by score of the precision at each (no ties here)
    order = np.argsort(-score)
    hits = y[order] == 1
    precision_at = np.cumsum(hits) / np.arange(1, y.size + 1)
    assert got["average_precision"] == pytest.approx(precision_at[hits].sum() / hits.sum())


def test_positive_class_metrics_follow_pos_label():
    y, y_pred = np.array([0, 0, 0, 1, 1]), np.array([0, 1, 1, 1, 0])
    as_zero = metrics_from_predictions(y, y_pred, None, metrics=["precision", "recall", "specificity"],
                                       pos_label=0)
    assert as_zero == {"precision": pytest.approx(1 / 2), "recall": pytest.approx(1 / 3),
                       "specificity": pytest.approx(1 / 2)}


class _Images(HTMLParser):
    """The page's figures, images, scripts (with their text) and any address it would fetch."""

    def __init__(self):
        super().__init__()
        self.images, self.figures, self.interactive, self.external, self.scripts = [], [], [], [], []
        self._script = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure":
            self.figures.append(attrs.get("id"))
            if "interactive" in (attrs.get("class") or ""):
                self.interactive.append(attrs.get("id"))
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "script":
            self._script = [attrs, ""]
        for key in ("src", "href"):
            if attrs.get(key, "").startswith(("http:", "https:", "//")):
                self.external.append(attrs[key])

    def handle_data(self, data):
        if self._script is not None:
            self._script[1] += data

    def handle_endtag(self, tag):
        if tag == "script":
            self.scripts.append(tuple(self._script))
            self._script = None

    def bokeh_documents(self):
        """``{figure id: bokeh.document.Document}`` rebuilt by Bokeh from the JSON embedded in the page."""
        from bokeh.document import Document

        items = [json.loads(text) for attrs, text in self.scripts if attrs.get("class") == "bokeh-document"]
        return {item["target_id"].removesuffix("-plot"): Document.from_json(item["doc"]) for item in items}


def _job(tmp_path, **changes):
    spec = {"name": "report", "data": {"source": "yeast5"},
            "estimator": {"name": "ensemble_othr", "params": {"n_estimators": 3, "random_state": 0}},
            "cv": {"n_splits": 3, "n_repeats": 2, "random_state": 0},
            "metrics": ALL_QUALITY + ["fit_time", "predict_time"]}
    spec.update(changes)
    return validate_job(spec)


@pytest.fixture(scope="module")
def ensemble_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    result = run_job(_job(out.parent), None, out=out, progress=False)
    return result, out


@pytest.mark.parametrize("where", ["side process", "thread"])
def test_out_of_fold_sections_drawn_beside_the_final_model_are_the_ones_drawn_after(tmp_path, monkeypatch, where):
    # With a final model to fit, the out-of-fold sections (curves, confusion, thresholds) are drawn once every
    # fold is saved: in the report's side process (a process that has not loaded the drawing libraries), or
    # in a thread of this one. The truth is the same sections drawn here from the finished run's files.
    import threading

    from dimbsvm._side_process import SideProcess
    from dimbsvm.jobs import report_drawing
    from dimbsvm.report import run_report

    # a side process of this test's own (started by the run), or none with the libraries counted as loaded
    monkeypatch.setattr(report_drawing, "_process", None)
    monkeypatch.setattr(report_drawing, "DRAWING_LIBRARIES", () if where == "side process" else ("sys",))
    real, drawn, sent = run_report.out_of_fold_sections, [], []

    def recording(*args, **kwargs):  # the real drawing, with the thread it ran in noted (in this process)
        sections = real(*args, **kwargs)
        drawn.append((threading.current_thread().name, sections))
        return sections

    real_submit = SideProcess.submit

    def submitted(self, func, /, *args, **kwargs):
        sent.append(func.__name__)
        return real_submit(self, func, *args, **kwargs)

    monkeypatch.setattr(report_drawing, "out_of_fold_sections", recording)
    monkeypatch.setattr(SideProcess, "submit", submitted)
    out = tmp_path / "run"
    try:
        run_job(_job(tmp_path, cv={"n_splits": 3, "n_repeats": 1, "random_state": 0}), None, out=out, progress=False)
    finally:
        if report_drawing._process is not None:
            report_drawing._process.close()
    if where == "side process":
        assert drawn == [] and sent == ["prepare_drawing", "draw_ahead", "_write"]
    else:
        [(thread, ahead)] = drawn
        assert thread.startswith("dimbsvm-report") and sent == []
        assert [section.title for section in ahead] == ["Out-of-fold predictions", "Thresholds"]
    metrics = json.loads((out / "metrics.json").read_text())
    names = run_report.class_names_by_code(load_job_data("yeast5"))
    after = real(load_oof(out), names, metrics["positive_label"], n_repeats=1)
    after_md = run_report.render_markdown("t", after, tmp_path / "after" / "report")
    assert after_md.split("## Out-of-fold predictions")[1] in (out / "report.md").read_text()
    pngs = sorted(path.name for path in (tmp_path / "after" / "report").glob("*.png"))
    assert pngs == ["confusion.png", "roc_pr.png"]
    for name in pngs:  # the report's own figure files are these
        assert (out / run_report.FIGURE_DIR / name).read_bytes() == (tmp_path / "after" / "report" / name).read_bytes()
    # the figures of the folds' records, drawn with them ahead of the final model: those of the finished records
    summarised = list(metrics["summary"])
    truth = run_report.draw_sections([run_report.Section("t", [
        ("figure", name, figure, "") for name, figure in run_report.fold_figures(metrics["folds"], summarised).items()])])
    drawn_after = {block[1]: block[2] for block in truth[0].blocks}
    assert set(drawn_after) == {"fold_spread", "member_thresholds"}
    for name, png in drawn_after.items():
        assert (out / run_report.FIGURE_DIR / f"{name}.png").read_bytes() == png


def test_out_of_fold_predictions_cover_every_row_once_per_repeat(ensemble_run):
    result, out = ensemble_run
    data = load_keel("yeast5")
    oof = load_oof(out)
    for seed in np.unique(oof["seed"]):
        here = oof["seed"] == seed
        assert np.array_equal(np.sort(oof["row"][here]), np.arange(len(data.y)))  # a partition of the rows
    np.testing.assert_array_equal(oof["y_true"], data.y[oof["row"]])
    # every fold's record equals scikit-learn's metrics recomputed from its saved predictions
    for record in result.folds:
        fold = (oof["seed"] == record["seed"]) & (oof["fold"] == record["fold"])
        y, y_pred, score = oof["y_true"][fold], oof["y_pred"][fold], oof["score"][fold]
        assert fold.sum() == record["n_test"]
        assert record["f_measure"] == pytest.approx(f1_score(y, y_pred, pos_label=1))
        assert record["recall"] == pytest.approx(recall_score(y, y_pred, pos_label=1))
        assert record["auc"] == pytest.approx(roc_auc_score(y == 1, score))
        recalls = [recall_score(y, y_pred, pos_label=c) for c in (0, 1)]
        assert record["g_mean"] == pytest.approx(np.sqrt(np.prod(recalls)))


def test_metrics_json_keeps_times_apart_and_records_provenance(ensemble_run):
    _, out = ensemble_run
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["summary"]) == set(ALL_QUALITY)
    assert set(metrics["timings"]) == {"fit_time", "predict_time"}
    assert metrics["data_source"] == "yeast5"  # as the job gives it
    assert metrics["versions"]["scikit-learn"] and metrics["versions"]["numpy"]
    assert metrics["started_at"] <= metrics["finished_at"] and metrics["duration_s"] > 0
    resources = json.loads((out / "resources.json").read_text())
    assert list(resources["peak_worker_memory_bytes"]) == ["this process"]
    assert "folds and final model" in resources["phase_seconds"]


def test_report_html_is_self_contained_with_its_figures(ensemble_run):
    from matplotlib.image import imread

    _, out = ensemble_run
    page = (out / "report.html").read_text()
    parser = _Images()
    parser.feed(page)
    assert parser.external == []  # no network needed to read it
    assert all("src" not in attrs for attrs, _ in parser.scripts)  # BokehJS is in the page, not fetched
    assert set(parser.figures) == {"fold_spread", "roc_pr", "confusion", "threshold", "member_thresholds"}
    assert parser.interactive == ["roc_pr", "threshold"] and set(parser.bokeh_documents()) == {"roc_pr", "threshold"}
    assert len(parser.images) == len(parser.figures) - len(parser.interactive)  # interactive: no PNG on the page
    for src in parser.images:
        assert src.startswith("data:image/png;base64,")
        image = imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
        assert image.shape[0] >= 300 and image.shape[1] >= 400  # drawn, not an empty canvas
        assert image[..., :3].std() > 0.05
    for heading in ("Data", "Metrics", "Out-of-fold predictions", "Decision threshold", "Time and memory"):
        assert f"<h2>{heading}</h2>" in page
    assert "imbalance ratio (largest class / smallest) 32.73" in page  # 1440 / 44
    markdown = (out / "report.md").read_text()
    for name in parser.figures:  # the Markdown has every figure, the interactive ones too, as PNG files
        assert f"(report/{name}.png)" in markdown and (out / "report" / f"{name}.png").is_file()
    for name in parser.interactive:
        image = imread(out / "report" / f"{name}.png", format="png")
        assert image.shape[0] >= 300 and image[..., :3].std() > 0.05


def test_report_page_stays_one_file_of_reasonable_size(ensemble_run):
    """BokehJS inline, only its core bundle (no widgets, tables, WebGL, MathJax): ~1.3 MB of the page."""
    _, out = ensemble_run
    page = (out / "report.html").read_text()
    assert page.count("/* BEGIN bokeh.min.js */") == 1
    assert "bokeh-widgets" not in page and "bokeh-tables" not in page and "bokeh-mathjax" not in page
    assert (out / "report.html").stat().st_size < 2_000_000


def test_resumed_run_has_every_folds_predictions(tmp_path):
    job = _job(tmp_path, estimator={"name": "svc_balanced"})
    first = run_job(job, None, out=tmp_path / "run", progress=False)
    before = load_oof(tmp_path / "run")
    # an interruption after three folds: their records and predictions saved, nothing else
    partial = tmp_path / ".run.partial"
    (tmp_path / "run").rename(partial)
    for name in ("metrics.json", "summary.md", "resources.json", "report.html", "report.md"):
        (partial / name).unlink()
    shutil.rmtree(partial / "report")
    for path in sorted((partial / "folds").glob("*.json"))[3:]:
        path.unlink()
        (partial / "oof" / path.name.replace(".json", ".npz")).unlink()
    resumed = run_job(job, None, out=tmp_path / "run", progress=False)
    untimed = [[{k: v for k, v in r.items() if not k.endswith("_time")} for r in run.folds] for run in (first, resumed)]
    assert resumed.reused == 3 and untimed[0] == untimed[1]
    after = load_oof(tmp_path / "run")
    for name in before:
        np.testing.assert_array_equal(after[name], before[name])
    assert (tmp_path / "run" / "report.html").is_file()


def test_a_resumed_run_that_reuses_its_final_model_reports_its_threshold_search(tmp_path):
    """The final model saved by the interrupted run is read back for the report's threshold sections."""
    job = _job(tmp_path, cv={"n_splits": 3, "n_repeats": 1, "random_state": 0})
    run_job(job, None, out=tmp_path / "run", progress=False)
    first = (tmp_path / "run" / "report.md").read_text()
    threshold_png = (tmp_path / "run" / "report" / "threshold.png").read_bytes()
    partial = tmp_path / ".run.partial"
    (tmp_path / "run").rename(partial)
    for name in ("metrics.json", "summary.md", "resources.json", "report.html", "report.md"):
        (partial / name).unlink()
    shutil.rmtree(partial / "report")
    for path in sorted((partial / "folds").glob("*.json"))[1:]:  # two folds to run again; the model stays
        path.unlink()
        (partial / "oof" / path.name.replace(".json", ".npz")).unlink()
    resumed = run_job(job, None, out=tmp_path / "run", progress=False)
    assert resumed.reused == 1
    again = (tmp_path / "run" / "report.md").read_text()
    assert re.findall(r"^## .*", again, re.M) == re.findall(r"^## .*", first, re.M)
    assert "report/threshold.png" in again
    assert (tmp_path / "run" / "report" / "threshold.png").read_bytes() == threshold_png


def _chromium(tmp_path, page, *command):
    """Headless Chromium on ``page`` (its scripts given 5 s of virtual time); the finished process."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian package chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"  # one per run: no lock between them
    return subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
         *command, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)


def _page_console(stderr, page):
    """The console messages the page logged (Chromium's log lines ``CONSOLE(line)] "message", source: page``)."""
    return [m.group(1) for m in re.finditer(r'CONSOLE[^\]]*\] "(.*)", source: (\S+)', stderr)
            if m.group(2) == page.resolve().as_uri()]


def test_report_renders_in_headless_chromium(ensemble_run, tmp_path):
    """The page in a real browser with no network: every Bokeh plot built, no script error, the plots on screen."""
    from matplotlib.image import imread

    _, out = ensemble_run
    page = out / "report.html"
    proc = _chromium(tmp_path, page, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    for name, root in (("roc_pr", "bk-Row"), ("threshold", "bk-Figure")):
        # the page's loader marks a figure once BokehJS drew it; BokehJS put its root view in the plot's element
        assert f'<figure id="{name}" class="interactive" data-rendered="yes">' in dom
        assert f'<div id="{name}-plot"><div class="{root}"' in dom
    # the only console lines: BokehJS's own log-level notes (the page lowers its log level to warnings)
    logged = _page_console(proc.stderr, page)
    assert logged and all("setting log level to" in line for line in logged), logged

    shot = tmp_path / "report.png"
    proc = _chromium(tmp_path, page, "--hide-scrollbars", f"--screenshot={shot}", "--window-size=1100,4000")
    assert shot.is_file(), proc.stderr[-2000:]
    assert [line for line in _page_console(proc.stderr, page) if "setting log level to" not in line] == []
    image = imread(shot)
    assert image.shape[:2] == (4000, 1100)
    # the curves' colours (matplotlib's C0 blue and C1 orange, as the legends) are on the screen, drawn by
    # BokehJS: the page has no PNG of these curves
    rgb = (image[..., :3] * 255).round().astype(int)
    for colour in ((0x1f, 0x77, 0xb4), (0xff, 0x7f, 0x0e)):
        assert (np.abs(rgb - colour).sum(axis=-1) < 30).sum() > 500, colour


#: Injected into a copy of the page: once the ROC plot is drawn, moves the pointer onto the middle vertex of
#: repeat 0's curve (its screen position from BokehJS's own scales) and writes what the hover did into
#: ``body[data-hover]`` for --dump-dom. BokehJS 3 internals (Bokeh.index, frame scales, canvas events element):
#: a test of this page, not an API.
_HOVER_PROBE = """<script>
(function probe(tries) {
  if (document.getElementById("roc_pr").dataset.rendered !== "yes") {
    if (tries > 0) setTimeout(function () { probe(tries - 1); }, 100);
    return;
  }
  var out = {};
  try {
    var roc = [...Bokeh.index.query(function (v) {
      return v.model.constructor.__name__ === "Figure" && v.model.title.text.startsWith("ROC"); })][0];
    var source = roc.model.document.get_model_by_name("roc repeat 0");
    var i = Math.floor(source.data.fpr.length / 2);
    var target = roc.canvas_view.events_el, box = target.getBoundingClientRect();
    var at = {clientX: box.left + roc.frame.x_scale.compute(source.data.fpr[i]),
              clientY: box.top + roc.frame.y_scale.compute(source.data.tpr[i]),
              bubbles: true, composed: true, pointerType: "mouse", isPrimary: true};
    out.index = i;
    target.dispatchEvent(new PointerEvent("pointerenter", at));
    target.dispatchEvent(new PointerEvent("pointermove", at));
    setTimeout(function () {
      out.inspected = Array.from(source.inspected.indices);
      out.tooltips = [];
      (function walk(node) {  // tooltips are drawn in shadow roots
        if (node.shadowRoot) walk(node.shadowRoot);
        node.childNodes.forEach(function (c) { if (c.nodeType === 1 || c.nodeType === 11) walk(c); });
        if (node.classList && node.classList.contains("bk-Tooltip") && node.shadowRoot)
          out.tooltips.push([...node.shadowRoot.children].filter(function (c) { return c.tagName !== "STYLE"; })
                            .map(function (c) { return c.innerText; }).join("\\n"));
      })(document.body);
      document.body.dataset.hover = JSON.stringify(out);
    }, 300);
  } catch (error) { out.error = String(error); document.body.dataset.hover = JSON.stringify(out); }
})(50);
</script>"""


def test_hovering_a_roc_vertex_shows_its_threshold_and_rates_in_headless_chromium(ensemble_run, tmp_path):
    """A pointer on repeat 0's ROC vertex: BokehJS's hover finds it and its tooltip prints the embedded numbers."""
    import html

    _, out = ensemble_run
    page = (out / "report.html").read_text()
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body></html>", _HOVER_PROBE + "</body></html>"))
    proc = _chromium(tmp_path, probed, "--dump-dom")
    found = re.search(r'data-hover="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    hover = json.loads(html.unescape(found.group(1)))
    assert "error" not in hover, hover
    i = hover["index"]
    assert i in hover["inspected"]
    parser = _Images()
    parser.feed(page)
    roc = parser.bokeh_documents()["roc_pr"].get_model_by_name("roc repeat 0").data
    # limit=1: one tooltip per curve under the pointer, the nearest vertex's; repeat 0's is the one moved onto
    tooltips = [dict(line.split(":\t", 1) for line in text.strip().splitlines()) for text in hover["tooltips"]]
    [mine] = [t for t in tooltips if t["repeat"] == "0"]
    assert mine == {"repeat": "0", "threshold (score >=)": f"{roc['threshold'][i]:.4g}",
                    "TPR (recall)": f"{roc['tpr'][i]:.4f}", "FPR": f"{roc['fpr'][i]:.4f}",
                    "precision": f"{roc['precision'][i]:.4f}"}


def test_a_fold_recorded_without_predictions_runs_again(tmp_path):
    """A partial run of an earlier dimbsvm has fold records but no oof/: those folds are refitted."""
    job = _job(tmp_path, estimator={"name": "svc_balanced"})
    first = run_job(job, None, out=tmp_path / "run", progress=False)
    partial = tmp_path / ".run.partial"
    (tmp_path / "run").rename(partial)
    for name in ("metrics.json", "summary.md", "resources.json", "report.html", "report.md"):
        (partial / name).unlink()
    shutil.rmtree(partial / "report")
    for path in sorted((partial / "oof").glob("*.npz"))[:2]:  # two folds lose their predictions only
        path.unlink()
    resumed = run_job(job, None, out=tmp_path / "run", progress=False)
    assert resumed.reused == len(first.folds) - 2
    oof = load_oof(tmp_path / "run")
    for seed in np.unique(oof["seed"]):
        assert np.array_equal(np.sort(oof["row"][oof["seed"] == seed]), np.arange(len(load_keel("yeast5").y)))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_figures_precision_recall_curve_and_average_precision_are_scikit_learns(seed):
    # one precision-recall curve gives both the drawn curve and its average precision (a sort fewer on
    # millions of out-of-fold scores); the truth is scikit-learn computing each on its own
    from sklearn.metrics import PrecisionRecallDisplay, average_precision_score, precision_recall_curve

    from dimbsvm.report.figures import precision_recall_and_average, roc_pr_figure

    rng = np.random.RandomState(seed)
    positive = rng.rand(3000) < 0.1
    score = np.round(rng.normal(size=3000) + 1.5 * positive, 1)  # ties
    precision, recall, average = precision_recall_and_average(positive, score)
    expected_precision, expected_recall, _ = precision_recall_curve(positive, score)
    np.testing.assert_array_equal(precision, expected_precision)
    np.testing.assert_array_equal(recall, expected_recall)
    assert average == average_precision_score(positive, score)
    repeat = np.repeat([0, 1], 1500)
    _assert_panel_is_scikit_learns(roc_pr_figure(positive, score, repeat).axes[1], PrecisionRecallDisplay,
                                   positive, score, repeat, same_path=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_drawn_precision_recall_path_is_scikit_learns_from_fewer_vertices(seed):
    """Each run of equal recall keeps its ends: the drawn steps-post path equals scikit-learn's, point for point."""
    from sklearn.metrics import precision_recall_curve

    from dimbsvm.report.figures import step_vertices

    rng = np.random.RandomState(seed)
    positive = rng.rand(20_000) < 0.01
    score = rng.normal(size=20_000) + positive
    precision, recall, _ = precision_recall_curve(positive, score)
    kept = step_vertices(recall)
    assert kept.size <= 2 * np.unique(recall).size < recall.size // 10
    np.testing.assert_array_equal(_steps_post(recall[kept], precision[kept]), _steps_post(recall, precision))


def _steps_post(x, y):
    """The corners of matplotlib's steps-post path through (x, y), collinear corners merged (the drawn path)."""
    xs = np.repeat(x, 2)[1:]
    ys = np.repeat(y, 2)[:-1]
    corners = np.column_stack([xs, ys])
    keep = np.ones(len(corners), dtype=bool)  # a corner between two on the same vertical or horizontal line
    same_x = (corners[1:-1, 0] == corners[:-2, 0]) & (corners[1:-1, 0] == corners[2:, 0])
    same_y = (corners[1:-1, 1] == corners[:-2, 1]) & (corners[1:-1, 1] == corners[2:, 1])
    between = ((corners[1:-1] - corners[:-2]) * (corners[2:] - corners[1:-1]) >= 0).all(axis=1)
    keep[1:-1] = ~((same_x | same_y) & between)
    corners = corners[keep]
    return corners[np.concatenate([[True], (np.diff(corners, axis=0) != 0).any(axis=1)])]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_figures_roc_curves_are_scikit_learns_on_the_unsorted_scores(seed):
    # the figure sorts each repeat's rows by score once before drawing both curves; the truth is
    # scikit-learn's display on the rows as given (ties and interleaved repeats included)
    from sklearn.metrics import RocCurveDisplay

    from dimbsvm.report.figures import roc_pr_figure

    rng = np.random.RandomState(seed)
    positive = rng.rand(4000) < 0.1
    score = np.round(rng.normal(size=4000) + 1.5 * positive, 1)
    repeat = rng.randint(0, 2, size=4000)
    _assert_panel_is_scikit_learns(roc_pr_figure(positive, score, repeat).axes[0], RocCurveDisplay,
                                   positive, score, repeat)


def _assert_panel_is_scikit_learns(drawn, display, positive, score, repeat, same_path=False):
    """The panel's curves and legend are ``display.from_predictions`` of each repeat's rows as given.

    ``same_path``: the drawn steps-post path is the same, from a subset of the vertices.
    """
    from matplotlib.figure import Figure

    reference = Figure().add_subplot()
    for r in np.unique(repeat):
        here = repeat == r
        display.from_predictions(positive[here], score[here], ax=reference, name=f"repeat {r}")
    n_repeats = np.unique(repeat).size
    assert drawn.get_legend_handles_labels()[1][:n_repeats] == reference.get_legend_handles_labels()[1]
    # the same unit square: limits and aspect as the display sets them
    assert (drawn.get_xlim(), drawn.get_ylim(), drawn.get_aspect()) == (
        reference.get_xlim(), reference.get_ylim(), reference.get_aspect())
    theirs = reference.get_lines()
    assert len(theirs) == n_repeats
    for line, expected in zip(drawn.get_lines()[:n_repeats], theirs):
        if same_path:
            assert line.get_drawstyle() == expected.get_drawstyle() == "steps-post"
            np.testing.assert_array_equal(_steps_post(*line.get_xydata().T), _steps_post(*expected.get_xydata().T))
        else:
            np.testing.assert_array_equal(line.get_xydata(), expected.get_xydata())


# -- issue 35 item 3: the numbers people act on ---------------------------------------------------------------


class _Tables(HTMLParser):
    """Every table of a page as ``(headers, rows)``, cells as text, with the heading of its section."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell, self._row, self._heading, self._in_h2 = [], None, None, "", False

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self._in_h2, self._heading = True, ""
        elif tag == "table":
            self.tables.append((self._heading, []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False
        elif tag in ("td", "th"):
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr":
            self.tables[-1][1].append(self._row)

    def handle_data(self, data):
        if self._in_h2:
            self._heading += data
        elif self._cell is not None:
            self._cell += data

    def section(self, heading):
        return [rows for title, rows in self.tables if title == heading]


def _page_tables(out):
    parser = _Tables()
    parser.feed((out / "report.html").read_text())
    return parser


def test_thresholds_table_equals_scikit_learns_curves_on_the_same_out_of_fold_scores(ensemble_run):
    from sklearn.metrics import precision_recall_curve, roc_curve

    from dimbsvm.report.run_report import chosen_cutoff

    _, out = ensemble_run
    oof = load_oof(out)
    positive, score = oof["y_true"] == 1, oof["score"]
    # the chosen cutoff reproduces every prediction (the scores are decision values shifted by each fold's threshold)
    cutoff, share = chosen_cutoff(score, oof["y_pred"] == 1)
    assert share == 1.0
    np.testing.assert_array_equal(score >= cutoff, oof["y_pred"] == 1)
    fpr, tpr, roc_thresholds = roc_curve(positive, score, drop_intermediate=False)
    precision, recall, pr_thresholds = precision_recall_curve(positive, score)
    [rows] = _page_tables(out).section("Thresholds")
    assert rows[0] == ["threshold (score >=)", "TPR (recall)", "FPR", "precision", "G-mean", "F-measure", ""]
    body = rows[1:]
    assert len(body) == 5 and [r[-1] for r in body].count("chosen") == 1
    shown = [float(r[0]) for r in body]
    assert shown == sorted(shown, reverse=True)
    for row in body:
        t = float(row[0])
        i = int(np.argmin(np.abs(roc_thresholds - t)))  # the table prints 4 significant digits
        j = int(np.argmin(np.abs(pr_thresholds - roc_thresholds[i])))
        assert pr_thresholds[j] == roc_thresholds[i]
        p, r = precision[j], recall[j]
        expected = [tpr[i], fpr[i], p, np.sqrt(tpr[i] * (1 - fpr[i])), 2 * p * r / (p + r)]
        assert [float(v) for v in row[1:6]] == pytest.approx(expected, abs=5e-5), row
    chosen = next(r for r in body if r[-1] == "chosen")
    assert float(chosen[0]) == pytest.approx(cutoff, rel=1e-3, abs=1e-4)
    # the chosen row's rates are the predictions' own
    tp = np.sum(positive & (oof["y_pred"] == 1))
    assert float(chosen[1]) == pytest.approx(tp / positive.sum(), abs=5e-5)


def test_threshold_rows_are_the_rates_of_their_thresholds():
    from sklearn.metrics import f1_score, precision_score, recall_score

    from dimbsvm.report.run_report import threshold_rows

    rng = np.random.RandomState(3)
    positive = rng.rand(2000) < 0.08
    score = np.round(rng.normal(size=2000) + 2 * positive, 2)  # ties
    rows = threshold_rows(positive, score, 0.5)
    assert sum(r["chosen"] for r in rows) == 1 and len(rows) == 5
    for r in rows:
        predicted = score >= r["threshold"]
        assert r["tpr"] == pytest.approx(recall_score(positive, predicted))
        assert r["fpr"] == pytest.approx(1 - recall_score(~positive, ~predicted))
        assert r["precision"] == pytest.approx(precision_score(positive, predicted))
        assert r["f_measure"] == pytest.approx(f1_score(positive, predicted))
        assert r["g_mean"] == pytest.approx(np.sqrt(r["tpr"] * (1 - r["fpr"])))
    assert next(r for r in rows if r["chosen"])["threshold"] == 0.5


def test_confusion_matrix_is_per_repeat_with_counts_and_rates_named_by_class(ensemble_run):
    from sklearn.metrics import confusion_matrix

    _, out = ensemble_run
    oof = load_oof(out)
    tables = _page_tables(out).section("Out-of-fold predictions")
    [rows] = tables
    assert rows[0] == ["repeat", "true class", "predicted negative", "predicted positive", "rows"]
    data = load_keel("yeast5")
    for seed in np.unique(oof["seed"]):
        here = oof["seed"] == seed
        matrix = confusion_matrix(oof["y_true"][here], oof["y_pred"][here], labels=[0, 1])
        mine = [r for r in rows[1:] if r[0] == str(seed)]
        assert [r[1] for r in mine] == ["negative", "positive"]  # class names, not codes
        for i, r in enumerate(mine):
            counts = [int(cell.split(" ")[0]) for cell in r[2:4]]
            rates = [float(cell.split("(")[1].rstrip("%)")) for cell in r[2:4]]
            assert counts == matrix[i].tolist()
            assert rates == pytest.approx(100 * matrix[i] / matrix[i].sum(), abs=0.05)
        assert sum(int(r[-1]) for r in mine) == len(data.y)  # each repeat once: 1484 rows, not 2968


def test_per_fold_table_lists_every_fold_record(ensemble_run):
    result, out = ensemble_run
    [rows] = _page_tables(out).section("Folds")
    assert rows[0][:4] == ["repeat", "fold", "train rows", "test rows"] and "g_mean" in rows[0]
    at = rows[0].index("g_mean")
    assert len(rows) - 1 == len(result.folds)
    for row, record in zip(rows[1:], result.folds):
        assert row[:4] == [str(record["seed"]), str(record["fold"]), str(record["n_train"]), str(record["n_test"])]
        assert float(row[at]) == pytest.approx(record["g_mean"], abs=5e-5)


def test_roc_and_pr_mark_each_repeats_operating_point_and_name_no_class_code(ensemble_run):
    from dimbsvm.report.figures import roc_pr_figure

    _, out = ensemble_run
    oof = load_oof(out)
    positive, predicted = oof["y_true"] == 1, oof["y_pred"] == 1
    fig = roc_pr_figure(positive, oof["score"], oof["seed"], predicted=predicted)
    roc, pr = fig.axes
    for ax in (roc, pr):
        assert "label: 1" not in ax.get_xlabel() + ax.get_ylabel()
    points = [line.get_xydata()[0] for line in roc.lines if line.get_marker() == "o"]
    pr_points = [line.get_xydata()[0] for line in pr.lines if line.get_marker() == "o"]
    for k, seed in enumerate(np.unique(oof["seed"])):
        here = oof["seed"] == seed
        tp = np.sum(positive[here] & predicted[here])
        fp = np.sum(~positive[here] & predicted[here])
        tpr, fpr = tp / positive[here].sum(), fp / (~positive[here]).sum()
        assert points[k] == pytest.approx([fpr, tpr])
        assert pr_points[k] == pytest.approx([tpr, tp / (tp + fp)])


def test_brier_score_and_reliability_diagram_from_out_of_fold_probabilities(tmp_path):
    """Out-of-fold probabilities of a real model (EnsembleOTHR with Platt probabilities), saved as a run saves them."""
    from sklearn.metrics import brier_score_loss
    from dimbsvm.model_selection import StratifiedBlockKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    from dimbsvm import EnsembleOTHRClassifier
    from dimbsvm.jobs import load_job_data
    from dimbsvm.jobs.oof import save_fold_predictions
    from dimbsvm.report.run_report import render_html, run_report_sections

    data = load_keel("yeast5")
    for seed in (0, 1):
        for fold, (train, test) in enumerate(StratifiedBlockKFold(3, random_state=seed).split(data.X, data.y)):
            model = make_pipeline(MinMaxScaler(), EnsembleOTHRClassifier(n_estimators=3, probability=True,
                                                                         random_state=0))
            model.fit(data.X[train], data.y[train])
            save_fold_predictions(tmp_path / "oof", (seed, fold), test, data.y[test], model.predict(data.X[test]),
                                  model.decision_function(data.X[test]), model.predict_proba(data.X[test])[:, 1])
    oof = load_oof(tmp_path)
    assert "proba" in oof
    job = _job(tmp_path, cv={"n_splits": 3, "n_repeats": 2, "random_state": 0})
    metrics = {"positive_label": 1, "summary": {}, "folds": []}
    title, sections = run_report_sections(job=job, data=load_job_data("yeast5"), metrics=metrics, resources={},
                                          oof=oof)
    page = render_html(title, sections)
    parser = _Tables()
    parser.feed(page)
    [rows] = parser.section("Calibration")
    assert rows[0] == ["repeat", "Brier score", "rows"]
    positive = oof["y_true"] == 1
    for row in rows[1:3]:
        here = oof["seed"] == int(row[0])
        assert float(row[1]) == pytest.approx(brier_score_loss(positive[here], oof["proba"][here]), abs=5e-5)
    assert rows[3][0] == "all repeats"
    assert float(rows[3][1]) == pytest.approx(brier_score_loss(positive, oof["proba"]), abs=5e-5)
    assert 'id="reliability"' in page
    # a run whose folds saved no probabilities has no calibration section
    del oof["proba"]
    _, sections = run_report_sections(job=job, data=load_job_data("yeast5"), metrics=metrics, resources={}, oof=oof)
    assert "Calibration" not in [s.title for s in sections]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_reliability_bins_and_the_roc_area_are_scikit_learns(seed):
    # the report draws without importing scikit-learn; the truth is scikit-learn's calibration_curve and auc
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import auc, roc_curve

    from dimbsvm.report.figures import calibration_bins, roc_area

    rng = np.random.RandomState(seed)
    positive = rng.rand(2000) < 0.2
    proba = np.round(rng.beta(1, 3, size=2000), 2)
    proba[:6] = [0.0, 1.0, 0.1, 0.5, 0.9, 0.3]  # on bin edges
    proba[(proba > 0.6) & (proba < 0.7)] = 0.55  # an empty bin
    observed, predicted = calibration_bins(positive, proba, n_bins=10)
    expected_observed, expected_predicted = calibration_curve(positive, proba, n_bins=10, strategy="uniform")
    np.testing.assert_array_equal(observed, expected_observed)
    np.testing.assert_array_equal(predicted, expected_predicted)
    fpr, tpr, _ = roc_curve(positive, proba)
    assert roc_area(fpr, tpr) == auc(fpr, tpr)


def test_summary_and_validate_name_classes_not_codes(ensemble_run):
    import os
    import sys
    from pathlib import Path

    _, out = ensemble_run
    assert "class counts negative: 1440, positive: 44)" in (out / "summary.md").read_text()
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "validate", str(root / "jobs" / "quickstart.yaml")],
                          cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "class counts {negative: 1440, positive: 44}" in proc.stdout


def test_thresholds_of_folds_that_chose_their_own_cutoffs_add_the_predictions_row(tmp_path):
    """Scores not shifted by each fold's threshold: no one cutoff reproduces every prediction, and the table says so."""
    from sklearn.metrics import f1_score, precision_score, recall_score

    from dimbsvm.jobs import load_job_data
    from dimbsvm.report.run_report import chosen_cutoff, render_html, run_report_sections

    data = load_keel("yeast5")
    rng = np.random.RandomState(0)
    n = len(data.y)
    score = rng.normal(size=n) + 2.0 * (data.y == 1)
    fold = np.arange(n) % 2
    y_pred = np.where(fold == 0, score >= 0.5, score >= 1.5).astype(int)  # two folds, two cutoffs
    oof = {"seed": np.zeros(n, dtype=np.int64), "fold": fold, "row": np.arange(n), "y_true": data.y,
           "y_pred": y_pred, "score": score}
    cutoff, share = chosen_cutoff(score, y_pred == 1)
    assert share < 1 and 0.5 <= cutoff <= 1.5
    # brute force: no distinct score reproduces more predictions
    best = max(np.mean((score >= t) == (y_pred == 1)) for t in np.unique(score))
    assert share == pytest.approx(best)
    title, sections = run_report_sections(job=_job(tmp_path, cv={"n_splits": 2, "n_repeats": 1, "random_state": 0}),
                                          data=load_job_data("yeast5"),
                                          metrics={"positive_label": 1, "summary": {}, "folds": []},
                                          resources={}, oof=oof)
    parser = _Tables()
    parser.feed(render_html(title, sections))
    [rows] = parser.section("Thresholds")
    last = rows[-1]
    assert last[0] == "each fold's own" and last[-1] == "the predictions"
    positive, predicted = data.y == 1, y_pred == 1
    tpr, fpr = recall_score(positive, predicted), 1 - recall_score(~positive, ~predicted)
    expected = [tpr, fpr, precision_score(positive, predicted), np.sqrt(tpr * (1 - fpr)), f1_score(positive, predicted)]
    assert [float(v) for v in last[1:6]] == pytest.approx(expected, abs=5e-5)


def test_a_majority_positive_class_is_named_and_not_called_the_minority(tmp_path):
    from sklearn.metrics import roc_curve

    job = _job(tmp_path, data={"source": "yeast5", "positive": "negative"}, estimator={"name": "svc_balanced"},
               cv={"n_splits": 2, "n_repeats": 1, "random_state": 0}, metrics=["g_mean"])
    out = tmp_path / "run"
    run_job(job, None, out=out, progress=False)
    parser = _page_tables(out)
    [data_rows] = parser.section("Data")
    roles = {row[0]: row[3] for row in data_rows[1:]}
    assert roles == {"negative": "positive", "positive": ""}
    page = (out / "report.html").read_text()
    assert "Positive class: negative." in page
    # the table's rates are of the class named positive: here the majority, "negative"
    oof = load_oof(out)
    metrics = json.loads((out / "metrics.json").read_text())
    positive = oof["y_true"] == metrics["positive_label"]
    fpr, tpr, thresholds = roc_curve(positive, oof["score"], drop_intermediate=False)
    [rows] = parser.section("Thresholds")
    chosen = next(r for r in rows[1:] if r[-1] == "chosen")
    i = int(np.argmin(np.abs(thresholds - float(chosen[0]))))
    assert [float(chosen[1]), float(chosen[2])] == pytest.approx([tpr[i], fpr[i]], abs=5e-5)


# -- issue 35 item 3: the interactive curves ---------------------------------------------------------------------


def test_interactive_curves_are_scikit_learns_on_the_same_out_of_fold_scores(ensemble_run):
    """The data BokehJS draws and hovers, rebuilt from the page: scikit-learn's curves of each repeat's scores."""
    from sklearn.metrics import precision_recall_curve, precision_score, roc_curve

    from dimbsvm.report.interactive import MAX_POINTS

    _, out = ensemble_run
    oof = load_oof(out)
    parser = _Images()
    parser.feed((out / "report.html").read_text())
    document = parser.bokeh_documents()["roc_pr"]
    positive = oof["y_true"] == 1
    for seed in np.unique(oof["seed"]):
        here = oof["seed"] == seed
        p, s = positive[here], oof["score"][here]
        roc = document.get_model_by_name(f"roc repeat {seed}").data
        fpr, tpr, thresholds = roc_curve(p, s)  # as RocCurveDisplay draws it (drop_intermediate)
        assert len(thresholds) < MAX_POINTS  # so nothing more was thinned
        np.testing.assert_array_equal(roc["fpr"], fpr)
        np.testing.assert_array_equal(roc["tpr"], tpr)
        np.testing.assert_array_equal(roc["threshold"], thresholds)
        pr = document.get_model_by_name(f"pr repeat {seed}").data
        precision, recall, pr_thresholds = precision_recall_curve(p, s)
        # the same steps-post path from fewer vertices, each vertex one of scikit-learn's with its threshold
        np.testing.assert_array_equal(_steps_post(pr["tpr"], pr["precision"]), _steps_post(recall, precision))
        at = [int(np.flatnonzero(np.append(pr_thresholds, np.inf) == t)[0]) for t in pr["threshold"]]
        np.testing.assert_array_equal(pr["precision"], precision[at])
        np.testing.assert_array_equal(pr["tpr"], recall[at])
        # every hovered point's rates are those of predicting positive from its threshold
        for data in (roc, pr):
            for t, rates in zip(data["threshold"], zip(data["tpr"], data["fpr"], data["precision"])):
                predicted = s >= t
                expected = [np.mean(predicted[p]), np.mean(predicted[~p]),
                            precision_score(p, predicted, zero_division=1.0)]
                assert list(rates) == pytest.approx(expected, abs=1e-12)
            assert set(data["repeat"]) == {seed}
        # the chosen point: the repeat's predictions, from the cutoff that reproduces them
        chosen = document.get_model_by_name(f"chosen repeat {seed}").data
        predicted = oof["y_pred"][here] == 1
        assert [chosen["tpr"][0], chosen["fpr"][0]] == pytest.approx([np.mean(predicted[p]), np.mean(predicted[~p])])
        assert chosen["precision"][0] == pytest.approx(precision_score(p, predicted))
        cutoff = float(chosen["threshold_text"][0])
        assert cutoff == pytest.approx(s[predicted].min(), rel=1e-3)


def test_curves_longer_than_the_page_keeps_are_thinned_to_vertices_of_scikit_learns():
    """10^5 scores: each curve keeps at most MAX_POINTS of scikit-learn's vertices, both ends, evenly along it."""
    from sklearn.metrics import roc_curve

    from dimbsvm.report.curves import MAX_POINTS, spaced_vertices
    from dimbsvm.report.interactive import roc_pr_plots

    rng = np.random.RandomState(0)
    positive = rng.rand(100_000) < 0.1
    score = rng.normal(size=100_000) + positive
    document_roots = roc_pr_plots(positive, score, np.zeros(100_000, dtype=int)).select({"name": "roc repeat 0"})
    [roc] = [source.data for source in document_roots]
    fpr, tpr, thresholds = roc_curve(positive, score)
    assert thresholds.size > 5 * MAX_POINTS and roc["fpr"].size <= MAX_POINTS
    at = np.searchsorted(-thresholds, -roc["threshold"])  # thresholds decrease: where each kept one is
    np.testing.assert_array_equal(thresholds[at], roc["threshold"])
    np.testing.assert_array_equal(fpr[at], roc["fpr"])
    np.testing.assert_array_equal(tpr[at], roc["tpr"])
    assert at[0] == 0 and at[-1] == thresholds.size - 1
    # evenly along the path: no two consecutive kept vertices further apart than the spacing and one step
    steps = np.abs(np.diff(fpr)) + np.abs(np.diff(tpr))
    along = np.concatenate([[0.0], np.cumsum(steps)])
    assert np.diff(along[at]).max() <= along[-1] / (MAX_POINTS - 1) + steps.max() + 1e-12
    assert spaced_vertices(np.arange(5.0), np.arange(5.0)).tolist() == [0, 1, 2, 3, 4]  # short: all kept


def test_interactive_threshold_search_is_the_candidates_with_the_chosen_shift():
    from dimbsvm.report.interactive import threshold_plot

    rng = np.random.RandomState(0)
    theta = rng.uniform(-2, 2, size=300)
    objective = 1 - (theta - 0.4) ** 2 / 4
    plot = threshold_plot(theta, objective, 0.4, objective_name="g_mean")
    [candidates] = plot.select({"name": "candidates"})
    order = np.argsort(theta)
    np.testing.assert_array_equal(candidates.data["theta"], theta[order])
    np.testing.assert_array_equal(candidates.data["objective"], objective[order])
    [chosen] = plot.select({"name": "chosen"})
    nearest = int(np.argmin(np.abs(theta - 0.4)))
    assert chosen.data["theta"] == [0.4] and chosen.data["objective"] == [objective[nearest]]


def test_the_threshold_section_draws_only_the_candidates_the_search_scored():
    # a smoothed or precision-bounded search scores some candidates -inf (it could not choose them): with more
    # candidates than the page keeps, the thinning measured the path through -inf and drew garbage
    import warnings
    from types import SimpleNamespace

    from dimbsvm.report.interactive import MAX_POINTS, threshold_plot
    from dimbsvm.report.run_report import ThresholdSearch

    rng = np.random.RandomState(0)
    theta = np.sort(rng.uniform(-2, 2, size=5 * MAX_POINTS))
    score = 1 - (theta - 0.4) ** 2 / 4
    score[rng.rand(theta.size) < 0.8] = -np.inf
    chosen = theta[np.argmax(score)]
    search = ThresholdSearch.of(SimpleNamespace(candidates_={"theta": theta, "score": score}, threshold_=chosen,
                                                objective="g_mean"))
    scored = np.isfinite(score)
    np.testing.assert_array_equal(search.theta, theta[scored])
    np.testing.assert_array_equal(search.objective_values, score[scored])
    assert search.chosen == chosen and search.objective == "g_mean"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no inf - inf in the thinning
        plot = threshold_plot(search.theta, search.objective_values, search.chosen, objective_name="g_mean")
    [candidates] = plot.select({"name": "candidates"})
    drawn = np.asarray(candidates.data["objective"])
    assert np.isfinite(drawn).all() and 2 < drawn.size <= MAX_POINTS
    assert drawn.max() == score[scored].max()  # the peak survives the thinning
    unscored = SimpleNamespace(candidates_={"theta": theta, "score": np.full(theta.size, -np.inf)}, threshold_=0.0)
    assert ThresholdSearch.of(unscored) is None


@pytest.mark.parametrize("kind", ["distinct", "few ties", "many ties", "signed zeros", "nan", "empty"])
def test_stable_argsort_is_numpys_stable_argsort(kind):
    from dimbsvm.report.figures import stable_argsort

    rng = np.random.default_rng(3)
    values = {"distinct": rng.normal(size=50_000),
              "few ties": np.concatenate([rng.normal(size=50_000), np.repeat(rng.normal(size=50), 20)]),
              "many ties": np.round(rng.normal(size=50_000), 1),
              "signed zeros": rng.permutation(np.concatenate([np.zeros(300), -np.zeros(300), rng.normal(size=5_000)])),
              "nan": np.where(rng.random(5_000) < 0.1, np.nan, rng.normal(size=5_000)),
              "empty": np.empty(0)}[kind]
    values = rng.permutation(values) if kind == "few ties" else values
    np.testing.assert_array_equal(stable_argsort(values), np.argsort(values, kind="stable"))


def test_class_counts_are_scikit_learns_confusion_matrix():
    from sklearn.metrics import confusion_matrix

    from dimbsvm.report.run_report import class_counts

    rng = np.random.default_rng(4)
    for n_classes in (2, 3, 6):
        codes = sorted(rng.choice(20, n_classes, replace=False).tolist())
        for n in (1, 7, 5_000):
            y_true, y_pred = rng.choice(codes, n), rng.choice(codes[:-1], n)  # a class never predicted
            np.testing.assert_array_equal(class_counts(y_true, y_pred, codes),
                                          confusion_matrix(y_true, y_pred, labels=codes))
    with pytest.raises(ValueError, match="not one of the class codes"):
        class_counts(np.array([0, 2]), np.array([0, 1]), [0, 1])


def test_threshold_rows_count_the_rows_at_or_above_each_threshold_by_definition():
    # against a pass over the rows per threshold, on ties, rounded scores and unscored (NaN) rows
    from dimbsvm.report.run_report import threshold_rows

    rng = np.random.default_rng(5)
    for trial in range(100):
        n = int(rng.integers(2, 2_000))
        score = np.round(rng.normal(size=n), int(rng.integers(0, 4)))
        positive = rng.random(n) < 0.2
        if trial % 3 == 0:
            score[rng.random(n) < 0.1] = np.nan
        for row in threshold_rows(positive, score, float(rng.normal())):
            predicted = score >= row["threshold"]
            tp, fp = int(np.sum(predicted & positive)), int(np.sum(predicted & ~positive))
            assert row["tpr"] == tp / max(int(positive.sum()), 1)
            assert row["fpr"] == fp / max(int((~positive).sum()), 1)
            assert row["precision"] == tp / (tp + fp)


SPLIT_DRIVER = """
import json, sys
from pathlib import Path

from dimbsvm.artifacts import load_artifact
from dimbsvm.jobs import load_oof, validate_job
from dimbsvm.jobs.data import load_job_data
from dimbsvm.report import interactive, run_report

out, where, split = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "split"
forks = []
real_start = run_report.start_in_fork
run_report.start_in_fork = lambda func: forks.append(real_start(func)) or forks[-1]
metrics = json.loads((out / "metrics.json").read_text())
model, _ = load_artifact(out / "model")
title, sections = run_report.run_report_sections(
    job=validate_job(json.loads(sys.argv[4])), data=load_job_data("yeast5"), metrics=metrics, resources={},
    oof=load_oof(out), final_estimator=run_report.ThresholdSearch.of(model.steps[-1][1]))
run_report.draw_sections(sections, split=split)
(where / "report.md").write_text(run_report.render_markdown(title, sections, where / "report"))
(where / "report.html").write_text(run_report.render_html(title, sections))
print(json.dumps({"forked": [f is not None for f in forks], "last_id": interactive.last_model_id()}))
"""


def test_a_report_drawn_over_a_forked_copy_is_the_same_bytes_as_drawn_in_one_process(ensemble_run, tmp_path):
    # the truth: the same sections drawn one figure after another in one fresh process (Bokeh's ids from the
    # same start); split, the interactive documents are drawn in a forked copy while the PNGs are drawn here
    from process_drivers import drive

    _, out = ensemble_run
    spec = json.dumps({"name": "report", "data": {"source": "yeast5"},
                       "estimator": {"name": "ensemble_othr", "params": {"n_estimators": 3, "random_state": 0}},
                       "cv": {"n_splits": 3, "n_repeats": 2, "random_state": 0}})
    answers = {}
    for how in ("serial", "split"):
        (tmp_path / how).mkdir()
        answers[how] = drive("", SPLIT_DRIVER, out, tmp_path / how, how, spec)
    assert answers["split"]["forked"] == [True] and answers["serial"]["forked"] == []
    assert answers["split"]["last_id"] == answers["serial"]["last_id"]  # the next model's id is the same too
    files = sorted(p.relative_to(tmp_path / "serial") for p in (tmp_path / "serial").rglob("*") if p.is_file())
    assert {"report.html", "report.md", "report/roc_pr.png", "report/threshold.png"} <= {str(f) for f in files}
    assert files == sorted(p.relative_to(tmp_path / "split") for p in (tmp_path / "split").rglob("*") if p.is_file())
    for name in files:
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "split" / name).read_bytes(), name


def test_the_figures_curves_of_many_rows_are_drawn_from_at_most_max_points_of_scikit_learns_vertices():
    # millions of out-of-fold rows give curves of ~a million vertices: the PNG draws MAX_POINTS of them, as the
    # page does; every vertex drawn is one of scikit-learn's, both ends included
    from sklearn.metrics import precision_recall_curve, roc_curve

    from dimbsvm.report.curves import MAX_POINTS
    from dimbsvm.report.figures import roc_pr_figure

    rng = np.random.RandomState(0)
    positive = rng.rand(200_000) < 0.05
    score = rng.normal(size=200_000) + positive
    roc, pr = roc_pr_figure(positive, score, np.zeros(200_000, dtype=int)).axes
    fpr, tpr, _ = roc_curve(positive, score)
    precision, recall, _ = precision_recall_curve(positive, score)
    for line, (x, y) in ((roc.get_lines()[0], (fpr, tpr)), (pr.get_lines()[0], (recall, precision))):
        drawn = line.get_xydata()
        assert x.size > 10 * MAX_POINTS and 2 <= len(drawn) <= MAX_POINTS + 2
        theirs = set(zip(x.tolist(), y.tolist()))
        assert all((a, b) in theirs for a, b in drawn.tolist())
        assert tuple(drawn[0]) == (x[0], y[0]) and tuple(drawn[-1]) == (x[-1], y[-1])


def test_the_metrics_table_says_what_its_numbers_are_and_plots_of_zeros_are_left_out(tmp_path):
    """Issue 51's report contradictions: the Metrics section says its numbers are means over folds and that the
    pooled curves' AUC differs; times are pointed to; an ensemble whose members all kept shift 0 gets a sentence,
    not a plot of zeros; one number format."""
    from dimbsvm.jobs import load_job_data
    from dimbsvm.jobs.oof import save_fold_predictions
    from dimbsvm.report.run_report import run_report_sections

    rng = np.random.default_rng(0)
    data = load_keel("yeast5")
    for fold in range(2):
        test = np.arange(fold, len(data.y), 2)
        score = rng.normal(size=test.size) + 2.0 * (data.y[test] == 1)
        save_fold_predictions(tmp_path / "oof", (0, fold), test, data.y[test], (score > 1).astype(int), score)
    folds = [{"seed": 0, "fold": f, "auc": a, "g_mean": 0.8, "member_thresholds": [0.0, 0.0, 0.0]}
             for f, a in enumerate((0.91, 0.93))]
    summary = {"auc": {"mean": 0.92, "std": 0.0008318, "min": 0.91, "max": 0.93, "n": 2},
               "g_mean": {"mean": 0.8, "std": 0.0, "min": 0.8, "max": 0.8, "n": 2}}
    metrics = {"positive_label": 1, "summary": summary, "folds": folds,
               "timings": {"fit_time": {"mean": 1.0, "min": 1.0, "max": 1.0}}}
    _, sections = run_report_sections(job=_job(tmp_path, cv={"n_splits": 2, "n_repeats": 1, "random_state": 0}),
                                      data=load_job_data("yeast5"), metrics=metrics, resources={},
                                      oof=load_oof(tmp_path))
    by_title = {section.title: section for section in sections}
    text = " ".join(block[1] for block in by_title["Metrics"].blocks if block[0] == "text")
    assert "mean, standard deviation" in text and "the curves below pool a repeat's rows" in text
    assert "Times (fit_time) are under Time and memory" in text
    [table] = [block for block in by_title["Metrics"].blocks if block[0] == "table"]
    assert table[2][0][:5] == ["auc", "0.9200", "0.0008", "0.9100", "0.9300"]
    threshold = by_title["Decision threshold"]
    assert not any(block[0] == "figure" for block in threshold.blocks)
    assert any("Every ensemble member's shift is 0" in block[1] for block in threshold.blocks if block[0] == "text")
