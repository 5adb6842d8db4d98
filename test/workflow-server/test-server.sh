#!/usr/bin/env bash
# Starts Temporal's time-skipping test server on the JVM: `test-server.sh <port> [args...]`, the
# interface the Node SDK's TestWorkflowEnvironment gives an existing test-server executable.
# The classpath is resolved by scripts/lib/workflow-test-server.ts (from pom.xml beside this).
set -euo pipefail
: "${GANTRY_WORKFLOW_TEST_SERVER_CLASSPATH:?set by scripts/lib/workflow-test-server.ts}"
port=$1
shift
# Class data sharing (scripts/lib/workflow-test-server.ts writeClassArchive): the archive beside the
# classpath file is mapped when it is there, or written as the JVM exits when asked for. A JVM that
# cannot use it (another JDK since) starts without it, quietly.
archive="$(dirname "$GANTRY_WORKFLOW_TEST_SERVER_CLASSPATH")/classes.jsa"
sharing=(-Xlog:cds=off -Xlog:cds+dynamic=off)
if [[ ${GANTRY_WORKFLOW_TEST_SERVER_WRITE_ARCHIVE:-} == 1 ]]; then
  sharing+=(-XX:ArchiveClassesAtExit="$archive")
elif [[ -f $archive ]]; then
  sharing+=(-XX:SharedArchiveFile="$archive")
fi
# The SDK starts this server to skip time; say so whatever else it passes.
exec java -Xss4m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${sharing[@]}" \
  -cp "$(cat "$GANTRY_WORKFLOW_TEST_SERVER_CLASSPATH")" io.temporal.testserver.TestServer "$port" --enable-time-skipping
