"""The integrity record a result carries (`RunResult.integrity`): its own module so that the schema
(sglab/schema/result.py) and the sealing code (sglab/results/integrity.py) both read it without importing
each other."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Algorithm = Literal["sha256", "hmac-sha256"]


class IntegrityRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    algorithm: Algorithm
    digest: str
    key_id: str | None = Field(None, description="sha256 of the HMAC key, first 16 hex digits (hmac-sha256 only)")
    covers: str = Field("the whole result document except `integrity` and `verdict`, as canonical JSON")
    schedule: dict[int, int] | None = Field(None, description="what the run planned to measure: level -> rounds "
                                            "(bench runs; interactive runs have none)")
