#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback, for the server tests and for trying the tool
# against a team-style backend store. Installs the distribution's PostgreSQL if it is missing.
#
#   scripts/postgres.sh start DIR [PORT]   initdb DIR/data (if new), start on 127.0.0.1:PORT
#                                          (default 55432); prints the SQLAlchemy URI
#   scripts/postgres.sh stop DIR           fast shutdown
#   scripts/postgres.sh bindir             print the PostgreSQL bin directory (installs if absent)
#
# PostgreSQL refuses to run as root: as root the cluster runs as the `postgres` user; as any
# other user it runs as that user. Authentication is `trust` on loopback only: for tests.
set -euo pipefail

find_bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; return 0; fi
    done
    local initdb
    initdb=$(command -v initdb 2>/dev/null || true)
    if [[ -n "$initdb" ]]; then dirname "$initdb"; return 0; fi
    return 1
}

bindir() {
    if find_bindir; then return 0; fi
    if [[ $(id -u) -ne 0 ]]; then
        echo "postgres.sh: PostgreSQL is not installed and installing it needs root" \
             "(apt-get install -y postgresql)" >&2
        return 1
    fi
    echo "postgres.sh: installing PostgreSQL (apt-get install -y postgresql)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2 || {
        echo "postgres.sh: apt-get could not install postgresql" >&2; return 1; }
    find_bindir
}

as_owner() {  # run a command line as the cluster owner
    if [[ $(id -u) -eq 0 ]]; then
        su postgres -s /bin/bash -c "$1"
    else
        bash -c "$1"
    fi
}

cmd=${1:-}
case "$cmd" in
    bindir)
        bindir ;;
    start)
        dir=${2:?usage: postgres.sh start DIR [PORT]}
        port=${3:-55432}
        bin=$(bindir)
        mkdir -p "$dir/data" "$dir/sock"
        if [[ $(id -u) -eq 0 ]]; then
            getent passwd postgres >/dev/null || useradd --system --no-create-home postgres
            chown -R postgres: "$dir"
        fi
        chmod 700 "$dir/data"
        if [[ ! -f "$dir/data/PG_VERSION" ]]; then
            as_owner "'$bin/initdb' -D '$dir/data' -U postgres --auth=trust -E UTF8 \
                      --locale=C.UTF-8 >'$dir/sock/initdb.log' 2>&1" || {
                cat "$dir/sock/initdb.log" >&2; exit 1; }
        fi
        as_owner "'$bin/pg_ctl' -D '$dir/data' -l '$dir/sock/pg.log' -w -t 60 \
                  -o \"-p $port -k '$dir/sock' -h 127.0.0.1 -c fsync=off\" start >/dev/null" || {
            cat "$dir/sock/pg.log" >&2; exit 1; }
        echo "postgresql+psycopg2://postgres@127.0.0.1:$port/postgres" ;;
    stop)
        dir=${2:?usage: postgres.sh stop DIR}
        bin=$(bindir)
        as_owner "'$bin/pg_ctl' -D '$dir/data' -m fast -w stop >/dev/null" ;;
    *)
        echo "usage: postgres.sh start DIR [PORT] | stop DIR | bindir" >&2; exit 2 ;;
esac
