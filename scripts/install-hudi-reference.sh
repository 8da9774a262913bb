#!/usr/bin/env bash
# Installs the reference readers the tests judge Tandem's tables with: Apache Hudi's own Spark bundles, each run
# by a pyspark of the Spark line it was built for, in a venv OUTSIDE the repository, so that every clone on this
# machine reuses it:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/tandem/hudi-ref/
#     venv-pyspark-<V>/                  python + pyspark==V + pyarrow (the server writes its answers as parquet)
#     jars/<artifact>-<version>.jar      from Maven Central (mvn dependency:copy)
#     <reader>/stamp                     written last: the reader is complete
#     readers.json                       what tests/hudi_reference/client.py starts
#     jars/hudi-aws-0.15.0/*.jar         Hudi 0.15's DynamoDB lock provider and what it needs beside the bundle
#     hudi-0.15-aws/stamp, hudi-aws.json the same stamp-then-manifest pair for that jar set
#
# Readers:
#   hudi-0.15  org.apache.hudi:hudi-spark3.5-bundle_2.12:0.15.0 on pyspark 3.5: table version 6, the line Tandem
#              writes (0.15.0 is the newest 0.15.x on Maven Central).
#   hudi-1.x   org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0 on the same pyspark 3.5: Hudi 1.x reading a
#              version-6 table. The Spark 4 bundle (hudi-spark4.0-bundle_2.13) has no version on Maven Central
#              (checked with mvn dependency:get for 1.0.2, 1.1.0, 1.1.1, 1.2.0), so the 1.x line runs on Spark 3.5.
#
# Beside hudi-0.15, the jars tests/interop/test_dynamodb_hudi_interop.py runs Hudi's DynamoDBBasedLockProvider with: the
# Spark bundle has no hudi-aws classes, no AWS SDK v2 and no lock client, and org.apache.hudi:hudi-aws-bundle:0.15.0
# is not on Maven Central. So: hudi-aws 0.15.0 alone (its hudi-common/hive classes come from the bundle), the lock
# client and SDK versions Hudi 0.15's pom pins (dynamodb.lockclient.version 1.2.0, aws.sdk.version 2.18.40), with the
# SDK's async netty client and the http/logging jars pyspark already ships left out. hudi-aws.json lists the jars.
#
# Idempotent: a reader whose stamp and files are present is skipped without touching pip or mvn.
# TANDEM_HUDI_REF_READERS="hudi-0.15" installs only the first one.
set -euo pipefail

PYSPARK_VERSION="${TANDEM_PYSPARK_REF_VERSION:-3.5.9}"
ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/tandem/hudi-ref"
VENV="$ROOT/venv-pyspark-$PYSPARK_VERSION"
JARS="$ROOT/jars"
READERS="${TANDEM_HUDI_REF_READERS:-hudi-0.15 hudi-1.x}"
RECIPE="recipe-2" # bump when what a reader needs changes (recipe-2: pyarrow in the venv)

AWS_DIR="$JARS/hudi-aws-0.15.0"
AWS_RECIPE="aws-1" # bump when the jar set below changes
AWS_POM='<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tandem.reference</groupId><artifactId>hudi-aws-lock</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.hudi</groupId><artifactId>hudi-aws</artifactId><version>0.15.0</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
    <dependency><groupId>com.amazonaws</groupId><artifactId>dynamodb-lock-client</artifactId><version>1.2.0</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
    <dependency><groupId>software.amazon.awssdk</groupId><artifactId>dynamodb</artifactId><version>2.18.40</version>
      <exclusions>
        <exclusion><groupId>software.amazon.awssdk</groupId><artifactId>netty-nio-client</artifactId></exclusion>
        <exclusion><groupId>org.slf4j</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>org.apache.httpcomponents</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>commons-codec</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>commons-logging</groupId><artifactId>*</artifactId></exclusion>
      </exclusions></dependency>
  </dependencies>
</project>'

declare -A ARTIFACT=(
  [hudi-0.15]="org.apache.hudi:hudi-spark3.5-bundle_2.12:0.15.0"
  [hudi-1.x]="org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0"
)

say() { echo "hudi-reference: $*"; }

jar_path() { # group:artifact:version -> the jar's path in $JARS
  local coords="$1" artifact version
  artifact="$(echo "$coords" | cut -d: -f2)"
  version="$(echo "$coords" | cut -d: -f3)"
  echo "$JARS/$artifact-$version.jar"
}

reader_ok() { # a reader is complete when its stamp names this venv and jar, and both exist
  local name="$1" jar
  jar="$(jar_path "${ARTIFACT[$name]}")"
  [ -f "$ROOT/$name/stamp" ] && [ "$(cat "$ROOT/$name/stamp")" = "$RECIPE $VENV/bin/python $jar" ] &&
    [ -x "$VENV/bin/python" ] && [ -s "$jar" ]
}

aws_wanted() { [[ " $READERS " == *" hudi-0.15 "* ]]; }

aws_ok() { # the jar set is complete when its stamp names this recipe and every jar the stamp lists exists
  local stamp="$ROOT/hudi-0.15-aws/stamp" jar
  [ -f "$stamp" ] && [ "$(head -1 "$stamp")" = "$AWS_RECIPE $AWS_DIR" ] || return 1
  while read -r jar; do [ -s "$jar" ] || return 1; done < <(tail -n +2 "$stamp")
}

write_aws_manifest() {
  local tmp="$ROOT/hudi-aws.json.tmp.$$"
  if aws_wanted && aws_ok; then
    printf '{"hudi-0.15": {"recipe": "%s", "jars": [' "$AWS_RECIPE" >"$tmp"
    tail -n +2 "$ROOT/hudi-0.15-aws/stamp" | sed 's/.*/"&"/' | paste -sd, - | tr -d '\n' >>"$tmp"
    echo ']}}' >>"$tmp"
  else
    echo "{}" >"$tmp"
  fi
  mv "$tmp" "$ROOT/hudi-aws.json"
}

install_aws() { # mvn copy-dependencies of the pom above into $AWS_DIR, then the stamp listing what it copied
  local work="$ROOT/hudi-0.15-aws" log="$ROOT/mvn-hudi-0.15-aws.log"
  mkdir -p "$work" "$AWS_DIR"
  rm -f "$work/stamp" "$AWS_DIR"/*.jar # a set of an earlier recipe is not mixed into this one
  echo "$AWS_POM" >"$work/pom.xml"
  say "hudi-0.15 DynamoDB lock jars: fetching hudi-aws 0.15.0, dynamodb-lock-client 1.2.0, AWS SDK 2.18.40 (mvn)"
  mvn -B -Dstyle.color=never -f "$work/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DoutputDirectory="$AWS_DIR" -DincludeScope=runtime -Dmdep.overWriteReleases=false >"$log" 2>&1 ||
    { tail -20 "$log" >&2; echo "hudi-reference: mvn could not fetch the DynamoDB lock jars (log: $log)" >&2; exit 1; }
  [ -s "$AWS_DIR/hudi-aws-0.15.0.jar" ] && [ -s "$AWS_DIR/dynamodb-lock-client-1.2.0.jar" ] ||
    { echo "hudi-reference: DynamoDB lock jars missing after mvn (log: $log)" >&2; exit 1; }
  { echo "$AWS_RECIPE $AWS_DIR"; ls "$AWS_DIR"/*.jar; } >"$work/stamp.tmp"
  mv "$work/stamp.tmp" "$work/stamp"
  say "hudi-0.15 DynamoDB lock jars: ready ($(($(wc -l <"$work/stamp") - 1)) jars)"
}

write_manifest() {
  local tmp="$ROOT/readers.json.tmp.$$" first=1 name jar
  {
    echo "{"
    for name in $READERS; do
      reader_ok "$name" || continue
      jar="$(jar_path "${ARTIFACT[$name]}")"
      [ $first -eq 1 ] || echo ","
      first=0
      printf '  "%s": {"python": "%s", "jar": "%s", "artifact": "%s", "pyspark": "%s"}' \
        "$name" "$VENV/bin/python" "$jar" "${ARTIFACT[$name]}" "$PYSPARK_VERSION"
    done
    echo
    echo "}"
  } >"$tmp"
  mv "$tmp" "$ROOT/readers.json"
}

mkdir -p "$ROOT" "$JARS"
todo=()
for name in $READERS; do
  [ -n "${ARTIFACT[$name]:-}" ] || { echo "hudi-reference: unknown reader $name" >&2; exit 2; }
  if reader_ok "$name"; then
    say "$name: cached ($(cat "$ROOT/$name/stamp"))"
  else
    todo+=("$name")
  fi
done
aws_todo=0
if aws_wanted; then
  if aws_ok; then say "hudi-0.15 DynamoDB lock jars: cached ($(head -1 "$ROOT/hudi-0.15-aws/stamp"))"; else aws_todo=1; fi
fi
if [ ${#todo[@]} -eq 0 ] && [ $aws_todo -eq 0 ]; then
  write_manifest
  write_aws_manifest
  exit 0
fi

# Java (for Spark) and Maven (for the bundles) come from scripts/install-system-deps.sh.
bash "$(dirname "${BASH_SOURCE[0]}")/install-system-deps.sh"

if [ ${#todo[@]} -eq 0 ]; then
  : # only the DynamoDB lock jars are missing: the venv and the bundles stay as they are
elif [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c \
  "import pyarrow, pyspark, sys; sys.exit(pyspark.__version__ != '$PYSPARK_VERSION')" 2>/dev/null; then
  say "venv $VENV: pyspark $PYSPARK_VERSION and pyarrow present"
else
  say "venv $VENV: installing pyspark==$PYSPARK_VERSION and pyarrow (pip, a few minutes on first run)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "pyspark==$PYSPARK_VERSION" "pyarrow>=14"
fi

for name in "${todo[@]+"${todo[@]}"}"; do
  coords="${ARTIFACT[$name]}"
  jar="$(jar_path "$coords")"
  if [ -s "$jar" ]; then
    say "$name: $jar present"
  else
    say "$name: fetching $coords from Maven Central (mvn dependency:copy)"
    log="$ROOT/mvn-$name.log"
    mvn -B -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
      -Dartifact="$coords" -DoutputDirectory="$JARS" -Dmdep.overWriteReleases=false >"$log" 2>&1 ||
      { tail -20 "$log" >&2; echo "hudi-reference: mvn could not fetch $coords (log: $log)" >&2; exit 1; }
    [ -s "$jar" ] || { echo "hudi-reference: $jar missing after mvn" >&2; exit 1; }
  fi
  mkdir -p "$ROOT/$name"
  echo "$RECIPE $VENV/bin/python $jar" >"$ROOT/$name/stamp"
  say "$name: ready"
done
[ $aws_todo -eq 0 ] || install_aws
write_manifest
write_aws_manifest
