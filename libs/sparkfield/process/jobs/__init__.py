"""The event_log and process_mining jobs: their parameters, the pure ``compute`` of a classic log
and of an object-centric one, the steps each adds (filters, statistics, model, conformance), the
writers and the result; ``frames`` runs the same compute on source tables held as DataFrames."""
