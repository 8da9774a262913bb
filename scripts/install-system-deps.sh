#!/usr/bin/env bash
# Installs what the tests need from Debian's packages when it is missing:
# a Java runtime (Spark, ZooKeeper, the Hudi reference), a JDK's javac (the tests compile small judges against
# Hudi's bundle), Maven (the Hudi bundles) and the ZooKeeper server jars.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
[ -d /usr/share/zookeeper ] || need+=(zookeeper)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "installing ${need[*]} from Debian's packages"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
