"""The benchmarks: each module is a script (`python benchmarks/x.py` or `python -m benchmarks.x`)
whose figures land in benchmarks/results/; common.py holds what they share."""
