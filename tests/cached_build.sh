# Sourced by the test scripts (from the repository's root).
# cached_build OUT COMPILER ARGS...: runs COMPILER ARGS... -o OUT, unless the
# same command built it before from the same bytes: the compiler's --version,
# every file among ARGS and every header the sources can include (*.h,
# tests/*.h, tests/fuzz/*.h, and DIR/*.h for each -IDIR among ARGS). Each
# command's output (a program, or an object with -c) is kept in build/cache
# (NAME-HASH, its key in NAME-HASH.key), so make test's flags and a script's
# own (run by hand) do not rebuild each other's; OUT is a hard link to it.
# A failed build leaves no OUT. Returns the compiler's status (0 when the
# output was up to date). Scripts that run at once and need the same output
# take turns (flock): the first builds it, the others find it built.
cached_build() {
    local out=$1; shift
    local key command arg files=() headers=(./*.h tests/*.h tests/fuzz/*.h)
    for arg in "$@"; do
        if [ -f "$arg" ]; then files+=("$arg")
        elif [[ $arg == -I?* ]]; then headers+=("${arg#-I}"/*.h)
        fi
    done
    command=$(printf '%s\n' "$@" | md5sum)
    key=$({
        "$1" --version 2>&1 | head -n 1
        cat "${files[@]}" "${headers[@]}" 2>/dev/null
    } | md5sum)
    key=${command%% *}${key%% *}
    local cached=build/cache/${out##*/}-${command:0:16} lock built=1
    mkdir -p build/cache
    [[ $out == */* ]] && mkdir -p "${out%/*}"
    exec {lock}>"$cached.lock"
    flock "$lock"
    if ! [ -f "$cached" ] || ! [ -f "$cached.key" ] || [ "$(<"$cached.key")" != "$key" ]; then
        rm -f "$cached.key"
        if "$@" -o "$cached.part.$BASHPID"; then
            mv -f "$cached.part.$BASHPID" "$cached"
            printf '%s\n' "$key" >"$cached.key"
        else
            rm -f "$cached.part.$BASHPID"
            built=0
        fi
    fi
    if [ "$built" = 0 ]; then
        rm -f "$out"
    elif ! [ "$out" -ef "$cached" ]; then
        ln -f "$cached" "$out.part.$BASHPID" && mv -f "$out.part.$BASHPID" "$out" || built=0
    fi
    exec {lock}>&-
    [ "$built" = 1 ]
}

# The flags of a test program that links the engine: make test's CFLAGS and
# OpenMP flag, as the engine was built with (make test OPENMP=: none)
# shellcheck disable=SC2206 # (each is a list of flags)
TEST_FLAGS=(-std=c11 -D_POSIX_C_SOURCE=200809L ${TEST_OPENMP--fopenmp} -Wall -Wno-unknown-pragmas ${TEST_CFLAGS:--O2})

# engine_build OUT ARGS...: builds a test program from ARGS (sources and
# flags) and build/engine.o, the engine's implementation as make compiled it
# for ./run (make test builds it first, with the same CFLAGS), for the
# programs that use the engine only through its interface.
engine_build() {
    local out=$1; shift
    [ -f build/engine.o ] || { echo "engine_build: build/engine.o is missing (make all makes it)" >&2; return 1; }
    cached_build "$out" ${CC:-cc} "${TEST_FLAGS[@]}" "$@" build/engine.o -lm
}

# within_build: sets the array `within` to a command that runs the rest of
# its arguments with a time limit in seconds, killed when it is out:
# tests/alarm_exec.c (built static where the C library allows it; status
# 142 when killed) or else coreutils' timeout (status 124).
# The static and the dynamic build have names of their own: a failed build
# removes its output, which another script may be running.
within_build() {
    if cached_build build/alarm_exec_static ${CC:-cc} -O2 -static tests/alarm_exec.c 2>/dev/null; then
        within=(build/alarm_exec_static)
    elif cached_build build/alarm_exec ${CC:-cc} -O2 tests/alarm_exec.c; then
        within=(build/alarm_exec)
    else
        within=(timeout)
    fi
}
