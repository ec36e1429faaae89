"""The OTHR threshold search (dimbsvm.svm.threshold, dimbsvm.svm.candidates) against brute force and closed forms."""

import math

import numpy as np
import pytest
from sklearn.svm import SVC

from dimbsvm.metrics import f_measure, g_mean
from dimbsvm.svm import (
    EnsembleOTHRClassifier,
    OTHRClassifier,
)
from dimbsvm.svm.othr import PAPER_PARAMS as OTHR_PAPER
from dimbsvm.svm.threshold import (
    best_threshold,
    farther_majority_neighbours,
    midpoint_candidates,
    othr_threshold,
    smoothing_bandwidth,
)
from svm_cases import imbalanced as _imbalanced


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
        best_threshold([1, 0], [0.1, -0.1], [0.0], objective="no_such_metric")  # ("accuracy" is a scikit-learn scorer)
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




def test_thin_candidates_keeps_zero_and_extremes_within_budget():
    from dimbsvm.svm.threshold import thin_candidates

    rng = np.random.default_rng(0)
    theta = np.concatenate([[0.0], rng.normal(size=999)])
    keep = thin_candidates(theta, 50)
    assert len(keep) <= 50 and 0 in keep
    assert theta.argmin() in keep and theta.argmax() in keep
    assert np.all(np.diff(keep) > 0)  # original order
    assert thin_candidates(theta, None) == slice(None) and thin_candidates(theta, 1000) == slice(None)


@pytest.mark.parametrize("n, budget", [(7, 3), (1000, 999), (5000, 50), (5000, 4999)])
def test_thin_candidates_are_the_evenly_spaced_ranks_and_zero(n, budget):
    # the definition, written with np.unique: the first zero, and the candidates at evenly spaced ranks of the
    # stable sort (ranks repeat where the budget is close to n), each position once, in increasing order
    from dimbsvm.svm.threshold import thin_candidates

    rng = np.random.default_rng(n)
    theta = np.round(rng.normal(size=n), 1)  # ties, several zeros
    theta[rng.integers(0, n, size=max(1, n // 5))] = 0.0
    zero = np.flatnonzero(theta == 0.0)[:1]
    ranks = np.unique(np.linspace(0, n - 1, budget - zero.size).round().astype(np.int64))
    truth = np.unique(np.concatenate([zero, np.argsort(theta, kind="stable")[ranks]]))
    np.testing.assert_array_equal(thin_candidates(theta, budget), truth)




def test_binned_smoothed_counts_match_the_margin_by_margin_sums(monkeypatch):
    """Above the work budget the smoothed counts come from binned margins: within 1e-5 of the exact sums."""
    from dimbsvm.svm import smoothing as S
    from dimbsvm.svm import threshold as T

    rng = np.random.default_rng(1)
    n = 60_000
    y = rng.random(n) < 0.03
    margins = rng.normal(size=n) * 0.7 + np.where(y, -0.2, -1.3)
    margins[:5] = [-40.0, -25.0, 12.0, 30.0, 55.0]  # far outliers: counted 0 or 1 beyond the kernel's reach
    negatives = np.sort(margins[~y])
    bandwidth = T.smoothing_bandwidth(np.sort(margins[y]))
    theta = np.sort(rng.uniform(-3, 3, size=4096))
    binned = S.binned_smoothed_count(negatives, theta, bandwidth)
    monkeypatch.setattr(S, "MAX_EXACT_SMOOTHING", 1 << 62)
    exact = S.smoothed_count(negatives, theta, bandwidth)
    np.testing.assert_allclose(binned, exact, rtol=1e-5, atol=1e-3)
    chosen_exact = T.othr_threshold(None, y, margins, candidates="midpoints", smoothing="silverman",
                                    tolerance=0.005)[0]
    monkeypatch.setattr(S, "MAX_EXACT_SMOOTHING", 1 << 20)  # every search here is over the budget
    assert T.othr_threshold(None, y, margins, candidates="midpoints", smoothing="silverman",
                            tolerance=0.005)[0] == chosen_exact




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
