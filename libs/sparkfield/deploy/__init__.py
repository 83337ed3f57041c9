"""Deployment tooling: the spark-submit command from a conf profile, the library zip for --py-files
and the driver's class archive. Nothing here runs inside a job."""
