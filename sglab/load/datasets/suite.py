"""The bundled prompt suite: a few hundred prompts written for sglab (tools/gen_prompt_suite.py makes them).

Categories chat, code, maths, summarisation, extraction, translation, long-context; every record carries
its category, a target output length and a natural-stop cap. Shipped as package data.
"""

from __future__ import annotations

from importlib import resources

from sglab.load.datasets.model import CategorySource, Dataset
from sglab.load.datasets.openai_jsonl import load_openai_jsonl

SUITE_NAME = "sglab-suite"
SUITE_FILE = "prompt_suite.jsonl"
SUITE_CATEGORIES = ("chat", "code", "maths", "summarisation", "extraction", "translation", "long-context")


def load_suite(*, categories: tuple[str, ...] | None = None, limit: int | None = None) -> Dataset:
    """The suite, optionally only some categories (in file order)."""
    resource = resources.files("sglab.load.datasets").joinpath("data", SUITE_FILE)
    dataset = load_openai_jsonl(str(resource), categories=CategorySource(field="category"),
                                text=resource.read_text(encoding="utf-8"), name=SUITE_NAME)
    records = dataset.records
    if categories is not None:
        unknown = sorted(set(categories) - set(SUITE_CATEGORIES))
        if unknown:
            raise ValueError(f"unknown suite categories {unknown}: choose from {', '.join(SUITE_CATEGORIES)}")
        records = tuple(r for r in records if r.category in categories)
    if limit is not None:
        records = records[:limit]
    return Dataset(dataset.name, dataset.source, records)
