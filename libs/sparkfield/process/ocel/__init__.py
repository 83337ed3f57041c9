"""Object-centric event logs (OCEL 2.0) from source tables: the mapping form
(:mod:`.mapping`), the log's tables built and validated in Spark (:mod:`.build`), per-type
flattened views (:mod:`.views`), the object-centric process map (:mod:`.process_map`), the
OCEL 2.0 files (:mod:`.write`) and the event_log job for this form (:mod:`.job`)."""
