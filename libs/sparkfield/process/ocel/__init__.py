"""Object-centric event logs (OCEL 2.0) from source tables: the mapping form
(:mod:`.mapping`), the log's tables built and validated in Spark (:mod:`.build`), per-type
flattened views (:mod:`.views`), the object-centric process map (:mod:`.process_map`) and the
OCEL 2.0 files (:mod:`.write`). The event_log job for this form is
:mod:`sparkfield.process.jobs.ocel`."""
