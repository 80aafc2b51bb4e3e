#!/usr/bin/env bash
# run.sh: the scaling benchmarks on a many-core machine that has no Go
# toolchain and no network, from the prebuilt bundle `make bench-bundle`
# makes. Each benchmark runs twice: pinned to two cores (taskset -c 0,1,
# GOMAXPROCS=2; the benchmark's servers and clients inherit both) and then
# on all cores; the figures of both runs go side by side, with their ratio,
# into a summary.
#
# Procedure:
#   1. Here, with Go:   make bench-bundle
#      builds bench-bundle/setpoint-bench.tar.xz (stripped test binaries of
#      test/bench/{reconcile,api,peer,watch}, the stripped server, the widget
#      plugin, etcd and kube-apiserver of the peer benchmark) and prints its
#      size: about 43 MiB, under the 64 MiB that may travel with the
#      checkout (kube-apiserver is left out, and the peer benchmark measures
#      Setpoint's side only, when it would not fit). The first build of the
#      peer takes half an hour or more (test/bench/peer/build-peer.sh), and
#      the compression about ten minutes and 6 GiB of memory on two cores.
#   2. On the machine, from the repository root (the tracked files travel
#      with the bundle; carry bench-bundle):
#         test/bench/device/run.sh
#      It unpacks the bundle into a temp dir, runs the benchmarks, writes
#      four files to $OUT (summary.md: the machine, each run's status and
#      every figure pinned and on all cores with the ratio; lines.md: the
#      benchmarks' own log lines; run.log; results.tar.gz: whole logs and
#      metrics), prints the summary, removes what it unpacked and stops by
#      itself within BUDGET seconds (540: a 10-minute command with time to
#      spare). It needs bash, tar, gzip, xz (or python3), taskset, timeout
#      and nproc; go is not used.
#   3. Put summary.md's table in docs/BENCHMARKS.md with the machine line.
#
# Knobs (environment):
#   BUNDLE     the archive, or a directory it was unpacked to
#              (bench-bundle/setpoint-bench.tar.xz)
#   OUT        where logs and the summary go (a new temp dir)
#   BUDGET     seconds for the whole run (540); a run that would not fit
#              is skipped, a run is killed at its cap or the budget's end
#   STEPS      which benchmarks, in order ("reconcile peer api watch")
#   PIN_CPUS   the CPUs of the pinned runs, comma-separated (0,1); the
#              summary says whether they share a core (SMT siblings)
#   RECONCILE_OBJECTS (10000), RECONCILE_ROUNDS (1): Widgets converged
#              through the Wasm plugin, natively and by webhook;
#              RECONCILE_WORKERS (the server's default): worker counts,
#              comma-separated (e.g. 4,16,64: metric names then end in @wN)
#   PEER_OBJECTS (5000), PEER_GETS (10000), PEER_WATCHERS (200,2000),
#   PEER_WATCH_UPDATES (500), PEER_SIDES (both, or setpoint without
#              kube-apiserver): Setpoint beside kube-apiserver on etcd
#   API_CREATES (10000), API_GETS (20000), API_WARMUP (2000),
#   API_ROUNDS (1): creates, GETs and LISTs beside raw etcd
#   WATCH_WATCHERS (200,2000), WATCH_RATES (100,300,1000),
#   WATCH_PHASE_SECONDS (3): HTTP watch fan-out
# A smoke test with small sizes, here and without go on PATH:
#   env PATH=/usr/bin:/bin BUDGET=300 RECONCILE_OBJECTS=200 PEER_OBJECTS=200 \
#     PEER_GETS=200 PEER_WATCHERS=20 PEER_WATCH_UPDATES=20 API_CREATES=200 \
#     API_GETS=200 API_WARMUP=50 WATCH_WATCHERS=20 WATCH_RATES=100 \
#     WATCH_PHASE_SECONDS=1 test/bench/device/run.sh
set -uo pipefail
unset GOMAXPROCS GOFLAGS
started=$SECONDS
repo=$(cd "$(dirname "$0")/../../.." && pwd)
BUNDLE=${BUNDLE:-$repo/bench-bundle/setpoint-bench.tar.xz}
BUDGET=${BUDGET:-540}
STEPS=${STEPS:-reconcile peer api watch}
PIN_CPUS=${PIN_CPUS:-0,1}
deadline=$((started + BUDGET - 15)) # the summary's time
OUT=${OUT:-$(mktemp -d /tmp/setpoint-bench-out.XXXXXX)}
mkdir -p "$OUT"
say() { echo "run.sh: $*" | tee -a "$OUT/run.log" >&2; }
die() { say "$*"; exit 1; }

for tool in tar taskset timeout nproc; do
	command -v "$tool" >/dev/null || die "$tool is missing"
done
if command -v go >/dev/null; then
	say "note: go is on PATH; nothing here uses it"
fi

# The bundle, unpacked into a temp dir (or used in place).
work=$(mktemp -d /tmp/setpoint-bench.XXXXXX)
cleanup() {
	sweep
	rm -rf "$work"
}
# sweep kills what a killed run left behind: processes started from the
# bundle (servers, etcd, kube-apiserver), by pid.
sweep() {
	local p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		case "$exe" in "$work"/* | "$top"/*) kill -KILL "${p#/proc/}" 2>/dev/null ;; esac
	done
}
top=$work/none
trap cleanup EXIT
if [[ -d $BUNDLE ]]; then
	top=$(cd "$BUNDLE" && pwd)
	[[ -d $top/setpoint-bench ]] && top=$top/setpoint-bench
else
	[[ -f $BUNDLE ]] || die "no bundle at $BUNDLE: run \`make bench-bundle\` where Go is, and carry bench-bundle"
	say "unpacking $BUNDLE"
	if command -v xz >/dev/null; then
		xz -dc "$BUNDLE" | tar -xf - -C "$work" || die "cannot unpack $BUNDLE"
	elif command -v python3 >/dev/null; then
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$BUNDLE" |
			tar -xf - -C "$work" || die "cannot unpack $BUNDLE"
	else
		die "neither xz nor python3 is here to unpack $BUNDLE"
	fi
	top=$work/setpoint-bench
fi
[[ -x $top/bin/setpoint ]] || die "$top holds no bin/setpoint: not a bundle"
res=$work/results # logs/ and metrics/, packed into $OUT at the end
mkdir -p "$res/logs" "$res/metrics"

export SETPOINT_ROOT=$top SETPOINT_BIN=$top/bin/setpoint
[[ -x $top/peer/etcd ]] && export ETCD_BIN=$top/peer/etcd
if [[ -x $top/peer/kube-apiserver ]]; then
	export KUBE_APISERVER_BIN=$top/peer/kube-apiserver
	sides=${PEER_SIDES:-setpoint,peer}
else
	sides=${PEER_SIDES:-setpoint}
fi
ncpu=$(nproc)
npin=$(awk -F, '{ print NF }' <<<"$PIN_CPUS")

{
	echo "# Setpoint scaling benchmarks: $npin pinned cores and all $ncpu"
	echo
	echo "machine: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $ncpu CPUs online," \
		"$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r)"
	[[ -r /sys/fs/cgroup/cpu.max ]] && echo "cgroup cpu.max: $(cat /sys/fs/cgroup/cpu.max)"
	# Whether the pinned CPUs are two cores or two threads of one.
	for c in ${PIN_CPUS//,/ }; do
		f=/sys/devices/system/cpu/cpu$c/topology/thread_siblings_list
		[[ -r $f ]] && echo "cpu$c shares its core with CPUs $(cat "$f")"
	done
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${BUDGET} s"
	echo
	echo "pinned: taskset -c $PIN_CPUS, GOMAXPROCS=$npin (servers and load clients share those cores);" \
		"all: no pinning, GOMAXPROCS unset"
	echo
	echo "bundle:"
	sed 's/^/    /' "$top/MANIFEST"
	echo
} >"$OUT/summary.md"

status=() # one line per run
runs=0
failed=0

# run NAME MODE PKG BENCH CAP [VAR=value...]: one run of test/bench/PKG's
# BENCH, logged to logs/NAME-MODE.log, its metrics (the benchmark's result
# line) to metrics/NAME-MODE.tsv. It is killed after CAP
# seconds or at the budget's end, and skipped when under 20 s are left.
run() {
	local name=$1 mode=$2 pkg=$3 bench=$4 cap=$5
	shift 5
	local left=$((deadline - SECONDS)) log=$res/logs/$name-$mode.log
	local bin=$top/tests/$pkg.test
	if [[ ! -x $bin ]]; then
		status+=("$name $mode: not in the bundle")
		return
	fi
	if ((left < 20)); then
		status+=("$name $mode: skipped, ${left} s of the budget left")
		say "$name $mode: skipped (${left} s left)"
		return
	fi
	local t=$((cap < left ? cap : left))
	local pre=()
	[[ $mode == pinned ]] && pre=(taskset -c "$PIN_CPUS" env GOMAXPROCS="$npin")
	local tmp=$work/tmp/$name-$mode
	mkdir -p "$tmp"
	say "$name $mode: ${bench} (at most ${t} s)"
	local t0=$SECONDS rc
	(cd "$tmp" && exec timeout -k 10 "$t" env TMPDIR="$tmp" "$@" "${pre[@]}" "$bin" \
		-test.run '^$' -test.bench "^${bench}\$" -test.benchtime 1x -test.v \
		-test.timeout "$((t + 60))s") >"$log" 2>&1
	rc=$?
	sweep
	rm -rf "$tmp"
	local took=$((SECONDS - t0)) what=ok
	if ((rc == 124 || rc == 137)); then
		what="killed at its ${t} s cap"
	elif ((rc != 0)); then
		what="failed (exit $rc)"
	fi
	runs=$((runs + 1))
	[[ $what == ok ]] || failed=$((failed + 1))
	status+=("$name $mode: $what in ${took} s, load average after $(cut -d' ' -f1-3 /proc/loadavg)")
	say "$name $mode: $what in ${took} s"
	# The result lines: "BenchmarkX/sub-N  1  V1 unit1  V2 unit2 ...".
	awk -v OFS='\t' '$1 ~ /^Benchmark/ && $2 ~ /^[0-9]+$/ && / ns\/op/ {
		n = $1; sub(/-[0-9]+$/, "", n)
		for (i = 3; i < NF; i += 2) print n, $(i + 1), $i
	}' "$log" >"$res/metrics/$name-$mode.tsv"
}

# step NAME PKG BENCH PINNED_CAP ALL_CAP [VAR=value...]: NAME pinned, then
# on all cores, when STEPS names it.
step() {
	local name=$1 pkg=$2 bench=$3 pinned=$4 all=$5
	shift 5
	[[ " $STEPS " == *" $name "* ]] || return 0
	run "$name" pinned "$pkg" "$bench" "$pinned" "$@"
	run "$name" all "$pkg" "$bench" "$all" "$@"
}

# The caps are about twice what a quiet 16-core x86-64 machine is expected
# to take at these sizes; the pinned runs take longest.
for s in $STEPS; do
	case $s in
	reconcile)
		step reconcile reconcile BenchmarkReconcile 200 100 \
			SETPOINT_BENCH_OBJECTS="${RECONCILE_OBJECTS:-10000}" SETPOINT_BENCH_ROUNDS="${RECONCILE_ROUNDS:-1}" \
			SETPOINT_BENCH_WORKERS="${RECONCILE_WORKERS:-}"
		;;
	peer)
		step peer peer BenchmarkPeer 220 140 \
			OBJECTS="${PEER_OBJECTS:-5000}" GETS="${PEER_GETS:-10000}" WATCHERS="${PEER_WATCHERS:-200,2000}" \
			WATCH_UPDATES="${PEER_WATCH_UPDATES:-500}" SIDES="$sides"
		;;
	api)
		step api api BenchmarkAPI 100 70 \
			CREATES="${API_CREATES:-10000}" GETS="${API_GETS:-20000}" WARMUP="${API_WARMUP:-2000}" ROUNDS="${API_ROUNDS:-1}"
		;;
	watch)
		step watch watch BenchmarkHTTPWatch 90 70 \
			HTTP_WATCHERS="${WATCH_WATCHERS:-200,2000}" RATES="${WATCH_RATES:-100,300,1000}" \
			PHASE_SECONDS="${WATCH_PHASE_SECONDS:-3}"
		;;
	*) die "STEPS: unknown benchmark $s (reconcile, peer, api, watch)" ;;
	esac
done

# The summary: each run's status, then every metric pinned and on all
# cores with their ratio; the benchmarks' own log lines go to lines.md.
{
	echo "## Runs"
	echo
	for l in "${status[@]}"; do echo "- $l"; done
	echo
	echo "## Figures"
	echo
	echo "| benchmark | metric | $npin cores (pinned) | $ncpu cores | $ncpu / $npin |"
	echo "|---|---|---:|---:|---:|"
	for s in $STEPS; do
		p=$res/metrics/$s-pinned.tsv a=$res/metrics/$s-all.tsv
		[[ -s $p || -s $a ]] || continue
		touch "$p" "$a"
		awk -F'\t' '
			FNR == NR { pin[$1 "\t" $2] = $3; if (!(($1 "\t" $2) in seen)) { seen[$1 "\t" $2] = 1; order[++n] = $1 "\t" $2 }; next }
			{ all[$1 "\t" $2] = $3; if (!(($1 "\t" $2) in seen)) { seen[$1 "\t" $2] = 1; order[++n] = $1 "\t" $2 } }
			END {
				for (i = 1; i <= n; i++) {
					k = order[i]; split(k, f, "\t")
					p = (k in pin) ? pin[k] : "-"; a = (k in all) ? all[k] : "-"
					r = (k in pin && k in all && pin[k] + 0 != 0) ? sprintf("%.2fx", all[k] / pin[k]) : "-"
					printf "| %s | %s | %s | %s | %s |\n", f[1], f[2], p, a, r
				}
			}' "$p" "$a"
	done
	r=$res/metrics/reconcile
	if [[ -s $r-pinned.tsv && -s $r-all.tsv ]]; then
		echo
		awk -F'\t' -v n="${RECONCILE_OBJECTS:-10000}" -v np="$npin" -v na="$ncpu" '
			$2 == "wasm-obj/s" { w[FILENAME ~ /pinned/ ? "p" : "a"] = $3 }
			$2 == "wasm/native" { r[FILENAME ~ /pinned/ ? "p" : "a"] = $3 }
			END {
				if (w["p"] > 0 && w["a"] > 0)
					printf "Convergence through the Wasm plugin: %.2fx faster on %d cores than on %d (goal >= 4x); %d Widgets in %.2f s on %d cores (goal < 2 s).\n", w["a"] / w["p"], na, np, n, n / w["a"], na
				if (r["p"] != "" && r["a"] != "")
					printf "Wasm / native: %s on %d cores, %s on %d (goal >= 0.9x).\n", r["p"], np, r["a"], na
			}' "$r-pinned.tsv" "$r-all.tsv"
	fi
	echo
	echo "finished $(date -u +%Y-%m-%dT%H:%M:%SZ) after $((SECONDS - started)) s; $runs runs, $failed failed or killed"
} >>"$OUT/summary.md"
{
	echo "# The benchmarks' own lines"
	for s in $STEPS; do
		for m in pinned all; do
			l=$res/logs/$s-$m.log
			[[ -f $l ]] || continue
			echo
			echo "### $s, $m"
			echo
			echo '```'
			grep -E '^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: |^Benchmark|^(FAIL|PASS|ok|panic)' "$l" | tail -n 80
			echo '```'
		done
	done
} >"$OUT/lines.md"
tar -C "$work" -czf "$OUT/results.tar.gz" results

cat "$OUT/summary.md"
say "logs and summary in $OUT"
((failed == 0 && runs > 0))
