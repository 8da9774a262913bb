#!/usr/bin/env bash
# Installs the Trino the RFC-40 tests query Tandem's tables with: trino-server from Maven Central (476, the newest
# version whose server tarball Maven Central serves here), with its Hudi plugin only (Trino loads every plugin it
# finds at start; the Hudi one alone starts in seconds), outside the repository so every clone on this machine
# reuses it:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/tandem/trino/
#     trino-server-<V>.tar.gz     the download, its SHA-1 checked against Maven Central's
#     trino-server-<V>/           lib/ and plugin/hudi/ of it
#     trino.json                  written last: {"home": ..., "java": ..., "version": ...} for chaos/servers.py
#
# Trino 476 needs Java 24 or newer: the newest JDK under /usr/lib/jvm is taken (Temurin 25 on these machines),
# else Debian's openjdk-25 if the release has it. Without one, nothing is installed and the script says so
# without failing `make test`: the Trino tests then fail in CI (CI=true) and skip elsewhere, the rest runs.
# Idempotent: nothing is downloaded when trino.json names files present.
set -euo pipefail

VERSION="${TANDEM_TRINO_VERSION:-476}"
ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/tandem/trino"
HOME_DIR="$ROOT/trino-server-$VERSION"
TARBALL="$ROOT/trino-server-$VERSION.tar.gz"
URL="https://repo1.maven.org/maven2/io/trino/trino-server/$VERSION/trino-server-$VERSION.tar.gz"
MANIFEST="$ROOT/trino.json"
MIN_JAVA=24

say() { echo "trino: $*"; }

java_major() { # the feature version of the JDK at $1 (0 when it is not one)
  local release="$1/release"
  [ -x "$1/bin/java" ] && [ -f "$release" ] || { echo 0; return; }
  sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$release" | head -1
}

find_java() { # the newest JDK under /usr/lib/jvm at least $MIN_JAVA, else nothing
  local best="" best_major=0 dir major
  for dir in /usr/lib/jvm/*/; do
    dir="${dir%/}"
    [ -L "$dir" ] && continue
    major="$(java_major "$dir")"
    if [ "${major:-0}" -ge "$MIN_JAVA" ] && [ "$major" -gt "$best_major" ]; then
      best="$dir/bin/java" best_major="$major"
    fi
  done
  echo "$best"
}

installed() {
  [ -f "$MANIFEST" ] && [ -d "$HOME_DIR/lib" ] && [ -d "$HOME_DIR/plugin/hudi" ] &&
    grep -q "\"version\": \"$VERSION\"" "$MANIFEST" && [ -x "$(sed -n 's/.*"java": "\([^"]*\)".*/\1/p' "$MANIFEST")" ]
}

if installed; then
  exit 0
fi
mkdir -p "$ROOT"

JAVA="$(find_java)"
if [ -z "$JAVA" ]; then
  say "no JDK >= $MIN_JAVA under /usr/lib/jvm: installing Debian's openjdk-25-jre-headless"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends openjdk-25-jre-headless \
    >/dev/null 2>&1 || true
  JAVA="$(find_java)"
  if [ -z "$JAVA" ]; then
    say "not installed: Trino $VERSION needs Java $MIN_JAVA+, none is under /usr/lib/jvm and Debian has none here"
    rm -f "$MANIFEST"
    exit 0
  fi
fi

expected="$(curl -fsSL "$URL.sha1" | cut -c1-40)"
if [ ! -f "$TARBALL" ] || [ "$(sha1sum "$TARBALL" | cut -c1-40)" != "$expected" ]; then
  say "downloading trino-server $VERSION from Maven Central"
  curl -fsSL -o "$TARBALL.part" "$URL"
  actual="$(sha1sum "$TARBALL.part" | cut -c1-40)"
  if [ "$actual" != "$expected" ]; then
    rm -f "$TARBALL.part"
    say "error: trino-server-$VERSION.tar.gz has SHA-1 $actual, Maven Central says $expected"
    exit 1
  fi
  mv "$TARBALL.part" "$TARBALL"
fi

say "unpacking lib/ and plugin/hudi/ of trino-server $VERSION"
rm -rf "$ROOT/unpack" "$HOME_DIR.part"
mkdir -p "$ROOT/unpack" "$HOME_DIR.part/plugin"
tar xzf "$TARBALL" -C "$ROOT/unpack" --strip-components=1 # whole: plugins share jars by hard links
mv "$ROOT/unpack/lib" "$HOME_DIR.part/lib"
mv "$ROOT/unpack/plugin/hudi" "$HOME_DIR.part/plugin/hudi"
rm -rf "$ROOT/unpack" "$HOME_DIR"
mv "$HOME_DIR.part" "$HOME_DIR"
printf '{"home": "%s", "java": "%s", "version": "%s"}\n' "$HOME_DIR" "$JAVA" "$VERSION" >"$MANIFEST"
say "installed in $HOME_DIR, run by $JAVA"
