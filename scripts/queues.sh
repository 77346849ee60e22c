#!/usr/bin/env bash
# The full-scale compute queues (scripts/compute_queue.py) on the two cores, started, paused and kept
# in the repository from one place, so that a sitting on a new machine resumes them with one command.
#
#   bash scripts/queues.sh start        worktrees, OUT folders seeded from results/reproduce-full/runs,
#                                       both queues started in the background
#   bash scripts/queues.sh pause|resume stop / continue both queues and their runs (e.g. while CI runs)
#   bash scripts/queues.sh stop         end both queues and their runs (a run resumes at its last task)
#   bash scripts/queues.sh keep         finished runs and unfinished runs' checkpoints into
#                                       results/reproduce-full/runs (git add -f the checkpoints)
#   bash scripts/queues.sh checkpoint   keep, then commit the unfinished runs (with their checkpoints) alone,
#                                       each at most every CHECKPOINT_HOURS (2), none past CHECKPOINT_BUDGET_MB
#                                       (150) of this sitting's diffs, so that a sitting that ends without
#                                       warning loses little and its submission stays small; run it
#                                       hourly: while sleep 3600; do bash scripts/queues.sh checkpoint; done &
#   bash scripts/queues.sh publish      keep, then every table, al-claims and docs/results.md rebuilt from
#                                       the runs, and `bimu report --check docs/results.md`
#   bash scripts/queues.sh status       what each queue is running, the tail of its log, and each
#                                       run that failed (its error.txt)
#
# One core: active (the active-learning entries, in $QUEUE_ROOT/alrun2), then pmnist (Table 1 and the
# memory-window rows, trained by the code at PMNIST_CODE so that every run of Table 1 trains with the
# same code, in $QUEUE_ROOT/repro), then pmnist-al (the real-data active-learning venue, imbalanced
# Permuted MNIST, in $QUEUE_ROOT/pmnist-al; what it has left decides no claim). The other core: mesu
# (MESU's seed 0, the longest run, in $QUEUE_ROOT/mesu), then after-pmnist (MESU's seed 1, which Table 1
# needs, in $QUEUE_ROOT/after-pmnist), then pmnist-b (probes of Table 1's BayesBiNN and Syn. Meta. gaps,
# the pmnist queue's code, in $QUEUE_ROOT/repro-b). All but pmnist and pmnist-b train with the code at
# the commit checked out when the queues start. The queue lists are always this checkout's
# scripts/compute_queue.py.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
QUEUE_ROOT="${QUEUE_ROOT:-/work}"
PMNIST_CODE=2298154
PM_OUT="$QUEUE_ROOT/repro"
AL_OUT="$QUEUE_ROOT/alrun2"
TAIL_OUT="$QUEUE_ROOT/after-pmnist"
MESU_OUT="$QUEUE_ROOT/mesu"
PMB_OUT="$QUEUE_ROOT/repro-b"
PMAL_OUT="$QUEUE_ROOT/pmnist-al"
KEPT="$REPO/results/reproduce-full"
export BIMU_DATA_DIR="${BIMU_DATA_DIR:-$(cd "$REPO/../shared/data" 2>/dev/null && pwd || true)}"

runs_of() {  # runs_of OUT: the command lines (pgrep -f) of the runs a queue in OUT started
    printf -- '--out %s(/runs/probes/[^ ]+)?$' "$1"  # a probe writes to OUT/runs/probes/NAME
}

signal() {  # signal SIG: every queue driver and every run it started
    for out in "$PM_OUT" "$AL_OUT" "$PMAL_OUT" "$TAIL_OUT" "$MESU_OUT" "$PMB_OUT"; do
        pkill "-$1" -f "compute_queue.py $out" || true
        pkill "-$1" -f -- "$(runs_of "$out")" || true
    done
}

worktree() {  # worktree DIR COMMIT: a detached worktree of this repository at COMMIT
    if [ -e "$1/.git" ]; then
        git -C "$1" checkout -q --detach "$2"
    else
        git -C "$REPO" worktree add -q --detach "$1" "$2"
    fi
}

run_queue() {  # run_queue OUT CODE QUEUE LOG [nice]: in the foreground
    mkdir -p "$1"
    # finished runs are reused, a kept checkpoint resumes, a run trained further in OUT stays (whole run
    # directories: a stale copy is never merged file by file with a finished one)
    PYTHONPATH="$REPO/src" python "$REPO/scripts/keep_runs.py" "$KEPT" "$1" --partial > /dev/null
    (cd "$1" && PYTHONPATH="$2/src" nice -n "${5:-0}" python "$REPO/scripts/compute_queue.py" "$1" \
        --queue "$3" >> "$4" 2>&1)
}

keep() {
    for out in "$PM_OUT" "$AL_OUT" "$PMAL_OUT" "$TAIL_OUT" "$MESU_OUT" "$PMB_OUT"; do
        [ -d "$out/runs" ] && PYTHONPATH="$REPO/src" python "$REPO/scripts/keep_runs.py" "$out" "$KEPT" --partial --compact
    done
    git -C "$REPO" ls-files -o --ignored --exclude-standard -- "results/reproduce-full/runs/**/checkpoint.pt" \
        | sed 's/^/unfinished, add with git add -f: /'
}

diff_bytes() {  # the text diffs of every commit of this sitting, added up (what a submission may hold)
    base=$(cat "$(git -C "$REPO" rev-parse --git-dir)/bimu-sitting-base" 2>/dev/null || true)
    [ -n "$base" ] || { echo 0; return; }
    git -C "$REPO" log --text -p --format= "$base..HEAD" | wc -c
}

case "${1:-}" in
start)
    # the commit this sitting started from, once per clone: what `checkpoint` counts its diffs against
    sitting="$(git -C "$REPO" rev-parse --git-dir)/bimu-sitting-base"
    [ -s "$sitting" ] || git -C "$REPO" rev-parse HEAD > "$sitting"
    echo 0 > /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || true  # nice applies across sessions
    # 512-bit vectors where the processor has them, also for the frozen pmnist code, which predates
    # bimu.vectors (the same bits either way: tests/test_vectors.py)
    features=$(PYTHONPATH="$REPO/src" python -c 'import os, bimu; print(os.environ.get("NUMBA_CPU_FEATURES", ""))')
    [ -n "$features" ] && export NUMBA_CPU_FEATURES="$features"
    worktree "$PM_OUT/code" "$PMNIST_CODE"
    worktree "$QUEUE_ROOT/wt-alrun" "$(git -C "$REPO" rev-parse HEAD)"
    # priorities (nice): Table 1's runs (pmnist) -15, MESU and the probes -10, the developer's work 0;
    # each queue of a chain starts when the one before it ends by itself (not when it is stopped)
    (trap '' HUP; run_queue "$AL_OUT" "$QUEUE_ROOT/wt-alrun" active "$AL_OUT/active.log" &&
        run_queue "$PM_OUT" "$PM_OUT/code" pmnist "$PM_OUT/queue.log" -15 &&
        run_queue "$PMAL_OUT" "$QUEUE_ROOT/wt-alrun" pmnist-al "$PMAL_OUT/queue.log") > /dev/null 2>&1 &
    (trap '' HUP; run_queue "$MESU_OUT" "$QUEUE_ROOT/wt-alrun" mesu "$MESU_OUT/queue.log" -10 &&
        run_queue "$TAIL_OUT" "$QUEUE_ROOT/wt-alrun" after-pmnist "$TAIL_OUT/queue.log" -10 &&
        run_queue "$PMB_OUT" "$PM_OUT/code" pmnist-b "$PMB_OUT/queue.log" -10) > /dev/null 2>&1 &
    sleep 5
    bash "$0" status
    ;;
pause) signal STOP ;;
resume) signal CONT ;;
stop) signal TERM ;;
status)
    for log in "$AL_OUT/active.log" "$PMAL_OUT/queue.log" "$PM_OUT/queue.log" "$MESU_OUT/queue.log" "$PMB_OUT/queue.log" \
        "$TAIL_OUT/queue.log"; do
        echo "== $log"
        [ -f "$log" ] && grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2} ' "$log" | tail -n 1 | cut -c1-160
    done
    working=$(for out in "$PM_OUT" "$AL_OUT" "$PMAL_OUT" "$TAIL_OUT" "$MESU_OUT" "$PMB_OUT"; do
        pgrep -af -- "$(runs_of "$out")" || true; done)
    [ -n "$working" ] && echo "$working" | cut -c1-160 || echo "no run is working"
    # a run that failed is not retried by its queue, which goes on with its next item: its error.txt
    # (the traceback's last line) says why; `start` tries it again once the cause is fixed
    for out in "$PM_OUT" "$AL_OUT" "$PMAL_OUT" "$TAIL_OUT" "$MESU_OUT" "$PMB_OUT"; do
        [ -d "$out/runs" ] || continue
        find "$out/runs" -name error.txt | sort | while read -r f; do
            echo "FAILED $(dirname "$f"): $(grep -v '^\s*$' "$f" | tail -n 1 | cut -c1-160)"
        done
    done
    ;;
keep) keep ;;
checkpoint)
    keep > /dev/null
    cd "$REPO"
    # runs whose checkpoint is on disk now (a run that has finished since its last checkpoint commit,
    # checkpoint deleted and summary written, waits for publish, which rebuilds the page from it); each
    # at most every CHECKPOINT_HOURS, and none once this sitting's commits add up to
    # CHECKPOINT_BUDGET_MB of text diffs (a submission may hold 256 MiB; finished runs and code need
    # the rest)
    spent=$(diff_bytes)
    if [ "$spent" -gt $(( ${CHECKPOINT_BUDGET_MB:-150} * 1048576 )) ]; then
        echo "no checkpoint committed: this sitting's commits already hold $((spent / 1048576)) MB of diffs"
        exit 0
    fi
    now=$(date +%s)
    mapfile -t dirs < <(git ls-files -o -i -c --exclude-standard -- "results/reproduce-full/runs/**/checkpoint.pt" \
        | sort -u | while read -r f; do
            [ -f "$f" ] || continue
            last=$(git log -1 --format=%ct -- "$f")
            [ $(( now - ${last:-0} )) -ge $(( ${CHECKPOINT_HOURS:-2} * 3600 )) ] || continue
            # a run that has not moved since its last checkpoint commit (its queue is elsewhere) has
            # nothing to commit
            [ -n "$(git status --porcelain --ignored -- "$(dirname "$f")")" ] && dirname "$f"
        done)
    [ "${#dirs[@]}" -eq 0 ] && { echo "no unfinished run due"; exit 0; }
    git add -f -- "${dirs[@]}"
    for i in 1 2 3 4 5 6; do  # the developer's own git command may hold the index for a moment
        git commit -q --only -m "runs: checkpoints of the unfinished runs, to resume them on another machine" \
            -m "$(printf '%s\n' "${dirs[@]#results/reproduce-full/runs/}")" -- "${dirs[@]}" && break
        sleep 10
    done
    git log --oneline -1
    ;;
publish)
    keep
    cd "$REPO"
    export PYTHONPATH="$REPO/src"  # this checkout's bimu, whatever an editable install points at
    bimu() { python -m bimu "$@"; }
    mapfile -t commands < <(grep -oP '^- command: `\K[^`]+' docs/results.md | sort -u)
    for entry in results/reproduce-full/runs/full/*/; do  # an entry with runs that is not on the page yet
        name=$(basename "$entry")
        printf '%s\n' "${commands[@]}" | grep -q "reproduce $name " ||
            commands+=("bimu reproduce $name --scale full --out results/reproduce-full --from-runs")
    done
    for c in "${commands[@]}"; do
        echo "$c"
        eval "$c" > /dev/null
    done
    eval "$(grep -oP 'Generated from real run directories by `\K[^`]+' docs/results.md)"
    bimu report --check docs/results.md
    grep -n "not explained yet" docs/results.md || true
    ;;
*)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
