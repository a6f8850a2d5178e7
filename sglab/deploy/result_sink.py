"""Moved to sglab/results/sink.py (the result transport sits next to the result store); re-exported here."""

from sglab.results.sink import (INDEX, MAX_PART_BYTES, NAMESPACE_FILE, PART, PART_ANNOTATION, PARTS_ANNOTATION,  # noqa: F401
                                PAYLOAD_KEY, RESULT_LABEL, RESULT_PARTS, RUN_ID_ANNOTATION, SUMMARY_KEY,
                                TRIMMED_ANNOTATION, EncodedResult, current_namespace, decode_parts, encode_result,
                                part_names, parts_count, summary_of, write_result_configmap)
