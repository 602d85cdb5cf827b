package drill

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
)

// Target is what the drill acts on besides the mirror's engine. The demo's
// sandbox does every step itself: it takes cluster A down, moves its own
// producers and consumer group, and knows every write it was acknowledged,
// so its losses are exact. Real clusters have an operator who takes the
// source away and moves the clients, and confirms each of those steps;
// there the drill measures what offsets and group state can tell.
//
// What both share (preflight over the engine's snapshot, the T0 snapshot,
// the failover, the report) is in the drill; the steps call the target for
// the rest. Both implementations live in this package: New(Config) takes
// SandboxTarget or RealTarget.
type Target interface {
	// Clusters names the source and the destination for the report.
	Clusters() (source, destination string)
	// Instruction is what the operator must do and confirm before step id
	// can run; "" when the target does the step itself.
	Instruction(id StepID) string

	// kind names the target in the report.
	kind() string
	// describe is the step's title, its explanation and where to look on
	// the console.
	describe(id StepID) stepText
	// destination is how the drill's own readers reach B.
	destination() cluster
	// wantTopics are the topics preflight waits to see MIRRORING (nil: the
	// mirror's, whatever they are).
	wantTopics() []string
	preflight(ctx context.Context, r *stepRun) error
	snapshot(r *stepRun)
	outage(ctx context.Context, r *stepRun) error
	afterFailover(ctx context.Context, r *stepRun) error
	switchClients(ctx context.Context, r *stepRun) error
	verify(ctx context.Context, r *stepRun) error
	failback(ctx context.Context, r *stepRun) error
	fill(rep *Report)
	// audit holds rep's numbers against what the target knows
	// independently (the sandbox's ledger); nil when it knows nothing
	// more. lme is the forward mirror's last mirrored offsets at the stop.
	audit(ctx context.Context, rep *Report, lme map[string]int64) []AuditCheck
}

// Mirror is the engine instance as the drill uses it: its snapshot, and
// the stop it sends. *engine.Engine implements it.
type Mirror interface {
	Snapshot() engine.Snapshot
	Control(ctx context.Context, cmd engine.Command) error
}

// cluster is how the drill's own short-lived clients reach one cluster.
type cluster struct {
	name      string
	bootstrap []string
	opts      []kgo.Opt // security settings
}

func (c cluster) String() string { return c.name + " (" + strings.Join(c.bootstrap, ",") + ")" }

func (c cluster) clientOpts(id string, extra ...kgo.Opt) []kgo.Opt {
	out := append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap...), kgo.ClientID(id)}, c.opts...)
	return append(out, extra...)
}
