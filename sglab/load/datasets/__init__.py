"""Prompt datasets that look like traffic: the bundled suite, ShareGPT JSON and OpenAI `messages` JSONL.

    from sglab.load.datasets import load_suite, load_sharegpt, load_openai_jsonl, CategorySource
    suite = load_suite()                                   # Dataset of PromptRecord, 7 categories
    logs = load_openai_jsonl("logs.jsonl", categories=CategorySource.parse("field:route"))
    body = record.chat_body(natural_stop=True)             # messages + max_tokens (+ ignore_eos)

Loaders raise sglab.core.errors.ConfigError (file, line, fix) on bad input.
"""

from sglab.load.datasets.model import UNLABELLED, CategorySource, Dataset, PromptRecord
from sglab.load.datasets.openai_jsonl import load_openai_jsonl
from sglab.load.datasets.sharegpt import load_sharegpt
from sglab.load.datasets.suite import SUITE_CATEGORIES, SUITE_NAME, load_suite

__all__ = ["CategorySource", "Dataset", "PromptRecord", "SUITE_CATEGORIES", "SUITE_NAME", "UNLABELLED",
           "load_openai_jsonl", "load_sharegpt", "load_suite"]
