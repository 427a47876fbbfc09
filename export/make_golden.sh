#!/bin/sh
# Regenerates everything under tests/data/ (tiny tokenizer, random test models in
# every format, Q8_0 and Q4_0 ones, hostile files in tests/data/bad/) and the golden
# vectors tests/golden/{gqa,mqa,sepcls,f16,q8,q4}.txt.  Deterministic: fixed seeds, same bytes each run.
#
#     export/make_golden.sh
#
# Needs only Debian's python3 + python3-numpy.
set -e
cd "$(dirname "$0")/.."
exec /usr/bin/python3 export/make_test_models.py "$@"
