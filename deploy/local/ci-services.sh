#!/usr/bin/env bash
# Make Postgres and Redis answer on 127.0.0.1 on a Debian/Ubuntu CI machine.
#
# Meant for a throwaway machine running as root with apt: it installs what is
# missing (postgresql, redis-server), starts what is stopped, and sets trust
# authentication for local and loopback connections to Postgres. It does
# nothing but check when both already answer. Never run it on a machine whose
# Postgres authentication you care about; use services.sh on a laptop.
#
# Afterwards:
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentry?sslmode=disable
#   REDIS_URL=redis://127.0.0.1:6379/0
#
# PGPORT_LOCAL and REDIS_PORT_LOCAL (default 5432 and 6379) change the ports.
set -euo pipefail

HOST=127.0.0.1
# Overridable for testing this script beside servers already running.
PGPORT="${PGPORT_LOCAL:-5432}"
REDIS_PORT="${REDIS_PORT_LOCAL:-6379}"
DBNAME=agentry
REDIS_LOG="/tmp/redis-ci-$REDIS_PORT.log"

export PGCONNECT_TIMEOUT=5

say() { printf '[ci-services] %s\n' "$*"; }
die() { printf '[ci-services] error: %s\n' "$*" >&2; exit 1; }

# as_root CMD... runs CMD as root, through sudo when not root already.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

APT_UPDATED=0
apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* yourself"
	if [ "$APT_UPDATED" -eq 0 ]; then
		say "apt-get update"
		as_root apt-get update -qq
		APT_UPDATED=1
	fi
	say "apt-get install $*"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# ---------------------------------------------------------------- Postgres

pg_ready() {
	command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h "$HOST" -p "$PGPORT" -t 2
}

pg_installed() {
	command -v pg_ctlcluster >/dev/null 2>&1 &&
		compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

# pg_cluster prints "VERSION NAME STATUS" of the Debian cluster configured for
# $PGPORT, or nothing.
pg_cluster() {
	command -v pg_lsclusters >/dev/null 2>&1 || return 0
	pg_lsclusters -h 2>/dev/null | awk -v port="$PGPORT" '$3 == port { print $1, $2, $4; exit }'
}

pg_wait() {
	local i
	for i in $(seq 1 60); do
		pg_ready && return 0
		sleep 0.5
	done
	return 1
}

pg_start() {
	local cluster ver name status newest
	if ! pg_installed; then
		# No pg_ctlcluster or no server binaries: Postgres is not installed.
		apt_install postgresql
		# The package's postinst may have created and started a cluster.
		if pg_ready; then
			say "postgres: started by the package install"
			return 0
		fi
	fi

	cluster="$(pg_cluster)"
	if [ -z "$cluster" ]; then
		newest="$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)"
		[ -n "$newest" ] || die "no Postgres server under /usr/lib/postgresql"
		# "main" unless a cluster of that name exists on another port.
		name=main
		if [ -e "/etc/postgresql/$newest/main" ]; then
			name="agentry$PGPORT"
		fi
		say "postgres: creating cluster $newest/$name on port $PGPORT"
		as_root pg_createcluster --port "$PGPORT" "$newest" "$name" >/dev/null
		cluster="$newest $name down"
	fi
	read -r ver name status <<<"$cluster"
	if [ "$status" = online ]; then
		say "postgres: cluster $ver/$name is running but not ready yet; waiting"
		return 0
	fi

	# The socket directory lives on tmpfs and is gone after a reboot of a
	# machine without systemd.
	as_root install -d -o postgres -g postgres -m 2775 /var/run/postgresql
	say "postgres: starting cluster $ver/$name"
	if ! as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start; then
		tail -n 20 "/var/log/postgresql/postgresql-$ver-$name.log" >&2 2>/dev/null || true
		die "pg_ctlcluster $ver $name start failed"
	fi
}

pg_can_login() {
	psql -w -X -h "$HOST" -p "$PGPORT" -U postgres -d postgres -tAc 'SELECT 1' >/dev/null 2>&1
}

# pg_trust rewrites pg_hba.conf so local and loopback connections use trust.
pg_trust() {
	local cluster ver name hba
	if pg_can_login; then
		return 0
	fi
	cluster="$(pg_cluster)"
	[ -n "$cluster" ] ||
		die "cannot log in as postgres on $HOST:$PGPORT without a password, and the server is not a Debian cluster this script can reconfigure"
	read -r ver name _ <<<"$cluster"
	hba="/etc/postgresql/$ver/$name/pg_hba.conf"
	[ -f "$hba" ] || die "cannot find $hba"
	say "postgres: setting trust authentication for local and loopback connections in $hba"
	[ -f "$hba.orig" ] || as_root cp -p "$hba" "$hba.orig"
	as_root sed -E -i \
		-e '/^[[:space:]]*local[[:space:]]/ s/[[:space:]](peer|ident|md5|scram-sha-256|password)[[:space:]]*$/ trust/' \
		-e '/^[[:space:]]*host[[:space:]].*[[:space:]](127\.0\.0\.1\/32|::1\/128)[[:space:]]/ s/[[:space:]](peer|ident|md5|scram-sha-256|password)[[:space:]]*$/ trust/' \
		"$hba"
	as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" reload
	local i
	for i in $(seq 1 10); do
		pg_can_login && return 0
		sleep 0.5
	done
	die "still cannot log in as postgres on $HOST:$PGPORT after rewriting $hba"
}

pg_db() {
	if [ "$(psql -w -X -h "$HOST" -p "$PGPORT" -U postgres -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = '$DBNAME'")" != 1 ]; then
		createdb -w -h "$HOST" -p "$PGPORT" -U postgres "$DBNAME"
		say "postgres: created database '$DBNAME'"
	fi
}

ensure_postgres() {
	if pg_ready; then
		say "postgres: running on $HOST:$PGPORT"
	else
		pg_start
		pg_wait || die "postgres does not answer on $HOST:$PGPORT after 30 s"
		say "postgres: ready on $HOST:$PGPORT"
	fi
	pg_trust
	pg_db
}

# ---------------------------------------------------------------- Redis

redis_ping() {
	local reply=""
	if command -v redis-cli >/dev/null 2>&1; then
		reply="$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)"
		[ "$reply" = PONG ]
		return
	fi
	(
		exec 3<>"/dev/tcp/$HOST/$REDIS_PORT" || exit 1
		printf 'PING\r\n' >&3
		IFS= read -r -t 2 reply <&3 || exit 1
		[ "${reply%$'\r'}" = "+PONG" ]
	) 2>/dev/null
}

ensure_redis() {
	local i
	if redis_ping; then
		say "redis: running on $HOST:$REDIS_PORT"
		return 0
	fi
	if ! command -v redis-server >/dev/null 2>&1; then
		apt_install redis-server
	fi
	# The package's postinst may have started it.
	if ! redis_ping; then
		say "redis: starting on $HOST:$REDIS_PORT (log: $REDIS_LOG)"
		redis-server --daemonize yes --bind "$HOST" --port "$REDIS_PORT" \
			--save "" --appendonly no --dir /tmp --logfile "$REDIS_LOG" >/dev/null
	fi
	for i in $(seq 1 20); do
		if redis_ping; then
			say "redis: ready on $HOST:$REDIS_PORT"
			return 0
		fi
		sleep 0.5
	done
	tail -n 20 "$REDIS_LOG" >&2 2>/dev/null || true
	die "redis does not answer on $HOST:$REDIS_PORT after 10 s"
}

ensure_postgres
ensure_redis
