"""A job's class_weight keyed by class name: mapped to the codes its labels get, refused where it names no class."""

import numpy as np
import pytest

from dimbsvm.exceptions import JobSpecError
from dimbsvm.jobs import run_job, validate_job
from dimbsvm.jobs.checks import check_job
from dimbsvm.jobs.class_weights import coded_class_weights
from dimbsvm.jobs.data import code_labels, load_job_data


def test_names_become_codes_nested_keys_too_and_other_values_are_kept():
    class_map = {"neg": 0, "pos": 1}
    params = {"C": 2.0, "class_weight": {"pos": 5, "neg": 1}, "estimator__class_weight": {"neg": 2}}
    assert coded_class_weights(params, class_map) == {"C": 2.0, "class_weight": {1: 5, 0: 1},
                                                      "estimator__class_weight": {0: 2}}
    assert coded_class_weights({"class_weight": "balanced"}, class_map) == {"class_weight": "balanced"}
    # svmlight's and KEEL's numeric class names match however YAML typed them
    assert coded_class_weights({"class_weight": {-1: 1, 1.0: 9}}, {"-1": 0, "1": 1}) == {"class_weight": {0: 1,
                                                                                                           1: 9}}
    # data without class names (arrays) is weighted by its codes, as before
    assert coded_class_weights({"class_weight": {1: 5, "0": 1}}, None) == {"class_weight": {1: 5, 0: 1}}


@pytest.mark.parametrize("weights, class_map, message", [
    ({"postive": 5}, {"neg": 0, "pos": 1}, r"names class 'postive', which the data does not have; its classes: "
                                            r"'neg', 'pos'"),
    ({1: 5}, {"neg": 0, "pos": 1}, r"names class 1, which the data does not have"),  # a code is not a name
    ({1: 5, "1": 2}, {"0": 0, "1": 1}, r"weights class '1' twice \(two keys name it\)"),
    ({"a": 5}, None, r"names class 'a', which the data does not have; its classes: their codes"),
])
def test_a_key_that_names_no_class_is_refused_in_one_line(weights, class_map, message):
    with pytest.raises(JobSpecError, match=message):
        coded_class_weights({"class_weight": weights}, class_map)


def _job(params, source, **more):
    return {"name": "weighted", "data": {"source": source}, "estimator": {"name": "svc", "params": params},
            "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 0}, "metrics": ["g_mean", "f_measure"], **more}


def test_a_job_weighted_by_class_name_equals_the_same_data_as_arrays_weighted_by_code(tmp_path):
    data, _ = code_labels(load_job_data("yeast5"))
    codes = data.meta["class_map"]
    np.savez(tmp_path / "coded.npz", X=np.asarray(data.X), y=np.asarray(data.y))
    by_name = run_job(validate_job(_job({"class_weight": {"positive": 8, "negative": 1}}, "yeast5")), None,
                      out=tmp_path / "by-name", progress=False)
    by_code = run_job(validate_job(_job({"class_weight": {codes["positive"]: 8, codes["negative"]: 1}},
                                        str(tmp_path / "coded.npz"))), None, out=tmp_path / "by-code", progress=False)
    unweighted = run_job(validate_job(_job({}, "yeast5")), None, out=tmp_path / "plain", progress=False)
    untimed = [[{k: v for k, v in fold.items() if not k.endswith("_time")} for fold in run.folds]
               for run in (by_name, by_code, unweighted)]
    assert untimed[0] == untimed[1]
    assert untimed[0] != untimed[2]  # the weights were applied, not dropped


def test_validate_refuses_a_class_weight_naming_no_class_of_the_data_or_a_search_candidate(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("data: {source: yeast5}\nestimator: {name: svc, params: {class_weight: {postive: 5}}}\n")
    with pytest.raises(JobSpecError, match=r"'estimator.params.class_weight' names class 'postive'"):
        check_job(job, run_dir=False)
    job.write_text("data: {source: yeast5}\nestimator: {name: svc}\n"
                   "search: {params: {class_weight: [{positive: 5}, {negative: 5, spam: 1}]}}\n")
    with pytest.raises(JobSpecError, match=r"'search.params.class_weight' names class 'spam'"):
        check_job(job, run_dir=False)
