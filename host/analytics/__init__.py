"""Fleet telemetry analytics on Spark (issue 7).

Modules, one job each:
  schema     - the telemetry record: fields, types, what is required, the metric constants
  generator  - writes a synthetic landing zone (hourly NDJSON or Parquet) with known faults
  landing    - finds the landing zone's files, reads them, sorts out bad records with counts
  session    - builds a local (or cluster) SparkSession with quiet logs; settings for the cluster in hand
  storage    - every file the job writes or lists, on any Hadoop filesystem (file:, hdfs:, s3a:, ...)
  metrics    - the Spark definitions: clean, device_window, device_health, firmware_cohort, outliers
  job        - the batch run, writing the tables
  incremental - the incremental run: only new files, only the hours they touch
  standalone - a Spark standalone cluster on loopback from pyspark's spark-class (tests, trying --master)
  report     - report.html with PNG plots and CSV copies of the small tables

pyspark, pandas and matplotlib come with the `spark` extra (pip install 'fleetwire[spark]');
nothing here is imported by the board code.
"""
