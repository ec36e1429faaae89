"""Small imbalanced problems shared by the SVM test modules (test_threshold, test_members, test_othr, test_ensemble)."""

from sklearn.datasets import make_classification


def imbalanced(seed, n_samples=90, weight=0.8, class_sep=0.6):
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
