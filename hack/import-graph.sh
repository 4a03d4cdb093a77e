#!/usr/bin/env bash
# Prints nodenet's own import graph, one package a line with the nodenet
# packages its non-test files import (Linux and Windows builds together),
# and then the arrows that point up a floor: a part (cni, ipam, overlay,
# proxy, hns, config, internal) importing agent/ or cmd/, or a lower floor
# importing a higher one. Exits 1 if there is any. Test files may import
# the test harnesses (test/apiserver, test/netnode); that is not checked.
#
# Floors, bottom to top:
#   0  internal/*, hns, cni/api, proxy (types), proxy/diffstore
#   1  config
#   2  ipam, cni/*, overlay/*, proxy/*
#   3  agent/*
#   4  cmd/*, test/*, bench/*, demo, deploy
# Inside floor 2 parts may use each other (cni uses ipam, the HNS proxy
# backend reads overlay's network facts); only the floors are checked.
#
# Usage: hack/import-graph.sh [dir]   (default: the repository root)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
mod=$(go list -m)

graph() {
	GOOS=$1 go list -e -f '{{.ImportPath}} {{join .Imports " "}}' ./... |
		awk -v mod="$mod/" '{
			out = substr($1, length(mod) + 1)
			delete seen
			for (i = 2; i <= NF; i++) {
				if (index($i, mod) != 1) continue
				p = substr($i, length(mod) + 1)
				if (p == out || (p in seen)) continue
				seen[p] = 1
				out = out " " p
			}
			print out
		}'
}

floor() {
	case $1 in
	internal/* | hns | hns/* | cni/api | proxy | proxy/diffstore) echo 0 ;;
	config | config/*) echo 1 ;;
	agent | agent/*) echo 3 ;;
	cmd/* | test/* | bench/* | demo | demo/* | deploy | deploy/*) echo 4 ;;
	*) echo 2 ;;
	esac
}

lines=$( (graph linux; graph windows) | sort -u | awk '{ if ($1 in g) { for (i = 2; i <= NF; i++) if (index(" " g[$1] " ", " " $i " ") == 0) g[$1] = g[$1] " " $i } else { g[$1] = substr($0, length($1) + 2) } } END { for (p in g) print p ": " g[p] }' | sed "s/:  */: /" | sort)

echo "$lines"
echo
up=0
while IFS= read -r line; do
	pkg=${line%%:*}
	from=$(floor "$pkg")
	for dep in ${line#*:}; do
		to=$(floor "$dep")
		if ((to > from)); then
			echo "UP: $pkg (floor $from) imports $dep (floor $to)"
			up=$((up + 1))
		fi
	done
done <<<"$lines"
echo "upward imports: $up"
((up == 0))
