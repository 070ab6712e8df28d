#!/usr/bin/env bash
# Postgres and Redis for a laptop, without Docker.
#
#   deploy/local/services.sh up       reuse running servers, or start throwaway ones under .data/
#   deploy/local/services.sh down     stop only what `up` started under .data/
#   deploy/local/services.sh status   report what answers and who started it
#   deploy/local/services.sh env      print export lines for DATABASE_URL and REDIS_URL
#
# Environment:
#   PGPORT_LOCAL      Postgres port on 127.0.0.1 (default 5432)
#   REDIS_PORT_LOCAL  Redis port on 127.0.0.1 (default 6379)
#   PGDATABASE_LOCAL  database to create (default agentry)
#
# `up` never installs packages; it says what to install when a server is missing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA="$REPO/.data"
PGDATA_DIR="$DATA/pg"
PG_LOG="$DATA/pg.log"
PG_SOCKDIR="$DATA/run"
REDIS_PIDFILE="$DATA/redis.pid"
REDIS_PORTFILE="$DATA/redis.port"
REDIS_LOG="$DATA/redis.log"

HOST=127.0.0.1
PGPORT_LOCAL="${PGPORT_LOCAL:-5432}"
REDIS_PORT_LOCAL="${REDIS_PORT_LOCAL:-6379}"
PGDATABASE_LOCAL="${PGDATABASE_LOCAL:-agentry}"

# Never prompt for a password and never wait long for a server that is not there.
export PGCONNECT_TIMEOUT=5

say() { printf '[services] %s\n' "$*"; }
die() { printf '[services] error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

install_hint() {
	cat >&2 <<-'EOF'
	[services] install them, then run this again:
	[services]   Debian/Ubuntu: sudo apt-get install postgresql redis-server
	[services]   macOS:         brew install postgresql@15 redis
	[services] or point DATABASE_URL and REDIS_URL at servers you already run.
	EOF
}

# ---------------------------------------------------------------- Postgres

# pg_bindir prints the directory holding initdb and pg_ctl, or nothing.
pg_bindir() {
	local d
	if command -v pg_config >/dev/null 2>&1; then
		d="$(pg_config --bindir 2>/dev/null || true)"
		if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			printf '%s\n' "$d"
			return
		fi
	fi
	# Debian/Ubuntu keep server binaries out of PATH; Homebrew's postgresql@N is keg-only.
	d="$(ls -d /usr/lib/postgresql/*/bin /opt/homebrew/opt/postgresql@*/bin /usr/local/opt/postgresql@*/bin 2>/dev/null |
		awk -F/ '{ v = $0; sub(/.*postgresql[@\/]/, "", v); sub(/\/.*/, "", v); print v "\t" $0 }' |
		sort -t "$(printf '\t')" -k1,1V | cut -f2 | tail -n 1 || true)"
	if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
		printf '%s\n' "$d"
		return
	fi
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
	fi
}

# pg_tool NAME prints the path of a Postgres client tool, or nothing.
pg_tool() {
	local bindir
	if command -v "$1" >/dev/null 2>&1; then
		command -v "$1"
		return
	fi
	bindir="$(pg_bindir)"
	if [ -n "$bindir" ] && [ -x "$bindir/$1" ]; then
		printf '%s\n' "$bindir/$1"
	fi
}

# tcp_open PORT succeeds when something accepts TCP connections on 127.0.0.1:PORT.
tcp_open() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# pg_state prints ready, starting, down or unknown (no pg_isready and the port is open).
pg_state() {
	local isready rc=0
	isready="$(pg_tool pg_isready)"
	if [ -z "$isready" ]; then
		if tcp_open "$PGPORT_LOCAL"; then echo unknown; else echo down; fi
		return
	fi
	"$isready" -q -h "$HOST" -p "$PGPORT_LOCAL" -t 3 || rc=$?
	case "$rc" in
	0) echo ready ;;
	1) echo starting ;;
	*) echo down ;;
	esac
}

# pg_ours succeeds when the cluster under .data/pg is running.
pg_ours() {
	local pid
	[ -f "$PGDATA_DIR/postmaster.pid" ] || return 1
	pid="$(head -n 1 "$PGDATA_DIR/postmaster.pid" 2>/dev/null || true)"
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# pg_ours_port prints the port the .data/pg cluster was started on.
pg_ours_port() {
	sed -n 4p "$PGDATA_DIR/postmaster.pid" 2>/dev/null || true
}

# as_pg_owner CMD... runs CMD as the owner of the data directory: the invoking
# user, or "postgres" when running as root (initdb and postgres refuse root).
as_pg_owner() {
	if ! is_root; then
		"$@"
		return
	fi
	if command -v runuser >/dev/null 2>&1; then
		runuser -u postgres -- "$@"
	else
		local cmd
		cmd="$(printf '%q ' "$@")"
		su postgres -s /bin/sh -c "$cmd"
	fi
}

wait_pg_ready() {
	local i
	for i in $(seq 1 "$1"); do
		[ "$(pg_state)" = ready ] && return 0
		sleep 1
	done
	return 1
}

pg_start_local() {
	local bindir
	bindir="$(pg_bindir)"
	if [ -z "$bindir" ]; then
		say "postgres: nothing answers on $HOST:$PGPORT_LOCAL and no Postgres server binaries (initdb, pg_ctl) were found."
		install_hint
		exit 1
	fi

	mkdir -p "$DATA"
	if is_root; then
		id postgres >/dev/null 2>&1 ||
			die "running as root: initdb refuses root and there is no 'postgres' user to run it as; run as a normal user"
	fi

	if [ ! -f "$PGDATA_DIR/PG_VERSION" ]; then
		say "postgres: creating a throwaway cluster in $PGDATA_DIR ($bindir)"
		mkdir -p "$PGDATA_DIR"
		chmod 700 "$PGDATA_DIR"
		if is_root; then
			chown postgres: "$PGDATA_DIR"
			as_pg_owner test -w "$PGDATA_DIR" ||
				die "running as root: user postgres cannot write $PGDATA_DIR (a parent directory is not searchable by it); run as a normal user"
		fi
		as_pg_owner "$bindir/initdb" -U postgres --auth=trust -E UTF8 --no-locale --no-sync \
			-D "$PGDATA_DIR" >"$DATA/initdb.log" 2>&1 || {
			tail -n 20 "$DATA/initdb.log" >&2
			die "initdb failed (full log: $DATA/initdb.log)"
		}
	fi

	# The server runs as the data directory's owner, which must be able to
	# write its log and socket directory.
	mkdir -p "$PG_SOCKDIR"
	touch "$PG_LOG"
	if is_root; then
		chown postgres: "$PG_SOCKDIR" "$PG_LOG"
	fi
	# Unix socket paths are limited to about 100 bytes; use TCP only when the
	# repository path is too long for one.
	local sockdir="$PG_SOCKDIR"
	if [ "${#sockdir}" -gt 90 ]; then
		sockdir=""
	fi

	say "postgres: starting $PGDATA_DIR on $HOST:$PGPORT_LOCAL (log: $PG_LOG)"
	if ! as_pg_owner "$bindir/pg_ctl" -D "$PGDATA_DIR" -l "$PG_LOG" -w -t 60 \
		-o "-h $HOST -p $PGPORT_LOCAL -k '$sockdir'" start >/dev/null; then
		tail -n 20 "$PG_LOG" >&2
		die "postgres did not start (log: $PG_LOG)"
	fi
	wait_pg_ready 30 || die "postgres started but does not answer on $HOST:$PGPORT_LOCAL (log: $PG_LOG)"
}

pg_ensure_db() {
	local psql createdb out
	psql="$(pg_tool psql)"
	createdb="$(pg_tool createdb)"
	if [ -z "$psql" ] || [ -z "$createdb" ]; then
		say "postgres: psql/createdb not found; make sure database '$PGDATABASE_LOCAL' exists"
		return 0
	fi
	if ! out="$("$psql" -w -X -h "$HOST" -p "$PGPORT_LOCAL" -U postgres -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = '$PGDATABASE_LOCAL'" 2>&1)"; then
		say "postgres: cannot connect as user postgres without a password: $out"
		say "postgres: create database '$PGDATABASE_LOCAL' yourself and set DATABASE_URL to match"
		return 0
	fi
	if [ "$out" = 1 ]; then
		say "postgres: database '$PGDATABASE_LOCAL' exists"
	else
		"$createdb" -w -h "$HOST" -p "$PGPORT_LOCAL" -U postgres "$PGDATABASE_LOCAL"
		say "postgres: created database '$PGDATABASE_LOCAL'"
	fi
}

pg_up() {
	local state
	state="$(pg_state)"
	if [ "$state" = starting ]; then
		say "postgres: $HOST:$PGPORT_LOCAL is starting up; waiting"
		wait_pg_ready 30 || die "postgres on $HOST:$PGPORT_LOCAL did not become ready"
		state=ready
	fi
	case "$state" in
	ready)
		if pg_ours && [ "$(pg_ours_port)" = "$PGPORT_LOCAL" ]; then
			say "postgres: already running from $PGDATA_DIR on $HOST:$PGPORT_LOCAL"
		else
			say "postgres: reusing the server at $HOST:$PGPORT_LOCAL"
		fi
		;;
	unknown)
		say "postgres: something listens on $HOST:$PGPORT_LOCAL but pg_isready is not installed; assuming Postgres"
		;;
	down)
		if pg_ours; then
			if [ "$(pg_ours_port)" = "$PGPORT_LOCAL" ]; then
				die "postgres from $PGDATA_DIR is running but does not answer on $HOST:$PGPORT_LOCAL (log: $PG_LOG); try '$0 down' then '$0 up'"
			fi
			die "postgres from $PGDATA_DIR runs on port $(pg_ours_port), not $PGPORT_LOCAL; run '$0 down' first or set PGPORT_LOCAL=$(pg_ours_port)"
		fi
		pg_start_local
		;;
	esac
	pg_ensure_db
}

pg_down() {
	local bindir
	if ! pg_ours; then
		say "postgres: nothing started from $PGDATA_DIR is running"
		return 0
	fi
	bindir="$(pg_bindir)"
	[ -n "$bindir" ] || die "postgres from $PGDATA_DIR is running but pg_ctl was not found"
	say "postgres: stopping $PGDATA_DIR"
	as_pg_owner "$bindir/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t 60 stop >/dev/null
}

pg_status() {
	local state where
	state="$(pg_state)"
	if pg_ours && [ "$(pg_ours_port)" = "$PGPORT_LOCAL" ]; then
		where="started by this script from $PGDATA_DIR"
	else
		where="not started by this script"
	fi
	case "$state" in
	ready) say "postgres: ready on $HOST:$PGPORT_LOCAL ($where)" ;;
	starting) say "postgres: starting on $HOST:$PGPORT_LOCAL ($where)" ;;
	unknown) say "postgres: port $HOST:$PGPORT_LOCAL is open (pg_isready not installed)" ;;
	*)
		say "postgres: not answering on $HOST:$PGPORT_LOCAL"
		if pg_ours; then
			say "postgres: (the cluster in $PGDATA_DIR runs on port $(pg_ours_port))"
		fi
		;;
	esac
	[ "$state" = ready ] || [ "$state" = unknown ]
}

# ---------------------------------------------------------------- Redis

# redis_ping PORT succeeds when Redis answers PONG on 127.0.0.1:PORT.
redis_ping() {
	local reply=""
	if command -v redis-cli >/dev/null 2>&1; then
		reply="$(redis-cli -h "$HOST" -p "$1" ping 2>/dev/null || true)"
		[ "$reply" = PONG ]
		return
	fi
	# No redis-cli (Redis may run in a container): speak RESP over bash's /dev/tcp.
	(
		exec 3<>"/dev/tcp/$HOST/$1" || exit 1
		printf 'PING\r\n' >&3
		IFS= read -r -t 2 reply <&3 || exit 1
		[ "${reply%$'\r'}" = "+PONG" ]
	) 2>/dev/null
}

# redis_ours succeeds when the Redis that `up` started is running.
redis_ours() {
	local pid
	[ -f "$REDIS_PIDFILE" ] || return 1
	pid="$(cat "$REDIS_PIDFILE" 2>/dev/null || true)"
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	# The pid may have been reused by an unrelated process.
	case "$(ps -p "$pid" -o comm= 2>/dev/null || true)" in
	*redis*) return 0 ;;
	*) return 1 ;;
	esac
}

redis_ours_port() {
	cat "$REDIS_PORTFILE" 2>/dev/null || true
}

redis_up() {
	local i
	if redis_ping "$REDIS_PORT_LOCAL"; then
		if redis_ours && [ "$(redis_ours_port)" = "$REDIS_PORT_LOCAL" ]; then
			say "redis: already running from $DATA on $HOST:$REDIS_PORT_LOCAL"
		else
			say "redis: reusing the server at $HOST:$REDIS_PORT_LOCAL"
		fi
		return 0
	fi
	if redis_ours; then
		die "redis started from $DATA runs on port $(redis_ours_port), not $REDIS_PORT_LOCAL; run '$0 down' first or set REDIS_PORT_LOCAL=$(redis_ours_port)"
	fi
	if ! command -v redis-server >/dev/null 2>&1; then
		say "redis: nothing answers on $HOST:$REDIS_PORT_LOCAL and redis-server was not found."
		install_hint
		exit 1
	fi
	mkdir -p "$DATA"
	rm -f "$REDIS_PIDFILE"
	say "redis: starting on $HOST:$REDIS_PORT_LOCAL (log: $REDIS_LOG)"
	redis-server --daemonize yes --bind "$HOST" --port "$REDIS_PORT_LOCAL" \
		--save "" --appendonly no --dir "$DATA" \
		--logfile "$REDIS_LOG" --pidfile "$REDIS_PIDFILE" >/dev/null
	printf '%s\n' "$REDIS_PORT_LOCAL" >"$REDIS_PORTFILE"
	for i in $(seq 1 20); do
		redis_ping "$REDIS_PORT_LOCAL" && return 0
		sleep 0.5
	done
	tail -n 20 "$REDIS_LOG" >&2 || true
	die "redis did not answer on $HOST:$REDIS_PORT_LOCAL within 10 s (log: $REDIS_LOG)"
}

redis_down() {
	local pid port i
	if ! redis_ours; then
		say "redis: nothing started from $DATA is running"
		rm -f "$REDIS_PIDFILE" "$REDIS_PORTFILE"
		return 0
	fi
	pid="$(cat "$REDIS_PIDFILE")"
	port="$(redis_ours_port)"
	say "redis: stopping pid $pid (port ${port:-unknown})"
	# SHUTDOWN only when the server on the recorded port is the one in the
	# pidfile, so a Redis that this script did not start is never touched.
	if [ -n "$port" ] && command -v redis-cli >/dev/null 2>&1 &&
		[ "$(redis-cli -h "$HOST" -p "$port" info server 2>/dev/null | tr -d '\r' |
			sed -n 's/^process_id://p')" = "$pid" ]; then
		redis-cli -h "$HOST" -p "$port" shutdown nosave >/dev/null 2>&1 || true
	else
		kill -TERM "$pid" 2>/dev/null || true
	fi
	for i in $(seq 1 20); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		die "redis pid $pid did not stop"
	fi
	rm -f "$REDIS_PIDFILE" "$REDIS_PORTFILE"
}

redis_status() {
	local where
	if redis_ours && [ "$(redis_ours_port)" = "$REDIS_PORT_LOCAL" ]; then
		where="started by this script from $DATA"
	else
		where="not started by this script"
	fi
	if redis_ping "$REDIS_PORT_LOCAL"; then
		say "redis: ready on $HOST:$REDIS_PORT_LOCAL ($where)"
		return 0
	fi
	say "redis: not answering on $HOST:$REDIS_PORT_LOCAL"
	if redis_ours; then
		say "redis: (the server started from $DATA runs on port $(redis_ours_port))"
	fi
	return 1
}

# ---------------------------------------------------------------- main

print_env() {
	printf "export DATABASE_URL='%s'\n" "postgres://postgres@$HOST:$PGPORT_LOCAL/$PGDATABASE_LOCAL?sslmode=disable"
	printf "export REDIS_URL='%s'\n" "redis://$HOST:$REDIS_PORT_LOCAL/0"
}

usage() {
	echo "usage: $0 up|down|status|env" >&2
	exit 2
}

main() {
	[ $# -eq 1 ] || usage
	case "$1" in
	up)
		pg_up
		redis_up
		say "ready: DATABASE_URL=postgres://postgres@$HOST:$PGPORT_LOCAL/$PGDATABASE_LOCAL?sslmode=disable REDIS_URL=redis://$HOST:$REDIS_PORT_LOCAL/0"
		;;
	down)
		redis_down
		pg_down
		;;
	status)
		local rc=0
		pg_status || rc=1
		redis_status || rc=1
		return "$rc"
		;;
	env) print_env ;;
	*) usage ;;
	esac
}

main "$@"
