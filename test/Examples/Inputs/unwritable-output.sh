#!/bin/sh
# Trains on with a checkpoint whose directory has become read-only, then
# full, each in a private mount namespace (needs unshare -m: root or user
# namespaces). Prints what each run said and whether the checkpoint that was
# there is still byte for byte the same.
# usage: unwritable-output.sh WORKDIR KILN-EXAMPLE-SHAKESPEARE
set -u
work=$1
shakespeare=$2
train="$shakespeare --batch 4 --context 16 --d-model 32 --layers 1 --heads 2 \
  --warmup 2 --eval-every 5 --eval-batches 1 --sample 0"

rm -rf "$work" && mkdir -p "$work/out" "$work/full"
$train --steps 5 --checkpoint "$work/out/ckpt.safetensors" > /dev/null || exit 1
cp "$work/out/ckpt.safetensors" "$work/before.safetensors"

echo "read-only:"
unshare -m sh -c "mount --bind '$work/out' '$work/out' &&
  mount -o remount,bind,ro '$work/out' &&
  exec $train --steps 10 --resume --checkpoint '$work/out/ckpt.safetensors'" \
  > "$work/ro.log" 2>&1
echo "exit $?"
grep error "$work/ro.log"
cmp "$work/before.safetensors" "$work/out/ckpt.safetensors" && echo "kept"
ls "$work/out"

# A file system with room for the checkpoint and a third of another.
size=$(( $(stat -c %s "$work/before.safetensors") * 4 / 3 / 1024 + 8 ))
echo "full:"
unshare -m sh -c "mount -t tmpfs -o size=${size}k kiln-full '$work/full' &&
  cp '$work/before.safetensors' '$work/full/ckpt.safetensors' &&
  $train --steps 10 --resume --checkpoint '$work/full/ckpt.safetensors';
  status=\$?
  cmp '$work/before.safetensors' '$work/full/ckpt.safetensors' && echo kept
  ls '$work/full'
  exit \$status" > "$work/full.log" 2>&1
echo "exit $?"
grep -v '^step\|^ *$' "$work/full.log" | grep -v '^\[' || true
