#!/usr/bin/env bash
# Starts Temporal's time-skipping test server on the JVM: `test-server.sh <port> [args...]`, the
# interface the Node SDK's TestWorkflowEnvironment gives an existing test-server executable.
# The classpath is resolved by scripts/lib/workflow-test-server.ts (from pom.xml beside this).
set -euo pipefail
: "${GANTRY_WORKFLOW_TEST_SERVER_CLASSPATH:?set by scripts/lib/workflow-test-server.ts}"
port=$1
shift
# The SDK starts this server to skip time; say so whatever else it passes.
exec java -Xss4m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$(cat "$GANTRY_WORKFLOW_TEST_SERVER_CLASSPATH")" \
  io.temporal.testserver.TestServer "$port" --enable-time-skipping
