#!/usr/bin/env bash
# Runs a test script with a python3 that has boto3 (the machine's own, else Debian's).
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import boto3' 2>/dev/null; then
    exec "$py" "$@"
  fi
done
echo "no python3 with boto3 found; run scripts/setup --test" >&2
exit 1
