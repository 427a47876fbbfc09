# Sourced by the test scripts (from the repository's root).
# cached_build OUT COMPILER ARGS...: runs COMPILER ARGS... -o OUT, unless OUT
# was built before by the same command from the same bytes: the command, the
# compiler's --version, every file among ARGS and every header the sources
# can include (*.h, tests/*.h, tests/fuzz/*.h, build/*.h). The key is kept
# in OUT.key; a failed build leaves neither file. Returns the compiler's
# status (0 when OUT was already up to date). Two scripts may build the same
# OUT at once: each writes its own temporary file and renames it.
cached_build() {
    local out=$1; shift
    local key arg files=()
    for arg in "$@"; do [ -f "$arg" ] && files+=("$arg"); done
    key=$({
        printf '%s\n' "$@"
        "$1" --version 2>&1 | head -n 1
        cat "${files[@]}" ./*.h tests/*.h tests/fuzz/*.h build/*.h 2>/dev/null
    } | md5sum)
    key=${key%% *}
    if [ -x "$out" ] && [ -f "$out.key" ] && [ "$(<"$out.key")" = "$key" ]; then
        return 0
    fi
    rm -f "$out.key"
    [[ $out == */* ]] && mkdir -p "${out%/*}"
    local part="$out.part.$$"
    if "$@" -o "$part"; then
        mv -f "$part" "$out"
        printf '%s\n' "$key" >"$out.key.$$" && mv -f "$out.key.$$" "$out.key"
    else
        rm -f "$part"
        return 1
    fi
}
