#!/bin/sh
# The builder lock of one build directory: a directory (mkdir is atomic) whose "owner" file names the run holding it.
#   builder_lock.sh take LOCK OWNER STALE_AFTER DEAD_OWNER   exit 0 when this run holds it, 3 while another one does
#   builder_lock.sh release LOCK OWNER [SCRATCH]              removes it only when this run holds it, and SCRATCH
#                                                             (the finished build's tree) first, if given
# A holder is passed over when the controller found it dead (DEAD_OWNER: its ansible-playbook process is gone) or
# when the lock is older than STALE_AFTER seconds (longer than any build may run: that run's make has ended).
set -u
verb=${1:?usage: builder_lock.sh take|release LOCK OWNER [STALE_AFTER DEAD_OWNER | SCRATCH]}
lock=${2:?lock directory}
owner=${3:?owner}
case "$verb" in
take)
    stale_after=${4:?stale after (seconds)}
    dead=${5:-}
    # Exit 1 (not 3) for what waiting cannot cure: the task retries only while another run holds the lock.
    if ! mkdir -p "$(dirname "$lock")"; then
        echo "builder_lock.sh: cannot create $(dirname "$lock")" >&2
        exit 1
    fi
    # Twice: a lock released between a failed mkdir and the look at it is taken on the second try.
    for _ in 1 2; do
        if mkdir "$lock" 2>/dev/null; then
            if ! printf '%s\n' "$owner" >"$lock/owner"; then
                rm -rf "$lock"
                echo "builder_lock.sh: cannot write $lock/owner" >&2
                exit 1
            fi
            echo "taken"
            exit 0
        fi
        [ -d "$lock" ] && break
    done
    if [ ! -d "$lock" ]; then
        echo "builder_lock.sh: cannot create $lock" >&2
        exit 1
    fi
    held=$(cat "$lock/owner" 2>/dev/null || true)
    if [ "$held" = "$owner" ]; then
        echo "taken (already held by this run)"
        exit 0
    fi
    made=$(stat -c %Y "$lock" 2>/dev/null) || {
        echo "released meanwhile: $lock"  # its holder let it go as this run looked: the task tries again
        exit 3
    }
    age=$(($(date +%s) - made))
    if { [ -n "$dead" ] && [ "$held" = "$dead" ]; } || [ "$age" -gt "$stale_after" ]; then
        printf '%s\n' "$owner" >"$lock/owner"
        touch "$lock"
        echo "taken over from: $held (held for ${age} s)"
        exit 0
    fi
    echo "held by: $held (for ${age} s)"
    exit 3
    ;;
release)
    scratch=${4:-}
    if [ "$(cat "$lock/owner" 2>/dev/null || true)" = "$owner" ]; then
        # Only the holder removes the tree: a run that took the lock over works in it now. The lock is released
        # even when the tree cannot be removed, and that is reported after.
        kept=""
        if [ -n "$scratch" ]; then
            rm -rf "$scratch" || kept=$scratch
        fi
        rm -rf "$lock"
        echo "released"
        if [ -n "$kept" ]; then
            echo "builder_lock.sh: cannot remove the scratch directory $kept" >&2
            exit 1
        fi
    fi
    ;;
*)
    echo "unknown verb: $verb" >&2
    exit 2
    ;;
esac
