# qkv — build, run, test, benchmark.
#   make        build ./run
#   make run    build, then generate a story from the default model
#   make test   build and run every test
#   make bench  latency against context length on the default model
CC ?= gcc
CFLAGS ?= -O3 -ffp-contract=fast
CFLAGS += -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wno-unused-parameter
OPENMP ?= -fopenmp
LDLIBS = -lm
SOURCES = run.c tokenizer.c trace.c bench.c
HEADERS = model.h tokenizer.h sampler.h trace.h bench.h

.PHONY: all run test bench clean

# The binary is built in build/ and copied to ./run, because `run` is also
# the name of the quickstart target.
all: build/run
	@cmp -s build/run run || cp build/run run

build/run: $(SOURCES) $(HEADERS)
	@mkdir -p build
	$(CC) $(CFLAGS) $(OPENMP) -o $@ $(SOURCES) $(LDLIBS)

run: all
	./run

test: all
	@bash tests/run_tests.sh

bench: all
	./run models/stories.bin -m bench --svg build/bench-stories.svg --csv build/bench-stories.csv

clean:
	rm -rf build run
