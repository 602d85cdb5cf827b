package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/store"
)

// ErrOperation marks failures of an admin operation the operator can act on
// (unknown mirror, nothing matched, not stopped). The CLI exits 1 on them.
var ErrOperation = errors.New("operation failed")

func opErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrOperation, fmt.Sprintf(format, args...))
}

// Admin records operator actions in a destination's __mirror_state and
// reads it back. Instances act on what it records; nothing here needs an
// instance running.
type Admin struct {
	opts []kgo.Opt
	cl   *kgo.Client
	w    *store.Writer
	now  func() time.Time
}

// NewAdmin connects to the destination cluster; it fails within timeout when
// the cluster does not answer. extra go to its franz-go clients (a logger).
func NewAdmin(ctx context.Context, bootstrap []string, security map[string]string, timeout time.Duration, extra ...kgo.Opt) (*Admin, error) {
	sec, err := SecurityOpts(security)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	opts := append(append([]kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.ClientID("kmirror-admin"), kgo.RetryTimeout(timeout)}, sec...), extra...)
	cl, err := kgo.NewClient(append(slices.Clone(opts), store.WriterOpts()...)...)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := kadm.NewClient(cl).ListBrokers(cctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("destination cluster %s unreachable: %w", strings.Join(bootstrap, ","), err)
	}
	return &Admin{opts: opts, cl: cl, w: store.NewWriter(cl), now: time.Now}, nil
}

// Close closes the admin's connections.
func (a *Admin) Close() { a.cl.Close() }

// Catalog reads __mirror_state; a destination without it has no mirror.
func (a *Admin) Catalog(ctx context.Context) (*store.Catalog, error) {
	cat, err := store.ReadAll(ctx, a.opts, nil)
	if errors.Is(err, store.ErrNoStateTopic) {
		return store.NewCatalog(), nil
	}
	return cat, err
}

// resolveSecrets replaces the ${env:…} and ${file:…} references of a
// mirror definition, within the instance's definition policy
// (props.DefinitionPolicyFromEnv): a definition is written by whoever may
// write __mirror_state, and must not read the instance's other secrets.
func resolveSecrets(cfg map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		r, err := props.ResolveDefinition(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = r
	}
	return out, nil
}

// CreateMirror validates a mirror configuration, checks that its source
// answers, and records the mirror with the source's cluster id. Secret
// values must be references unless allowLiteralSecrets.
func (a *Admin) CreateMirror(ctx context.Context, name string, p props.Properties, allowLiteralSecrets bool) (warnings []string, err error) {
	def, warnings, err := buildDef(name, p, allowLiteralSecrets)
	if err != nil {
		return warnings, err
	}
	def.CreatedAt = a.now().UTC()
	cat, err := a.Catalog(ctx)
	if err != nil {
		return warnings, err
	}
	if _, ok := cat.Mirrors[name]; ok {
		return warnings, opErr("mirror %s already exists", name)
	}
	id, err := a.reachSource(ctx, def)
	if err != nil {
		return warnings, err
	}
	def.SourceClusterID = id
	if err := store.EnsureTopic(ctx, kadm.NewClient(a.cl)); err != nil {
		return warnings, err
	}
	return warnings, a.w.PutMirror(ctx, def)
}

// reachSource checks what a created or altered definition needs of the
// clusters: an ACL write guard needs an authorizer on the destination, and
// the source answers with its cluster id.
func (a *Admin) reachSource(ctx context.Context, def store.MirrorDef) (sourceID string, err error) {
	if strings.EqualFold(strings.TrimSpace(def.Config[props.KeyWriteGuard]), props.WriteGuardACL) {
		if err := probeAuthorizer(ctx, a.cl); err != nil {
			return "", err
		}
	}
	return sourceClusterID(ctx, def)
}

// AlterMirror replaces an existing mirror's configuration, validated as
// CreateMirror validates it. Its topics and standing --start patterns stay;
// a new bootstrap must reach the same source cluster (the mirror's offsets
// are that cluster's). Running instances pick the new definition up from
// __mirror_state and reconfigure the mirror in place.
func (a *Admin) AlterMirror(ctx context.Context, name string, p props.Properties, allowLiteralSecrets bool) (warnings []string, err error) {
	def, warnings, err := buildDef(name, p, allowLiteralSecrets)
	if err != nil {
		return warnings, err
	}
	old, err := a.MirrorDefinition(ctx, name)
	if err != nil {
		return warnings, err
	}
	id, err := a.reachSource(ctx, def)
	if err != nil {
		return warnings, err
	}
	if old.SourceClusterID != "" && id != old.SourceClusterID {
		return warnings, opErr("bootstrap.servers %s reach cluster %s, not the mirror's source %s", strings.Join(def.SourceBootstrap, ","), id, old.SourceClusterID)
	}
	def.SourceClusterID, def.CreatedAt, def.Patterns, def.UpdatedAt = old.SourceClusterID, old.CreatedAt, old.Patterns, a.now().UTC()
	return warnings, a.w.PutMirror(ctx, def)
}

// MirrorDefinition returns a mirror's recorded definition.
func (a *Admin) MirrorDefinition(ctx context.Context, name string) (store.MirrorDef, error) {
	cat, err := a.Catalog(ctx)
	if err != nil {
		return store.MirrorDef{}, err
	}
	def, ok := cat.Mirrors[name]
	if !ok {
		return def, opErr("mirror %s does not exist", name)
	}
	return def, nil
}

// buildDef validates a mirror configuration and splits it into a
// definition: bootstrap, source client settings, mirror.* settings (under
// their primary names, so instances never see an alias).
func buildDef(name string, p props.Properties, allowLiteralSecrets bool) (store.MirrorDef, []string, error) {
	def := store.MirrorDef{Name: name, SourceConfig: map[string]string{}, Config: map[string]string{}}
	if err := store.ValidateName(name); err != nil {
		return def, nil, fmt.Errorf("mirror name %q: %w", name, err)
	}
	warnings, err := props.ValidateMirrorConfig(p)
	if err != nil {
		return def, warnings, err
	}
	for _, e := range p.Entries {
		key := props.Canonical(e.Key)
		switch {
		case key == "bootstrap.servers":
			for _, s := range strings.Split(e.Value, ",") {
				if s = strings.TrimSpace(s); s != "" {
					def.SourceBootstrap = append(def.SourceBootstrap, s)
				}
			}
		case strings.HasPrefix(key, "mirror."):
			def.Config[key] = e.Value
		default:
			if props.IsLiteralSecret(key, e.Value) && !allowLiteralSecrets {
				return def, warnings, fmt.Errorf("%s holds a literal secret: store a reference (${env:NAME} or ${file:/path:key}) or pass --allow-plaintext-secrets", e.Key)
			}
			if err := props.CheckDefinition(e.Value); err != nil {
				return def, warnings, fmt.Errorf("mirror %s: %s: %w", name, e.Key, err)
			}
			def.SourceConfig[key] = e.Value
		}
	}
	return def, warnings, nil
}

// sourceClient connects to a mirror's source with its resolved settings;
// extra go to its franz-go client (a logger).
func sourceClient(def store.MirrorDef, extra ...kgo.Opt) (*cluster, error) {
	sec, err := resolveSecrets(def.SourceConfig)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: %w", def.Name, err)
	}
	opts, err := SecurityOpts(sec)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: %w", def.Name, err)
	}
	return newCluster("source", def.SourceBootstrap, "kmirror-admin", slices.Concat(opts, []kgo.Opt{kgo.RetryTimeout(10 * time.Second)}, extra)...)
}

func sourceClusterID(ctx context.Context, def store.MirrorDef) (string, error) {
	src, err := sourceClient(def)
	if err != nil {
		return "", err
	}
	defer src.close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, err := src.metadata(cctx, []string{})
	if err != nil {
		return "", fmt.Errorf("source cluster %s unreachable: %w", strings.Join(def.SourceBootstrap, ","), err)
	}
	return m.clusterID, nil
}

// DeleteMirror removes a mirror whose topics are all STOPPED.
func (a *Admin) DeleteMirror(ctx context.Context, name string) error {
	cat, err := a.Catalog(ctx)
	if err != nil {
		return err
	}
	if _, ok := cat.Mirrors[name]; !ok {
		return opErr("mirror %s does not exist", name)
	}
	var running []string
	for _, t := range cat.TopicsOf(name) {
		stopped := t.Desired == partition.DesiredStop
		for _, p := range cat.PartitionsOf(name, t.Topic) {
			stopped = stopped && p.State == partition.Stopped
		}
		if !stopped {
			running = append(running, t.Topic)
		}
	}
	if len(running) > 0 {
		return opErr("mirror %s has topics that are not STOPPED: %s (stop them first)", name, strings.Join(running, ", "))
	}
	for _, p := range cat.PartitionsOf(name, "") {
		if err := a.w.Put(ctx, store.PartitionKey(name, p.Topic, p.Partition), nil); err != nil {
			return err
		}
	}
	for _, t := range cat.TopicsOf(name) {
		if err := a.w.Put(ctx, store.TopicKey(name, t.Topic), nil); err != nil {
			return err
		}
	}
	return a.w.Put(ctx, store.MirrorKey(name), nil)
}

// Start records desired state start for the source topics sel selects and
// exclude (an RE2 regex, may be nil) does not; it returns them.
func (a *Admin) Start(ctx context.Context, mirror string, sel TopicSelector, exclude *regexp.Regexp) ([]string, error) {
	cat, err := a.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	def, ok := cat.Mirrors[mirror]
	if !ok {
		return nil, opErr("mirror %s does not exist", mirror)
	}
	settings, err := mirrorSettings(def)
	if err != nil {
		return nil, err
	}
	src, err := sourceClient(def)
	if err != nil {
		return nil, err
	}
	defer src.close()
	meta, err := src.metadata(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("source cluster %s unreachable: %w", strings.Join(def.SourceBootstrap, ","), err)
	}
	var excl []*regexp.Regexp
	for _, p := range settings.TopicsExclude {
		if re, err := regexp.Compile("^(?:" + p + ")$"); err == nil {
			excl = append(excl, re)
		}
	}
	if exclude != nil {
		excl = append(excl, exclude)
	}
	var topics []string
	for _, n := range sel.names {
		if _, ok := meta.topics[n]; !ok {
			return nil, opErr("source topic %s does not exist", n)
		}
	}
	for t := range meta.topics {
		if !sel.Match(t) || slices.ContainsFunc(excl, func(re *regexp.Regexp) bool { return re.MatchString(t) }) {
			continue
		}
		topics = append(topics, t)
	}
	if len(topics) == 0 {
		if !sel.HasPatterns() {
			return nil, opErr("no source topic matches %q", sel.raw)
		}
		// KIP-1279: a pattern is a standing order. Recorded on the
		// mirror, discovery starts its topics once they appear.
		return nil, a.recordPattern(ctx, def, sel, exclude)
	}
	slices.Sort(topics)
	if err := a.refuseLoop(ctx, def, topics); err != nil {
		return nil, err
	}
	for _, t := range topics {
		td := cat.Topics[store.TopicRef{Mirror: mirror, Topic: t}]
		td.Mirror, td.Topic, td.Desired, td.Pattern, td.UpdatedAt = mirror, t, partition.DesiredStart, sel.raw, a.now().UTC()
		if exclude != nil {
			td.Exclude = exclude.String()
		}
		if err := a.w.PutTopic(ctx, td); err != nil {
			return nil, err
		}
	}
	return topics, nil
}

func (a *Admin) recordPattern(ctx context.Context, def store.MirrorDef, sel TopicSelector, exclude *regexp.Regexp) error {
	p := store.StartPattern{Topics: sel.raw}
	if exclude != nil {
		p.Exclude = exclude.String()
	}
	if slices.Contains(def.Patterns, p) {
		return nil
	}
	def.Patterns = append(def.Patterns, p)
	return a.w.PutMirror(ctx, def)
}

// refuseLoop fails when an active mirror in the source cluster's own
// __mirror_state copies any of topics from this destination to the source.
func (a *Admin) refuseLoop(ctx context.Context, def store.MirrorDef, topics []string) error {
	dst := &cluster{name: "destination", cl: a.cl, adm: kadm.NewClient(a.cl)}
	meta, err := dst.metadata(ctx, []string{})
	if err != nil {
		return err
	}
	sec, err := resolveSecrets(def.SourceConfig)
	if err != nil {
		return err
	}
	opts, err := SecurityOpts(sec)
	if err != nil {
		return err
	}
	peer, err := store.ReadAll(ctx, append([]kgo.Opt{kgo.SeedBrokers(def.SourceBootstrap...)}, opts...), nil)
	if errors.Is(err, store.ErrNoStateTopic) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the source cluster's %s: %w", store.Topic, err)
	}
	if loops := loopTopics(peer, meta.clusterID, topics); len(loops) > 0 {
		return opErr("%v: %s already mirrored from this cluster to the source and not STOPPED; stop that mirror first", ErrMirrorLoop, strings.Join(loops, ", "))
	}
	return nil
}

// Control records pause, resume, stop or recover for the mirror's topics
// that sel selects (all when sel is nil); it returns them.
func (a *Admin) Control(ctx context.Context, kind CommandKind, mirror string, sel *TopicSelector, rebuild bool) ([]string, error) {
	cat, err := a.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	cmd := Command{Kind: kind, Mirror: mirror, Rebuild: rebuild}
	for _, t := range cat.TopicsOf(mirror) {
		if sel == nil || sel.Match(t.Topic) {
			cmd.Topics = append(cmd.Topics, t.Topic)
		}
	}
	def, ok := cat.Mirrors[mirror]
	if ok && sel == nil && kind == CmdStop && len(def.Patterns) > 0 {
		// Stopping a whole mirror ends its standing --start patterns
		// too: a failed-over mirror must not start new topics.
		def.Patterns = nil
		if err := a.w.PutMirror(ctx, def); err != nil {
			return nil, err
		}
		if len(cmd.Topics) == 0 {
			return nil, nil
		}
	}
	if ok && len(cmd.Topics) == 0 {
		if sel == nil {
			return nil, opErr("mirror %s has no started topic", mirror)
		}
		return nil, opErr("mirror %s has no started topic matching %q", mirror, sel.raw)
	}
	return SetDesired(ctx, a.w, cat, cmd, a.now())
}

// SetDesired records a command for cmd.Topics (all the mirror's topics when
// empty) in __mirror_state.
func SetDesired(ctx context.Context, w *store.Writer, cat *store.Catalog, cmd Command, now time.Time) ([]string, error) {
	if _, ok := cat.Mirrors[cmd.Mirror]; !ok {
		return nil, opErr("mirror %s does not exist", cmd.Mirror)
	}
	var done, stopped []string
	for _, t := range cat.TopicsOf(cmd.Mirror) {
		if len(cmd.Topics) > 0 && !slices.Contains(cmd.Topics, t.Topic) {
			continue
		}
		// A stopped topic is failed over: clients write to it. A pause,
		// resume or recover leaves it alone (a resume would mirror into
		// it again); only --start mirrors it again.
		if t.Desired == partition.DesiredStop && cmd.Kind != CmdStop {
			stopped = append(stopped, t.Topic)
			continue
		}
		switch cmd.Kind {
		case CmdPause:
			t.Desired = partition.DesiredPause
		case CmdResume:
			t.Desired = partition.DesiredStart
		case CmdStop:
			t.Desired = partition.DesiredStop
		case CmdRecover:
			t.RecoverAt, t.RebuildRequested = now.UTC(), cmd.Rebuild
		}
		t.UpdatedAt = now.UTC()
		if err := w.PutTopic(ctx, t); err != nil {
			return done, err
		}
		done = append(done, t.Topic)
	}
	if len(done) == 0 && len(stopped) > 0 {
		return nil, opErr("mirror %s: %s stopped (failed over); --start mirrors a stopped topic again", cmd.Mirror, strings.Join(stopped, ", "))
	}
	if len(done) == 0 {
		return nil, opErr("mirror %s has no started topic among %v", cmd.Mirror, cmd.Topics)
	}
	return done, nil
}

// DescribeRow is one partition of --describe.
type DescribeRow struct {
	Mirror            string `json:"mirror"`
	Topic             string `json:"topic"`
	Partition         int32  `json:"partition"`
	SourceOffset      int64  `json:"sourceOffset"`      // source high watermark, -1 unknown
	DestinationOffset int64  `json:"destinationOffset"` // destination log end, -1 unknown
	Lag               int64  `json:"lag"`
	State             string `json:"state"`
	RetryAttempt      int    `json:"retryAttempt"`
	ErrorMessage      string `json:"errorMessage"`
	// Retryable says a FAILED partition retries by itself, up to
	// RetryMaxAttempts (the mirror's setting; 0: no retries).
	Retryable        bool `json:"retryable"`
	RetryMaxAttempts int  `json:"retryMaxAttempts"`
	// StateEpoch counts the partition's state changes (its record's):
	// unchanged means the partition never left its state in between.
	StateEpoch       int64  `json:"stateEpoch"`
	LastMirrorOffset int64  `json:"lastMirrorOffset"`
	LastMirrorEpoch  int32  `json:"lastMirrorEpoch"`
	Owner            string `json:"owner,omitempty"`
	// OwnerStatus is OwnerLive, OwnerLost, OwnerStopped, OwnerNotOwned
	// or OwnerNone; OwnerLive alone means an instance runs the partition.
	OwnerStatus         string `json:"ownerStatus"`
	OwnerLive           bool   `json:"ownerLive"`
	OwnerHeartbeatAgeMs int64  `json:"ownerHeartbeatAgeMs"`          // age of the owner's last heartbeat, -1 none
	SourceTopicID       string `json:"sourceTopicId,omitempty"`      // as recorded by the owner, "" unknown
	DestinationTopicID  string `json:"destinationTopicId,omitempty"` // as recorded by the owner, "" unknown
	// HeldWrites are the source's WRITE grants on the topic held back
	// while it is mirrored and granted by --stop ("principal@host"), as
	// the owner last recorded them; empty once the topic is stopped.
	HeldWrites []string `json:"heldWrites,omitempty"`
	// SourceUnreachableSince is when the mirror's source stopped
	// answering, as a live instance's heartbeat reports it, or when
	// describe itself could not reach it; "" while it answers. Then
	// SourceOffset and Lag are unknown, and SourceError says why.
	SourceUnreachableSince string `json:"sourceUnreachableSince,omitempty"`
	SourceError            string `json:"sourceError,omitempty"`
}

// sourceOutage is what describe knows of a mirror's source not answering.
type sourceOutage struct {
	since time.Time
	err   string
}

// sourceOutageOf tells whether mirror's source answers: a live instance's
// heartbeat saying it does not is believed first (it has watched for a
// while); otherwise describe's own failure to list the source's offsets.
func sourceOutageOf(cat *store.Catalog, mirror string, listErr error, now time.Time) (sourceOutage, bool) {
	for _, h := range cat.Instances {
		if !h.Live(now, HeartbeatMisses) {
			continue
		}
		for _, m := range h.Mirrors {
			if m.Name == mirror && m.Source.State == store.ReachUnreachable {
				return sourceOutage{since: m.Source.At, err: fmt.Sprintf("%s (instance %s)", m.Source.Error, h.Instance)}, true
			}
		}
	}
	if listErr != nil {
		return sourceOutage{since: now, err: "describe could not list its offsets: " + listErr.Error()}, true
	}
	return sourceOutage{}, false
}

// Describe returns every partition of the mirror (all mirrors when name is
// ""), with live offsets from both clusters where they answer.
func (a *Admin) Describe(ctx context.Context, name string) ([]DescribeRow, error) {
	cat, err := a.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	if name != "" {
		if _, ok := cat.Mirrors[name]; !ok {
			return nil, opErr("mirror %s does not exist", name)
		}
	}
	dst := &cluster{name: "destination", cl: a.cl, adm: kadm.NewClient(a.cl)}
	now := a.now()
	var rows []DescribeRow
	outages := map[string]sourceOutage{}
	for _, mn := range cat.MirrorNames() {
		if name != "" && mn != name {
			continue
		}
		topics := cat.TopicsOf(mn)
		if len(topics) == 0 {
			continue
		}
		names := make([]string, len(topics))
		for i, t := range topics {
			names[i] = t.Topic
		}
		srcEnds := map[string]map[int32]int64{}
		src, listErr := sourceClient(cat.Mirrors[mn])
		if listErr == nil {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			srcEnds, listErr = src.endOffsets(sctx, names...)
			cancel()
			src.close()
		}
		outage, down := sourceOutageOf(cat, mn, listErr, now)
		if down {
			outages[mn] = outage
		}
		dstEnds, _ := dst.endOffsets(ctx, names...)
		maxAttempts := props.DefaultMirrorSettings().RetryMaxAttempts
		if s, err := mirrorSettings(cat.Mirrors[mn]); err == nil {
			maxAttempts = s.RetryMaxAttempts
		}
		first := len(rows)
		for _, t := range topics {
			from := len(rows)
			seen := map[int32]bool{}
			for _, r := range cat.PartitionsOf(mn, t.Topic) {
				seen[r.Partition] = true
				rows = append(rows, describeRow(mn, t.Topic, r.Partition, &r, srcEnds, dstEnds).withOwner(ownerOf(cat, mn, t.Topic, r.Owner, now)))
			}
			for p := range srcEnds[t.Topic] {
				if !seen[p] {
					rows = append(rows, describeRow(mn, t.Topic, p, nil, srcEnds, dstEnds).withOwner(ownerOf(cat, mn, t.Topic, "", now)))
				}
			}
			if t.Desired == partition.DesiredStop {
				continue // granted by the stop
			}
			var held []string
			for _, g := range cat.HeldACLs[store.TopicRef{Mirror: mn, Topic: t.Topic}].Grants {
				held = append(held, g.Principal+"@"+g.Host)
			}
			for i := from; i < len(rows); i++ {
				rows[i].HeldWrites = held
			}
		}
		for i := first; i < len(rows); i++ {
			rows[i].RetryMaxAttempts = maxAttempts
		}
	}
	for i := range rows {
		if down, ok := outages[rows[i].Mirror]; ok {
			rows[i].SourceUnreachableSince, rows[i].SourceError = down.since.UTC().Format(time.RFC3339), down.err
			rows[i].SourceOffset, rows[i].Lag = -1, 0
		}
	}
	slices.SortFunc(rows, func(x, y DescribeRow) int {
		if x.Mirror != y.Mirror {
			return compareStrings(x.Mirror, y.Mirror)
		}
		if x.Topic != y.Topic {
			return compareStrings(x.Topic, y.Topic)
		}
		return int(x.Partition - y.Partition)
	})
	return rows, nil
}

func describeRow(mirror, topic string, p int32, r *store.PartitionRecord, srcEnds, dstEnds map[string]map[int32]int64) DescribeRow {
	row := DescribeRow{Mirror: mirror, Topic: topic, Partition: p, SourceOffset: -1, DestinationOffset: -1,
		State: partition.Unknown.String(), LastMirrorOffset: -1, LastMirrorEpoch: -1}
	if o, ok := srcEnds[topic][p]; ok {
		row.SourceOffset = o
	}
	if o, ok := dstEnds[topic][p]; ok {
		row.DestinationOffset = o
	}
	if row.SourceOffset >= 0 && row.DestinationOffset >= 0 {
		row.Lag = max(0, row.SourceOffset-row.DestinationOffset)
	}
	if r != nil {
		row.State, row.RetryAttempt, row.ErrorMessage, row.Retryable = r.State.String(), r.Attempt, r.Error, r.Retryable
		row.StateEpoch = r.StateEpoch
		row.LastMirrorOffset, row.LastMirrorEpoch, row.Owner = r.LastOffset, r.LastEpoch, r.Owner
		row.SourceTopicID, row.DestinationTopicID = r.SourceTopicID, r.DestTopicID
	}
	return row
}

func (r DescribeRow) withOwner(o ownership) DescribeRow {
	r.Owner, r.OwnerStatus, r.OwnerLive = o.owner, o.status, o.status == OwnerLive
	r.OwnerHeartbeatAgeMs = -1
	if o.age >= 0 {
		r.OwnerHeartbeatAgeMs = o.age.Milliseconds()
	}
	return r
}

// mirrorSettings parses a definition's mirror.* settings.
func mirrorSettings(def store.MirrorDef) (props.MirrorSettings, error) {
	m := maps.Clone(def.Config)
	if m == nil {
		m = map[string]string{}
	}
	m["bootstrap.servers"] = strings.Join(def.SourceBootstrap, ",")
	s, err := props.ParseMirrorSettings(props.FromMap(m))
	if err != nil {
		return s, fmt.Errorf("mirror %s: %w", def.Name, err)
	}
	return s, nil
}
