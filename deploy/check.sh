#!/usr/bin/env bash
# Checks deploy/ with promtool (Debian's prometheus package): the alert
# rules, their unit tests, and every query of the Grafana dashboard, parsed
# as a recording rule ($mirror standing for every mirror). That every
# kmirror series they name exists is metrics' TestDeployUsesKnownMetrics.
set -euo pipefail
cd "$(dirname "$0")"
promtool check rules prometheus/kmirror-rules.yml
promtool test rules prometheus/kmirror-rules.test.yml
queries=$(mktemp --suffix=.yml)
trap 'rm -f "$queries"' EXIT
python3 - grafana/kmirror-dashboard.json >"$queries" <<'EOF'
import json, sys
panels = json.load(open(sys.argv[1]))["panels"]
print("groups:\n  - name: dashboard\n    rules:")
for i, t in enumerate(t for p in panels for t in p.get("targets", [])):
    print(f"      - record: kmirror_dashboard_query_{i}")
    print(f"        expr: {json.dumps(t['expr'].replace('$mirror', '.*'))}")
EOF
echo "dashboard queries:"
promtool check rules "$queries"
