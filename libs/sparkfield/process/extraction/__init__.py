"""Source tables to events as a mapping file says: the mapping (classic form; the object-centric
form is in :mod:`sparkfield.process.ocel`), its sources and views as DataFrames, and the
extraction."""
