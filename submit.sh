#!/usr/bin/env bash
# Submit a Sparkfield job with the installed spark-submit.
#   ./submit.sh --list                 jobs and what they do
#   ./submit.sh JOB --help             the job's flags
#   ./submit.sh JOB [--profile local|cluster|yarn|k8s[,gpu]] [--master URL] [--conf k=v]...
#                   [--python-env ENV.tar.gz] [spark-submit options] [--dry-run] [job flags...]
# spark-submit's own options (--packages, --jars, --conf, --driver-memory, --executor-memory,
# --files, --archives, --py-files, ...) go to spark-submit; --dry-run prints the command.
# The library is shipped as a zip with --py-files, the conf files with --files; master and
# Spark settings come from the conf profile (--master overrides it). A packed virtual
# environment (`make pack-env`; or `submit.python_env` in the profile) goes with --archives and
# gives the executors their third-party packages, native ones included.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${SPARKFIELD_PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"

list_jobs() {
  for f in "$ROOT"/jobs/*.py; do
    name="$(basename "$f" .py)"
    [ "$name" = "__init__" ] && continue
    doc="$(sed -n 's/^"""\(.*\)/\1/p' "$f" | head -n 1)"
    printf '  %-18s %s\n' "$name" "$doc"
  done
}

if [ $# -eq 0 ] || [ "$1" = "--list" ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: ./submit.sh JOB [--profile local|cluster|yarn|k8s] [--master URL] [--conf k=v]"
  echo "                   [--python-env ENV.tar.gz] [spark-submit options: --packages, --jars,"
  echo "                   --driver-memory, ...] [--dry-run] [flags]   (JOB --help: the job's flags)"
  echo "jobs:"
  list_jobs
  exit 0
fi

JOB="$1"; shift
JOB_FILE="$ROOT/jobs/$JOB.py"
if [ ! -f "$JOB_FILE" ]; then
  echo "error: unknown job '$JOB'. Jobs:" >&2
  list_jobs >&2
  exit 2
fi

PROFILE=local; MASTER=""; PYENV=""; CONF_DIR="$ROOT/conf"; PASS=(); EXTRA=()
USER_PYFILES=""; USER_FILES=""; USER_ARCHIVES=""; DRY_RUN=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) PYTHONPATH="$ROOT/libs${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m sparkfield "$JOB" --help ;;
    --profile) PROFILE="$2"; PASS+=("$1" "$2"); shift 2 ;;
    --profile=*) PROFILE="${1#*=}"; PASS+=("$1"); shift ;;
    --master) MASTER="$2"; shift 2 ;;
    --master=*) MASTER="${1#*=}"; shift ;;
    --python-env) PYENV="$2"; shift 2 ;;
    --python-env=*) PYENV="${1#*=}"; shift ;;
    --conf-dir) CONF_DIR="$2"; PASS+=("$1" "$2"); shift 2 ;;
    --conf) EXTRA+=(--conf "$2"); shift 2 ;;   # one-off Spark setting, wins over the profile
    # spark-submit's own options go to spark-submit (they win over the profile's)
    --packages|--jars|--repositories|--exclude-packages|--driver-memory|--driver-cores|\
    --driver-java-options|--driver-library-path|--driver-class-path|--executor-memory|\
    --executor-cores|--num-executors|--total-executor-cores|--queue|--principal|--keytab|\
    --properties-file|--name|--deploy-mode|--proxy-user)
      [ $# -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      EXTRA+=("$1" "$2"); shift 2 ;;
    --packages=*|--jars=*|--repositories=*|--exclude-packages=*|--driver-memory=*|\
    --driver-cores=*|--driver-java-options=*|--driver-library-path=*|--driver-class-path=*|\
    --executor-memory=*|--executor-cores=*|--num-executors=*|--total-executor-cores=*|\
    --queue=*|--principal=*|--keytab=*|--properties-file=*|--name=*|--deploy-mode=*|\
    --proxy-user=*|--conf=*)
      EXTRA+=("${1%%=*}" "${1#*=}"); shift ;;
    --verbose|--supervise) EXTRA+=("$1"); shift ;;
    # lists merged with the ones submit.sh ships (library zip, conf files, packed environment)
    --py-files) USER_PYFILES+=",$2"; shift 2 ;;
    --files) USER_FILES+=",$2"; shift 2 ;;
    --archives) USER_ARCHIVES+=",$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;   # print the spark-submit command instead of running it
    *) PASS+=("$1"); shift ;;
  esac
done

# found, not imported: importing pyspark takes longer than the lookup
SPARK_HOME="${SPARK_HOME:-$("$PY" -c 'import importlib.util as u, os
s = u.find_spec("pyspark")
print(os.path.dirname(s.origin) if s and s.origin else "")')}"
[ -n "$SPARK_HOME" ] || { echo "error: no pyspark for $PY: run \`make venv\` (or set SPARK_HOME)" >&2; exit 1; }
export SPARK_HOME
SUBMIT="$SPARK_HOME/bin/spark-submit"
[ -x "$SUBMIT" ] || { echo "error: spark-submit not found under $SPARK_HOME" >&2; exit 1; }
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || {
  echo "error: Java 17 is needed (install openjdk-17-jre-headless or set JAVA_HOME)" >&2; exit 1; }

# the library as a zip for --py-files (rebuilt every submit: cheap, never stale)
BUILD="$ROOT/build"; mkdir -p "$BUILD"
ZIP="$BUILD/sparkfield.zip"
PYTHONPATH="$ROOT/libs" "$PY" -m sparkfield.deploy.package "$ZIP" >/dev/null

# the job's arguments tell the size of its input (a small one gets the profile's
# submit.small_input_conf, sparkfield/deploy/submit.py); the user's driver Java options
# replace the ones a small input would get
JOB_ARGS=(--job-args ${PASS[@]+"${PASS[@]}"})
OWN_JAVA=""
for a in ${EXTRA[@]+"${EXTRA[@]}"}; do
  case "$a" in --driver-java-options|spark.driver.extraJavaOptions=*) OWN_JAVA=1 ;; esac
done
mapfile -t SUBMIT_ARGS < <(PYTHONPATH="$ROOT/libs" "$PY" -m sparkfield.deploy.submit \
  --job "$JOB" --profile "$PROFILE" --conf-dir "$CONF_DIR" ${MASTER:+--master "$MASTER"} \
  ${PYENV:+--python-env "$PYENV"} --driver-python "$PY" ${OWN_JAVA:+--own-driver-java} \
  ${JOB_ARGS[@]+"${JOB_ARGS[@]}"})
[ "${#SUBMIT_ARGS[@]}" -gt 0 ] || exit 2
# the user's --files / --archives join the generated lists (spark-submit keeps only the last)
for i in "${!SUBMIT_ARGS[@]}"; do
  case "${SUBMIT_ARGS[$i]}" in
    --files) SUBMIT_ARGS[i+1]+="$USER_FILES"; USER_FILES="" ;;
    --archives) SUBMIT_ARGS[i+1]+="$USER_ARCHIVES"; USER_ARCHIVES="" ;;
  esac
done
[ -z "$USER_FILES" ] || EXTRA+=(--files "${USER_FILES#,}")
[ -z "$USER_ARCHIVES" ] || EXTRA+=(--archives "${USER_ARCHIVES#,}")

export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PY}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PY}"
export SPARKFIELD_CONF_DIR="$CONF_DIR"
if [ -z "${SPARK_CONF_DIR:-}" ]; then
  # Spark's launcher puts its conf directory on the class path: an empty one here (no
  # spark-defaults.conf or spark-env.sh), so that the driver JVM can keep a class archive, and
  # the log settings of conf/spark/log4j2.properties given to the driver JVM by name
  export SPARK_CONF_DIR="$BUILD/spark-conf"
  mkdir -p "$SPARK_CONF_DIR"
  export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }-Dlog4j2.configurationFile=file:$ROOT/conf/spark/log4j2.properties"
fi
CMD=("$SUBMIT" "${SUBMIT_ARGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} --py-files "$ZIP$USER_PYFILES"
     "$JOB_FILE" ${PASS[@]+"${PASS[@]}"})
if [ "$DRY_RUN" = 1 ]; then printf '%s\n' "${CMD[@]}"; exit 0; fi

# the driver JVM's class archive (sparkfield/deploy/class_archive.py): mapped when there is one,
# written by the first run otherwise, and kept only when that run succeeds
CP_GIVEN=()
for a in "${SUBMIT_ARGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"}; do
  case "$a" in --driver-class-path|spark.driver.extraClassPath=*) CP_GIVEN=(--class-path-given) ;; esac
done
JVM_DIR="$BUILD/jvm"
ARCHIVE_OPTS="$(PYTHONPATH="$ROOT/libs" "$PY" -m sparkfield.deploy.class_archive \
  --spark-home "$SPARK_HOME" --dir "$JVM_DIR" --tag "$$" ${CP_GIVEN[@]+"${CP_GIVEN[@]}"})"
case "$ARCHIVE_OPTS" in
  *ArchiveClassesAtExit*) ;;
  *) [ -z "$ARCHIVE_OPTS" ] || export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }$ARCHIVE_OPTS"
     exec "${CMD[@]}" ;;
esac
export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }$ARCHIVE_OPTS"
"${CMD[@]}" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP  # not exec'd: pass a stop on
rc=0
wait "$child" || rc=$?
while kill -0 "$child" 2>/dev/null; do rc=0; wait "$child" || rc=$?; done
for f in "$JVM_DIR"/*.jsa."$$".partial; do
  [ -e "$f" ] || continue
  if [ "$rc" = 0 ] && [ -s "$f" ]; then mv -f "$f" "${f%."$$".partial}"; else rm -f "$f"; fi
done
exit "$rc"
