#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# load/tool-launch.sh: load/NAME for each C tool is a link to this script,
# which runs the tool the build made, $BUILD/load/NAME, with the same
# arguments (so `load/readers 1000` works from the tree, as the scripts in
# load/ and the documentation run it). The build is $HERALD_BUILD when set
# (a folder relative to the tree, as tests/run.py takes it, or absolute);
# otherwise the release build (build/, `make`), else the sanitized one
# (build/asan, `make check` or `make test`). An installed tool is the
# binary itself: this script is never installed.
name=$(basename "$0")
tree=$(dirname "$(dirname "$(readlink -f "$0")")")
if [ -n "${HERALD_BUILD:-}" ]; then
	case $HERALD_BUILD in
	/*) builds=$HERALD_BUILD ;;
	*) builds=$tree/$HERALD_BUILD ;;
	esac
else
	builds="$tree/build $tree/build/asan"
fi
for b in $builds; do
	if [ -x "$b/load/$name" ]; then
		exec "$b/load/$name" "$@"
	fi
done
echo "load/$name: not built: no $(echo "$builds" | sed "s|\([^ ]*\)|\1/load/$name|g; s| | or |g") (make builds build/load/$name)" >&2
exit 127
