"""The benchmarks: each module is a script (`python -m benchmarks.x` or `python -m benchmarks.x`)
whose figures land in benchmarks/results/; common.py holds what they share."""
