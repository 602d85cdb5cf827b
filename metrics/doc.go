package metrics

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/engine/partition"
)

// seriesPer is how many series one label set of the scope's objects (a
// partition, a topic) makes: a metric with a state label makes one per
// state.
func seriesPer(scope Scope) int {
	n := 0
	for _, m := range registry {
		if m.Scope != scope {
			continue
		}
		if slices.Contains(m.Labels, labelState) {
			n += len(partition.States)
		} else {
			n++
		}
	}
	return n
}

// Markdown is docs/metrics.md: every series of the registry with its type,
// labels and meaning.
func Markdown() string {
	var b strings.Builder
	perPart, perTopic := seriesPer(ScopePartition), seriesPer(ScopeTopic)
	fmt.Fprintf(&b, `# Metrics, health and readiness

<!-- Generated from the registry in metrics/registry.go by
     "go generate ./metrics"; a test fails when they differ. -->

`+"`kmirror run --metrics-addr HOST:PORT`"+` (and `+"`kmirror console --metrics-addr`"+`) serves on one
listener:

| path | answers |
|---|---|
| `+"`/metrics`"+` | the series below, plus the Go runtime's (`+"`go_*`"+`) and the process's (`+"`process_*`"+`) |
| `+"`/healthz`"+` | 200 `+"`ok`"+` while the process serves HTTP: use it for liveness |
| `+"`/readyz`"+` | 200 when every readiness check passes, else 503; one line per check (`+"`ok   joined`"+`, `+"`FAIL destination: does not answer since ...`"+`) |

Readiness checks of an instance: **joined** (a member of the instances'
group on __mirror_state, not suspended, the group answered lately),
**shards** (it owns at least one of the 50 shards, assigned and replayed),
**destination** (the destination cluster answered its last checks). A
console without `+"`--run-instance`"+` has the destination check only. The same
checks are exported as `+"`kmirror_instance_ready{check}`"+`.

Every instance exports the partitions it owns, so sums over instances
count each partition once. Series of mirrors an instance does not run
(`+"`kmirror_mirror_source_up`"+`, the latency histograms, the counters by cause,
the sync times) come only from the instances that run them.

## Granularity and cardinality

`+"`--metrics-granularity partition`"+` (the default) exports the partition series:
%d series per partition, so %s at 100,000 partitions, more than most
Prometheus servers take from one target. `+"`--metrics-granularity topic`"+`
exports the topic series instead, the partitions of a topic this instance
owns summed up: %d series per topic (%s for 1,000 topics of 100
partitions). The series under "Always exported" come at either
granularity. The alert rules and the dashboard in deploy/ work with
either: they combine both names with `+"`or`"+`.

`, perPart, thousands(perPart*100_000), perTopic, thousands(perTopic*1000))
	for _, sec := range []struct {
		scope Scope
		title string
	}{
		{ScopeAlways, "Always exported"},
		{ScopePartition, "Per partition (`--metrics-granularity partition`, the default)"},
		{ScopeTopic, "Per topic (`--metrics-granularity topic`)"},
	} {
		fmt.Fprintf(&b, "## %s\n\n| series | type | labels | meaning |\n|---|---|---|---|\n", sec.title)
		for _, m := range registry {
			if m.Scope != sec.scope {
				continue
			}
			labels := make([]string, len(m.Labels))
			for i, l := range m.Labels {
				labels[i] = "`" + l + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, strings.Join(labels, ", "), strings.ReplaceAll(m.Help, "|", `\|`))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "The `state` label takes every state: %s. The `cause` label takes every failure cause but none: %s.\n",
		states(), causes())
	return b.String()
}

func states() string {
	var out []string
	for _, s := range partition.States {
		out = append(out, "`"+s.String()+"`")
	}
	return strings.Join(out, ", ")
}

func causes() string {
	var out []string
	for _, c := range partition.Causes {
		if c != partition.CauseNone {
			out = append(out, "`"+c.String()+"`")
		}
	}
	return strings.Join(out, ", ")
}

// thousands writes n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
