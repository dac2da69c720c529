#!/bin/sh
# Stops every process whose working directory is inside the scratch directory given as $1: the make (and its
# compilers) of a run whose controller was killed. Ansible's async wrapper lets such a make run on, and a new run
# would otherwise start a second make in the same tree. Prints "stopped: PIDS" when it stopped any.
# Then empties the scratch directory and creates its src/ (mode 0755) for the source: one round trip to the builder,
# not three (stop, empty, create). The tree is marked (.rdmaforge-scratch) as rdmaforge's: `rdmaforge reset` removes
# the marked trees of the scratch directory's parent (nccl_build_workdir, a user setting), never the rest of it.
set -u
dir=${1:?usage: stop_leftover_build.sh SCRATCH_DIR}
found=""
for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    [ "$pid" = "$$" ] && continue
    cwd=$(readlink "$proc/cwd" 2>/dev/null) || continue
    case "$cwd" in
        "$dir" | "$dir"/*) found="$found $pid" ;;
    esac
done
if [ -n "$found" ]; then
    # shellcheck disable=SC2086 # one word per pid
    kill -TERM $found 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        alive=""
        for pid in $found; do
            [ -d "/proc/$pid" ] && alive="$alive $pid"
        done
        [ -z "$alive" ] && break
        sleep 1
    done
    # shellcheck disable=SC2086
    [ -n "$alive" ] && kill -KILL $alive 2>/dev/null
fi
if ! { rm -rf "$dir" && mkdir -p "$dir" && : >"$dir/.rdmaforge-scratch" && mkdir -m 0755 "$dir/src"; }; then
    echo "stop_leftover_build.sh: cannot empty $dir and create $dir/src" >&2
    exit 1
fi
[ -n "$found" ] && echo "stopped:$found"
exit 0
