# qkv — build, run, test, benchmark.
#   make        build ./run
#   make run    build, then generate a story from the default model
#   make test   build and run every test
#   make bench  latency against context length on the default model
#   make fuzz   libFuzzer targets in build/ (clang); tests/fuzz/run.sh runs them
CC ?= gcc
CFLAGS ?= -O3 -ffp-contract=fast
OPENMP ?= -fopenmp
QKV_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas $(CFLAGS) $(OPENMP)
LDLIBS = -lm
SOURCES = run.c options.c cli.c ppl.c tokenizer.c trace.c trace_text.c trace_json.c step_view.c stepper.c bench.c bench_report.c bench_svg.c quantize.c roofline.c heads.c output_file.c
HEADERS = options.h cli.h ppl.h progress.h threads.h team.h model.h cost.h alloc.h cpu.h kernels.h kernels_isa.h kernels_float.h kernels_rows.h kernels_int8.h elementwise.h kv_cache.h kv_int8.h kv_int8_256.h kv_window.h rope.h attention.h checkpoint.h weights_pack.h gguf.h gguf_format.h qkv_format.h tokenizer.h unicode_classes.h sampler.h trace.h trace_internal.h stepper.h bench.h bench_internal.h quantize.h roofline.h heads.h output_file.h input_file.h

.PHONY: all run test bench clean models fuzz FORCE

# The binary is built in build/ and copied to ./run, because `run` is also
# the name of the quickstart target.
all: build/run
	@cmp -s build/run run || cp build/run run

# One object per source, so that `make -j2` compiles them side by side. The
# engine is two translation units, engine.c and kernels_float.c (its tiles:
# each about half of the build's time), joined into one relocatable object,
# build/engine.o, which ./run, the test programs and the fuzz replays link.
OBJECTS = build/engine.o $(SOURCES:%.c=build/%.o)
ENGINE_PARTS = build/engine_main.o build/kernels_float.o

# The compiler and flags the objects were built with, rewritten only when
# they change (make OPENMP=, another CFLAGS): then every object is rebuilt,
# where make alone would link objects of the old flags with the new.
build/flags: FORCE
	@mkdir -p build
	@echo '$(CC) $(QKV_CFLAGS)' | cmp -s - $@ || echo '$(CC) $(QKV_CFLAGS)' >$@
FORCE:

build/engine.o: $(ENGINE_PARTS)
	$(CC) -nostdlib -r -o $@ $(ENGINE_PARTS)

build/engine_main.o: engine.c $(HEADERS) build/flags
	@mkdir -p build
	$(CC) $(QKV_CFLAGS) -c -o $@ engine.c

build/run: $(OBJECTS) build/flags
	$(CC) $(QKV_CFLAGS) -o $@ $(OBJECTS) $(LDLIBS)

build/%.o: %.c $(HEADERS) build/explorer_html.h build/flags
	@mkdir -p build
	$(CC) $(QKV_CFLAGS) -Ibuild -c -o $@ $<

# The HTML explorer page (explorer.html) goes into the binary as one C string:
# escape \ " and ? (no trigraphs), then quote each line.
build/explorer_html.h: explorer.html
	@mkdir -p build
	{ echo 'static const char EXPLORER_HTML[] ='; \
	  sed -e 's/[\\"?]/\\&/g' -e 's/^/"/' -e 's/$$/\\n"/' explorer.html; echo ';'; } >$@

run: all
	./run

# The tests run ./run and link build/engine.o: tests/run_tests.sh makes both
# first (QKV_TEST_BUILD).
test:
	@CC="$(CC)" TEST_CFLAGS="$(CFLAGS)" TEST_OPENMP="$(OPENMP)" QKV_TEST_BUILD="$(MAKE) --no-print-directory -j2 all" bash tests/run_tests.sh

# The default model's latency curve (with the no-cache comparison), then the
# same model in each weight type at 1 and 2 threads: one summary line each
# (decode and prefill, against the machine's measured roofline).
BENCH_TYPES = f32 f16 q8 q4
bench: all
	./run models/stories.bin -m bench --no-cache --svg build/bench-stories.svg --csv build/bench-stories.csv
	@for d in $(BENCH_TYPES); do ./run models/stories.bin -m quantize -o build/stories-$$d.qkv --dtype $$d 2>/dev/null || exit 1; done
	@echo; echo "qkv's weight types side by side ($$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
	@for t in 1 2; do for d in $(BENCH_TYPES); do \
	    ./run build/stories-$$d.qkv -m bench --threads $$t --repeats 3 2>/dev/null | grep '^summary' | cut -c10- || exit 1; \
	done; done

# libFuzzer targets (tests/fuzz/): clang with AddressSanitizer and
# UndefinedBehaviorSanitizer, on the plain C kernels (clang 14 has no
# __builtin_cpu_supports("f16c"); the AVX2 kernels are tested by make test).
FUZZ_TARGETS = checkpoint tokenizer sampler prompt gguf
FUZZ_CC ?= clang
FUZZ_SANITIZE = -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -DQKV_PORTABLE -Wall -Wno-unknown-pragmas \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = $(FUZZ_SANITIZE) -fsanitize=fuzzer
fuzz: $(FUZZ_TARGETS:%=build/fuzz_%)

build/fuzz_%: tests/fuzz/fuzz_%.c tokenizer.c kernels_float.c $(HEADERS)
	@mkdir -p build
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< tokenizer.c kernels_float.c $(LDLIBS)

# The prompt target's engine is built without coverage (engine.c says why).
build/fuzz_prompt: tests/fuzz/fuzz_prompt.c engine.c kernels_float.c tokenizer.c $(HEADERS)
	@mkdir -p build
	$(FUZZ_CC) $(FUZZ_SANITIZE) -c -o build/fuzz_engine.o engine.c
	$(FUZZ_CC) $(FUZZ_SANITIZE) -c -o build/fuzz_kernels_float.o kernels_float.c
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ tests/fuzz/fuzz_prompt.c tokenizer.c build/fuzz_engine.o \
	    build/fuzz_kernels_float.o $(LDLIBS)

# Retrain the shipped models from scratch (needs python3-torch; see README).
PYTHON ?= /usr/bin/python3
models:
	$(PYTHON) export/train.py --config grammar --init-only
	$(PYTHON) export/export.py out/grammar/init.pt models/grammar-random.bin
	$(PYTHON) export/train.py --config grammar
	$(PYTHON) export/export.py out/grammar/ckpt.pt models/grammar.bin
	$(PYTHON) export/train.py --config stories
	$(PYTHON) export/export.py out/stories/ckpt.pt models/stories.bin --dtype q8
	$(PYTHON) export/train.py --config induction
	$(PYTHON) export/export.py out/induction/ckpt.pt models/induction.bin
	nice -n 5 $(PYTHON) export/train.py --config shakespeare
	$(PYTHON) export/export.py out/shakespeare/ckpt.pt models/shakespeare.bin --dtype f16

clean:
	rm -rf build run
