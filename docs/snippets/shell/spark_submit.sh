spark-submit --master spark://spark-master:7077 \
    --driver-memory 4g --executor-memory 8g --executor-cores 4 --total-executor-cores 32 \
    --packages org.apache.hadoop:hadoop-aws:3.5.0 \
    --conf spark.hadoop.fs.s3a.endpoint=https://s3.eu-central-1.amazonaws.com \
    "$(python -c 'import fleetwire.tools.report as m; print(m.__file__)')" \
    --input s3a://fleet-bucket/landing --out s3a://fleet-bucket/report --incremental
