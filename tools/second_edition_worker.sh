#!/bin/bash
# One single-thread worker of the board's second edition (issue 78): trains, class by class in the plan's order, the
# runs without a current record (`umlkit plan --second-edition` lists them), every paper in turn, this worker's share.
# Usage: tools/second_edition_worker.sh I N [CLASS ...]   e.g. tools/second_edition_worker.sh 0 2 sweeps
# PAPERS="vptsp regime" tools/second_edition_worker.sh 0 2 sweeps: those papers only, in that order.
# Resumable: run it again; records finished by either worker are current and skipped.
set -u
i=${1:?worker index}; n=${2:?worker count}; shift 2
classes=${*:-sweeps}
umlkit=${UMLKIT:-.venv/bin/umlkit}
for cls in $classes; do
  for paper in ${PAPERS:-language_guidance oodml vptsp regime puma}; do
    echo "== $(date -u +%FT%TZ) $paper second_edition:$cls worker $i/$n"
    UMLKIT_PROGRESS=0 $umlkit records train "$paper" "second_edition:$cls" --worker "$i/$n" --threads 1 || \
      echo "!! $paper $cls worker $i/$n exited $?"
  done
done
echo "== $(date -u +%FT%TZ) done: $classes"
