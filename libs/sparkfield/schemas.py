"""Every job's parameter schema by job name (for the job manuals' tables and the tests that check
conf files, flags and docs against them)."""

from __future__ import annotations

from sparkfield.core.params import JobSchema
from sparkfield.geo.params import COFFEE_SHOPS
from sparkfield.nlp.params import EMBED, INFER
from sparkfield.process.jobs.params import EVENT_LOG, PROCESS_MINING
from sparkfield.text.params import BAG_OF_WORDS

SCHEMAS: dict[str, JobSchema] = {
    s.job: s for s in (COFFEE_SHOPS, EVENT_LOG, PROCESS_MINING, BAG_OF_WORDS, EMBED, INFER)}
