#!/usr/bin/env bash
# kernelcheck as a Slurm job-start gate: an srun prolog that refuses to launch a job step whose fast
# kernels would not run. Runs as the user, in the user's environment, on the node where srun starts
# the step, before the step is launched; a non-zero exit aborts the step.
#
#   per job:      srun --prolog=/shared/kernelcheck/slurm-prolog.sh torchrun ... train.py
#   cluster-wide: SrunProlog=/shared/kernelcheck/slurm-prolog.sh      (slurm.conf)
#   or simply as the first line of an sbatch script: /shared/kernelcheck/slurm-prolog.sh || exit $?
#
# A job opts in by exporting KCGATE_MODEL; jobs that do not are let through untouched. The KCGATE_*
# variables are this script's own: kernelcheck does not read them (its settings are KERNELCHECK_*,
# docs/settings.md).
#   KCGATE_MODEL           model to check: alias, Hub id, model_type or folder   (required to gate)
#   KCGATE_MODE            train (default) or infer
#   KCGATE_LIVE=1          also run the model's real layers on the GPU (doctor --live)
#   KCGATE_JUNIT=FILE      also write a JUnit report there
#   KCGATE_ALLOW_FALLBACK=1  let exit 3 (slow torch fallback) through with a warning; 4 still blocks
#   KCGATE_BIN=/path/to/kernelcheck  the executable (default: kernelcheck on PATH)
#
# Exit codes are kernelcheck's: 0 ready, 3 slow fallback, 4 broken, 2 bad input, 1 internal error.
# Not the slurm.conf `Prolog=`: that one runs as root without the job's environment, and a failure
# there drains the node, although the node is fine and the job's software is what needs fixing.
set -u

model="${KCGATE_MODEL:-}"
if [ -z "$model" ]; then
    echo "kernelcheck prolog: KCGATE_MODEL is not set; not gating this step." >&2
    exit 0
fi
mode="${KCGATE_MODE:-train}"
args=(doctor --model "$model" --mode "$mode")
if [ "${KCGATE_LIVE:-0}" = "1" ]; then
    args+=(--live)
fi
if [ -n "${KCGATE_JUNIT:-}" ]; then
    args+=(--junit "$KCGATE_JUNIT")
fi

# The report goes to stderr: srun prolog output lands in the job's error stream, next to the step.
"${KCGATE_BIN:-kernelcheck}" "${args[@]}" >&2
rc=$?

case "$rc" in
    0) ;;
    3)
        if [ "${KCGATE_ALLOW_FALLBACK:-0}" = "1" ]; then
            echo "kernelcheck prolog: WARNING: $model ($mode) would run a slow torch fallback; starting anyway (KCGATE_ALLOW_FALLBACK=1)." >&2
            exit 0
        fi
        echo "kernelcheck prolog: step not started: $model ($mode) would run a slow torch fallback (exit 3). Apply the fix above, or set KCGATE_ALLOW_FALLBACK=1 to run slowly anyway." >&2
        ;;
    4) echo "kernelcheck prolog: step not started: $model ($mode) would crash or compute wrong results (exit 4). Apply the fix above." >&2 ;;
    2) echo "kernelcheck prolog: step not started: bad KCGATE_* settings (exit 2), see the message above." >&2 ;;
    127) echo "kernelcheck prolog: step not started: '${KCGATE_BIN:-kernelcheck}' not found; set KCGATE_BIN to its full path (prologs may run without your PATH)." >&2 ;;
    *) echo "kernelcheck prolog: step not started: kernelcheck failed (exit $rc)." >&2 ;;
esac
exit "$rc"
