"""Tests of SVM-OTHR, SVM-THR and EnSVM-OTHR (dimbsvm.svm)."""

import math
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from dimbsvm.metrics import f_measure, g_mean
from dimbsvm.svm import (
    EnsembleOTHRClassifier,
    OTHRClassifier,
    THRClassifier,
    fit_member,
)
from dimbsvm.svm.ensemble import PAPER_PARAMS as ENSEMBLE_PAPER
from dimbsvm.svm.ensemble import draw_bag, pooled_oob_margins
from dimbsvm.svm.othr import PAPER_PARAMS as OTHR_PAPER
from dimbsvm.svm.threshold import (
    best_threshold,
    farther_majority_neighbours,
    midpoint_candidates,
    othr_threshold,
    smoothing_bandwidth,
    thr_shift,
)


def _imbalanced(seed, n_samples=90, weight=0.8, class_sep=0.6):
    return make_classification(
        n_samples=n_samples,
        n_features=4,
        n_informative=3,
        n_redundant=0,
        weights=[weight],
        class_sep=class_sep,
        flip_y=0.05,
        random_state=seed,
    )


# --- brute force: an independent, loop-by-loop reading of the paper's Fig. 3 -----------


def _brute_force_othr(X, positive, margins, objective):
    n_pos = sum(1 for p in positive if p)
    n_neg = len(positive) - n_pos
    candidates = [0.0]
    for i in range(len(X)):
        if not positive[i] or margins[i] >= 0:
            continue
        nearest, nearest_distance = None, math.inf
        for j in range(len(X)):
            if positive[j] or not margins[j] < margins[i]:
                continue
            distance = math.sqrt(sum((a - b) ** 2 for a, b in zip(X[i], X[j])))
            if distance < nearest_distance:
                nearest, nearest_distance = j, distance
        if nearest is not None:
            candidates.append(-(margins[i] + margins[nearest]) / 2)
    scores = []
    for theta in candidates:
        tp = tn = fp = 0
        for p, h in zip(positive, margins):
            predicted_positive = h + theta > 0
            tp += p and predicted_positive
            tn += (not p) and (not predicted_positive)
            fp += (not p) and predicted_positive
        if objective == "g_mean":
            scores.append(math.sqrt(tp * tn / (n_pos * n_neg)))
        else:
            scores.append(2 * tp / (n_pos + tp + fp))
    best = 0
    for c in range(1, len(candidates)):
        better = scores[c] > scores[best]
        tie = scores[c] == scores[best] and abs(candidates[c]) < abs(candidates[best])
        if better or tie:
            best = c
    return candidates[best], candidates, scores


@pytest.mark.parametrize("objective", ["g_mean", "f_measure"])
@pytest.mark.parametrize(
    "estimator",
    [SVC(kernel="linear", C=1.0), SVC(kernel="rbf", gamma="scale")],
    ids=["linear", "rbf"],
)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_threshold_search_equals_brute_force(seed, estimator, objective):
    X, y = _imbalanced(seed)
    params = {**OTHR_PAPER, "objective": objective}
    clf = OTHRClassifier(estimator, n_neighbors=2, **params).fit(X, y)
    assert clf.pos_label_ == 1
    margins = clf.estimator_.decision_function(X)
    theta, candidates, scores = _brute_force_othr(
        X.tolist(), (y == 1).tolist(), margins.tolist(), objective
    )
    assert clf.threshold_ == theta
    table = clf.candidates_
    order = np.argsort(table["theta"], kind="stable")
    np.testing.assert_array_equal(table["theta"][order], np.sort(candidates))
    expected_scores = np.asarray(scores)[np.argsort(candidates, kind="stable")]
    np.testing.assert_allclose(table[objective][order], expected_scores)


def test_brute_force_problems_are_not_trivial():
    n_candidates = [
        OTHRClassifier(**OTHR_PAPER).fit(*_imbalanced(seed)).candidates_["theta"].size
        for seed in range(4)
    ]
    assert min(n_candidates) > 3


def test_candidate_table_agrees_with_metrics():
    X, y = _imbalanced(5)
    clf = OTHRClassifier(**OTHR_PAPER).fit(X, y)
    table = clf.candidates_
    columns = {"theta", "sample", "neighbour", "tpr", "tnr", "precision", "g_mean", "f_measure"}
    columns.add("score")  # the objective maximised: here the G-mean itself
    np.testing.assert_array_equal(table["score"], table["g_mean"])
    assert set(table) == columns
    assert len({column.size for column in table.values()}) == 1
    margins = clf.estimator_.decision_function(X)
    for row, theta in enumerate(table["theta"]):
        y_pred = (margins + theta > 0).astype(int)
        assert table["g_mean"][row] == pytest.approx(g_mean(y, y_pred))
        assert table["f_measure"][row] == pytest.approx(f_measure(y, y_pred, pos_label=1))
        if table["sample"][row] >= 0:
            i, j = table["sample"][row], table["neighbour"][row]
            assert y[i] == 1 and y[j] == 0 and margins[j] < margins[i] < 0
            assert theta == -(margins[i] + margins[j]) / 2
    assert table["theta"][0] == 0.0 and table["sample"][0] == -1
    best = table["g_mean"].max()
    assert table["g_mean"][table["theta"] == clf.threshold_][0] == best
    y_pred = clf.predict(X)
    assert g_mean(y, y_pred) == pytest.approx(best)


@pytest.mark.parametrize("n_neighbors", [1, 3, 1000])
def test_neighbour_search_does_not_depend_on_first_k(n_neighbors):
    rng = np.random.RandomState(0)
    X_min, X_maj = rng.normal(size=(30, 3)), rng.normal(size=(50, 3))
    h_min, h_maj = rng.normal(size=30), rng.normal(size=50)
    h_min[0] = h_maj.min() - 0.1  # misclassified, but no majority row is farther
    expected = []
    for x, h in zip(X_min, h_min):
        allowed = np.flatnonzero(h_maj < h)
        if h >= 0 or allowed.size == 0:
            expected.append(-1)
            continue
        distances = np.linalg.norm(X_maj[allowed] - x, axis=1)
        expected.append(allowed[np.argmin(distances)])
    found = farther_majority_neighbours(X_min, h_min, X_maj, h_maj, n_neighbors=n_neighbors)
    np.testing.assert_array_equal(found, expected)
    assert (found == -1).sum() > (h_min >= 0).sum()  # some rows had no farther majority row


@pytest.mark.parametrize("n_neighbors", [1, 2, 10])
def test_neighbour_ties_go_to_the_lowest_row(n_neighbors):
    # Points on an integer grid, many duplicated: plenty of equal distances.
    rng = np.random.RandomState(1)
    X_min = rng.randint(0, 3, size=(40, 2)).astype(float)
    X_maj = rng.randint(0, 3, size=(60, 2)).astype(float)
    h_min, h_maj = rng.uniform(-1, 0.2, size=40), rng.uniform(-1.2, 0.5, size=60)
    expected = []
    for x, h in zip(X_min, h_min):
        best, best_distance = -1, np.inf
        for j, (z, g) in enumerate(zip(X_maj, h_maj)):
            distance = np.sqrt(((x - z) ** 2).sum())
            if h < 0 and g < h and distance < best_distance:
                best, best_distance = j, distance
        expected.append(best)
    found = farther_majority_neighbours(X_min, h_min, X_maj, h_maj, n_neighbors=n_neighbors)
    np.testing.assert_array_equal(found, expected)


def _farther_majority_neighbours_0_1_0(X_min, h_min, X_maj, h_maj, *, n_neighbors=10,
                                       method="auto", random_state=None):
    """dimbsvm 0.1.0's search, which rebuilt a neighbour index in every widening round."""
    from dimbsvm.graph.knn import nearest_neighbors

    h_min, h_maj = np.asarray(h_min, dtype=np.float64), np.asarray(h_maj, dtype=np.float64)
    n_maj = h_maj.shape[0]
    neighbour = np.full(h_min.shape[0], -1, dtype=np.int64)
    todo = np.flatnonzero((h_min < 0) & (h_min > h_maj.min()))
    k = min(int(n_neighbors), n_maj)
    while todo.size:
        indices, distances = nearest_neighbors(X_maj, X_min[todo], k, method="exact" if k == n_maj else method,
                                               random_state=random_state)
        farther = h_maj[indices] < h_min[todo, None]
        nearest = np.where(farther, distances, np.inf).min(axis=1)
        tied = farther & (distances == nearest[:, None])
        choice = np.where(tied, indices, n_maj).min(axis=1)
        resolved = np.isfinite(nearest) & ((distances[:, -1] > nearest) | (k == n_maj))
        neighbour[todo[resolved]] = choice[resolved]
        todo = todo[~resolved]
        if k == n_maj:
            break
        k = min(2 * k, n_maj)
    return neighbour


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_neighbors", [1, 2, 5, 10])
@pytest.mark.parametrize("grid", [False, True])
def test_one_index_per_search_answers_as_the_index_per_round(seed, n_neighbors, grid):
    # Exact search: building the majority index once and widening k gives 0.1.0's answers,
    # also where many distances tie (integer grid with duplicated rows).
    rng = np.random.RandomState(seed)
    n_min, n_maj = rng.randint(1, 40), rng.randint(1, 120)
    if grid:
        X_min = rng.randint(0, 3, size=(n_min, 2)).astype(float)
        X_maj = rng.randint(0, 3, size=(n_maj, 2)).astype(float)
    else:
        X_min, X_maj = rng.normal(size=(n_min, 4)), rng.normal(size=(n_maj, 4))
    h_min, h_maj = rng.uniform(-1, 0.3, size=n_min), rng.uniform(-1.2, 0.5, size=n_maj)
    expected = _farther_majority_neighbours_0_1_0(X_min, h_min, X_maj, h_maj, n_neighbors=n_neighbors,
                                                  method="exact")
    for method in ("exact", "auto"):
        found = farther_majority_neighbours(X_min, h_min, X_maj, h_maj, n_neighbors=n_neighbors,
                                            method=method)
        np.testing.assert_array_equal(found, expected)


def test_neighbour_search_builds_one_index(monkeypatch):
    from dimbsvm.graph import knn

    fits = []
    fit = knn.KNNIndex.fit

    def counted(self, X):
        fits.append((self.method, X.shape[0]))
        return fit(self, X)

    monkeypatch.setattr(knn.KNNIndex, "fit", counted)
    rng = np.random.RandomState(0)
    X_min, X_maj = rng.normal(size=(50, 3)), rng.normal(size=(400, 3))
    h_min, h_maj = rng.uniform(-1, 0.2, size=50), rng.normal(size=400)
    farther_majority_neighbours(X_min, h_min, X_maj, h_maj, n_neighbors=1, method="exact")
    assert fits == [("exact", 400)]  # several widening rounds, one index
    fits.clear()
    approximate = farther_majority_neighbours(X_min, h_min, X_maj, h_maj, n_neighbors=1,
                                              method="pynndescent", random_state=0)
    assert [method for method, _ in fits] in (["pynndescent"], ["pynndescent", "exact"])
    exact = farther_majority_neighbours(X_min, h_min, X_maj, h_maj, n_neighbors=1, method="exact")
    assert np.mean(approximate == exact) >= 0.9  # approximate: may differ slightly


def test_default_member_searches_no_neighbours(monkeypatch):
    # threshold="pooled_oob" (the default) hands members margins="none": no neighbour search
    # anywhere in a member; the shared midpoint search needs none either.
    from dimbsvm.graph import knn

    def refuse(self, X):
        raise AssertionError("a neighbour index was built")

    monkeypatch.setattr(knn.KNNIndex, "fit", refuse)
    monkeypatch.setattr(knn, "NearestNeighbors", None)
    X, y = _imbalanced(3, n_samples=200)
    ensemble = EnsembleOTHRClassifier(LogisticRegression(), n_estimators=4, random_state=0).fit(X, y)
    assert {member.margins for member in ensemble.members_} == {"pooled_oob"}


def test_paper_member_searches_its_own_bag_only(monkeypatch):
    from dimbsvm.graph import knn
    from dimbsvm.svm.members import fit_member

    fits = []
    fit = knn.KNNIndex.fit

    def recorded(self, X):
        fits.append(np.asarray(X).copy())
        return fit(self, X)

    monkeypatch.setattr(knn.KNNIndex, "fit", recorded)
    X, y = _imbalanced(4, n_samples=600, weight=0.9)
    rows = np.arange(100, 600)  # e.g. a fold's training rows
    member = fit_member(X, y, 11, pos_label=1, rows=rows, estimator=LogisticRegression(),
                        bootstrap="balanced", max_samples=60, margins="train", candidates="othr",
                        keep_oob=False)
    assert member.margins == "train" and len(fits) <= 2
    # what was indexed are the bag's majority rows: 30 rows drawn from rows, none from outside
    bag_rows = {tuple(r) for r in X[rows][y[rows] == 0]}
    for indexed in fits:
        assert indexed.shape[0] == 30
        assert {tuple(r) for r in indexed} <= bag_rows


def test_theta_zero_when_separable():
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(0, 0.3, size=(40, 2)), rng.normal(5, 0.3, size=(8, 2))])
    y = np.array([0] * 40 + [1] * 8)
    clf = OTHRClassifier().fit(X, y)
    assert clf.threshold_ == 0.0
    assert clf.candidates_["theta"].tolist() == [0.0]


def test_theta_zero_when_no_candidate_improves():
    # Both shifts trade one error for another: G-mean ties, the smallest |theta| wins.
    y = np.array([1, 1, 0, 0, 0, 0])
    margins = np.array([-0.5, 1.0, 0.2, 0.1, -0.45, -2.0])
    theta, table = best_threshold(y, margins, [0.0, 0.5, 0.55])
    assert table["g_mean"][0] == table["g_mean"][2] > table["g_mean"][1]
    assert theta == 0.0


def test_best_threshold_tie_prefers_smallest_absolute_shift():
    theta, _ = best_threshold([1, 0], [-1.0, -3.0], [2.5, 1.5, -4.0, 2.0])
    assert theta == 1.5


# --- refinements of the search: objective, smoothing, tolerance, precision floor -------


def _brute_force_choice(positive, margins, candidates, objective, bandwidth, tolerance, floor):
    """Loop-by-loop reading of best_threshold's documented rule."""
    n_pos = sum(positive)
    n_neg = len(positive) - n_pos
    scores, precisions = [], []
    for theta in candidates:
        tp = sum(1 for p, h in zip(positive, margins) if p and h + theta > 0)
        fp = sum(1 for p, h in zip(positive, margins) if not p and h + theta > 0)
        precisions.append(tp / (tp + fp) if tp + fp else 0.0)
        if bandwidth:
            def phi(v):
                return 0.5 * (1 + math.erf(v / math.sqrt(2)))

            tp = sum(phi((h + theta) / bandwidth) for p, h in zip(positive, margins) if p)
            fp = sum(phi((h + theta) / bandwidth) for p, h in zip(positive, margins) if not p)
        g = math.sqrt(max(0.0, (tp / n_pos) * (1 - fp / n_neg)))
        f = 2 * tp / (n_pos + tp + fp)
        scores.append({"g_mean": g, "f_measure": f, "g_f_mean": math.sqrt(g * f)}[objective])
    allowed = [q >= floor for q in precisions]
    if not any(allowed):
        allowed = [q == max(precisions) for q in precisions]
    best = max(v for v, ok in zip(scores, allowed) if ok)
    chosen = None
    for c, (theta, v, ok) in enumerate(zip(candidates, scores, allowed)):
        if not ok or v < best - tolerance * abs(best) - 1e-12:
            continue
        if chosen is None or abs(theta) < abs(candidates[chosen]):
            chosen = c
    return candidates[chosen], best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("objective", ["g_mean", "f_measure", "g_f_mean"])
@pytest.mark.parametrize(
    "smoothing,tolerance,floor",
    [(None, 0.0, 0.0), (None, 0.02, 0.0), ("silverman", 0.0, 0.0), ("silverman", 0.005, 0.0),
     (0.3, 0.01, 0.4), (None, 0.0, 0.6), (None, 0.0, 1.1)],
)
def test_refined_search_equals_brute_force(seed, objective, smoothing, tolerance, floor):
    rng = np.random.RandomState(seed)
    n = 60
    positive = rng.rand(n) < 0.25
    positive[:2] = [True, False]
    margins = np.round(rng.normal(size=n) + 1.2 * positive - 0.8, 2)  # rounding: ties
    candidates, _, _ = midpoint_candidates(margins)
    bandwidth = 0.0
    if smoothing == "silverman":
        bandwidth = smoothing_bandwidth(margins[positive], margins)
    elif smoothing is not None:
        bandwidth = smoothing
    floor = min(floor, 1.0)
    theta, table = best_threshold(
        positive, margins, candidates, objective=objective, smoothing=smoothing,
        tolerance=tolerance, min_precision=floor,
    )
    expected, best = _brute_force_choice(
        positive.tolist(), margins.tolist(), candidates.tolist(), objective, bandwidth,
        tolerance, floor,
    )
    assert theta == pytest.approx(expected, abs=1e-12)
    assert table["score"].max() == pytest.approx(best)
    chosen = table["theta"] == theta
    assert table["precision"][chosen][0] >= floor or floor > table["precision"].max()


@pytest.mark.parametrize("seed", range(5))
def test_midpoints_reach_the_best_threshold_of_all(seed):
    # Every classification a shift can make is a midpoint cut: exact search over the
    # midpoints finds the best G-mean over any threshold whatsoever.
    rng = np.random.RandomState(seed)
    margins = np.round(rng.normal(size=40), 1)
    positive = rng.rand(40) < 0.3
    positive[:2] = [True, False]
    candidates, upper, lower = midpoint_candidates(margins)
    _, table = best_threshold(positive, margins, candidates)
    dense = np.linspace(-4, 4, 8001)
    _, dense_table = best_threshold(positive, margins, dense)
    assert table["g_mean"].max() == pytest.approx(dense_table["g_mean"].max())
    # the rows named for a cut lie on either side of it
    for t, i, j in zip(candidates[1:], upper[1:], lower[1:]):
        assert margins[i] + t > 0 > margins[j] + t
    assert np.unique(margins).size == candidates.size


@pytest.mark.parametrize("margins", [
    np.round(np.random.RandomState(0).normal(size=5000), 2),  # many ties
    np.random.RandomState(1).normal(size=300),
    np.array([0.0, -0.0, 1.0, -0.0, 2.0, 0.0]), np.array([-0.0, 0.0, 1.0]),  # signed zeros: one group
    np.array([1.0, np.nan, 2.0, np.nan]), np.array([np.inf, 1.0, -np.inf, 1.0]), np.array([]), np.array([3.0]),
])
def test_midpoint_rows_are_the_first_rows_of_each_margin(margins):
    # the candidates' rows come from one unstable argsort; the truth is np.unique's stable sort
    values, first = np.unique(margins, return_index=True)
    values, first = values[::-1], first[::-1]
    candidates, upper, lower = midpoint_candidates(margins)
    np.testing.assert_array_equal(upper[1:], first[:-1])
    np.testing.assert_array_equal(lower[1:], first[1:])
    np.testing.assert_array_equal(candidates[1:], -(values[1:] + values[:-1]) / 2)
    assert np.signbit(candidates[1:]).tolist() == np.signbit(-(values[1:] + values[:-1]) / 2).tolist()


def test_smoothed_search_thins_many_candidates(monkeypatch):
    from dimbsvm.svm import threshold

    rng = np.random.RandomState(3)
    positive = rng.rand(300) < 0.2
    margins = rng.normal(size=300) + positive - 0.5
    candidates, _, _ = midpoint_candidates(margins)
    monkeypatch.setattr(threshold, "MAX_SMOOTHED_CANDIDATES", 40)
    theta, table = best_threshold(positive, margins, candidates, smoothing="silverman")
    scored = np.isfinite(table["score"])
    assert 35 <= scored.sum() <= 40 and scored[0]  # theta = 0 is always scored
    assert table["theta"][scored].min() == candidates.min()
    assert table["theta"][scored].max() == candidates.max()
    expected, _ = best_threshold(
        positive, margins, candidates[scored], smoothing="silverman"
    )
    assert theta == expected


def test_smoothing_bandwidth_rule_and_fallbacks():
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    sd, iqr = np.std(values, ddof=1), 1.0
    assert smoothing_bandwidth(values) == pytest.approx(0.9 * min(sd, iqr / 1.34) * 5 ** -0.2)
    # one positive margin: the spread of all margins is used; none at all: no smoothing
    assert smoothing_bandwidth([0.3], values) == smoothing_bandwidth(values)
    assert smoothing_bandwidth([0.3], [0.3, 0.3]) == 0.0
    _, table = best_threshold([1, 0], [0.3, 0.3], [0.0, -1.0], smoothing="silverman")
    np.testing.assert_array_equal(table["score"], table["g_mean"])  # fell back to exact


def test_search_parameters_are_checked():
    with pytest.raises(ValueError, match="objective must be one of"):
        best_threshold([1, 0], [0.1, -0.1], [0.0], objective="accuracy")
    with pytest.raises(ValueError, match="smoothing must be one of"):
        best_threshold([1, 0], [0.1, -0.1], [0.0], smoothing="scott")
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        best_threshold([1, 0], [0.1, -0.1], [0.0], smoothing=-0.1)
    with pytest.raises(ValueError, match="tolerance must be in"):
        best_threshold([1, 0], [0.1, -0.1], [0.0], tolerance=1.0)
    with pytest.raises(ValueError, match="candidates must be one of"):
        othr_threshold(np.zeros((2, 1)), [1, 0], [0.1, -0.1], candidates="all")
    X, y = _imbalanced(0)
    for Estimator in (OTHRClassifier, EnsembleOTHRClassifier):
        for bad in (dict(smoothing="scott"), dict(smoothing=0.0), dict(tolerance=1.0),
                    dict(min_precision=1.5), dict(candidates="all"), dict(objective="auc")):
            with pytest.raises(ValueError, match="parameter of"):
                Estimator(**bad).fit(X, y)
    with pytest.raises(ValueError, match="'threshold' parameter"):
        EnsembleOTHRClassifier(threshold="vote").fit(X, y)


def test_othr_defaults_are_deterministic_and_not_the_paper():
    X, y = _imbalanced(3, n_samples=150)
    clf = OTHRClassifier()
    assert {k: clf.get_params()[k] for k in OTHR_PAPER} != OTHR_PAPER
    first, second = clone(clf).fit(X, y), clone(clf).fit(X, y)
    assert first.threshold_ == second.threshold_  # random_state=None: folds in row order
    shuffled = OTHRClassifier(random_state=0).fit(X, y)
    assert shuffled.threshold_ == OTHRClassifier(random_state=0).fit(X, y).threshold_


def test_tolerance_prefers_a_smaller_shift():
    X, y = _imbalanced(5, n_samples=200)
    exact = OTHRClassifier(margins="train", tolerance=0.0).fit(X, y)
    loose = OTHRClassifier(margins="train", tolerance=0.05).fit(X, y)
    assert abs(loose.threshold_) <= abs(exact.threshold_)
    best = exact.candidates_["g_mean"].max()
    row = loose.candidates_["theta"] == loose.threshold_
    assert loose.candidates_["g_mean"][row][0] >= 0.95 * best


def test_thr_equals_closed_form():
    X, y = _imbalanced(0, n_samples=120, weight=0.85)
    clf = THRClassifier().fit(X, y)
    n_pos, n_neg = int((y == 1).sum()), int((y == 0).sum())
    assert n_pos < n_neg
    assert clf.threshold_ == (n_neg - n_pos) / (n_pos + n_neg + 2)
    assert thr_shift(n_pos, n_neg) == clf.threshold_
    base = clf.estimator_.decision_function(X)
    np.testing.assert_allclose(clf.decision_function(X), base + clf.threshold_)
    np.testing.assert_array_equal(clf.predict(X), (base + clf.threshold_ > 0).astype(int))


@pytest.mark.parametrize("Estimator", [OTHRClassifier, THRClassifier])
@pytest.mark.parametrize(
    "labels",
    [("neg", "pos"), (-1, 1), (7, 3), (True, False), ("b", "a")],
    ids=["str", "pm1", "minority-first", "bool", "str-minority-first"],
)
def test_labels_of_any_dtype(Estimator, labels):
    X, y01 = _imbalanced(3)
    majority, minority = labels
    y = np.where(y01 == 1, minority, majority)
    # The reference sorts its labels as y does, so that the SVM solves the same problem.
    minority_first = minority < majority
    reference_labels = (1, 0) if minority_first else (0, 1)
    y_reference = np.where(y01 == 1, reference_labels[1], reference_labels[0])
    reference = Estimator().fit(X, y_reference)
    clf = Estimator().fit(X, y)
    assert clf.pos_label_ == minority
    assert reference.pos_label_ == reference_labels[1]
    assert clf.classes_.tolist() == sorted(labels)
    assert clf.threshold_ == reference.threshold_
    mapping = {reference_labels[0]: majority, reference_labels[1]: minority}
    expected = np.array([mapping[label] for label in reference.predict(X)])
    np.testing.assert_array_equal(clf.predict(X), expected)
    # decision_function follows scikit-learn: positive means classes_[1]
    np.testing.assert_array_equal(clf.decision_function(X), reference.decision_function(X))
    np.testing.assert_array_equal(
        clf.classes_[(clf.decision_function(X) > 0).astype(int)], clf.predict(X)
    )
    # the minority side is positive in the shifted margin, whatever the label order
    shifted = clf._shifted_margin(X)
    np.testing.assert_array_equal(clf.predict(X) == minority, shifted > 0)
    if minority_first:
        # same problem with the other label order: equal up to the SVM solver's tolerance
        assert clf.threshold_ == pytest.approx(Estimator().fit(X, y01).threshold_, rel=1e-2)


def test_pos_label_and_minority_from_counts():
    X, y = _imbalanced(4)
    y = np.where(y == 1, "rare", "common")
    assert OTHRClassifier().fit(X, y).pos_label_ == "rare"
    forced = OTHRClassifier(pos_label="common").fit(X, y)
    assert forced.pos_label_ == "common"
    assert forced.candidates_["sample"][1:].size == 0 or np.all(
        y[forced.candidates_["sample"][1:]] == "common"
    )
    with pytest.raises(ValueError, match="pos_label='other' is not one of the training classes"):
        OTHRClassifier(pos_label="other").fit(X, y)
    # a tie in the counts: classes_[1] is positive
    balanced = np.array([0, 1] * 20)
    assert THRClassifier().fit(np.random.RandomState(0).rand(40, 2), balanced).pos_label_ == 1


def test_cv_margins():
    X, y = _imbalanced(6, n_samples=150)
    train = OTHRClassifier(margins="train").fit(X, y)
    cv = OTHRClassifier(margins="cv", cv=4, random_state=0).fit(X, y)
    again = OTHRClassifier(margins="cv", cv=4, random_state=0).fit(X, y)
    assert cv.threshold_ == again.threshold_
    np.testing.assert_array_equal(train.estimator_.dual_coef_, cv.estimator_.dual_coef_)
    assert cv.threshold_ >= 0.0
    with pytest.raises(ValueError, match="margins='cv' needs at least 2 minority samples"):
        OTHRClassifier(margins="cv").fit(X[:20], np.array([1] + [0] * 19))


def test_one_vs_rest_for_multiclass():
    X, y = make_classification(n_samples=150, n_classes=3, n_informative=3, random_state=0)
    model = OneVsRestClassifier(OTHRClassifier()).fit(X, y)
    assert model.predict(X).shape == (150,)


ALL = [OTHRClassifier, THRClassifier, EnsembleOTHRClassifier]


@pytest.mark.parametrize("Estimator", ALL)
def test_estimator_without_decision_function(Estimator):
    X, y = _imbalanced(0)
    with pytest.raises(ValueError, match="'decision_function'.*GaussianNB"):
        Estimator(GaussianNB()).fit(X, y)


@pytest.mark.parametrize("Estimator", ALL)
def test_multiclass_error(Estimator):
    X, y = make_classification(n_samples=60, n_classes=3, n_informative=3, random_state=0)
    message = "Only binary classification is supported.*OneVsRestClassifier"
    with pytest.raises(ValueError, match=message):
        Estimator().fit(X, y)


@pytest.mark.parametrize("Estimator", ALL)
def test_nan_and_one_class_errors(Estimator):
    X, y = _imbalanced(0)
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        Estimator().fit(X_nan, y)
    with pytest.raises(ValueError, match="needs samples of 2 classes; got 1 class"):
        Estimator().fit(X, np.zeros_like(y))
    fitted = Estimator().fit(X, y)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        fitted.predict(X_nan)


# --- EnSVM-OTHR --------------------------------------------------------------------------


def test_ensemble_paper_setting_and_vote():
    X, y = _imbalanced(2, n_samples=150)
    ensemble = EnsembleOTHRClassifier(n_estimators=7, random_state=0, **ENSEMBLE_PAPER).fit(X, y)
    assert ensemble.get_params()["bootstrap"] == "plain"
    assert not hasattr(ensemble, "threshold_")
    assert len(ensemble.members_) == len(ensemble.estimators_) == 7
    assert all(member.margins == "train" for member in ensemble.members_)
    shifted = ensemble.optimal_thresholds_ != 0
    ratio = ensemble.thresholds_ / np.where(shifted, ensemble.optimal_thresholds_, 1.0)
    assert shifted.any()
    assert np.all(np.abs(ratio[shifted] - 1) <= 0.1)  # eq. 25
    assert len(set(ratio[shifted])) == shifted.sum()  # one perturbation per member
    margins = np.stack([member.shifted_margin(X) for member in ensemble.members_])
    np.testing.assert_allclose(ensemble.decision_function(X), margins.mean(axis=0))
    votes = (margins > 0).sum(axis=0)
    np.testing.assert_array_equal(ensemble.predict(X), (2 * votes >= 7).astype(int))


def test_ensemble_vote_tie_goes_to_minority():
    X, y = _imbalanced(2)
    ensemble = EnsembleOTHRClassifier(n_estimators=2, random_state=1, **ENSEMBLE_PAPER).fit(X, y)
    votes = np.stack([member.shifted_margin(X) > 0 for member in ensemble.members_]).sum(axis=0)
    assert (votes == 1).any()
    np.testing.assert_array_equal(ensemble.predict(X)[votes == 1], 1)


def test_members_are_rebuilt_from_seeds():
    X, y = _imbalanced(2)
    ensemble = EnsembleOTHRClassifier(n_estimators=3, random_state=0, **ENSEMBLE_PAPER).fit(X, y)
    member = fit_member(X, y, int(ensemble.seeds_[1]), pos_label=1)
    assert member.threshold == ensemble.thresholds_[1]
    np.testing.assert_array_equal(
        member.estimator.support_, ensemble.estimators_[1].support_
    )


@pytest.mark.parametrize(
    "params",
    [
        dict(bootstrap="stratified", threshold="member", member_margins="oob"),
        dict(bootstrap="balanced", threshold="member", member_margins="cv", cv=3),
        dict(bootstrap="plain", threshold="member", class_weight="balanced", objective="f_measure"),
        dict(bootstrap="balanced", threshold="member", max_samples=0.5, perturbation=0.0),
        dict(bootstrap="stratified", threshold="member", max_samples=40, tolerance=0.01),
        dict(bootstrap="balanced", candidates="othr", smoothing=None),
        dict(bootstrap="plain", objective="g_f_mean", min_precision=0.3),
        dict(class_weight="balanced", smoothing=0.2, tolerance=0.0),
    ],
)
def test_ensemble_refinements(params):
    X, y = _imbalanced(7, n_samples=150)
    ensemble = EnsembleOTHRClassifier(n_estimators=4, random_state=0, **params).fit(X, y)
    again = EnsembleOTHRClassifier(n_estimators=4, random_state=0, **params).fit(X, y)
    np.testing.assert_array_equal(ensemble.thresholds_, again.thresholds_)
    assert g_mean(y, ensemble.predict(X)) > 0.5
    if params.get("perturbation") == 0.0:
        np.testing.assert_array_equal(ensemble.thresholds_, ensemble.optimal_thresholds_)
    if "class_weight" in params:
        assert ensemble.estimators_[0].class_weight == "balanced"
    if "member_margins" in params:
        assert {member.margins for member in ensemble.members_} == {params["member_margins"]}


def test_pooled_threshold_is_searched_on_pooled_out_of_bag_margins():
    X, y = _imbalanced(7, n_samples=160)
    ensemble = EnsembleOTHRClassifier(n_estimators=6, random_state=0).fit(X, y)
    assert ensemble.threshold == "pooled_oob" and ensemble.threshold_margins_ == "oob"
    np.testing.assert_array_equal(ensemble.thresholds_, ensemble.threshold_)
    assert {member.margins for member in ensemble.members_} == {"pooled_oob"}
    assert all(member.oob_rows is None for member in ensemble.members_)  # dropped after pooling
    # rebuild the members from their seeds and pool their out-of-bag margins independently
    params = dict(pos_label=1, bootstrap="stratified", margins="none", perturbation=0.0)
    rebuilt = [fit_member(X, y, int(seed), keep_oob=True, **params) for seed in ensemble.seeds_]
    total, count = np.zeros(y.size), np.zeros(y.size)
    for member in rebuilt:
        margins = member.estimator.decision_function(X)
        in_bag = np.isin(np.arange(y.size), member.oob_rows, invert=True)
        total += np.where(in_bag, 0.0, margins)
        count += ~in_bag
        np.testing.assert_allclose(member.oob_margins, margins[member.oob_rows])
    pooled, counts = pooled_oob_margins(rebuilt, y.size)
    np.testing.assert_array_equal(counts, count)
    covered = count > 0
    np.testing.assert_allclose(pooled[covered], total[covered] / count[covered])
    assert np.isnan(pooled[~covered]).all()
    theta, table = othr_threshold(
        X[covered], y[covered], pooled[covered], candidates="midpoints", smoothing="silverman",
        tolerance=0.005,
    )
    assert ensemble.threshold_ == theta
    np.testing.assert_array_equal(ensemble.candidates_["theta"], table["theta"])
    # prediction is the sign of the shifted mean margin, which decision_function is
    mean = np.mean([m.estimator.decision_function(X) for m in rebuilt], axis=0)
    np.testing.assert_allclose(ensemble.decision_function(X), mean + theta)
    np.testing.assert_array_equal(ensemble.predict(X), (mean + theta > 0).astype(int))


def test_pooled_threshold_with_eq23_candidates_names_training_rows():
    X, y = _imbalanced(4, n_samples=150)
    ensemble = EnsembleOTHRClassifier(
        n_estimators=5, candidates="othr", smoothing=None, tolerance=0.0, random_state=1
    ).fit(X, y)
    table = ensemble.candidates_
    rows = table["sample"][1:]
    assert rows.size and np.all(y[rows] == 1) and np.all(y[table["neighbour"][1:]] == 0)
    assert ensemble.threshold_ in table["theta"]


def test_pooled_threshold_falls_back_to_train_margins(caplog):
    # A single minority row is in every stratified bag: no out-of-bag minority row.
    rng = np.random.RandomState(0)
    X = rng.normal(size=(30, 2))
    y = np.zeros(30, dtype=int)
    y[0] = 1
    X[0] += 2
    with caplog.at_level("WARNING", logger="dimbsvm.svm.ensemble"):
        ensemble = EnsembleOTHRClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert ensemble.threshold_margins_ == "train"
    assert "searched on the mean margins of all training rows" in caplog.text
    assert {member.margins for member in ensemble.members_} == {"pooled_train"}


def test_refitting_in_member_mode_drops_the_shared_threshold():
    X, y = _imbalanced(2)
    ensemble = EnsembleOTHRClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert hasattr(ensemble, "threshold_")
    ensemble.set_params(threshold="member").fit(X, y)
    assert not hasattr(ensemble, "threshold_") and not hasattr(ensemble, "candidates_")


def test_bag_sizes():
    positive = np.array([True] * 10 + [False] * 90)
    rng = np.random.RandomState(0)
    bag, _ = draw_bag(positive, rng, bootstrap="stratified")
    assert bag.size == 100 and positive[bag].sum() == 10
    bag, _ = draw_bag(positive, rng, bootstrap="balanced")
    assert bag.size == 20 and positive[bag].sum() == 10
    assert np.unique(bag[~positive[bag]]).size == 10  # majority drawn without replacement
    bag, _ = draw_bag(positive, rng, bootstrap="plain", max_samples=0.5)
    assert bag.size == 50
    bag, _ = draw_bag(positive, rng, bootstrap="balanced", max_samples=8)
    assert bag.size == 8 and positive[bag].sum() == 4


@pytest.mark.parametrize("bootstrap, max_samples", [("plain", None), ("stratified", 0.5), ("balanced", 30)])
def test_a_bag_drawn_ahead_gives_the_member_it_draws_itself(bootstrap, max_samples):
    # The fold engine draws each member's bag in a task of its own and hands it to the member task;
    # the member must be the one that draws its own bag, perturbation (drawn after the bag) included.
    from dimbsvm.svm.bagging import draw_seeded_bag
    from dimbsvm.svm.members import fit_member

    X, y = _imbalanced(3)
    rows = np.arange(10, len(y))  # a fold's training rows
    options = dict(pos_label=1, rows=rows, bootstrap=bootstrap, max_samples=max_samples, perturbation=0.5,
                   keep_oob="bag")
    perturbed = []
    for seed in (3, 5, 7, 11):
        itself = fit_member(X, y, seed, **options)
        perturbed.append(itself.threshold != itself.optimal_threshold)
        drawn = draw_seeded_bag(y[rows] == 1, seed, bootstrap=bootstrap, max_samples=max_samples)
        ahead = fit_member(X, y, seed, **options, drawn=drawn)
        again = fit_member(X, y, seed, **options, drawn=drawn)  # the bag is not used up (a retried task)
        for member in (ahead, again):
            assert member.threshold == itself.threshold
            np.testing.assert_array_equal(member.in_bag, itself.in_bag)
            np.testing.assert_array_equal(member.estimator.support_vectors_, itself.estimator.support_vectors_)
    assert any(perturbed)  # the generator's state after the bag mattered
    with pytest.raises(ValueError, match="bag drawn for member 11"):
        fit_member(X, y, 3, **options, drawn=drawn)


def test_balanced_bags_of_smaller_data_are_drawn_as_before():
    # up to PERMUTED_POPULATION majority rows the majority is sampled by RandomState.choice (a
    # permutation), as before the rejection sampler: the same bags and the same generator state after
    positive = np.zeros(5000, dtype=bool)
    positive[::50] = True
    for seed in range(4):
        rng, legacy = np.random.RandomState(seed), np.random.RandomState(seed)
        bag, _ = draw_bag(positive, rng, bootstrap="balanced", max_samples=400)
        minority, majority = np.flatnonzero(positive), np.flatnonzero(~positive)
        expected = np.concatenate([minority[legacy.randint(0, minority.size, size=200)],
                                   legacy.choice(majority, size=200, replace=False)])
        np.testing.assert_array_equal(bag, expected)
        assert rng.uniform() == legacy.uniform()


def test_sampling_without_replacement_by_rejection_is_uniform():
    from scipy.stats import chisquare

    from dimbsvm.svm.bagging import sample_without_replacement

    rng = np.random.RandomState(0)
    # the rejection path (permuted_up_to=0) on 6 rows, 2 drawn: each of the 30 ordered pairs has probability 1/30
    pairs = np.array([sample_without_replacement(6, 2, rng, permuted_up_to=0) for _ in range(30_000)])
    assert np.all(pairs[:, 0] != pairs[:, 1])
    observed = np.bincount(pairs[:, 0] * 6 + pairs[:, 1], minlength=36)
    assert np.all(observed[np.arange(6) * 7] == 0)  # (i, i) never
    assert chisquare(np.delete(observed, np.arange(6) * 7)).pvalue > 1e-3
    whole = sample_without_replacement(50, 50, rng, permuted_up_to=0)  # the whole population, every row once
    np.testing.assert_array_equal(np.sort(whole), np.arange(50))
    with pytest.raises(ValueError, match="cannot draw 7 distinct rows out of 6"):
        sample_without_replacement(6, 7, rng)


def test_a_balanced_bag_from_millions_of_majority_rows_holds_distinct_majority_rows():
    from dimbsvm.svm.bagging import PERMUTED_POPULATION

    positive = np.zeros(PERMUTED_POPULATION + 1000, dtype=bool)
    positive[::1000] = True
    bag, _ = draw_bag(positive, np.random.RandomState(0), bootstrap="balanced", max_samples=20_000)
    majority_rows = bag[~positive[bag]]
    assert bag.size == 20_000 and majority_rows.size == 10_000 and np.unique(majority_rows).size == 10_000


def test_bags_without_minority_are_redrawn():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(200, 3))
    y = np.zeros(200, dtype=int)
    y[:2] = 1
    X[:2] += 3
    ensemble = EnsembleOTHRClassifier(
        n_estimators=5, bootstrap="plain", max_samples=20, max_bag_draws=500, random_state=0
    ).fit(X, y)
    n_draws = [member.n_draws for member in ensemble.members_]
    assert max(n_draws) > 1
    for member in ensemble.members_:
        np.testing.assert_array_equal(member.estimator.classes_, [0, 1])


def test_redraws_exhausted():
    X, y = _imbalanced(0)
    with pytest.raises(ValueError, match="No bag of 1 rows .* held both classes in 3 attempts"):
        EnsembleOTHRClassifier(
            n_estimators=2, bootstrap="plain", max_samples=1, max_bag_draws=3
        ).fit(X, y)


def test_class_weight_needs_a_base_that_has_it():
    X, y = _imbalanced(0)
    with pytest.raises(ValueError, match="class_weight='balanced' needs a base estimator"):
        EnsembleOTHRClassifier(LinearDiscriminantAnalysis(), class_weight="balanced").fit(X, y)
    EnsembleOTHRClassifier(LogisticRegression(), n_estimators=2, class_weight="balanced").fit(X, y)


def _fitted_on(client, X, y, **params):
    ensemble = EnsembleOTHRClassifier(n_estimators=6, random_state=3, client=client, **params)
    return ensemble.fit(X, y)


def _assert_identical(a, b, X):
    np.testing.assert_array_equal(a.seeds_, b.seeds_)
    assert getattr(a, "threshold_", None) == getattr(b, "threshold_", None)
    np.testing.assert_array_equal(a.thresholds_, b.thresholds_)
    np.testing.assert_array_equal(a.optimal_thresholds_, b.optimal_thresholds_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.filterwarnings("ignore:Port 8787 is already in use")
@pytest.mark.parametrize(
    "params",
    [dict(bootstrap="stratified", threshold="member", member_margins="oob"), dict()],
    ids=["member-oob", "defaults-pooled-oob"],
)
@pytest.mark.parametrize("n_workers,processes", [(1, False), (2, False), (2, True)])
def test_ensemble_identical_on_any_number_of_workers(n_workers, processes, params):
    distributed = pytest.importorskip("distributed")
    X, y = _imbalanced(8, n_samples=120)
    in_process = _fitted_on(None, X, y, **params)
    with distributed.LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        on_cluster = _fitted_on(client, X, y, **params)
        # the active client is found without being passed
        active = _fitted_on(None, X, y, **params)
        if not processes:
            # fitted inside a task: members are fitted in that task, not submitted from it
            inside = client.submit(_fitted_on, None, X, y, **params).result(timeout=60)
            _assert_identical(in_process, inside, X)
        restored = pickle.loads(pickle.dumps(on_cluster))
        assert on_cluster.client is client and restored.client is None
        assert clone(on_cluster).client is client
    _assert_identical(in_process, on_cluster, X)
    _assert_identical(in_process, active, X)
    _assert_identical(in_process, restored, X)


# --- scikit-learn's estimator checks -----------------------------------------------------


#: A base SVM for which weighting a row equals repeating it to the check's tolerance: a fixed gamma
#: (gamma="scale" reads the unweighted feature variance) and a solver tolerance far below the check's.
EXACT_WEIGHT_SVC = SVC(gamma=1.0, tol=1e-10)


def _expected_failed_checks(estimator):
    if not isinstance(estimator, EnsembleOTHRClassifier):
        base = estimator.estimator
        if base is None or (isinstance(base, SVC) and base.tol > 1e-8):
            reason = ("the default base SVC(gamma='scale') computes gamma from the unweighted feature "
                      "variance and stops at tol=1e-3, so it is not exactly weight-equivalent itself "
                      "(scikit-learn marks SVC so); the same check passes with SVC(gamma=1.0, tol=1e-10)")
            return {"check_sample_weight_equivalence_on_dense_data": reason,
                    "check_sample_weight_equivalence_on_sparse_data": reason}
        return {}
    failures = {
        "check_class_weight_classifiers": (
            "the shared threshold is searched for the best G-mean after the members are "
            "fitted, which by design undoes the extreme class_weight this check sets"
        )
    }
    if estimator.threshold == "member":
        reason = (
            "predict is the members' majority vote and decision_function their mean "
            "shifted margin (EnSVM-OTHR as designed); near the boundary the two can disagree"
        )
        failures = {
            "check_classifiers_train": reason,
            "check_classifiers_train(readonly_memmap=True)": reason,
            "check_classifiers_train(readonly_memmap=True,X_dtype=float32)": reason,
        }
    return failures


@parametrize_with_checks(
    [
        OTHRClassifier(),
        OTHRClassifier(**OTHR_PAPER),
        OTHRClassifier(candidates="midpoints", smoothing="silverman", objective="g_f_mean"),
        THRClassifier(),
        # sample_weight: the base's fit and the threshold objective's counts
        THRClassifier(EXACT_WEIGHT_SVC),
        OTHRClassifier(EXACT_WEIGHT_SVC),
        OTHRClassifier(LogisticRegression(tol=1e-12), candidates="midpoints", smoothing="silverman",
                       probability=True),
        OTHRClassifier(probability=True),
        EnsembleOTHRClassifier(n_estimators=3),
        EnsembleOTHRClassifier(n_estimators=3, **ENSEMBLE_PAPER),
        EnsembleOTHRClassifier(n_estimators=3, probability=True),
        EnsembleOTHRClassifier(n_estimators=2, param_grid={"C": [0.5, 4.0]}, top_candidates=1),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_thin_candidates_keeps_zero_and_extremes_within_budget():
    from dimbsvm.svm.threshold import thin_candidates

    rng = np.random.default_rng(0)
    theta = np.concatenate([[0.0], rng.normal(size=999)])
    keep = thin_candidates(theta, 50)
    assert len(keep) <= 50 and 0 in keep
    assert theta.argmin() in keep and theta.argmax() in keep
    assert np.all(np.diff(keep) > 0)  # original order
    assert thin_candidates(theta, None) == slice(None) and thin_candidates(theta, 1000) == slice(None)


def test_pooled_threshold_with_thinned_candidates_stays_close():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=3000, weights=[0.9], random_state=0)
    full = EnsembleOTHRClassifier(n_estimators=3, max_candidates=None, random_state=0).fit(X, y)
    thin = EnsembleOTHRClassifier(n_estimators=3, max_candidates=200, random_state=0).fit(X, y)
    assert full.candidates_["theta"].size > 2000 and thin.candidates_["theta"].size <= 200
    # every kept candidate scores exactly as in the full table
    common = np.isin(full.candidates_["theta"], thin.candidates_["theta"])
    np.testing.assert_allclose(np.sort(full.candidates_["score"][common]), np.sort(thin.candidates_["score"]))


def test_binned_smoothed_counts_match_the_margin_by_margin_sums(monkeypatch):
    """Above the work budget the smoothed counts come from binned margins: within 1e-5 of the exact sums."""
    from dimbsvm.svm import threshold as T

    rng = np.random.default_rng(1)
    n = 60_000
    y = rng.random(n) < 0.03
    margins = rng.normal(size=n) * 0.7 + np.where(y, -0.2, -1.3)
    margins[:5] = [-40.0, -25.0, 12.0, 30.0, 55.0]  # far outliers: counted 0 or 1 beyond the kernel's reach
    negatives = np.sort(margins[~y])
    bandwidth = T.smoothing_bandwidth(np.sort(margins[y]))
    theta = np.sort(rng.uniform(-3, 3, size=4096))
    binned = T._binned_smoothed_count(negatives, theta, bandwidth)
    monkeypatch.setattr(T, "MAX_EXACT_SMOOTHING", 1 << 62)
    exact = T._smoothed_count(negatives, theta, bandwidth)
    np.testing.assert_allclose(binned, exact, rtol=1e-5, atol=1e-3)
    chosen_exact = T.othr_threshold(None, y, margins, candidates="midpoints", smoothing="silverman",
                                    tolerance=0.005)[0]
    monkeypatch.setattr(T, "MAX_EXACT_SMOOTHING", 1 << 20)  # every search here is over the budget
    assert T.othr_threshold(None, y, margins, candidates="midpoints", smoothing="silverman",
                            tolerance=0.005)[0] == chosen_exact


@pytest.mark.parametrize("make", [lambda: OTHRClassifier(), lambda: THRClassifier(),
                                  lambda: EnsembleOTHRClassifier(n_estimators=3, random_state=0)])
def test_nested_search_over_the_default_estimator(make):
    """``estimator=None`` is searchable like the explicit default: same scores, no shared default mutated."""
    from sklearn.model_selection import GridSearchCV

    from dimbsvm.svm._base import default_estimator

    X, y = make_classification(n_samples=240, weights=[0.85], random_state=0)
    grid = {"estimator__C": [0.1, 10.0]}
    implicit = GridSearchCV(make(), grid, cv=3, scoring="roc_auc").fit(X, y)
    explicit = GridSearchCV(make().set_params(estimator=default_estimator()), grid, cv=3, scoring="roc_auc").fit(X, y)
    np.testing.assert_array_equal(implicit.cv_results_["mean_test_score"], explicit.cv_results_["mean_test_score"])
    assert implicit.best_estimator_.estimator.C == implicit.best_params_["estimator__C"]
    assert make().estimator is None  # the constructor's default was not touched
    assert make().get_params()["estimator__C"] == default_estimator().C


@pytest.mark.parametrize("scale", [1.0, 80.0])
def test_platt_fit_equals_scikit_learns_sigmoid_calibration(scale):
    from sklearn.calibration import _sigmoid_calibration  # scikit-learn's own Platt fit: the oracle

    from dimbsvm.svm.calibration import platt_fit

    rng = np.random.RandomState(3)
    positive = rng.rand(600) < 0.12
    scores = scale * (1.3 * positive + rng.normal(size=600))
    a, b = platt_fit(scores, positive)
    a_ref, b_ref = _sigmoid_calibration(scores, positive.astype(int))
    assert a == pytest.approx(a_ref, rel=1e-4) and b == pytest.approx(b_ref, rel=1e-4, abs=1e-6)


def test_ensemble_probabilities_are_calibrated_like_calibratedclassifiercv():
    """Platt on the pooled out-of-bag margins (one fit) against CalibratedClassifierCV (5 more fits), held out."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.metrics import log_loss

    X, y = make_classification(n_samples=4000, n_features=8, weights=[0.9], class_sep=0.8, flip_y=0.02,
                               random_state=0)
    train, test = slice(0, 2000), slice(2000, None)
    ours = EnsembleOTHRClassifier(n_estimators=10, probability=True, random_state=0).fit(X[train], y[train])
    reference = CalibratedClassifierCV(EnsembleOTHRClassifier(n_estimators=10, random_state=0), method="sigmoid",
                                       cv=5).fit(X[train], y[train])
    proba = ours.predict_proba(X[test])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert log_loss(y[test], proba) <= 1.05 * log_loss(y[test], reference.predict_proba(X[test])) + 0.005
    assert abs(proba[:, 1].mean() - y[test].mean()) < 0.02  # the minority's share, not the 0.5 of a shifted cut
    # the probability grows with the decision value (same ranking, so the same ROC-AUC)
    order = np.argsort(ours.decision_function(X[test]))
    assert np.all(np.diff(proba[order, 1]) >= 0)


def test_probability_is_refused_where_it_could_not_be_honest():
    X, y = _imbalanced(0, n_samples=200)
    assert not hasattr(EnsembleOTHRClassifier(n_estimators=3).fit(X, y), "predict_proba")
    with pytest.raises(ValueError, match="needs threshold='pooled_oob'"):
        EnsembleOTHRClassifier(n_estimators=3, threshold="member", probability=True).fit(X, y)


def test_othr_probabilities_equal_calibratedclassifiercv_on_the_same_folds():
    """Platt on OTHR's out-of-fold margins is CalibratedClassifierCV(ensemble=False): same folds, same sigmoid."""
    from sklearn.calibration import CalibratedClassifierCV

    X, y = make_classification(n_samples=1500, n_features=6, weights=[0.85], class_sep=0.8, flip_y=0.02,
                               random_state=1)
    ours = OTHRClassifier(probability=True).fit(X[:1000], y[:1000])  # cv=5 unshuffled, as cv=5 below
    # Platt's b absorbs OTHR's shift, so the same margins up to a constant give the same probabilities
    reference = CalibratedClassifierCV(SVC(), method="sigmoid", cv=5, ensemble=False).fit(X[:1000], y[:1000])
    np.testing.assert_allclose(ours.predict_proba(X[1000:]), reference.predict_proba(X[1000:]), atol=2e-4)
    assert ours.predict_proba(X[:5]).shape == (5, 2)
    with pytest.raises(ValueError, match="needs margins='cv'"):
        OTHRClassifier(margins="train", probability=True).fit(X, y)
    assert not hasattr(OTHRClassifier().fit(X, y), "predict_proba")
    assert not hasattr(THRClassifier().fit(X, y), "predict_proba")


@pytest.mark.parametrize("smoothing", [None, 0.3])
@pytest.mark.parametrize("objective", ["g_mean", "f_measure"])
def test_weighted_threshold_scoring_equals_repeated_rows(smoothing, objective):
    rng = np.random.default_rng(4)
    y = rng.random(300) < 0.15
    margins = rng.normal(size=300) + 1.5 * y
    counts = rng.integers(0, 4, size=300)
    counts[np.flatnonzero(y)[:2]] = 1  # both classes keep weight
    candidates = np.linspace(-1.0, 2.0, 41)
    kwargs = dict(objective=objective, smoothing=smoothing)
    weighted = best_threshold(y, margins, candidates, sample_weight=counts, **kwargs)
    repeated = best_threshold(np.repeat(y, counts), np.repeat(margins, counts), candidates, **kwargs)
    assert weighted[0] == repeated[0]
    for column in ("tpr", "tnr", "precision", "g_mean", "f_measure", "score"):
        np.testing.assert_allclose(weighted[1][column], repeated[1][column], rtol=1e-12, err_msg=column)


def test_sample_weight_reaches_the_base_estimator_or_is_refused_by_name():
    X, y = _imbalanced(0, n_samples=200)
    weights = np.where(y == 1, 5.0, 1.0)
    weighted = OTHRClassifier(SVC(gamma=1.0)).fit(X, y, sample_weight=weights)
    by_class = OTHRClassifier(SVC(gamma=1.0, class_weight={0: 1.0, 1: 5.0})).fit(X, y)
    # per-row weights of 5 on the minority are the class weight of 5: the same SVM underneath
    np.testing.assert_allclose(weighted.estimator_.decision_function(X), by_class.estimator_.decision_function(X),
                               atol=1e-6)
    for model in (OTHRClassifier(LinearDiscriminantAnalysis()), THRClassifier(LinearDiscriminantAnalysis())):
        with pytest.raises(TypeError, match=f"{type(model).__name__} was given sample_weight, but its base "
                                            "estimator LinearDiscriminantAnalysis does not accept"):
            model.fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match="[Nn]egative"):
        THRClassifier().fit(X, y, sample_weight=-weights)


# --- EnsembleOTHRClassifier(param_grid=...): settings ranked on out-of-bag margins -------------------------

GRID = {"C": [0.1, 1.0, 10.0], "gamma": [0.5, "scale"]}


def test_grid_keeps_the_settings_of_best_out_of_bag_auc_computed_by_hand():
    from sklearn.metrics import roc_auc_score

    from dimbsvm.svm.members import fit_member

    X, y = make_classification(n_samples=400, n_features=6, weights=[0.88], flip_y=0.03, random_state=5)
    model = EnsembleOTHRClassifier(n_estimators=4, param_grid=GRID, top_candidates=2, random_state=1).fit(X, y)
    seeds = np.random.RandomState(1).randint(np.iinfo(np.int32).max, size=4)
    by_hand = []
    for setting in [{"C": c, "gamma": g} for c in GRID["C"] for g in GRID["gamma"]]:
        total, count = np.zeros(len(y)), np.zeros(len(y))
        for seed in seeds:
            member = fit_member(X, y, int(seed), pos_label=1, estimator=SVC(**setting), bootstrap="stratified",
                                margins="none", perturbation=0.0, keep_oob=True)
            total[member.oob_rows] += member.oob_margins
            count[member.oob_rows] += 1
        seen = count > 0
        by_hand.append((roc_auc_score(y[seen], total[seen] / count[seen]), setting))
    np.testing.assert_allclose(model.search_results_["oob_auc"], [auc for auc, _ in by_hand], rtol=1e-12)
    best_two = [setting for _, setting in sorted(by_hand, key=lambda t: -t[0])[:2]]
    assert model.best_params_ == best_two
    assert len(model.members_) == 8 and model.search_results_["kept"].sum() == 2
    assert {m.estimator.C for m in model.members_} == {s["C"] for s in best_two}


def test_a_grid_of_one_setting_is_the_plain_ensemble_on_another_scale():
    X, y = make_classification(n_samples=500, n_features=5, weights=[0.9], flip_y=0.03, random_state=6)
    plain = EnsembleOTHRClassifier(SVC(C=2.0), n_estimators=4, random_state=0).fit(X[:350], y[:350])
    grid = EnsembleOTHRClassifier(n_estimators=4, param_grid={"C": [2.0]}, random_state=0).fit(X[:350], y[:350])
    np.testing.assert_array_equal(grid.predict(X[350:]), plain.predict(X[350:]))
    ratio = grid.decision_function(X[350:]) / plain.decision_function(X[350:])
    np.testing.assert_allclose(ratio, 1.0 / grid.search_results_["oob_spread"][0], rtol=1e-9)


def test_grid_is_refused_where_it_cannot_work():
    X, y = _imbalanced(0, n_samples=200)
    with pytest.raises(ValueError, match="'degree_of_freedom', not parameter"):
        EnsembleOTHRClassifier(n_estimators=2, param_grid={"degree_of_freedom": [1]}).fit(X, y)
    with pytest.raises(ValueError, match="needs threshold='pooled_oob'"):
        EnsembleOTHRClassifier(n_estimators=2, param_grid={"C": [1.0]}, threshold="member").fit(X, y)


def test_recommended_is_an_unfitted_grid_ensemble_that_fits_with_and_without_a_client():
    from dimbsvm import recommended
    from dimbsvm.recommended import RECOMMENDED_GRID

    model = recommended(random_state=0)
    assert model.param_grid == RECOMMENDED_GRID and not hasattr(model, "members_")
    X, y = make_classification(n_samples=300, n_features=5, weights=[0.9], flip_y=0.03, random_state=7)
    fitted = model.set_params(n_estimators=2).fit(X, y)
    assert len(fitted.members_) == 2 * fitted.top_candidates and len(fitted.search_results_["oob_auc"]) == 32
    assert {m.estimator.class_weight for m in fitted.members_} <= {None, "balanced"}


# --- signed_margins: linear members without scikit-learn's per-call validation --------------------------------


def _linear_models():
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.svm import LinearSVC

    rng = np.random.RandomState(0)
    X = rng.normal(size=(600, 7))
    y = (X[:, 0] + 0.3 * rng.normal(size=600) > 0.8).astype(int)
    return X, y, [LinearSVC(dual=False).fit(X, y), LogisticRegression().fit(X, y),
                  SGDClassifier(random_state=0).fit(X, y)]


@pytest.mark.parametrize("assume_finite", [False, True])
def test_signed_margins_of_linear_models_equal_their_decision_function_bit_for_bit(assume_finite):
    from sklearn import config_context

    from dimbsvm.svm._base import _is_plain_linear_call, signed_margins

    X, _, models = _linear_models()
    rows = np.random.RandomState(1).normal(size=(333, 7))
    for model in models:
        assert _is_plain_linear_call(model, rows)
        with config_context(assume_finite=assume_finite):
            for sign in (1.0, -1.0):
                got = signed_margins(model, rows, sign)
                assert got.shape == (333,) and got.dtype == np.float64
                assert got.tobytes() == (sign * model.decision_function(rows)).tobytes()


def test_signed_margins_leave_other_inputs_to_decision_function_and_its_errors():
    import scipy.sparse as sp
    from sklearn.svm import SVC

    from dimbsvm.svm._base import _is_plain_linear_call, signed_margins

    X, y, [svc, *_] = _linear_models()
    rows = X[:50].copy()
    for other in (rows.astype(np.float32), sp.csr_matrix(rows), rows[:, :6], rows.tolist()):
        assert not _is_plain_linear_call(svc, other)
    np.testing.assert_array_equal(signed_margins(svc, sp.csr_matrix(rows), 1.0),
                                  svc.decision_function(sp.csr_matrix(rows)))
    with pytest.raises(ValueError, match="features"):
        signed_margins(svc, rows[:, :6], 1.0)
    bad = rows.copy()
    bad[3, 2] = np.nan
    assert not _is_plain_linear_call(svc, bad)
    with pytest.raises(ValueError, match="NaN"):
        signed_margins(svc, bad, 1.0)
    from sklearn.linear_model import RidgeClassifier

    # SVC has a decision_function of its own; RidgeClassifier's binary coef_ is 1-D: both left to scikit-learn
    for own in (SVC(kernel="linear").fit(X, y), RidgeClassifier().fit(X, y)):
        assert not _is_plain_linear_call(own, rows)
        np.testing.assert_array_equal(signed_margins(own, rows, -1.0), -own.decision_function(rows))
    pandas = pytest.importorskip("pandas")
    named = type(svc)(dual=False).fit(pandas.DataFrame(X, columns=[f"f{i}" for i in range(7)]), y)
    assert not _is_plain_linear_call(named, rows)  # decision_function warns about the missing names: kept
