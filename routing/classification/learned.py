"""A classifier learned from examples: TF-IDF over words and characters, then a linear model.

Training uses scikit-learn: two ``TfidfVectorizer`` (word 1-2 grams, and
character 2-4 grams within word boundaries, both with sublinear tf and their
own L2 norm) side by side, and a multinomial ``LogisticRegression``, whose
softmax gives calibrated probabilities. Its cross-validated accuracy is
measured on the examples at training time.

The fitted model is exported as plain numbers (:class:`LearnedModel`: the two
vocabularies with their idf, the coefficients and intercepts), stored as JSON
and read back by every process. Classifying a question replays the same
arithmetic with numpy, without scikit-learn: the hot path neither imports it
nor pays its per-call validation. tests/routing/classification/test_learned.py holds the two equal.

Pure: texts and labels in, a model out; no database (routing.classification.training
stores, loads and swaps models).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

WORD_NGRAMS = (1, 2)
CHAR_NGRAMS = (2, 4)
REGULARISATION = 10.0  # LogisticRegression's C: the examples are few and short
NEAREST = 5  # examples that vote when embeddings are configured
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern
_SPACES = re.compile(r"\s\s+")


def word_ngrams(text: str) -> list[str]:
    """What TfidfVectorizer(analyzer="word", ngram_range=WORD_NGRAMS) sees in ``text``."""
    tokens = _TOKEN.findall(text.lower())
    grams = list(tokens)
    for n in range(2, WORD_NGRAMS[1] + 1):
        grams += [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return grams


def char_ngrams(text: str) -> list[str]:
    """What TfidfVectorizer(analyzer="char_wb", ngram_range=CHAR_NGRAMS) sees in ``text``."""
    low, high = CHAR_NGRAMS
    grams: list[str] = []
    for word in _SPACES.sub(" ", text.lower()).split():
        padded = f" {word} "
        for n in range(low, high + 1):
            grams += [padded[i : i + n] for i in range(max(1, len(padded) - n + 1))]
            if len(padded) <= n:  # a short word counts once, whole
                break
    return grams


@dataclass(frozen=True)
class _Block:
    """One vectorizer's part of the features: term -> column, and each column's idf."""

    vocabulary: dict[str, int]
    idf: np.ndarray
    offset: int  # where its columns start among all features

    def features(self, grams: list[str]) -> tuple[list[int], np.ndarray]:
        counts = Counter(g for g in grams if g in self.vocabulary)
        if not counts:
            return [], np.zeros(0)
        columns = [self.vocabulary[g] for g in counts]
        weights = np.array([1.0 + math.log(n) for n in counts.values()]) * self.idf[columns]
        weights /= np.linalg.norm(weights)
        return [self.offset + c for c in columns], weights


@dataclass(frozen=True)
class Prediction:
    label: str
    confidence: float
    probabilities: dict[str, float]
    voted: bool = False  # the nearest examples by embedding voted too


@dataclass(frozen=True)
class Neighbours:
    """The examples' embeddings (optional, routing.classification.embeddings): unit rows,
    with the index of each one's label among the model's labels, and the embedding model
    they came from."""

    model: str
    vectors: np.ndarray  # examples x dimensions, each row of norm 1
    labels: np.ndarray  # examples, an index into LearnedModel.labels

    def vote(self, vector: np.ndarray, classes: int) -> np.ndarray | None:
        """Per label, the share of the NEAREST examples' cosine similarity to ``vector``
        (a unit vector); None when it has another dimension or nothing is similar."""
        if vector.shape != self.vectors.shape[1:]:
            return None
        similarity = self.vectors @ vector
        nearest = np.argsort(similarity)[::-1][:NEAREST]
        weights = np.clip(similarity[nearest], 0.0, None)
        if weights.sum() <= 0:
            return None
        votes = np.bincount(self.labels[nearest], weights=weights, minlength=classes)
        return votes / votes.sum()


@dataclass(frozen=True)
class LearnedModel:
    labels: tuple[str, ...]
    word: _Block
    char: _Block
    coef: np.ndarray  # labels x features
    intercept: np.ndarray
    examples: int
    accuracy: float  # cross-validated, on the examples it was trained on
    version: int = 0  # the stored version it was read from (0: not stored)
    # Questions people labelled themselves (admin examples, corrections), by their
    # normalised text: for exactly these, the label is known, not predicted.
    exact: dict[str, str] = field(default_factory=dict)
    neighbours: Neighbours | None = None

    def recall(self, text: str) -> str | None:
        """The label a person gave exactly this question (normalised), if any."""
        return self.exact.get(normalised(text)) if self.exact else None

    def predict(self, text: str, vector: np.ndarray | None = None) -> Prediction:
        """The label and probabilities for ``text``; with its embedding ``vector`` (a unit
        vector from the neighbours' embedding model), the average of the model's
        probabilities and the nearest examples' vote."""
        word_columns, word_weights = self.word.features(word_ngrams(text))
        char_columns, char_weights = self.char.features(char_ngrams(text))
        columns = word_columns + char_columns
        scores = self.intercept.copy()
        if columns:
            scores += self.coef[:, columns] @ np.concatenate([word_weights, char_weights])
        exp = np.exp(scores - scores.max())
        probabilities = exp / exp.sum()
        vote = None
        if vector is not None and self.neighbours is not None:
            vote = self.neighbours.vote(vector, len(self.labels))
            if vote is not None:
                probabilities = (probabilities + vote) / 2
        best = int(probabilities.argmax())
        return Prediction(
            label=self.labels[best],
            confidence=round(float(probabilities[best]), 4),
            probabilities={
                label: round(float(p), 4)
                for label, p in zip(self.labels, probabilities, strict=True)
            },
            voted=vote is not None,
        )

    def as_json(self) -> dict[str, Any]:
        def block(b: _Block) -> dict[str, Any]:
            return {"vocabulary": b.vocabulary, "idf": [round(float(v), 6) for v in b.idf]}

        return {
            "labels": list(self.labels),
            "word": block(self.word),
            "char": block(self.char),
            "coef": [[round(float(v), 6) for v in row] for row in self.coef],
            "intercept": [round(float(v), 6) for v in self.intercept],
            "examples": self.examples,
            "accuracy": self.accuracy,
            "exact": self.exact,
            "neighbours": None
            if self.neighbours is None
            else {
                "model": self.neighbours.model,
                "labels": [self.labels[i] for i in self.neighbours.labels],
                "vectors": [[round(float(v), 5) for v in row] for row in self.neighbours.vectors],
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, version: int = 0) -> LearnedModel:
        word_vocabulary: dict[str, int] = data["word"]["vocabulary"]
        labels = tuple(data["labels"])
        near = data.get("neighbours")
        return cls(
            labels=labels,
            word=_Block(word_vocabulary, np.array(data["word"]["idf"]), 0),
            char=_Block(
                data["char"]["vocabulary"], np.array(data["char"]["idf"]), len(word_vocabulary)
            ),
            coef=np.array(data["coef"]),
            intercept=np.array(data["intercept"]),
            examples=int(data["examples"]),
            accuracy=float(data["accuracy"]),
            version=version,
            exact=dict(data.get("exact", {})),
            neighbours=None
            if not near
            else neighbours_of(
                near["model"], near["vectors"], [labels.index(label) for label in near["labels"]]
            ),
        )


def neighbours_of(model: str, vectors: Any, labels: Sequence[int]) -> Neighbours:
    """Neighbours from raw ``vectors`` (normalised here) labelled by label index."""
    matrix = np.asarray(vectors, dtype=float)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return Neighbours(model, matrix / np.where(norms == 0, 1.0, norms), np.asarray(labels))


def _pipeline() -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
    from sklearn.pipeline import make_pipeline, make_union  # type: ignore[import-untyped]

    return make_pipeline(
        make_union(
            TfidfVectorizer(analyzer="word", ngram_range=WORD_NGRAMS, sublinear_tf=True),
            TfidfVectorizer(analyzer="char_wb", ngram_range=CHAR_NGRAMS, sublinear_tf=True),
        ),
        LogisticRegression(C=REGULARISATION, max_iter=2000),
    )


def normalised(text: str) -> str:
    """A question as exact recall compares it: case, spacing and end punctuation aside."""
    return " ".join(text.lower().split()).strip(" ?!.")


def train(
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    folds: int = 5,
    exact: dict[str, str] | None = None,
) -> LearnedModel:
    """Fit the model on ``texts`` labelled ``labels`` (at least two labels) and measure
    it by ``folds``-fold cross-validation (stratified; fewer folds when a label has
    fewer examples). ``exact`` maps questions people labelled to their labels, recalled
    as they are (see LearnedModel.recall). Takes about a second for a few hundred
    examples."""
    from sklearn.model_selection import (  # type: ignore[import-untyped]
        StratifiedKFold,
        cross_val_score,
    )

    fewest = min(Counter(labels).values())
    accuracy = 0.0
    if fewest >= 2:
        splits = StratifiedKFold(min(folds, fewest), shuffle=True, random_state=0)
        accuracy = float(cross_val_score(_pipeline(), list(texts), list(labels), cv=splits).mean())
    pipeline = _pipeline().fit(list(texts), list(labels))
    model = export(pipeline, examples=len(texts), accuracy=round(accuracy, 4))
    recalled = {normalised(text): label for text, label in (exact or {}).items()}
    return replace(model, exact=recalled)


def export(pipeline: Any, *, examples: int, accuracy: float) -> LearnedModel:
    """The fitted scikit-learn pipeline as a LearnedModel."""
    union, regression = pipeline.steps[0][1], pipeline.steps[-1][1]
    word, char = (vectorizer for _, vectorizer in union.transformer_list)
    word_vocabulary = {str(k): int(v) for k, v in word.vocabulary_.items()}
    coef = regression.coef_
    intercept = regression.intercept_
    if len(regression.classes_) == 2:  # scikit-learn keeps one row for two classes
        coef = np.vstack([-coef[0], coef[0]]) / 2
        intercept = np.array([-intercept[0], intercept[0]]) / 2
    return LearnedModel(
        labels=tuple(str(c) for c in regression.classes_),
        word=_Block(word_vocabulary, np.asarray(word.idf_), 0),
        char=_Block(
            {str(k): int(v) for k, v in char.vocabulary_.items()},
            np.asarray(char.idf_),
            len(word_vocabulary),
        ),
        coef=np.asarray(coef),
        intercept=np.asarray(intercept),
        examples=examples,
        accuracy=accuracy,
    )
