bash tools/run.sh demo    # the main job: the fleet demo
bash tools/run.sh test    # the whole test suite (what CI runs, via .ci/run)
