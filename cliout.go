package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/store"
)

// listRow is one mirror of --list --json.
type listRow struct {
	Mirror                 string   `json:"mirror"`
	TopicCount             int      `json:"topicCount"`
	Topics                 []string `json:"topics"`
	Patterns               []string `json:"patterns,omitempty"` // --start patterns waiting for a topic
	SourceClusterID        string   `json:"sourceClusterId"`
	SourceBootstrapServers []string `json:"sourceBootstrapServers"`
}

func list(ctx context.Context, adm *engine.Admin, asJSON bool, stdout io.Writer) error {
	cat, err := adm.Catalog(ctx)
	if err != nil {
		return err
	}
	rows := []listRow{}
	for _, n := range cat.MirrorNames() {
		def := cat.Mirrors[n]
		r := listRow{Mirror: n, Topics: []string{}, SourceClusterID: def.SourceClusterID, SourceBootstrapServers: def.SourceBootstrap}
		for _, t := range cat.TopicsOf(n) {
			r.Topics = append(r.Topics, t.Topic)
		}
		for _, p := range def.Patterns {
			r.Patterns = append(r.Patterns, p.Topics)
		}
		r.TopicCount = len(r.Topics)
		rows = append(rows, r)
	}
	if asJSON {
		return writeJSON(stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "No mirrors found.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPICS\tSOURCE-CLUSTER-ID\tSOURCE-BOOTSTRAP-SERVER")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.Mirror, r.TopicCount, r.SourceClusterID, strings.Join(r.SourceBootstrapServers, ","))
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func describe(ctx context.Context, adm *engine.Admin, f *actionFlags, stdout, stderr io.Writer) error {
	rows, err := adm.Describe(ctx, f.mirror)
	if err != nil {
		return err
	}
	if f.failed {
		kept := rows[:0]
		for _, r := range rows {
			if r.State == "FAILED" {
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	if f.asJSON {
		if rows == nil {
			rows = []engine.DescribeRow{}
		}
		return writeJSON(stdout, rows)
	}
	warnOutages(rows, stderr)
	noteHeldWrites(rows, stderr)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if f.failed {
		// KIP-1279's --failed table: what failed and whether it retries.
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tRETRY\tERROR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Mirror, r.Topic, r.Partition, retryColumn(r), cut(oneLineText(r.ErrorMessage), 80))
		}
		return tw.Flush()
	}
	// The KIP's columns come first and in its order; kmirror's own
	// (OWNER, HEARTBEAT) follow, so scripts that count columns still work.
	fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tSTATE\tOWNER\tHEARTBEAT")
	for _, r := range rows {
		lag := "-" // unknown where either end is: never a reassuring 0
		if r.SourceOffset >= 0 && r.DestinationOffset >= 0 {
			lag = strconv.FormatInt(r.Lag, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Mirror, r.Topic, r.Partition, offset(r.SourceOffset), offset(r.DestinationOffset), lag, r.State, ownerColumns(r))
	}
	return tw.Flush()
}

// retryColumn is RETRY of --failed: attempt/max, or NonRetryable for a
// partition that waits for --recover.
func retryColumn(r engine.DescribeRow) string {
	if !r.Retryable {
		return "NonRetryable"
	}
	return fmt.Sprintf("%d/%d", r.RetryAttempt, r.RetryMaxAttempts)
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }

// cut shortens s to n characters, the last one an ellipsis when cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// warnOutages says on stderr, once per mirror, that its source does not
// answer: the table's SOURCE-OFFSET and LAG are then unknown, not zero.
func warnOutages(rows []engine.DescribeRow, stderr io.Writer) {
	seen := map[string]bool{}
	for _, r := range rows {
		if r.SourceUnreachableSince == "" || seen[r.Mirror] {
			continue
		}
		seen[r.Mirror] = true
		fmt.Fprintf(stderr, "warning: mirror %s: its source is unreachable since %s: %s; source offsets and lag are unknown\n", r.Mirror, r.SourceUnreachableSince, r.SourceError)
	}
}

// noteHeldWrites says on stderr, once per topic, which WRITE grants of the
// source --stop will create on the destination (stderr: the table's
// columns stay what scripts parse).
func noteHeldWrites(rows []engine.DescribeRow, stderr io.Writer) {
	seen := map[string]bool{}
	for _, r := range rows {
		key := r.Mirror + "/" + r.Topic
		if len(r.HeldWrites) == 0 || seen[key] {
			continue
		}
		seen[key] = true
		fmt.Fprintf(stderr, "note: mirror %s topic %s: WRITE held back until --stop for %s\n", r.Mirror, r.Topic, strings.Join(r.HeldWrites, ", "))
	}
}

// ownerColumns are OWNER and HEARTBEAT: who runs the partition and how old
// its last heartbeat is, or why nobody runs it.
func ownerColumns(r engine.DescribeRow) string {
	owner := r.Owner
	if owner == "" {
		owner = "-"
	}
	age := "no heartbeat"
	if r.OwnerHeartbeatAgeMs >= 0 {
		age = ageText(time.Duration(r.OwnerHeartbeatAgeMs)*time.Millisecond) + " ago"
	}
	switch r.OwnerStatus {
	case engine.OwnerLive:
		return owner + "\t" + age
	case engine.OwnerNone:
		return owner + "\t-"
	}
	return owner + "\t" + r.OwnerStatus + " (" + age + ")"
}

func ageText(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// configView is --describe-config --json: the recorded definition under
// the settings' primary names, and what each live instance runs.
type configView struct {
	Mirror          string            `json:"mirror"`
	SourceClusterID string            `json:"sourceClusterId"`
	Config          map[string]string `json:"config"`
	CreatedAt       time.Time         `json:"createdAt,omitzero"`
	UpdatedAt       time.Time         `json:"updatedAt,omitzero"`
	Patterns        []string          `json:"patterns,omitempty"` // --start patterns waiting for a topic
	Instances       []appliedConfig   `json:"instances"`
}

// appliedConfig is one live instance's view of the mirror's configuration.
type appliedConfig struct {
	Instance string `json:"instance"`
	// ConfigUpdatedAt is the definition it runs (its updatedAt, or
	// createdAt when never altered): equal to the recorded one once the
	// instance has applied the last --alter.
	ConfigUpdatedAt time.Time `json:"configUpdatedAt,omitzero"`
	Current         bool      `json:"current"`
	ThrottleRate    int64     `json:"throttleRate"` // bytes/s in effect, 0 unthrottled
}

func describeConfig(ctx context.Context, adm *engine.Admin, mirror string, asJSON bool, stdout io.Writer) error {
	def, err := adm.MirrorDefinition(ctx, mirror)
	if err != nil {
		return err
	}
	cat, err := adm.Catalog(ctx)
	if err != nil {
		return err
	}
	v := configView{Mirror: def.Name, SourceClusterID: def.SourceClusterID, Config: shownConfig(def),
		CreatedAt: def.CreatedAt, UpdatedAt: def.UpdatedAt, Instances: []appliedConfig{}}
	for _, p := range def.Patterns {
		v.Patterns = append(v.Patterns, p.Topics)
	}
	now := time.Now()
	for _, id := range slices.Sorted(maps.Keys(cat.Instances)) {
		h := cat.Instances[id]
		if !h.Live(now, engine.HeartbeatMisses) {
			continue
		}
		for _, m := range h.Mirrors {
			if m.Name == mirror {
				v.Instances = append(v.Instances, appliedConfig{Instance: h.Instance, ConfigUpdatedAt: m.ConfigAt,
					Current: m.ConfigAt.Equal(configAt(def)), ThrottleRate: m.ThrottleRate})
			}
		}
	}
	if asJSON {
		return writeJSON(stdout, v)
	}
	fmt.Fprintf(stdout, "# mirror %s, source cluster %s\n", def.Name, def.SourceClusterID)
	for _, k := range slices.Sorted(maps.Keys(v.Config)) {
		fmt.Fprintf(stdout, "%s=%s\n", k, v.Config[k])
	}
	for _, p := range v.Patterns {
		fmt.Fprintf(stdout, "# --start %s: no topic matched yet; started when one appears\n", p)
	}
	if len(v.Instances) == 0 {
		fmt.Fprintln(stdout, "# no live instance runs this mirror")
	}
	for _, a := range v.Instances {
		state := "applied"
		if !a.Current {
			state = "not applied yet"
		}
		throttle := "unthrottled"
		if a.ThrottleRate > 0 {
			throttle = fmt.Sprintf("throttle %d B/s", a.ThrottleRate)
		}
		fmt.Fprintf(stdout, "# instance %s: %s, %s\n", a.Instance, state, throttle)
	}
	return nil
}

// configAt is the time that identifies a definition's version.
func configAt(def store.MirrorDef) time.Time {
	if !def.UpdatedAt.IsZero() {
		return def.UpdatedAt
	}
	return def.CreatedAt
}

// shownConfig is a definition as properties, under the primary names.
// Secrets appear as the references stored; a literal stored with
// --allow-plaintext-secrets is hidden, never printed.
func shownConfig(def store.MirrorDef) map[string]string {
	out := map[string]string{"bootstrap.servers": strings.Join(def.SourceBootstrap, ",")}
	for k, v := range def.SourceConfig {
		if props.IsLiteralSecret(k, v) {
			v = "[hidden: a literal secret]"
		}
		out[k] = v
	}
	for k, v := range def.Config {
		out[props.PrimaryName(k)] = v
	}
	return out
}
