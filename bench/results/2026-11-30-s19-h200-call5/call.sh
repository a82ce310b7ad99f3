#!/usr/bin/env bash
# session 19 call 5: the script of ../2026-11-30-s19-h200-call7/call.sh with its commented `layer1.txt` line run
# (calls 2 and 3 the same), on the tree of call7/splitk-l2h.patch before its poll change.
exec bash "$(dirname "$0")/../2026-11-30-s19-h200-call7/call.sh" "$@"
