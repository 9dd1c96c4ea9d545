"""Test infrastructure the benchmarks share with the tests: the noida-db server (noida.py) and the
reliability fuzz cases (fuzz.py). The one part of tests/ that benchmarks/ may import."""
