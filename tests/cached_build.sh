# Sourced by the test scripts (from the repository's root).
# cached_build OUT COMPILER ARGS...: runs COMPILER ARGS... -o OUT, unless the
# same command built it before from the same bytes: the compiler's --version,
# every file among ARGS and every header the sources can include (*.h,
# tests/*.h, tests/fuzz/*.h, and DIR/*.h for each -IDIR among ARGS). Each
# command's binary is kept in build/cache (NAME-HASH, its key in
# NAME-HASH.key), so make test's flags and a script's own (run by hand) do
# not rebuild each other's; OUT is a hard link to it. A failed build leaves
# no OUT. Returns the compiler's status (0 when the binary was up to date).
# Two scripts may build the same binary at once: each writes its own
# temporary files and renames them.
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
    local cached=build/cache/${out##*/}-${command:0:16}
    mkdir -p build/cache
    [[ $out == */* ]] && mkdir -p "${out%/*}"
    if ! [ -f "$cached" ] || ! [ -f "$cached.key" ] || [ "$(<"$cached.key")" != "$key" ]; then
        rm -f "$cached.key"
        if ! "$@" -o "$cached.part.$BASHPID"; then
            rm -f "$cached.part.$BASHPID" "$out"
            return 1
        fi
        mv -f "$cached.part.$BASHPID" "$cached"
        printf '%s\n' "$key" >"$cached.key.$BASHPID" && mv -f "$cached.key.$BASHPID" "$cached.key"
    fi
    [ "$out" -ef "$cached" ] || { ln -f "$cached" "$out.part.$BASHPID" && mv -f "$out.part.$BASHPID" "$out"; }
}
